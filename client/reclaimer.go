package client

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/messages"
)

// The reclaimer is the external observer of the kernel's rule that nothing is taken back
// on a timer (docs/api.md Part III): when an active lease's keep-alive lapses the lease
// moves to revoking — its holder fenced out, its members still held — and someone
// decides when what it held comes back. A Reclaimer decides after a grace period the
// operator sets: it follows the lease.revoking events whose reason is keepalive_lapsed
// and, Grace after the lapse, reclaims the lease. An operator's own revokes are left
// alone: they are the operator's to reclaim.

// ReclaimerConfig is how a Reclaimer decides.
type ReclaimerConfig struct {
	// Grace is how long after a keep-alive lapsed the lease is reclaimed: the time a
	// holder that stopped renewing (a partition, a pause) has to notice it is fenced out
	// and stop using what it held. At least 0; the lapse is the event's slot.
	Grace time.Duration
	// AllTenants follows every tenant's leases (the client's tenant otherwise).
	AllTenants bool
	// Since is how far back the events are read at start (default 24h, the events
	// stream's default age): lapses from before a restart are reclaimed too.
	Since time.Duration
	// MaxPending bounds the leases waiting for their grace to pass (default 1<<20);
	// past it a lapse waits for the next start's replay, counted in Stats.Dropped.
	MaxPending int
	// Logger receives one line per decision (default: discarded).
	Logger *slog.Logger
	// OnDecision, if set, is called with each decision, in order.
	OnDecision func(ReclaimDecision)
}

// ReclaimDecision is what the reclaimer did about one lapsed keep-alive.
type ReclaimDecision struct {
	Tenant  string
	LeaseID string
	Lapsed  time.Time // when the keep-alive lapsed (the revoking entry's slot)
	Outcome string    // "reclaimed", or "gone" (reclaimed already, or retired), or "failed"
	LSN     uint64    // the reclaim's lsn when reclaimed
	Err     error     // when failed
}

// ReclaimerStats are a Reclaimer's counts since it started.
type ReclaimerStats struct {
	Seen      uint64 // keep-alive lapses seen
	Reclaimed uint64 // leases reclaimed
	Gone      uint64 // already reclaimed (or retired) when their grace passed
	Failed    uint64 // reclaims that failed (retried at the next start)
	Dropped   uint64 // lapses not queued: MaxPending reached
	Pending   int64  // lapses waiting for their grace
	Skipped   uint64 // lease.revoking events of an operator's revoke
}

// Reclaimer reclaims leases whose keep-alive lapsed, Grace after the lapse.
type Reclaimer struct {
	c    *Client
	cfg  ReclaimerConfig
	slot time.Duration

	seen, reclaimed, gone, failed, dropped, skipped atomic.Uint64
	pending                                         atomic.Int64

	mu      sync.Mutex
	clients map[string]*Client // per tenant
}

// Stats returns the counts so far.
func (r *Reclaimer) Stats() ReclaimerStats {
	return ReclaimerStats{Seen: r.seen.Load(), Reclaimed: r.reclaimed.Load(), Gone: r.gone.Load(), Failed: r.failed.Load(),
		Dropped: r.dropped.Load(), Pending: r.pending.Load(), Skipped: r.skipped.Load()}
}

// NewReclaimer returns a reclaimer using c (its tenant, or every tenant).
func (c *Client) NewReclaimer(cfg ReclaimerConfig) (*Reclaimer, error) {
	if cfg.Grace < 0 {
		return nil, errors.New("reclaimer: grace must not be negative")
	}
	if cfg.Since <= 0 {
		cfg.Since = 24 * time.Hour
	}
	if cfg.MaxPending <= 0 {
		cfg.MaxPending = 1 << 20
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Reclaimer{c: c, cfg: cfg, clients: map[string]*Client{}}, nil
}

// lapse is one lease waiting for its grace; with one grace for all, the earliest lapse
// is the first due.
type lapse struct {
	tenant, lease string
	lapsed        time.Time
}

type lapses []lapse

func (h lapses) Len() int           { return len(h) }
func (h lapses) Less(i, j int) bool { return h[i].lapsed.Before(h[j].lapsed) }
func (h lapses) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *lapses) Push(x any)        { *h = append(*h, x.(lapse)) }
func (h *lapses) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Run follows the events and reclaims until ctx ends (then it returns nil) or the
// events cannot be followed.
func (r *Reclaimer) Run(ctx context.Context) error {
	slot, err := r.c.SlotLength(ctx)
	if err != nil {
		return fmt.Errorf("reclaimer: learning the slot length: %w", err)
	}
	r.slot = slot
	w, err := r.c.Watch(ctx, WatchOptions{Filter: contract.EventLeaseRevoking, AllTenants: r.cfg.AllTenants,
		StartTime: time.Now().Add(-r.cfg.Since)})
	if err != nil {
		return fmt.Errorf("reclaimer: following the events: %w", err)
	}
	defer w.Stop()
	var queue lapses
	queued := map[string]bool{} // tenant\x00lease: each lapse once
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		// Reset leaves no stale tick behind (Go 1.23 timers).
		if len(queue) > 0 {
			timer.Reset(max(0, time.Until(queue[0].lapsed.Add(r.cfg.Grace))))
		} else {
			timer.Reset(time.Hour)
		}
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events():
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("reclaimer: the events ended: %w", w.Err())
			}
			r.observe(ev, &queue, queued)
		case <-timer.C:
			now := time.Now()
			for len(queue) > 0 && !queue[0].lapsed.Add(r.cfg.Grace).After(now) {
				l := heap.Pop(&queue).(lapse)
				delete(queued, l.tenant+"\x00"+l.lease)
				r.pending.Store(int64(len(queue)))
				r.reclaim(ctx, l)
			}
		}
	}
}

// observe queues a lapsed keep-alive for its grace; an operator's revoke is not ours.
func (r *Reclaimer) observe(ev Event, queue *lapses, queued map[string]bool) {
	if ev.Event == nil || ev.Lease == nil {
		return
	}
	if ev.Reason != contract.RevokeReasonKeepAlive {
		r.skipped.Add(1)
		return
	}
	key := ev.Tenant + "\x00" + ev.Lease.LeaseId
	if queued[key] {
		return
	}
	r.seen.Add(1)
	if len(*queue) >= r.cfg.MaxPending {
		r.dropped.Add(1)
		r.cfg.Logger.Warn("reclaimer: too many lapses waiting; this one waits for the next start", "tenant", ev.Tenant, "lease", ev.Lease.LeaseId)
		return
	}
	lapsed := time.UnixMilli(int64(ev.Slot) * r.slot.Milliseconds())
	queued[key] = true
	heap.Push(queue, lapse{tenant: ev.Tenant, lease: ev.Lease.LeaseId, lapsed: lapsed})
	r.pending.Store(int64(len(*queue)))
	r.cfg.Logger.Info("keep-alive lapsed; reclaiming after the grace", "tenant", ev.Tenant, "lease", ev.Lease.LeaseId,
		"lapsed", lapsed.UTC().Format(time.RFC3339Nano), "grace", r.cfg.Grace)
}

// reclaim reclaims one lease whose grace has passed. The operation id is the lease's
// and its revoking epoch's, so a retry (or another reclaimer) never reclaims twice.
func (r *Reclaimer) reclaim(ctx context.Context, l lapse) {
	d := ReclaimDecision{Tenant: l.tenant, LeaseID: l.lease, Lapsed: l.lapsed}
	var res *LeaseResult
	cl := r.tenant(l.tenant)
	err := fmt.Errorf("invalid tenant %q", l.tenant)
	if cl != nil {
		res, err = cl.Reclaim(ctx, l.lease, WithOperationID("reclaimer-"+l.lease))
	}
	switch {
	case err != nil:
		d.Outcome, d.Err = "failed", err
		r.failed.Add(1)
		r.cfg.Logger.Error("reclaim failed; retried at the next start", "tenant", l.tenant, "lease", l.lease, "err", err)
	case res.Code == messages.CodeOK:
		d.Outcome, d.LSN = "reclaimed", res.LSN
		r.reclaimed.Add(1)
		r.cfg.Logger.Info("reclaimed", "tenant", l.tenant, "lease", l.lease, "lsn", res.LSN,
			"after", time.Since(l.lapsed).Round(time.Millisecond))
	case res.Code == messages.CodeInvalidState || res.Code == messages.CodeLeaseRetired || res.Code == messages.CodeLeaseNotFound:
		d.Outcome = "gone"
		r.gone.Add(1)
		r.cfg.Logger.Info("already reclaimed or retired", "tenant", l.tenant, "lease", l.lease, "code", res.Code)
	default:
		d.Outcome, d.Err = "failed", res.Err()
		r.failed.Add(1)
		r.cfg.Logger.Error("reclaim refused; retried at the next start", "tenant", l.tenant, "lease", l.lease, "code", res.Code)
	}
	if f := r.cfg.OnDecision; f != nil {
		f(d)
	}
}

// tenant is a client of the reclaimer's connection for tenant t (nil: t is not a
// valid tenant, which an event never names).
func (r *Reclaimer) tenant(t string) *Client {
	if t == r.c.Tenant() {
		return r.c
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, ok := r.clients[t]; ok {
		return c
	}
	c, err := r.c.ForTenant(t)
	if err != nil {
		return nil
	}
	if len(r.clients) < 1024 {
		r.clients[t] = c
	}
	return c
}
