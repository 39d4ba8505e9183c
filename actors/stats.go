package actors

import (
	"sync/atomic"
	"time"

	"github.com/holdfast/holdfast/kernel"
)

// Observer receives the shard runtime's measurements (metrics). Calls run on shard
// goroutines and must be cheap.
type Observer interface {
	// Batch reports one journal append: its entries and how long the append+fsync took.
	Batch(shard uint32, entries int, took time.Duration)
	// Expired reports a lease that ran out (expired, or a keep-alive lease moved to
	// revoking) and how late after its deadline that was committed — never negative:
	// holds end late, never early.
	Expired(shard uint32, late time.Duration)
}

// ShardStats is a point-in-time view of one shard for metrics and health checks.
type ShardStats struct {
	AppliedLSN    uint64
	AppliedSlot   uint64
	ClockSlot     uint64
	QueueDepth    int64
	Halted        bool
	ExpiryBacklog int // leases whose deadline has come but whose expiry is not yet applied
	Tables        kernel.Stats
	// Fullest are the shard's fullest ranges and pools (OccupancyTop of each), as of
	// at most OccupancyEvery ago.
	Fullest *Occupancy
}

// Occupancy is a shard's fullest ranges and pools.
type Occupancy struct {
	Ranges, Pools []kernel.Occupancy
}

// OccupancyTop is how many of a shard's fullest ranges and pools it publishes (a
// bounded set of metric labels); OccupancyEvery how often (a walk over its objects).
const (
	OccupancyTop   = 10
	OccupancyEvery = time.Second
)

// shardGauges is what the actor publishes after each batch and tick for lock-free reads.
type shardGauges struct {
	applied     atomic.Uint64
	appliedSlot atomic.Uint64
	backlog     atomic.Int64
	tables      atomic.Pointer[kernel.Stats]
	fullest     atomic.Pointer[Occupancy]
}

// publishOccupancy publishes the fullest ranges and pools, at most every OccupancyEvery.
func (s *shard) publishOccupancy() {
	now := s.now()
	if now.Sub(s.occupiedAt) < OccupancyEvery {
		return
	}
	s.occupiedAt = now
	r, p := s.k.Fullest(OccupancyTop)
	s.h.gauges.fullest.Store(&Occupancy{Ranges: r, Pools: p})
}

func (s *shard) publishGauges() {
	g := &s.h.gauges
	g.applied.Store(s.k.LastLSN())
	g.appliedSlot.Store(s.k.LastSlot())
	st := s.k.Stats()
	g.tables.Store(&st)
}

// Stats reads one shard's gauges.
func (s *System) Stats(shard uint32) ShardStats {
	h := s.hosts[shard]
	st := ShardStats{
		AppliedLSN:    h.gauges.applied.Load(),
		AppliedSlot:   h.gauges.appliedSlot.Load(),
		ClockSlot:     s.opts.slotAt(s.opts.Clock.Now()),
		QueueDepth:    h.queued.Load(),
		Halted:        h.halted.Load(),
		ExpiryBacklog: int(h.gauges.backlog.Load()),
	}
	if t := h.gauges.tables.Load(); t != nil {
		st.Tables = *t
	}
	st.Fullest = h.gauges.fullest.Load()
	return st
}
