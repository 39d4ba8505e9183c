// Package wire maps the kernel's read views and the shards' events to the protobuf
// messages of the wire contract: the one place the views' wire form is written, shared
// by replies (bridge) and published events (events).
package wire

import (
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/messages"
)

// Resource is a resource's wire view.
func Resource(v *kernel.ResourceView) *messages.Resource {
	r := &messages.Resource{ResourceId: v.ID, State: v.State.String(), Version: v.Version}
	if v.LeaseLSN != 0 {
		r.CurrentLeaseId = contract.FormatLeaseID(v.LeaseShard, v.LeaseLSN)
	}
	return r
}

// Pool is a pool's wire view.
func Pool(v *kernel.PoolView) *messages.Pool {
	return &messages.Pool{PoolId: v.ID, Capacity: v.Capacity, Reserved: v.Reserved, Active: v.Active, Available: v.Available,
		Consumed: v.Consumed}
}

// Range is a value range's wire view.
func Range(v *kernel.RangeView) *messages.Range {
	r := &messages.Range{RangeId: v.ID, First: v.First, Last: v.Last, Strategy: v.Strategy.String(),
		Allocated: v.Allocated, Free: v.Free, Excluded: v.Excluded, Format: v.Format}
	if v.HasBand {
		r.StaticBand = &messages.Interval{First: v.Band.First, Last: v.Band.Last}
	}
	return r
}

// Lease is a lease's wire view, its members in request order.
func Lease(v *kernel.LeaseView) *messages.Lease {
	l := &messages.Lease{
		LeaseId:         contract.FormatLeaseID(v.Shard, v.LSN),
		HolderId:        v.HolderID,
		State:           v.State.String(),
		LeaseEpoch:      v.Epoch,
		CreatedLsn:      v.CreatedLSN,
		DeadlineSlot:    v.DeadlineSlot,
		ReleasedLsn:     v.ReleasedLSN,
		RetireAfterSlot: v.RetireAfterSlot,
		KeepaliveSlots:  v.KeepAliveSlots,
		Members:         make([]*messages.Member, len(v.Members)),
	}
	for i := range v.Members {
		mv := &v.Members[i]
		m := &messages.Member{}
		switch mv.Kind {
		case kernel.MemberResource:
			m.ResourceId = mv.ID
		case kernel.MemberPool:
			m.PoolId, m.Quantity = mv.ID, mv.Quantity
		case kernel.MemberRange:
			m.RangeId, m.Value = mv.ID, proto.Uint64(mv.Value)
		case kernel.MemberWork:
			m.Work = &messages.WorkRef{RunId: mv.ID, Name: mv.Name}
		}
		l.Members[i] = m
	}
	if len(v.Labels) > 0 {
		l.Labels = make(map[string]string, len(v.Labels))
		for _, lb := range v.Labels {
			l.Labels[lb.Key] = lb.Value
		}
	}
	if v.AllocatedAtMillis != 0 {
		l.AllocatedAt = AllocatedAt(v.AllocatedAtMillis)
	}
	return l
}

// AllocatedAt is a lease's allocated_at: Unix milliseconds as a UTC time, RFC 3339 with
// milliseconds.
func AllocatedAt(ms uint64) string {
	return time.UnixMilli(int64(ms)).UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// Event is the payload of one published event (docs/api.md §5).
func Event(e *actors.Event) *messages.Event {
	m := &messages.Event{Event: e.Kind.String(), Tenant: e.Tenant, Shard: e.Shard, Lsn: e.LSN, Slot: e.Slot, Reason: e.Reason}
	switch e.Object {
	case kernel.ObjectResource:
		m.Resource = Resource(&e.Resource)
	case kernel.ObjectPool:
		m.Pool = Pool(&e.Pool)
	case kernel.ObjectRange:
		m.Range = Range(&e.Range)
	case kernel.ObjectLease:
		m.Lease = Lease(&e.Lease)
	case kernel.ObjectRun:
		m.Run = Run(&e.Run)
	case kernel.ObjectWork:
		m.Work = Work(e.Shard, &e.Work)
	}
	return m
}

// Run is a run's wire view.
func Run(v *kernel.RunView) *messages.Run {
	return &messages.Run{RunId: v.ID, Status: v.Status.String(), Reason: v.Reason, Work: v.Work, Active: v.Active,
		Claimed: v.Claimed, Done: v.Done, Split: v.Split, Parked: v.Parked}
}

// Work is a work shard's wire view; shard names its claim.
func Work(shard uint32, v *kernel.WorkView) *messages.Work {
	w := &messages.Work{RunId: v.RunID, Name: v.Name, Start: []byte(v.Start), End: []byte(v.End),
		Metadata: []byte(v.Metadata), Status: v.Status.String(), Claims: v.Claims, Parent: v.Parent,
		Children: v.Children, Reason: v.Reason}
	if v.LeaseLSN != 0 {
		w.LeaseId, w.LeaseEpoch = contract.FormatLeaseID(shard, v.LeaseLSN), v.LeaseEpoch
	}
	if v.HasCursor {
		w.Cursor = &messages.Cursor{LastKey: []byte(v.CursorKey), Token: []byte(v.CursorToken)}
	}
	return w
}

// Fill is an occupancy as the ratio an operator reads (metrics, the console): used over
// size, a Size of 0 standing for 2^64 values.
func Fill(o kernel.Occupancy) float64 {
	size := float64(o.Size)
	if o.Size == 0 {
		size = 1 << 64
	}
	return float64(o.Used) / size
}
