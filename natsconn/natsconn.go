// Package natsconn turns what a NATS operator hands out — a URL, a credentials file, an
// nkey seed, a user and password or a token, TLS files, the NATS_URL environment variable,
// a `nats` CLI context — into a URL and connect options, for `holdfast serve` and every
// client command alike, and redacts secrets from anything that is printed.
package natsconn

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats.go"
)

// Settings are the connection settings of one process. Empty fields are filled from the
// environment (NATS_URL, NATS_CONTEXT), then from the nats CLI context, then defaults.
type Settings struct {
	URL      string // comma-separated server URLs
	Context  string // a nats CLI context name, or a path to its JSON file
	Creds    string // a credentials file (JWT and nkey seed)
	NKey     string // a file holding an nkey seed
	User     string
	Password string
	Token    string
	TLSCA    string // CA certificate file
	TLSCert  string // client certificate file
	TLSKey   string // client key file
}

// context is the part of a nats CLI context file Holdfast uses
// (~/.config/nats/context/<name>.json, written by `nats context save`).
type context struct {
	URL      string `json:"url"`
	Creds    string `json:"creds"`
	NKey     string `json:"nkey"`
	User     string `json:"user"`
	Password string `json:"password"`
	Token    string `json:"token"`
	Cert     string `json:"cert"`
	Key      string `json:"key"`
	CA       string `json:"ca"`
}

// configDir is where the nats CLI keeps its contexts.
func configDir() string {
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "nats")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".config", "nats")
}

// loadContext reads a named context (or a path to one). An empty name means the nats
// CLI's selected context, if there is one.
func loadContext(name string) (*context, string, error) {
	dir := configDir()
	explicit := name != ""
	if name == "" {
		if dir == "" {
			return nil, "", nil
		}
		b, err := os.ReadFile(filepath.Join(dir, "context.txt"))
		if err != nil {
			return nil, "", nil // no selected context: not an error
		}
		if name = strings.TrimSpace(string(b)); name == "" {
			return nil, "", nil
		}
	}
	path := name
	if !strings.ContainsRune(name, os.PathSeparator) && !strings.HasSuffix(name, ".json") {
		path = filepath.Join(dir, "context", name+".json")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		if !explicit && errors.Is(err, os.ErrNotExist) {
			return nil, "", nil
		}
		return nil, "", fmt.Errorf("nats context %q: %w", name, err)
	}
	var c context
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, "", fmt.Errorf("nats context %q (%s): %w", name, path, err)
	}
	return &c, name, nil
}

// Resolve fills s from the environment and the context and returns the URL to dial and
// the options that carry the credentials and TLS settings. defaultURL is used when
// nothing names a server.
func (s Settings) Resolve(defaultURL string) (string, []nats.Option, error) {
	if s.URL == "" {
		s.URL = os.Getenv("NATS_URL")
	}
	if s.Context == "" {
		s.Context = os.Getenv("NATS_CONTEXT")
	}
	ctx, _, err := loadContext(s.Context)
	if err != nil {
		return "", nil, err
	}
	if ctx != nil {
		fill := func(dst *string, v string) {
			if *dst == "" {
				*dst = v
			}
		}
		fill(&s.URL, ctx.URL)
		fill(&s.Creds, ctx.Creds)
		fill(&s.NKey, ctx.NKey)
		fill(&s.User, ctx.User)
		fill(&s.Password, ctx.Password)
		fill(&s.Token, ctx.Token)
		fill(&s.TLSCA, ctx.CA)
		fill(&s.TLSCert, ctx.Cert)
		fill(&s.TLSKey, ctx.Key)
	}
	if s.URL == "" {
		s.URL = defaultURL
	}
	var opts []nats.Option
	methods := 0
	if s.Creds != "" {
		methods++
		opts = append(opts, nats.UserCredentials(expand(s.Creds)))
	}
	if s.NKey != "" {
		methods++
		o, err := nats.NkeyOptionFromSeed(expand(s.NKey))
		if err != nil {
			return "", nil, fmt.Errorf("nkey seed file %s: %w", s.NKey, err)
		}
		opts = append(opts, o)
	}
	if s.User != "" || s.Password != "" {
		methods++
		opts = append(opts, nats.UserInfo(s.User, s.Password))
	}
	if s.Token != "" {
		methods++
		opts = append(opts, nats.Token(s.Token))
	}
	if methods > 1 {
		return "", nil, errors.New("more than one of credentials file, nkey, user/password and token given: choose one")
	}
	if (s.TLSCert == "") != (s.TLSKey == "") {
		return "", nil, errors.New("a TLS client certificate needs both the certificate and the key")
	}
	if s.TLSCert != "" {
		opts = append(opts, nats.ClientCert(expand(s.TLSCert), expand(s.TLSKey)))
	}
	if s.TLSCA != "" {
		opts = append(opts, nats.RootCAs(expand(s.TLSCA)))
	}
	return s.URL, opts, nil
}

// expand resolves a leading ~ as the nats CLI does.
func expand(p string) string {
	if strings.HasPrefix(p, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, p[2:])
		}
	}
	return p
}

// Redact returns urls (comma-separated) with every password and token replaced, for
// logs and error messages.
func Redact(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		parts[i] = redactOne(strings.TrimSpace(p))
	}
	return strings.Join(parts, ",")
}

func redactOne(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		if at := strings.LastIndex(s, "@"); at >= 0 { // unparsable but holds user info: hide it all
			if scheme := strings.Index(s, "://"); scheme >= 0 && scheme < at {
				return s[:scheme+3] + "REDACTED@" + s[at+1:]
			}
			return "REDACTED@" + s[at+1:]
		}
		return s
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "REDACTED")
	} else {
		u.User = url.User("REDACTED") // a bare user part is a token
	}
	return u.String()
}

// RedactError returns err's text with the URLs in it redacted.
func RedactError(err error, urls string) string {
	msg := err.Error()
	for _, p := range strings.Split(urls, ",") {
		p = strings.TrimSpace(p)
		if p != "" {
			msg = strings.ReplaceAll(msg, p, redactOne(p))
		}
	}
	return msg
}
