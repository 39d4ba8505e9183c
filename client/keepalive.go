package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/holdfast/holdfast/messages"
)

// KeepAlive renews a reserved lease in the background, as clientv3's KeepAlive does for
// an etcd lease: every ttl/3, each renewal a new operation. Its Context is cancelled the
// moment the lease may be lost — a renewal answered with a committed failure
// (lease_expired, stale_epoch, ...), or no successful renewal sent within ttl minus a
// margin — so work guarded by it stops before another holder can be granted the lease's
// members. The margin (a fifth of ttl) covers the server rounding a deadline to its slot
// and the request's time on the way.
type KeepAlive struct {
	c      *Client
	holder string
	fence  Fence
	ttl    time.Duration

	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu  sync.Mutex
	err error
}

// ErrLeaseLost is the error of a KeepAlive that could not renew before its lease's
// deadline (the lease may have expired).
var ErrLeaseLost = errors.New("holdfast: the lease could not be renewed before its deadline")

// KeepAlive starts renewing holder's lease f (reserved, with a deadline ttl ahead) until
// ctx ends, Stop is called, or the lease is lost. The first renewal goes out after ttl/3.
func (c *Client) KeepAlive(ctx context.Context, holder string, f Fence, ttl time.Duration) *KeepAlive {
	k := &KeepAlive{c: c, holder: holder, fence: f, ttl: ttl, done: make(chan struct{})}
	k.ctx, k.cancel = context.WithCancel(ctx)
	go k.run(time.Now())
	return k
}

// Context is cancelled when the lease may be lost or the keep-alive stops.
func (k *KeepAlive) Context() context.Context { return k.ctx }

// Done is closed when the keep-alive has stopped.
func (k *KeepAlive) Done() <-chan struct{} { return k.done }

// Err is why the keep-alive stopped: nil while it runs or after Stop, a
// *CommittedError for a renewal refused (lease_expired, stale_epoch, ...), or
// ErrLeaseLost.
func (k *KeepAlive) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

// Stop ends the renewals and waits for the loop to exit; the lease itself is left as it
// is (release it, or let it expire).
func (k *KeepAlive) Stop() {
	k.cancel()
	<-k.done
}

func (k *KeepAlive) fail(err error) {
	k.mu.Lock()
	if k.err == nil {
		k.err = err
	}
	k.mu.Unlock()
	k.cancel()
}

// run renews until stopped; lastOK is when the last successful renewal (or the grant)
// was sent, which the server's deadline is at least ttl after, less a slot.
func (k *KeepAlive) run(lastOK time.Time) {
	defer close(k.done)
	interval := max(k.ttl/3, time.Millisecond)
	margin := k.ttl / 5
	next := interval
	for {
		t := time.NewTimer(next)
		select {
		case <-k.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		deadline := lastOK.Add(k.ttl - margin)
		if time.Now().After(deadline) {
			k.fail(ErrLeaseLost)
			return
		}
		sent := time.Now()
		rctx, cancel := context.WithDeadline(k.ctx, deadline)
		r, err := k.c.Renew(rctx, k.holder, k.fence, k.ttl)
		cancel()
		switch {
		case err == nil && r.OK():
			lastOK, next = sent, interval
		case k.ctx.Err() != nil:
			return // stopped meanwhile (the claim was completed, say): not a loss
		case err == nil:
			k.fail(r.Err()) // committed: the lease is gone or no longer this holder's
			return
		default:
			var def *DefiniteError
			if errors.As(err, &def) && def.Code != messages.CodeOverloaded {
				k.fail(fmt.Errorf("holdfast: keep-alive: %w", err))
				return
			}
			next = max(interval/4, time.Millisecond) // indefinite: try again soon, until the deadline
		}
	}
}

// ReserveWait reserves like Reserve and, while the answer is resource_busy (or, for a
// work member, none_available), waits and tries again with a new operation id until the
// lease is granted, another answer comes, or ctx ends — the few lines clientv3's
// concurrency package gives etcd users. It waits until the blocking claim's deadline
// (earliest_deadline_slot) when the reply gives one, else polls, from 50 ms up to poll
// (0: 2 s).
func (c *Client) ReserveWait(ctx context.Context, r ReserveRequest, poll time.Duration) (*LeaseResult, error) {
	if poll <= 0 {
		poll = 2 * time.Second
	}
	backoff := 50 * time.Millisecond
	for {
		res, err := c.Reserve(ctx, r)
		if err != nil || (res.Code != messages.CodeResourceBusy && res.Code != messages.CodeNoneAvailable) {
			return res, err
		}
		wait := backoff
		backoff = min(2*backoff, poll)
		if s := res.Reply.GetEarliestDeadlineSlot(); s != 0 {
			if length, err := c.SlotLength(ctx); err == nil {
				// The deadline's slot must have passed on the server: one slot more.
				wait = min(max(time.Until(SlotTime(s+1, length)), time.Millisecond), poll)
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, ctx.Err()
		case <-t.C:
		}
	}
}
