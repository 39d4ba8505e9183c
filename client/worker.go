package client

import (
	"context"
	"time"

	"github.com/holdfast/holdfast/messages"
)

// Worker claims work shards of one run for one holder: claim next, keep the claim alive
// in the background, checkpoint, then complete, park, split or hand back. Each claim's
// Context is cancelled the moment its fence may be lost, so work stops before another
// worker can be given the same shard.
//
//	w := &client.Worker{Client: c, Holder: "worker-7", Run: "crawl-42", TTL: 30 * time.Second}
//	for {
//		claim, res, err := w.Next(ctx)
//		if err != nil { ... }          // transport or rejection: retry later
//		if claim == nil { wait(res) } // none_available: res.EarliestDeadlineSlot says until when
//		... work in claim.Context(), claim.Checkpoint(...) as it goes ...
//		claim.Complete(ctx, cursor)
//	}
type Worker struct {
	Client *Client
	Holder string
	Run    string
	// TTL of each claim, renewed every TTL/3 (0: 30 s).
	TTL time.Duration
	// Along are members each claim takes with its work shard under the same lease (a GPU
	// for the worker, say), of any placement keys: every one or no claim (ClaimWith).
	Along []*messages.Member
}

// Claim is one claimed work shard and the keep-alive of its lease.
type Claim struct {
	*KeepAlive
	w *Worker
	// Work is the work shard as claimed: its range, metadata and last cursor, to resume
	// from.
	Work *messages.Work
	// Capacity is the run's advisory hint at the claim.
	Capacity *messages.Capacity
}

func (w *Worker) ttl() time.Duration {
	if w.TTL <= 0 {
		return 30 * time.Second
	}
	return w.TTL
}

// Next claims the next claimable work shard of the run. With a committed answer other
// than ok (none_available, run_terminal, ...) it returns no claim and the result, whose
// Code and EarliestDeadlineSlot tell what to do (Classify sorts the codes).
func (w *Worker) Next(ctx context.Context) (*Claim, *WorkResult, error) {
	return w.claim(ctx, "")
}

// Take claims the named work shard of the run, as Next.
func (w *Worker) Take(ctx context.Context, name string) (*Claim, *WorkResult, error) {
	return w.claim(ctx, name)
}

func (w *Worker) claim(ctx context.Context, name string) (*Claim, *WorkResult, error) {
	sent := time.Now()
	res, err := w.Client.ClaimWith(ctx, w.Holder, w.Run, name, w.ttl(), w.Along)
	if err != nil || !res.OK() {
		return nil, res, err
	}
	ka := &KeepAlive{c: w.Client, holder: w.Holder, fence: res.Fence(), ttl: w.ttl(), done: make(chan struct{})}
	ka.ctx, ka.cancel = context.WithCancel(context.WithoutCancel(ctx))
	go ka.run(sent)
	return &Claim{KeepAlive: ka, w: w, Work: res.Work, Capacity: res.Capacity}, res, nil
}

// Fence is the claim's fencing token, to hand to whatever the work writes to.
func (c *Claim) Fence() Fence { return c.fence }

// settle stops the claim's keep-alive after a call that ended it, or that says the claim
// is gone (a fatal code): its work must stop.
func (c *Claim) settle(res *WorkResult, err error, ended bool) (*WorkResult, error) {
	if err == nil && (ended && res.OK() || Classify(res.Code) == Fatal || res.Code == messages.CodeLeaseExpired) {
		if !res.OK() {
			c.fail(res.Err())
		}
		c.cancel()
	}
	return res, err
}

// Checkpoint records lastKey and token. A fatal answer (stale_epoch, work_terminal, a
// cursor code, ...) or lease_expired cancels the claim's Context.
func (c *Claim) Checkpoint(ctx context.Context, lastKey, token []byte, opts ...WriteOption) (*WorkResult, error) {
	res, err := c.w.Client.Checkpoint(ctx, c.w.Holder, c.fence, lastKey, token, opts...)
	return c.settle(res, err, false)
}

// Complete marks the work shard done (cursor, if not nil, is its final checkpoint) and
// ends the claim.
func (c *Claim) Complete(ctx context.Context, cursor *messages.Cursor, opts ...WriteOption) (*WorkResult, error) {
	res, err := c.w.Client.CompleteWork(ctx, c.w.Holder, c.fence, cursor, opts...)
	return c.settle(res, err, true)
}

// Park sets the work shard aside with a reason and ends the claim.
func (c *Claim) Park(ctx context.Context, reason string, opts ...WriteOption) (*WorkResult, error) {
	res, err := c.w.Client.Park(ctx, c.w.Holder, c.fence, reason, opts...)
	return c.settle(res, err, true)
}

// SplitResidual hands [splitKey, end) to a new work shard and keeps the rest.
func (c *Claim) SplitResidual(ctx context.Context, splitKey []byte, opts ...WriteOption) (*WorkResult, error) {
	res, err := c.w.Client.SplitResidual(ctx, c.w.Holder, c.fence, splitKey, opts...)
	return c.settle(res, err, false)
}

// SplitReplace retires the work shard for children covering its unfinished part, and
// ends the claim.
func (c *Claim) SplitReplace(ctx context.Context, children []*messages.KeyRange, opts ...WriteOption) (*WorkResult, error) {
	res, err := c.w.Client.SplitReplace(ctx, c.w.Holder, c.fence, children, opts...)
	return c.settle(res, err, true)
}

// Release hands the work shard back unfinished (its cursor stays for the next claim)
// and ends the claim.
func (c *Claim) Release(ctx context.Context, opts ...WriteOption) (*LeaseResult, error) {
	c.cancel()
	<-c.done
	return c.w.Client.Release(ctx, c.w.Holder, c.fence, opts...)
}
