//go:build unix

package harness

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/integration/internal/history"
	"github.com/holdfast/holdfast/messages"
)

// Conn is one client's NATS connection, replaceable: the nemesis may close it with
// requests in flight, and the client then dials again.
type Conn struct {
	name string
	side int // which client this is, for a target that places clients (ClientPlacer)
	srv  Target
	nc   atomic.Pointer[nats.Conn]
	gen  atomic.Int64 // the server URL generation the connection was dialed for
	mu   sync.Mutex   // serializes dialing
}

func newConn(name string, srv Target) *Conn { return &Conn{name: name, srv: srv} }

// ClientPlacer is a target that says which NATS server each client connects to (a
// partitioned cluster: clients on both sides of a cut).
type ClientPlacer interface {
	ClientURL(client int) string
}

// url is where this connection dials: its place, or the target's URL.
func (c *Conn) url() string {
	if p, ok := c.srv.(ClientPlacer); ok && c.side > 0 {
		return p.ClientURL(c.side)
	}
	return c.srv.URL()
}

func dial(url, name string) (*nats.Conn, error) {
	return nats.Connect(url,
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(20*time.Millisecond),
		nats.ReconnectJitter(10*time.Millisecond, 0),
		nats.ReconnectBufSize(-1), // no buffering while disconnected: a request either leaves or fails
		nats.RetryOnFailedConnect(true),
		nats.Timeout(2*time.Second),
		nats.NoCallbacksAfterClientClose(),
	)
}

// get returns a usable connection, dialing when there is none, it was closed, or the
// server moved to another URL.
func (c *Conn) get() (*nats.Conn, error) {
	nc := c.nc.Load()
	gen := int64(c.srv.URLGen())
	if nc != nil && !nc.IsClosed() && c.gen.Load() == gen {
		return nc, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	nc = c.nc.Load()
	if nc != nil && !nc.IsClosed() && c.gen.Load() == gen {
		return nc, nil
	}
	if nc != nil {
		nc.Close()
	}
	nc, err := dial(c.url(), c.name)
	if err != nil {
		return nil, err
	}
	c.nc.Store(nc)
	c.gen.Store(gen)
	return nc, nil
}

// Drop closes the connection under whatever requests are in flight.
func (c *Conn) Drop() bool {
	if nc := c.nc.Load(); nc != nil && !nc.IsClosed() {
		nc.Close()
		return true
	}
	return false
}

// Close closes the connection for good.
func (c *Conn) Close() {
	if nc := c.nc.Load(); nc != nil {
		nc.Close()
	}
}

// Subject is the request subject of verb in tenant.
func Subject(prefix, tenant, verb string) string { return prefix + ".v1." + tenant + "." + verb }

// Caller sends requests and records every attempt.
type Caller struct {
	Rec    *history.Recorder
	Round  int
	Client int
	Prefix string
	Conn   *Conn
	// Proto is the fraction of requests sent as protobuf.
	Proto float64
	Rng   *rand.Rand
}

// Call is one request.
type Call struct {
	Verb    string
	Tenant  string
	Key     string // operation id (writes) or read id
	Intent  string
	Msg     proto.Message
	Timeout time.Duration
	proto   bool
}

func classifyErr(err error) string {
	switch {
	case errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return history.ErrTimeout
	case errors.Is(err, nats.ErrNoResponders):
		return history.ErrNoResponders
	case errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrConnectionDraining), errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, nats.ErrReconnectBufExceeded):
		return history.ErrConnClosed
	}
	return history.ErrOther
}

// Send sends one attempt of call and records it. The reply is nil on a transport
// error, which the record names.
func (c *Caller) Send(call *Call, attempt int) *messages.Reply {
	jsonBody, err := messages.MarshalJSON(call.Msg)
	if err != nil {
		panic(fmt.Sprintf("harness: encoding a request: %v", err))
	}
	if attempt == 1 {
		call.proto = c.Proto > 0 && c.Rng.Float64() < c.Proto
	}
	msg := nats.NewMsg(Subject(c.Prefix, call.Tenant, call.Verb))
	if call.proto {
		msg.Data, err = messages.MarshalProto(call.Msg)
		if err != nil {
			panic(err)
		}
		msg.Header.Set(messages.HeaderContentType, messages.ContentTypeProtobuf)
	} else {
		msg.Data = jsonBody
	}
	rec := history.Record{Kind: history.KindCall, Round: c.Round, Client: c.Client, Op: call.Key, Attempt: attempt,
		Verb: call.Verb, Tenant: call.Tenant, Subject: msg.Subject, Proto: call.proto, Intent: call.Intent, Request: jsonBody}
	timeout := call.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	rec.Invoke = c.Rec.Now()
	var resp *nats.Msg
	nc, err := c.Conn.get()
	if err == nil {
		resp, err = nc.RequestMsg(msg, timeout)
	}
	rec.Return = c.Rec.Now()
	if err != nil {
		rec.Err = classifyErr(err)
		c.Rec.Add(rec)
		return nil
	}
	reply := &messages.Reply{}
	if call.proto {
		err = messages.UnmarshalProtoTolerant(resp.Data, reply)
	} else {
		err = messages.UnmarshalJSONTolerant(resp.Data, reply)
	}
	if err != nil {
		rec.Reply = resp.Data
		rec.Err = history.ErrOther
		rec.Detail = "undecodable reply: " + err.Error()
		c.Rec.Add(rec)
		return nil
	}
	rec.Reply, _ = messages.MarshalJSON(reply)
	c.Rec.Add(rec)
	return reply
}

// Indefinite reports whether an attempt's outcome leaves the operation's fate unknown.
func Indefinite(r *messages.Reply) bool {
	return r == nil || (r.Outcome == messages.OutcomeRejected && r.Category == messages.CategoryIndefinite)
}

// Write sends a write and retries it with the same operation id and the same body while
// its outcome is unknown (engine_halted, storage_failure, timeout, no reply), until it
// commits, or until maxWait / ctx end. A definite rejection ends it only if no earlier
// attempt was indefinite (an earlier attempt may still commit). It returns the
// resolving reply (nil when unresolved).
func (c *Caller) Write(ctx context.Context, call *Call, maxWait time.Duration) *messages.Reply {
	start := time.Now()
	indefinite := false
	backoff := 10 * time.Millisecond
	for attempt := 1; attempt <= 2000; attempt++ {
		r := c.Send(call, attempt)
		switch {
		case r != nil && r.Outcome == messages.OutcomeCommitted:
			return r
		case r != nil && !Indefinite(r) && (!indefinite || ShapeRejection(r.Code)):
			// A definite rejection ends the operation, unless an earlier attempt may still
			// commit. A request-shape rejection depends on the body alone: the same body
			// was never admitted, so nothing can commit.
			return r
		case Indefinite(r):
			indefinite = true
		}
		if time.Since(start) > maxWait {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff + time.Duration(c.Rng.Int64N(int64(backoff)))):
		}
		backoff = min(backoff*2, 250*time.Millisecond)
	}
	return nil
}

// ShapeRejection reports the rejection codes that depend on the request and the
// server's configuration alone (docs/api.md §4: checked before the journal, whatever the
// operation_id): an operation answered one of them never executed, in any attempt.
func ShapeRejection(code string) bool {
	switch code {
	case "invalid_request", "command_too_large", "cross_shard", "duplicate_member", "bundle_too_large", "ttl_out_of_range":
		return true
	}
	return false
}
