package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/natsconn"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/messages"
)

// Exit codes of the client commands. They tell outcomes apart for scripts.
const (
	exitOK         = 0 // committed, code ok
	exitDomain     = 1 // committed domain failure (resource_busy, lease_not_found, ...)
	exitUsage      = 2 // bad flags or arguments
	exitDefinite   = 3 // rejected/definite: nothing happened
	exitIndefinite = 4 // outcome unknown: retry with the same --op
	exitConnect    = 5 // cannot connect to NATS
)

const exitCodesHelp = `Exit codes:
  0  committed, code ok
  1  committed domain failure (e.g. resource_busy, lease_not_found): a final answer
  2  usage error
  3  rejected, definite (e.g. invalid_request, cross_shard): nothing happened
  4  outcome unknown (indefinite: engine_halted, storage_failure, timeout, no
     responders): retry the same command with the same --op
  5  cannot connect to the NATS server
`

// env is where a command writes, and the context it runs under; tests
// provide their own.
type env struct {
	stdout, stderr io.Writer
	ctx            context.Context
	cl             *client.Client // the command's client, once connected
}

// osEnv is the process environment: stdout, stderr, and a context that ends
// on SIGINT or SIGTERM.
func osEnv() (*env, context.CancelFunc) {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	return &env{stdout: os.Stdout, stderr: os.Stderr, ctx: ctx}, cancel
}

// registerCLI registers a command written against env.
// cliRuns are the client commands by name, for the tests that run command lines.
var cliRuns = map[string]func(e *env, args []string) int{}

func registerCLI(name, summary string, run func(e *env, args []string) int) {
	cliRuns[name] = run
	register(name, summary, func(args []string) int {
		e, cancel := osEnv()
		defer cancel()
		return run(e, args)
	})
}

func (e *env) errorf(format string, args ...any) {
	fmt.Fprintf(e.stderr, "holdfast: "+format+"\n", args...)
}

// connFlags are the flags every client command has.
type connFlags struct {
	server  string
	auth    natsconn.Settings
	tenant  string
	prefix  string
	timeout time.Duration
	json    bool
}

func (c *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.server, "server", "", "NATS server `URL`s, comma-separated (default: $NATS_URL, the nats context's, or "+nats.DefaultURL+")")
	registerAuthFlags(fs, &c.auth)
	fs.StringVar(&c.tenant, "tenant", client.DefaultTenant, "tenant")
	fs.StringVar(&c.prefix, "prefix", client.DefaultPrefix, "subject prefix (the server's --prefix)")
	fs.DurationVar(&c.timeout, "timeout", 10*time.Second, "give up after this long in total, retries included")
	fs.BoolVar(&c.json, "json", false, "print the JSON reply instead of the human-readable form")
}

func (c *connFlags) validate() error {
	if c.timeout <= 0 {
		return errors.New("--timeout must be positive")
	}
	if !client.ValidTenant(c.tenant) {
		return fmt.Errorf("invalid --tenant %q: 1-64 chars of A-Z a-z 0-9 _ -", c.tenant)
	}
	return nil
}

// connect opens the NATS connection and the client. Its error is reported
// with exitConnect (connection) or exitUsage (client options).
func (c *connFlags) connect(name string, opts ...client.Option) (*nats.Conn, *client.Client, int, error) {
	nc, err := c.dial(name, nats.Timeout(min(c.timeout, 5*time.Second)), nats.MaxReconnects(-1))
	if err != nil {
		return nil, nil, exitConnect, err
	}
	base := []client.Option{
		client.WithPrefix(c.prefix),
		client.WithTenant(c.tenant),
		client.WithTimeout(min(c.timeout, client.DefaultTimeout)),
		client.WithRetry(1000, client.DefaultBackoffBase, client.DefaultBackoffMax),
	}
	cl, err := client.New(nc, append(base, opts...)...)
	if err != nil {
		nc.Close()
		return nil, nil, exitUsage, err
	}
	return nc, cl, exitOK, nil
}

// newFlagSet returns a flag set that reports to e.stderr, with a usage
// text made of synopsis, the flags, and the exit codes.
func newFlagSet(e *env, name, synopsis, about string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // parseArgs reports a bad flag itself, in one line
	usages[fs] = func(w io.Writer) {
		fmt.Fprintf(w, "usage: holdfast %s\n", synopsis)
		if about != "" {
			fmt.Fprintf(w, "\n%s\n", strings.TrimRight(about, "\n"))
		}
		fmt.Fprintln(w, "\nFlags (--flag or -flag):")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
		fmt.Fprintf(w, "\n%s", exitCodesHelp)
	}
	// The flag package calls Usage on -h and on a bad flag; parseArgs prints the help
	// (on stdout) or a one-line hint itself.
	fs.Usage = func() {}
	return fs
}

// parseArgs parses flags and positional arguments in any order (the flag
// package alone stops at the first positional one); everything after "--"
// is positional. It returns the positional arguments, and the exit code to
// return at once when parsing fails or help was asked for (-1 otherwise).
func parseArgs(e *env, fs *flag.FlagSet, args []string) ([]string, int) {
	var rest []string
	for i, a := range args {
		if a == "--" {
			rest = append(rest, args[i+1:]...)
			args = args[:i]
			break
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				if u := usages[fs]; u != nil {
					u(e.stdout)
				}
				return nil, exitOK
			}
			msg := err.Error()
			if hint := flagHint(fs, err); hint != "" {
				msg += "; " + hint
			}
			fmt.Fprintf(e.stderr, "holdfast %s: %s (run 'holdfast %s --help' for help)\n", fs.Name(), msg, fs.Name())
			return nil, exitUsage
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	return append(pos, rest...), -1
}

// usageError reports a usage problem and returns exitUsage.
func usageError(e *env, fs *flag.FlagSet, format string, args ...any) int {
	fmt.Fprintf(e.stderr, "holdfast %s: %s\n", fs.Name(), fmt.Sprintf(format, args...))
	fmt.Fprintf(e.stderr, "Run 'holdfast %s --help' for help.\n", fs.Name())
	return exitUsage
}

// memberList is the ordered list of lease members built from repeated
// --resource, --pool and --range flags, in the order given on the command
// line. Each of those flags is a memberFlag appending to the same list.
type memberList struct {
	members []*messages.Member
}

type memberKind int

const (
	memberResource memberKind = iota
	memberPool
	memberRange
)

type memberFlag struct {
	list *memberList
	kind memberKind
}

func (f memberFlag) String() string {
	if f.list == nil {
		return ""
	}
	var parts []string
	for _, m := range f.list.members {
		parts = append(parts, memberString(m))
	}
	return strings.Join(parts, ", ")
}

func (f memberFlag) Set(s string) error {
	m, err := parseMember(f.kind, s)
	if err != nil {
		return err
	}
	f.list.members = append(f.list.members, m)
	return nil
}

// parseMember parses the value of --resource ID, --pool ID:QTY (split at the
// last colon, since ids may contain colons) or --range ID / ID=VALUE.
func parseMember(kind memberKind, s string) (*messages.Member, error) {
	switch kind {
	case memberResource:
		if s == "" {
			return nil, errors.New("empty resource id")
		}
		return client.Resource(s), nil
	case memberPool:
		i := strings.LastIndexByte(s, ':')
		if i <= 0 {
			return nil, fmt.Errorf("want POOL_ID:QUANTITY, got %q", s)
		}
		q, err := strconv.ParseUint(s[i+1:], 10, 64)
		if err != nil || q == 0 {
			return nil, fmt.Errorf("quantity in %q must be a positive integer", s)
		}
		return client.PoolUnits(s[:i], q), nil
	default:
		id, val, specific := strings.Cut(s, "=")
		if id == "" {
			return nil, fmt.Errorf("want RANGE_ID or RANGE_ID=VALUE, got %q", s)
		}
		if !specific {
			return client.RangeAny(id), nil
		}
		v, err := strconv.ParseUint(val, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("value in %q must be an unsigned 64-bit integer", s)
		}
		return client.RangeValue(id, v), nil
	}
}

// errorExit reports a call error and returns its exit code. With jsonOut
// it also prints a JSON reply on stdout: the rejection reply when there is
// one, else an object with outcome, code, category, message and
// operation_id.
func errorExit(e *env, err error, jsonOut bool) int {
	var (
		de *client.DefiniteError
		ie *client.IndefiniteError
	)
	switch {
	case errors.As(err, &de):
		if jsonOut {
			printReplyJSON(e, de.Reply, nil)
		}
		e.errorf("%s rejected (definite): %s%s", de.Op, de.Code, suffix(de.Message))
		return exitDefinite
	case errors.As(err, &ie):
		if jsonOut {
			rep := ie.Reply
			if rep == nil {
				rep = &messages.Reply{Outcome: messages.OutcomeRejected, Code: ie.Code, Category: messages.CategoryIndefinite, Message: ie.Message}
			}
			printReplyJSON(e, rep, map[string]string{"operation_id": ie.OperationID})
		}
		msg := fmt.Sprintf("%s outcome unknown: %s after %d attempt(s)%s", ie.Op, ie.Code, ie.Attempts, suffix(ie.Message))
		if ie.Code == "no_responders" {
			msg += " (is holdfast serve running, with this --prefix?)"
		}
		if ie.OperationID != "" {
			msg += "; retry with --op " + ie.OperationID
		}
		e.errorf("%s", msg)
		return exitIndefinite
	default:
		e.errorf("%v", err)
		return exitIndefinite
	}
}

func suffix(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

// resultExit returns the exit code of a committed result: 0 for ok, 1 for a
// domain failure.
func resultExit(r *client.Result) int {
	if r.OK() {
		return exitOK
	}
	return exitDomain
}

// registerAuthFlags adds the NATS credential, TLS and context flags of the nats CLI.
func registerAuthFlags(fs *flag.FlagSet, s *natsconn.Settings) {
	fs.StringVar(&s.Context, "context", "", "nats CLI context `name` to take the server and credentials from (default: $NATS_CONTEXT, or the selected context)")
	fs.StringVar(&s.Creds, "creds", "", "NATS credentials `file`")
	fs.StringVar(&s.NKey, "nkey", "", "NATS nkey seed `file`")
	fs.StringVar(&s.User, "user", "", "NATS `user`")
	fs.StringVar(&s.Password, "password", "", "NATS `password`")
	fs.StringVar(&s.Token, "token", "", "NATS auth `token`")
	fs.StringVar(&s.TLSCA, "tlsca", "", "CA certificate `file` to verify the NATS server")
	fs.StringVar(&s.TLSCert, "tlscert", "", "TLS client certificate `file`")
	fs.StringVar(&s.TLSKey, "tlskey", "", "TLS client key `file`")
}

// dial connects with the command's server and credentials; its error never shows a
// password or token.
func (c *connFlags) dial(name string, extra ...nats.Option) (*nats.Conn, error) {
	s := c.auth
	s.URL = c.server
	url, opts, err := s.Resolve(nats.DefaultURL)
	if err != nil {
		return nil, err
	}
	opts = append(append(opts, nats.Name("holdfast "+name)), extra...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to %s: %s", natsconn.Redact(url), natsconn.RedactError(err, url))
	}
	return nc, nil
}
