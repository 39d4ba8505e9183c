package check

import (
	"sort"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/integration/internal/history"
	"github.com/holdfast/holdfast/messages"
)

// The reconstructed log. Each shard's journal is a total order (lsn) of entries; the
// history reveals most of it: every committed write reply names its lsn, and every
// state change has an event carrying its lsn, slot and the object's view after it.
// Walking these facts in lsn order gives the exact state of every lease and holding at
// every position, which the double-grant, early-expiry and fencing checkers judge
// against, independently of porcupine.

type logEntry struct {
	shard   uint32
	lsn     uint64
	events  []*Event
	op      *Op // the committed write at this lsn
	slot    uint64
	hasSlot bool
}

type shardLog struct {
	entries map[uint64]*logEntry
	lsns    []uint64
}

func (l *shardLog) at(lsn uint64) *logEntry {
	e := l.entries[lsn]
	if e == nil {
		e = &logEntry{lsn: lsn}
		l.entries[lsn] = e
	}
	return e
}

// leaseSnap is a lease's state at one position of its shard's log.
type leaseSnap struct {
	known    bool
	tenant   string
	holder   string
	state    string
	epoch    uint64
	deadline uint64
	members  []*messages.Member
}

// LeaseInfo is what the history tells about a lease created by a committed reserve.
type LeaseInfo struct {
	ID       string
	Tenant   string
	Holder   string
	Shard    uint32
	LSN      uint64
	Activate bool
	Members  []*messages.Member // with the chosen values of range members
	Reserve  *Op
	Values   bool // every range member's value is known
}

// World is the history plus the reconstructed logs.
type World struct {
	H      *History
	logs   map[uint32]*shardLog
	Leases map[string]*LeaseInfo // by lease id (ids are unique across tenants: shard-lsn)
	before map[*Op]leaseSnap     // a lease verb's lease just before its entry
	// creation maps a lease id to the event that created it.
	creation map[string]*Event
}

func buildWorld(h *History) *World {
	w := &World{H: h, logs: map[uint32]*shardLog{}, Leases: map[string]*LeaseInfo{},
		before: map[*Op]leaseSnap{}, creation: map[string]*Event{}}
	logOf := func(s uint32) *shardLog {
		l := w.logs[s]
		if l == nil {
			l = &shardLog{entries: map[uint64]*logEntry{}}
			w.logs[s] = l
		}
		return l
	}
	for _, e := range h.Events {
		if e.N < 0 {
			continue
		}
		en := logOf(e.Shard).at(e.LSN)
		en.shard = e.Shard
		en.events = append(en.events, e)
		en.slot, en.hasSlot = e.Ev.Slot, true
		// A lease's first lease.reserved or lease.activated event creates it: at its id's
		// position, or — a bundle across shards committed in parallel, whose id is the
		// position its home took before it began — at its commit, after it.
		if l := e.Ev.Lease; l != nil && l.CreatedLsn <= e.LSN && (e.Ev.Event == "lease.reserved" || e.Ev.Event == "lease.activated") {
			if w.creation[l.LeaseId] == nil {
				w.creation[l.LeaseId] = e
			}
		}
	}
	for _, op := range h.Ops {
		if !op.Write || op.Status != Committed || !op.HasShard || op.Intent == history.IntentHostile {
			continue
		}
		en := logOf(op.Shard).at(w.entryLSN(op))
		en.shard = op.Shard
		if en.op == nil {
			en.op = op
		}
		if !en.hasSlot && op.Fresh() && op.OK() && op.Result.Lease != nil && h.Meta.SlotMs > 0 &&
			((op.Verb == VReserve && !op.Req.Activate) || op.Verb == VRenew) {
			ttlSlots := (op.Req.TTLMs + uint64(h.Meta.SlotMs) - 1) / uint64(h.Meta.SlotMs)
			if op.Result.Lease.DeadlineSlot >= ttlSlots {
				en.slot, en.hasSlot = op.Result.Lease.DeadlineSlot-ttlSlots, true
			}
		}
		if op.Verb == VReserve && op.OK() {
			w.addLease(op)
		}
	}
	for _, l := range w.logs {
		for lsn := range l.entries {
			l.lsns = append(l.lsns, lsn)
		}
		sort.Slice(l.lsns, func(i, j int) bool { return l.lsns[i] < l.lsns[j] })
	}
	w.walk()
	return w
}

// entryLSN is the position of a committed write's change: its reply's lsn, except for a
// reserve whose lease was created later (a bundle committed in parallel: its reply's lsn
// is its lease's id, its change and event at the commit).
func (w *World) entryLSN(op *Op) uint64 {
	if op.Verb == VReserve && op.OK() && op.Result.Lease != nil {
		if e := w.creation[op.Result.Lease.LeaseId]; e != nil && e.Shard == op.Shard && e.LSN > op.Result.Lsn {
			return e.LSN
		}
	}
	return op.Result.Lsn
}

func (w *World) addLease(op *Op) {
	id := contract.FormatLeaseID(op.Shard, op.Result.Lsn)
	li := &LeaseInfo{ID: id, Tenant: op.Tenant, Holder: op.Req.HolderID, Shard: op.Shard, LSN: op.Result.Lsn,
		Activate: op.Req.Activate, Reserve: op}
	var view *messages.Lease
	if l := op.Result.Lease; l != nil && l.LeaseId == id && len(l.Members) == len(op.Req.Members) {
		view = l
	} else if e := w.creation[id]; e != nil && len(e.Ev.Lease.Members) == len(op.Req.Members) {
		view = e.Ev.Lease
	}
	li.Values = true
	for i, m := range op.Req.Members {
		mm := &messages.Member{ResourceId: m.ResourceId, PoolId: m.PoolId, Quantity: m.Quantity, RangeId: m.RangeId, Value: m.Value}
		if m.RangeId != "" && m.Value == nil {
			if view != nil && view.Members[i].Value != nil {
				v := *view.Members[i].Value
				mm.Value = &v
			} else {
				li.Values = false
			}
		}
		li.Members = append(li.Members, mm)
	}
	w.Leases[id] = li
}

// walk replays each shard's log in lsn order, recording every lease verb's view of its
// lease just before its entry.
func (w *World) walk() {
	for _, l := range w.logs {
		cur := map[string]leaseSnap{}
		for _, lsn := range l.lsns {
			en := l.entries[lsn]
			if op := en.op; op != nil && leaseVerb(op.Verb) {
				w.before[op] = cur[op.Req.LeaseID]
			}
			applied := false
			for _, e := range en.events {
				if v := e.Ev.Lease; v != nil {
					cur[v.LeaseId] = snapOf(e.Ev.Tenant, v)
					applied = true
				}
			}
			if !applied && en.op != nil && en.op.OK() && en.op.Fresh() && en.op.Result.Lease != nil {
				cur[en.op.Result.Lease.LeaseId] = snapOf(en.op.Tenant, en.op.Result.Lease)
			}
		}
	}
}

func snapOf(tenant string, v *messages.Lease) leaseSnap {
	return leaseSnap{known: true, tenant: tenant, holder: v.HolderId, state: v.State, epoch: v.LeaseEpoch,
		deadline: v.DeadlineSlot, members: v.Members}
}

// slotBounds bounds the slot of the entry at lsn on shard from its neighbours: slots never
// go back along a shard's log. ok is false when no bound is known on that side.
func (w *World) slotBounds(shard uint32, lsn uint64) (lo uint64, loOK bool, hi uint64, hiOK bool) {
	l := w.logs[shard]
	if l == nil {
		return
	}
	i := sort.Search(len(l.lsns), func(i int) bool { return l.lsns[i] >= lsn })
	for j := i; j < len(l.lsns); j++ {
		if e := l.entries[l.lsns[j]]; e.hasSlot {
			if l.lsns[j] == lsn {
				return e.slot, true, e.slot, true
			}
			hi, hiOK = e.slot, true
			break
		}
	}
	for j := i - 1; j >= 0; j-- {
		if e := l.entries[l.lsns[j]]; e.hasSlot {
			lo, loOK = e.slot, true
			break
		}
	}
	return
}
