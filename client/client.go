// Package client is the Go SDK of Holdfast: typed, context-aware calls for
// every verb of the wire contract (docs/api.md, docs/api.md), with the retry rule
// that makes writes safe over an unreliable network.
//
// # Outcomes and errors
//
// A write that committed returns its result and a nil error, whatever its
// code: a committed domain failure such as resource_busy is a final answer,
// not an error. Check res.OK() or res.Code, or call res.Err(), which turns a
// committed non-ok code into a *CommittedError. A rejection returns a nil
// result and an error:
//
//   - *DefiniteError: not committed, no effect (invalid_request, cross_shard,
//     operation_conflict, overloaded, ...). Retrying as is will not help,
//     except for overloaded and operation_table_full, after a while.
//   - *IndefiniteError: the outcome is unknown (engine_halted,
//     storage_failure, timeout, or a transport failure) and stayed unknown
//     through the client's retries. The caller resolves it by retrying the
//     same operation id, IndefiniteError.OperationID.
//
// # Retries
//
// Each write carries an operation id, generated (128 random bits, hex) when
// the caller gives none with OperationID. Indefinite outcomes, transport
// timeouts and "no responders" are retried with the same operation id and the
// same request bytes under a bounded exponential backoff with jitter, until
// the context ends or the retry budget (WithRetry) is spent. The server's
// dedupe table turns those retries into replays of the first result
// (Result.FromRetryCache). A first "no responders" is looked into at once: when no
// Holdfast service on the NATS serves the client's prefix, the call ends with a
// *DefiniteError of code CodeNoService that says so (a wrong prefix, a stopped server)
// instead of retrying.
package client

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/messages"
)

// Encoding selects the wire encoding of requests and replies.
type Encoding int

const (
	// JSON is the protobuf JSON mapping with snake_case names (the default).
	JSON Encoding = iota
	// Protobuf is the protobuf binary form, selected per request by the header
	// Content-Type: application/protobuf.
	Protobuf
)

func (e Encoding) String() string {
	if e == Protobuf {
		return "protobuf"
	}
	return "json"
}

// Defaults of the options.
const (
	DefaultPrefix      = contract.DefaultPrefix
	DefaultTenant      = "default"
	DefaultTimeout     = contract.DefaultAttempt // one attempt; the service answers within 3/4 of it
	DefaultMaxAttempts = 8
	DefaultBackoffBase = 25 * time.Millisecond
	DefaultBackoffMax  = 2 * time.Second
	// EventsStream is the JetStream stream that stores the events.
	EventsStream = "HOLDFAST_EVENTS"
)

type config struct {
	prefix      string
	tenant      string
	timeout     time.Duration
	maxAttempts int
	backoffBase time.Duration
	backoffMax  time.Duration
	encoding    Encoding
	noDirect    bool // always the public subject (WithoutDirectRouting)
}

// Option configures a Client.
type Option func(*config)

// WithPrefix sets the subject prefix (default "holdfast"; the server's
// --prefix).
func WithPrefix(prefix string) Option { return func(c *config) { c.prefix = prefix } }

// WithTenant sets the tenant every call of the client addresses (default
// "default").
func WithTenant(tenant string) Option { return func(c *config) { c.tenant = tenant } }

// WithTimeout sets the timeout of one attempt (default 2s). The service answers
// every request within three quarters of the default (a `timeout` answer when its
// shard cannot), so a longer attempt only waits longer for a node that died with the
// request; a shorter one retries requests the service is still answering. A read that
// waits for a min_lsn gets at least its wait plus one second.
func WithTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// WithRetry sets the retry budget: at most maxAttempts attempts per call
// (1 disables retries; default 8), waiting between attempts an exponential
// backoff from base doubling up to max, with jitter (defaults 25ms, 2s).
// The context of the call bounds the whole as well.
func WithRetry(maxAttempts int, base, max time.Duration) Option {
	return func(c *config) {
		c.maxAttempts = maxAttempts
		c.backoffBase = base
		c.backoffMax = max
	}
}

// WithEncoding selects JSON (default) or Protobuf.
func WithEncoding(e Encoding) Option { return func(c *config) { c.encoding = e } }

// WithoutDirectRouting sends every request to the public subject, as clients of other
// languages do: the node that takes it forwards it to the shard's owner. By default the
// client sends a request it can place straight to its shard's owner in a cluster (the
// service says whether it routes so), which saves that hop; a deployment whose
// permissions let clients publish only to their tenant's subjects needs this option.
func WithoutDirectRouting() Option { return func(c *config) { c.noDirect = true } }

// WithProtobuf is WithEncoding(Protobuf).
func WithProtobuf() Option { return WithEncoding(Protobuf) }

// Client calls one tenant of a Holdfast service over a NATS connection. It is
// safe for concurrent use.
type Client struct {
	nc       *nats.Conn
	cfg      config
	subjects [contract.VerbCount]string
	header   nats.Header
	slotLen  atomic.Int64 // SlotLength's answer, once known
	route    route        // direct routing to shard owners (route.go)
	perms    *permWatch   // the connection's permission errors (permissions.go)
}

// New returns a client using nc. The connection stays the caller's: Close
// it when done. New chains a handler before nc's error and closed handlers (it
// calls the ones nc has), so that a request NATS refuses for permissions fails at once
// (CodePermissionDenied); a handler set on nc after New replaces it, and such a request
// then waits for its timeout.
func New(nc *nats.Conn, opts ...Option) (*Client, error) {
	if nc == nil {
		return nil, errors.New("holdfast client: nil NATS connection")
	}
	cfg := config{
		prefix:      DefaultPrefix,
		tenant:      DefaultTenant,
		timeout:     DefaultTimeout,
		maxAttempts: DefaultMaxAttempts,
		backoffBase: DefaultBackoffBase,
		backoffMax:  DefaultBackoffMax,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if err := contract.ValidPrefix(cfg.prefix); err != nil {
		return nil, fmt.Errorf("holdfast client: invalid subject %w", err)
	}
	if !ValidTenant(cfg.tenant) {
		return nil, fmt.Errorf("holdfast client: invalid tenant %q (1-64 chars of A-Z a-z 0-9 _ -)", cfg.tenant)
	}
	if cfg.timeout <= 0 {
		return nil, errors.New("holdfast client: timeout must be positive")
	}
	if cfg.maxAttempts < 1 {
		cfg.maxAttempts = 1
	}
	if cfg.backoffBase <= 0 {
		cfg.backoffBase = DefaultBackoffBase
	}
	if cfg.backoffMax < cfg.backoffBase {
		cfg.backoffMax = cfg.backoffBase
	}
	c := &Client{nc: nc, cfg: cfg, perms: watchPermissions(nc)}
	for _, v := range contract.Verbs() {
		c.subjects[v] = v.Subject(cfg.prefix, cfg.tenant)
	}
	if cfg.encoding == Protobuf {
		c.header = nats.Header{messages.HeaderContentType: []string{messages.ContentTypeProtobuf}}
	}
	return c, nil
}

// ForTenant returns a client like c — the same connection, prefix, encoding, timeout and
// retries — that addresses tenant t.
func (c *Client) ForTenant(t string) (*Client, error) {
	if !ValidTenant(t) {
		return nil, fmt.Errorf("holdfast client: invalid tenant %q (1-64 chars of A-Z a-z 0-9 _ -)", t)
	}
	cfg := c.cfg
	cfg.tenant = t
	n := &Client{nc: c.nc, cfg: cfg, header: c.header, perms: c.perms}
	for _, v := range contract.Verbs() {
		n.subjects[v] = v.Subject(cfg.prefix, t)
	}
	return n, nil
}

// Conn returns the client's NATS connection.
func (c *Client) Conn() *nats.Conn { return c.nc }

// Tenant returns the tenant the client addresses.
func (c *Client) Tenant() string { return c.cfg.tenant }

// Prefix returns the subject prefix.
func (c *Client) Prefix() string { return c.cfg.prefix }

// Encoding returns the wire encoding the client uses.
func (c *Client) Encoding() Encoding { return c.cfg.encoding }

// Subject returns the subject of an operation: <prefix>.v1.<tenant>.<object>.<verb>.
func Subject(prefix, tenant, object, verb string) string {
	return contract.Subject(prefix, tenant, object, verb)
}

// ValidTenant reports whether s is a valid tenant: 1–64 chars of A-Z a-z 0-9 _ -
// (contract.ValidTenant).
func ValidTenant(s string) bool { return contract.ValidTenant(s) }

// ValidID reports whether s is a valid resource, pool, range or holder id:
// 1–128 chars of A-Z a-z 0-9 _ - : / @ +, the first alphanumeric
// (contract.ValidObjectID). Operation ids have the same form with at most 64 chars.
func ValidID(s string) bool { return contract.ValidObjectID(s) }

// NewOperationID returns a fresh operation id: 128 random bits in hex.
func NewOperationID() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

// The results of the verbs that answer one object.
func resourceResult(r *Result) *ResourceResult {
	return &ResourceResult{Result: *r, Resource: r.Reply.Resource}
}
func poolResult(r *Result) *PoolResult   { return &PoolResult{Result: *r, Pool: r.Reply.Pool} }
func rangeResult(r *Result) *RangeResult { return &RangeResult{Result: *r, Range: r.Reply.Range} }
func leaseResult(r *Result) *LeaseResult {
	return &LeaseResult{Result: *r, Lease: Lease{r.Reply.Lease}}
}
func runResult(r *Result) *RunResult { return &RunResult{Result: *r, Run: r.Reply.Run} }

// callAs is call, its result made the verb's result type by as.
func callAs[T any](ctx context.Context, c *Client, v contract.Verb, req proto.Message, opID string, extra time.Duration,
	as func(*Result) *T) (*T, error) {
	r, err := c.call(ctx, v, req, opID, extra)
	if err != nil {
		return nil, err
	}
	return as(r), nil
}

// call sends req (already complete, operation id included) and returns the
// committed reply, a *DefiniteError or an *IndefiniteError. opID is "" for
// reads. extra widens the per-attempt timeout (reads waiting for a fence).
func (c *Client) call(ctx context.Context, v contract.Verb, req proto.Message, opID string, extra time.Duration) (*Result, error) {
	data, err := c.encode(req)
	if err != nil {
		return nil, fmt.Errorf("holdfast client: encode %s: %w", v, err)
	}
	msg := &nats.Msg{Subject: c.subjects[v], Data: data, Header: c.header}
	var last *IndefiniteError
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, c.giveUp(v, opID, attempt-1, last, err)
		}
		var rep *messages.Reply
		var raw []byte
		terr := nats.ErrNoResponders
		var denied *PermissionError
		if subject, ok := c.directSubject(req); ok {
			// Straight to the shard's owner; nobody there (the shard is moving), or not
			// allowed there (permissions that name only the public subjects): the
			// public subject, within the same attempt.
			rep, raw, terr = c.attempt(ctx, c.directMsg(msg, subject), c.cfg.timeout+extra)
			if errors.As(terr, &denied) && denied.Action == "publish" {
				terr = nats.ErrNoResponders
			}
		}
		if errors.Is(terr, nats.ErrNoResponders) {
			rep, raw, terr = c.attempt(ctx, msg, c.cfg.timeout+extra)
		}
		if attempt == 1 && errors.Is(terr, nats.ErrNoResponders) {
			// Nothing received the request. If no Holdfast serves this prefix at all (a
			// wrong --prefix, a stopped server), say so now instead of retrying: a
			// restarting shard is worth waiting for, a missing service is not.
			if seen, missing := c.serviceMissing(ctx); missing {
				return nil, &DefiniteError{Op: v.String(), OperationID: opID, Code: CodeNoService,
					Message: noServiceMessage(c.cfg.prefix, seen)}
			}
		}
		switch {
		case errors.As(terr, &denied):
			// Nothing was delivered: definite, and no retry will be let through.
			return nil, &DefiniteError{Op: v.String(), OperationID: opID, Code: CodePermissionDenied, Message: denied.Error()}
		case terr != nil && ctx.Err() != nil:
			// The caller's deadline ended this attempt: what the earlier ones were told
			// says why the outcome is unknown, not the cut.
			return nil, c.giveUp(v, opID, attempt, last, ctx.Err())
		case terr != nil:
			if !retryableTransport(ctx, terr) {
				return nil, &IndefiniteError{Op: v.String(), OperationID: opID, Code: transportCode(terr), Message: terr.Error(), Attempts: attempt, Err: terr}
			}
			last = &IndefiniteError{Op: v.String(), OperationID: opID, Code: transportCode(terr), Message: terr.Error(), Attempts: attempt, Err: terr}
		case rep.Outcome == messages.OutcomeCommitted:
			return newResult(v.String(), rep, raw, opID, attempt), nil
		case rep.Outcome == messages.OutcomeRejected && rejectionCategory(rep) == messages.CategoryIndefinite:
			last = &IndefiniteError{Op: v.String(), OperationID: opID, Code: rep.Code, Message: rep.Message, Attempts: attempt, Reply: rep}
		case rep.Outcome == messages.OutcomeRejected:
			return nil, &DefiniteError{Op: v.String(), OperationID: opID, Code: rep.Code, Message: rep.Message, Reply: rep}
		default:
			// Not a reply this client understands; the write may have
			// committed, so the outcome is unknown, and retrying will not
			// make the server speak differently.
			return nil, &IndefiniteError{Op: v.String(), OperationID: opID, Code: "bad_reply", Message: fmt.Sprintf("reply with outcome %q", rep.Outcome), Attempts: attempt, Reply: rep}
		}
		if attempt >= c.cfg.maxAttempts {
			return nil, last
		}
		t := time.NewTimer(c.backoff(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, c.giveUp(v, opID, attempt, last, ctx.Err())
		case <-t.C:
		}
	}
}

// giveUp is the error of a call whose context ended: the last indefinite
// outcome if there was one (wrapping the context error), else a plain
// indefinite transport failure.
func (c *Client) giveUp(v contract.Verb, opID string, attempts int, last *IndefiniteError, cerr error) error {
	if last == nil {
		return &IndefiniteError{Op: v.String(), OperationID: opID, Code: transportCode(cerr), Message: cerr.Error(), Attempts: attempts, Err: cerr}
	}
	e := *last
	e.Attempts = attempts
	if e.Err == nil {
		e.Err = cerr
	} else {
		e.Err = errors.Join(e.Err, cerr)
	}
	return &e
}

// attempt performs one request-reply exchange and decodes the reply.
// A decode failure is returned as a non-retryable transport error.
func (c *Client) attempt(ctx context.Context, msg *nats.Msg, timeout time.Duration) (*messages.Reply, []byte, error) {
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var pw *permWaiter
	if c.perms != nil {
		pw = c.perms.wait(msg.Subject, cancel)
		defer c.perms.stop(pw)
	}
	resp, err := c.nc.RequestMsgWithContext(actx, msg)
	if err != nil {
		if denied := pw.refusal(); denied != nil {
			return nil, nil, denied
		}
		return nil, nil, err
	}
	rep, err := decodeReply(resp, c.cfg.encoding)
	if err != nil {
		return nil, nil, &decodeFailure{err}
	}
	return rep, resp.Data, nil
}

func (c *Client) encode(m proto.Message) ([]byte, error) {
	if c.cfg.encoding == Protobuf {
		return messages.MarshalProto(m)
	}
	return messages.MarshalJSON(m)
}

// decodeReply decodes a reply in the encoding it says it has (its
// Content-Type header, else the one requested). A rejected reply with an empty
// body (a bare micro error) is rebuilt from its Nats-Service-Error header.
func decodeReply(resp *nats.Msg, enc Encoding) (*messages.Reply, error) {
	rep := &messages.Reply{}
	if len(resp.Data) == 0 {
		if code := resp.Header.Get("Nats-Service-Error"); code != "" {
			rep.Outcome = messages.OutcomeRejected
			rep.Code = code
			rep.Category = messages.RejectionCategory(code)
			if rep.Category == "" {
				rep.Category = messages.CategoryDefinite
			}
			return rep, nil
		}
		return nil, errors.New("empty reply")
	}
	switch ct := resp.Header.Get(messages.HeaderContentType); {
	case ct == messages.ContentTypeProtobuf, ct == "" && enc == Protobuf:
		return rep, messages.UnmarshalProtoTolerant(resp.Data, rep)
	default:
		return rep, messages.UnmarshalJSONTolerant(resp.Data, rep)
	}
}

// rejectionCategory is the reply's category, or the contract's category of
// its code when a reply leaves it out.
func rejectionCategory(rep *messages.Reply) string {
	if rep.Category != "" {
		return rep.Category
	}
	if cat := messages.RejectionCategory(rep.Code); cat != "" {
		return cat
	}
	return messages.CategoryDefinite
}

type decodeFailure struct{ err error }

func (d *decodeFailure) Error() string { return "undecodable reply: " + d.err.Error() }
func (d *decodeFailure) Unwrap() error { return d.err }

// retryableTransport reports whether a transport error may be retried with
// the same request: a timeout of the attempt (not of the caller's context) or
// no responders (the service is restarting or not yet subscribed).
func retryableTransport(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	return errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, nats.ErrNoResponders)
}

// transportCode names a transport failure in IndefiniteError.Code.
func transportCode(err error) string {
	var df *decodeFailure
	switch {
	case errors.As(err, &df):
		return "bad_reply"
	case errors.Is(err, nats.ErrNoResponders):
		return "no_responders"
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return messages.CodeTimeout
	case errors.Is(err, context.Canceled):
		return "canceled"
	default:
		return "transport_error"
	}
}

// backoff is the wait after the given attempt (1-based): exponential from the
// base, capped, with "equal jitter" (half fixed, half random) so that it
// always makes progress and concurrent clients spread out.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.cfg.backoffBase
	for i := 1; i < attempt && d < c.cfg.backoffMax; i++ {
		d *= 2
	}
	d = min(d, c.cfg.backoffMax)
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(half)+1))
}

// CodeNoService is the code of a *DefiniteError for a request that no Holdfast service
// could receive: none serves the client's prefix on this NATS. Nothing was executed.
const CodeNoService = "no_service"

// serviceMissing asks every Holdfast service on this NATS for its prefix ($SRV.PING),
// waiting a short while for the answers, and reports whether none serves the client's,
// with the prefixes that answered.
func (c *Client) serviceMissing(ctx context.Context) ([]string, bool) {
	var seen []string
	found, err := c.askServices(ctx, "PING", min(c.cfg.timeout, 300*time.Millisecond), func(meta map[string]string) bool {
		if p := meta["prefix"]; p != c.cfg.prefix {
			seen = append(seen, p)
			return false
		}
		return true
	})
	if err != nil || found {
		return nil, false
	}
	return seen, true
}

// askServices sends $SRV.<verb>.holdfast and hands the metadata of each answer to each
// until it returns true (found) or wait has passed (not found); an error when the
// question could not be sent or ctx ended first.
func (c *Client) askServices(ctx context.Context, verb string, wait time.Duration, each func(meta map[string]string) bool) (bool, error) {
	inbox := c.nc.NewInbox()
	replies := make(chan *nats.Msg, 64)
	sub, err := c.nc.ChanSubscribe(inbox, replies)
	if err != nil {
		return false, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := c.nc.PublishRequest("$SRV."+verb+"."+serviceName, inbox, nil); err != nil {
		return false, err
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case m := <-replies:
			var answer struct {
				Metadata map[string]string `json:"metadata"`
			}
			if json.Unmarshal(m.Data, &answer) == nil && each(answer.Metadata) {
				return true, nil
			}
		case <-t.C:
			return false, nil
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

func noServiceMessage(prefix string, seen []string) string {
	msg := fmt.Sprintf("no Holdfast service serves prefix %q on this NATS, so nothing received the request", prefix)
	if len(seen) > 0 {
		slices.Sort(seen)
		msg += fmt.Sprintf(" (services answered for prefixes %q: is the prefix wrong?)", slices.Compact(seen))
	} else {
		msg += " (none answered: is holdfast serve running, and on this NATS?)"
	}
	return msg
}
