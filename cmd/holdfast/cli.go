package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/alecthomas/kong"
	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/messages"
	"github.com/holdfast/holdfast/natsconn"
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

// exitCodesOf are the exit codes each command's help ends with.
var exitCodesOf = map[string]string{
	"resource": exitCodesHelp, "pool": exitCodesHelp, "range": exitCodesHelp, "lease": exitCodesHelp,
	"run": exitCodesHelp, "work": exitCodesHelp, "cluster": exitCodesHelp,
	"watch": watchExitCodes, "bench": benchExitCodes,
}

// env is where a command writes, and the context it runs under; tests
// provide their own.
type env struct {
	stdout, stderr io.Writer
	ctx            context.Context
	cmd            string         // the command's path, "lease reserve", for messages
	cl             *client.Client // the command's client, once connected
}

func (e *env) errorf(format string, args ...any) {
	fmt.Fprintf(e.stderr, "holdfast: "+format+"\n", args...)
}

// usageError reports a usage problem in one line and returns exitUsage.
func usageError(e *env, format string, args ...any) error {
	fmt.Fprintf(e.stderr, "holdfast %s: %s (run 'holdfast %s --help' for help)\n", e.cmd, fmt.Sprintf(format, args...), e.cmd)
	return exitCode(exitUsage)
}

// usageExit is usageError for a check made once connected (a value read in a range's
// format): it prints the same line and returns the exit code.
func usageExit(e *env, msg string) int {
	fmt.Fprintf(e.stderr, "holdfast %s: %s (run 'holdfast %s --help' for help)\n", e.cmd, msg, e.cmd)
	return exitUsage
}

// connFlags are the flags every client command has.
type connFlags struct {
	Server string `placeholder:"URL" group:"connection" help:"NATS server URLs, comma-separated (default: $$NATS_URL, the nats context's, or nats://127.0.0.1:4222)."`
	authFlags
	Tenant  string        `default:"default" group:"connection" help:"Tenant."`
	Prefix  string        `default:"holdfast" group:"connection" help:"Subject prefix (the server's --prefix)."`
	Timeout time.Duration `default:"10s" group:"connection" help:"Give up after this long in total, retries included."`
	JSON    bool          `name:"json" help:"Print the JSON reply instead of the human-readable form."`
}

// authFlags are the NATS credential, TLS and context flags of the nats CLI.
type authFlags struct {
	Context  string `name:"context" placeholder:"NAME" group:"connection" help:"nats CLI context to take the server and credentials from (default: $$NATS_CONTEXT, or the selected context)."`
	Creds    string `name:"creds" placeholder:"FILE" group:"connection" help:"NATS credentials file."`
	NKey     string `name:"nkey" placeholder:"FILE" group:"connection" help:"NATS nkey seed file."`
	User     string `name:"user" group:"connection" help:"NATS user."`
	Password string `name:"password" group:"connection" help:"NATS password."`
	Token    string `name:"token" group:"connection" help:"NATS auth token."`
	TLSCA    string `name:"tlsca" placeholder:"FILE" group:"connection" help:"CA certificate to verify the NATS server."`
	TLSCert  string `name:"tlscert" placeholder:"FILE" group:"connection" help:"TLS client certificate."`
	TLSKey   string `name:"tlskey" placeholder:"FILE" group:"connection" help:"TLS client key."`
}

// settings are the flags as natsconn's settings.
func (a authFlags) settings() natsconn.Settings {
	return natsconn.Settings{Context: a.Context, Creds: a.Creds, NKey: a.NKey, User: a.User, Password: a.Password,
		Token: a.Token, TLSCA: a.TLSCA, TLSCert: a.TLSCert, TLSKey: a.TLSKey}
}

func (c *connFlags) validate() error {
	if c.Timeout <= 0 {
		return errors.New("--timeout must be positive")
	}
	if !client.ValidTenant(c.Tenant) {
		return fmt.Errorf("invalid --tenant %q: 1-64 chars of A-Z a-z 0-9 _ -", c.Tenant)
	}
	return nil
}

// connect opens the NATS connection and the client. Its error is reported
// with exitConnect (connection) or exitUsage (client options).
func (c *connFlags) connect(name string, opts ...client.Option) (*nats.Conn, *client.Client, int, error) {
	nc, err := c.dial(name, nats.Timeout(min(c.Timeout, 5*time.Second)), nats.MaxReconnects(-1))
	if err != nil {
		return nil, nil, exitConnect, err
	}
	base := []client.Option{
		client.WithPrefix(c.Prefix),
		client.WithTenant(c.Tenant),
		client.WithTimeout(min(c.Timeout, client.DefaultTimeout)),
		client.WithRetry(1000, client.DefaultBackoffBase, client.DefaultBackoffMax),
	}
	cl, err := client.New(nc, append(base, opts...)...)
	if err != nil {
		nc.Close()
		return nil, nil, exitUsage, err
	}
	return nc, cl, exitOK, nil
}

// run checks the connection flags, connects and runs do under a context bounded by
// --timeout; do's result is the exit code.
func (c *connFlags) run(e *env, do func(ctx context.Context, cl *client.Client) int) error {
	if err := c.validate(); err != nil {
		return usageError(e, "%v", err)
	}
	nc, cl, code, err := c.connect(e.cmd)
	if err != nil {
		e.errorf("%v", err)
		return exitCode(code)
	}
	defer nc.Close()
	e.cl = cl
	ctx, cancel := context.WithTimeout(e.ctx, c.Timeout)
	defer cancel()
	return exitCode(do(ctx, cl))
}

// memberFlags are the repeated --resource, --pool and --range flags of a reserve. The
// lease's members keep the order of the command line across the three flags: each value
// takes the next number of one sequence, and members() merges by it.
type memberFlags struct {
	Resource memberValues `name:"resource" placeholder:"ID" help:"A resource (repeatable)."`
	Pool     memberValues `name:"pool" placeholder:"ID:QTY" help:"Units of a pool (repeatable)."`
	Range    memberValues `name:"range" placeholder:"ID[=VALUE]" help:"Any free value of a range, or that value (repeatable)."`
}

type memberKind int

const (
	memberResource memberKind = iota
	memberPool
	memberRange
)

// memberSeq numbers member values across the three flags (parses of one process run one
// at a time in order; the numbers only need to grow).
var memberSeq atomic.Uint64

type memberValue struct {
	seq    uint64
	member *messages.Member
}

// memberValues are the values of one member flag.
type memberValues []memberValue

// Decode is kong's hook for one occurrence of the flag: its kind is the flag's name.
func (v *memberValues) Decode(ctx *kong.DecodeContext) error {
	var s string
	if err := ctx.Scan.PopValueInto("member", &s); err != nil {
		return err
	}
	kind := map[string]memberKind{"resource": memberResource, "pool": memberPool, "range": memberRange}[ctx.Value.Name]
	m, err := parseMember(kind, s)
	if err != nil {
		return err
	}
	*v = append(*v, memberValue{seq: memberSeq.Add(1), member: m})
	return nil
}

// members are the members in command-line order.
func (f *memberFlags) members() []*messages.Member {
	all := append(append(append([]memberValue(nil), f.Resource...), f.Pool...), f.Range...)
	sort.Slice(all, func(i, j int) bool { return all[i].seq < all[j].seq })
	out := make([]*messages.Member, len(all))
	for i, v := range all {
		out[i] = v.member
	}
	return out
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

// dial connects with the command's server and credentials; its error never shows a
// password or token.
func (c *connFlags) dial(name string, extra ...nats.Option) (*nats.Conn, error) {
	s := c.authFlags.settings()
	s.URL = c.Server
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
