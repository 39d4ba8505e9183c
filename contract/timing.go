package contract

import (
	"fmt"
	"time"
)

// The timing table (docs/api.md §A.9 "Timing"). A deployment's timeouts nest: a client
// waits longer for one attempt than the service takes to answer a request, a forward
// waits at most what is left of its request, and a shard's journal gives up on an
// append before its node's claim could lapse. They were set one by one in nine files,
// and two relations ended up inverted (the server answered `timeout` after a default
// client had stopped listening; a stuck append outlasted the claim). Now two inputs —
// the ownership TTL and the client's attempt — decide every one, derived here only, and
// Validate checks the relations at start, as hashicorp/raft's ValidateConfig does for
// its timers.

// DefaultAttempt is how long a client waits for one answer before it sends the request
// again with the same operation_id (the Go client's default attempt). A request in flight
// at a node that is killed is never answered, so this is also how long such a request
// goes unnoticed.
const DefaultAttempt = 2 * time.Second

// DefaultOwnershipTTL is how long a shard claim lasts without renewal (--ownership-ttl).
const DefaultOwnershipTTL = 5 * time.Second

// Timing is a node's timeouts.
type Timing struct {
	// Attempt is the client attempt the service answers within.
	Attempt time.Duration
	// Request bounds one request inside the service, from its arrival at any node to its
	// answer, forwards included: a request not answered by then is answered `timeout`
	// (or, forwarded to a shard nobody serves, `engine_halted`), both indefinite, so the
	// client's retry with the same operation_id — the one owner of retries — learns the
	// outcome. Three quarters of the attempt: the answer reaches a client still waiting.
	Request time.Duration
	// ForwardRetry is the pause before a forward that met no responders (the shard is
	// moving) is sent again, within what is left of its request.
	ForwardRetry time.Duration
	// Drain bounds how long a node handing a shard over waits for the requests already
	// delivered to it: each is answered within its request's bound.
	Drain time.Duration

	// OwnershipTTL is how long a shard claim lasts without renewal.
	OwnershipTTL time.Duration
	// Renew is how often a node renews its claims and rebalances: a quarter of the TTL.
	Renew time.Duration
	// Serve is how long after sending its last successful renewal a node serves a shard:
	// three quarters of the TTL, so it has stopped before the claim can lapse (which is
	// at least the TTL after the server received that renewal).
	Serve time.Duration
	// Settle is how long a node that joins a cluster where no shard is claimed (a
	// cluster starting) claims nothing, so that the nodes started with it have joined
	// and the shards are split between them at once instead of claimed by the first up
	// and handed on one at a time: a renewal period, at most a second.
	Settle time.Duration
	// JournalCall bounds one JetStream call of a shard's journal: an append's
	// acknowledgement, or the read that settles an append whose outcome is unknown. A
	// quarter of the serve window, at most 2 s, so that the worst append (JournalWorst)
	// ends within the serve window: a node whose journal stalls finds out, halts the
	// shard and gives it up while its claim is still its own.
	JournalCall time.Duration
}

// JournalWorst is the longest an append can keep its shard waiting when its NATS server
// stops answering: its acknowledgement, the window behind it settling, and the read that
// finds out, one JournalCall each.
func (t Timing) JournalWorst() time.Duration { return 3 * t.JournalCall }

// NewTiming derives the table from the ownership TTL and the client attempt (zero: the
// defaults).
func NewTiming(ownershipTTL, attempt time.Duration) Timing {
	if ownershipTTL == 0 {
		ownershipTTL = DefaultOwnershipTTL
	}
	if attempt == 0 {
		attempt = DefaultAttempt
	}
	t := Timing{
		Attempt:      attempt,
		Request:      attempt * 3 / 4,
		ForwardRetry: 50 * time.Millisecond,
		OwnershipTTL: ownershipTTL,
		Renew:        ownershipTTL / 4,
		Serve:        ownershipTTL * 3 / 4,
	}
	t.Drain = t.Request
	t.Settle = min(time.Second, t.Renew)
	t.JournalCall = min(2*time.Second, t.Serve/4)
	return t
}

// Validate checks the relations the table promises; a table built by NewTiming holds them
// for any TTL of at least a second and any attempt of at least 100 ms.
func (t Timing) Validate() error {
	switch {
	case t.Request <= 0 || t.ForwardRetry <= 0 || t.Renew <= 0 || t.JournalCall <= 0:
		return fmt.Errorf("timing: every timeout must be positive: %+v", t)
	case t.Request >= t.Attempt:
		return fmt.Errorf("timing: request timeout %v must be below the client attempt %v (the answer must reach a client still waiting)", t.Request, t.Attempt)
	case t.ForwardRetry*2 > t.Request:
		return fmt.Errorf("timing: forward retry %v leaves a request of %v no second send", t.ForwardRetry, t.Request)
	case t.Drain < t.Request:
		return fmt.Errorf("timing: drain %v is shorter than a request %v: a delivered request could be cut off", t.Drain, t.Request)
	case t.Settle < 0 || t.Settle > t.Renew:
		return fmt.Errorf("timing: a starting cluster's settle %v must be between 0 and a renewal period %v (a lone node would wait longer for its first claims)", t.Settle, t.Renew)
	case t.Renew >= t.Serve:
		return fmt.Errorf("timing: renewals every %v do not come within the serve window %v", t.Renew, t.Serve)
	case t.Serve >= t.OwnershipTTL:
		return fmt.Errorf("timing: serve window %v must end before the claim lapses (%v)", t.Serve, t.OwnershipTTL)
	case t.JournalWorst() >= t.Serve:
		return fmt.Errorf("timing: a journal call of %v can stall a shard %v, past the serve window %v", t.JournalCall, t.JournalWorst(), t.Serve)
	}
	return nil
}
