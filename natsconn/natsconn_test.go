package natsconn

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"nats://admin:s3cret@h:4222":                  "nats://admin:REDACTED@h:4222",
		"nats://tok3n@h:4222":                         "nats://REDACTED@h:4222",
		"nats://h:4222":                               "nats://h:4222",
		"nats://a:b@h1:1, nats://h2:2,tls://c:d@h3:3": "nats://a:REDACTED@h1:1,nats://h2:2,tls://c:REDACTED@h3:3",
		"nats://a:%zz@h:1":                            "nats://REDACTED@h:1",
	} {
		if got := Redact(in); got != want || strings.Contains(got, "s3cret") || strings.Contains(got, "tok3n") {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
	err := errors.New(`dial nats://admin:s3cret@h:4222: refused`)
	if got := RedactError(err, "nats://admin:s3cret@h:4222"); strings.Contains(got, "s3cret") {
		t.Errorf("RedactError kept the password: %s", got)
	}
}

// startServer runs a NATS server with the given auth options.
func startServer(t *testing.T, o *natsserver.Options) string {
	t.Helper()
	o.Host, o.Port, o.NoLog, o.NoSigs = "127.0.0.1", -1, true, true
	ns, err := natsserver.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("not ready")
	}
	t.Cleanup(ns.Shutdown)
	return ns.ClientURL()
}

func connect(t *testing.T, s Settings) error {
	t.Helper()
	url, opts, err := s.Resolve(nats.DefaultURL)
	if err != nil {
		return err
	}
	nc, err := nats.Connect(url, append(opts, nats.Timeout(2*time.Second))...)
	if err == nil {
		nc.Close()
	}
	return err
}

// User and password, token and nkey each connect where the server asks for them, from
// flags, from NATS_URL and from a nats CLI context; wrong ones do not.
func TestResolveConnects(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("NATS_URL", "")
	t.Setenv("NATS_CONTEXT", "")
	pw := startServer(t, &natsserver.Options{Username: "admin", Password: "s3cret"})
	if err := connect(t, Settings{URL: pw, User: "admin", Password: "s3cret"}); err != nil {
		t.Fatal(err)
	}
	if err := connect(t, Settings{URL: pw, User: "admin", Password: "wrong"}); err == nil {
		t.Fatal("wrong password connected")
	}
	tok := startServer(t, &natsserver.Options{Authorization: "t0ken"})
	if err := connect(t, Settings{URL: tok, Token: "t0ken"}); err != nil {
		t.Fatal(err)
	}

	kp, _ := nkeys.CreateUser()
	pub, _ := kp.PublicKey()
	seed, _ := kp.Seed()
	seedFile := filepath.Join(t.TempDir(), "user.nk")
	if err := os.WriteFile(seedFile, seed, 0o600); err != nil {
		t.Fatal(err)
	}
	nk := startServer(t, &natsserver.Options{Nkeys: []*natsserver.NkeyUser{{Nkey: pub}}})
	if err := connect(t, Settings{URL: nk, NKey: seedFile}); err != nil {
		t.Fatal(err)
	}
	if err := connect(t, Settings{URL: nk}); err == nil {
		t.Fatal("connected without the nkey")
	}

	// NATS_URL names the server when no flag does.
	t.Setenv("NATS_URL", tok)
	if err := connect(t, Settings{Token: "t0ken"}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NATS_URL", "")

	// A saved nats context, selected or named.
	dir := filepath.Join(os.Getenv("XDG_CONFIG_HOME"), "nats", "context")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := `{"description":"prod","url":"` + pw + `","user":"admin","password":"s3cret"}`
	if err := os.WriteFile(filepath.Join(dir, "prod.json"), []byte(ctx), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := connect(t, Settings{Context: "prod"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "..", "context.txt"), []byte("prod\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := connect(t, Settings{}); err != nil {
		t.Fatalf("selected context: %v", err)
	}
	if _, _, err := (Settings{Context: "nope"}).Resolve(""); err == nil {
		t.Fatal("a missing named context resolved")
	}
	if _, _, err := (Settings{User: "a", Token: "b"}).Resolve(""); err == nil {
		t.Fatal("two auth methods accepted")
	}
	if _, _, err := (Settings{TLSCert: "c.pem"}).Resolve(""); err == nil {
		t.Fatal("a certificate without its key accepted")
	}
}
