package check

import (
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/integration/internal/history"
	"github.com/holdfast/holdfast/messages"
)

// expectedEvent is the event a committed write must have produced ("" for none).
func expectedEvent(op *Op) string {
	if !op.OK() {
		return ""
	}
	switch op.Verb {
	case VResourceCreate:
		return "resource.created"
	case VPoolCreate:
		return "pool.created"
	case VRangeCreate:
		return "range.created"
	case VReserve:
		if op.Req.Activate {
			return "lease.activated"
		}
		return "lease.reserved"
	case VActivate:
		return "lease.activated"
	case VRenew:
		return "lease.renewed"
	case VRelease:
		return "lease.released"
	case VRevoke:
		return "lease.revoking"
	case VReclaim:
		return "lease.revoked"
	case VResourceDelete:
		return "resource.deleted"
	case VPoolDelete:
		return "pool.deleted"
	case VRangeDelete:
		return "range.deleted"
	}
	return ""
}

var verbOfEvent = map[string][]string{
	"resource.created": {VResourceCreate}, "pool.created": {VPoolCreate}, "range.created": {VRangeCreate},
	"lease.reserved": {VReserve}, "lease.activated": {VReserve, VActivate}, "lease.renewed": {VRenew},
	"lease.released": {VRelease}, "lease.revoking": {VRevoke}, "lease.revoked": {VReclaim},
	"resource.deleted": {VResourceDelete}, "pool.deleted": {VPoolDelete}, "range.deleted": {VRangeDelete},
}

func eventObjectID(ev *messages.Event) string {
	if ev.Lease != nil {
		return ev.Lease.LeaseId
	}
	return eventObjectIDOf(ev.Resource, ev.Pool, ev.Range)
}

// eventObjectIDOf is the id of whichever object view is present.
func eventObjectIDOf(r *messages.Resource, p *messages.Pool, g *messages.Range) string {
	switch {
	case r != nil:
		return r.ResourceId
	case p != nil:
		return p.PoolId
	case g != nil:
		return g.RangeId
	}
	return ""
}

func opObjectID(op *Op) string {
	switch op.Verb {
	case VReserve:
		return contract.FormatLeaseID(op.Shard, op.Result.Lsn)
	case VActivate, VRenew, VRelease, VRevoke, VReclaim:
		return op.Req.LeaseID
	}
	return op.Req.ObjectID()
}

// checkEvents: the HOLDFAST_EVENTS stream, read whole at the end, matches the committed
// history one to one: every committed state change has exactly one event of the right
// kind, object and view; no event without a committed change except expiries, which
// must be of known reserved leases; no duplicates; message ids match payloads; lsn order
// and non-decreasing slots per shard.
func checkEvents(w *World, rep *Report) {
	h := w.H
	prefix := h.Meta.Prefix
	if prefix == "" {
		prefix = "holdfast"
	}
	seen := map[string]*Event{}
	last := map[uint32]*Event{}
	expiredCount := map[string]int{}
	for _, e := range h.Events {
		rep.count(CEvents, 1)
		rep.Stats.Events++
		if e.N < 0 {
			rep.add(CEvents, "message id is not <shard>-<lsn>-<n>", e.String())
			continue
		}
		if e.Ev.Shard != e.Shard || e.Ev.Lsn != e.LSN {
			rep.add(CEvents, fmt.Sprintf("message id %s does not match the payload's shard %d lsn %d", e.Rec.MsgID, e.Ev.Shard, e.Ev.Lsn), e.String())
		}
		if want := prefix + ".v1." + e.Ev.Tenant + ".events." + e.Ev.Event; e.Rec.Subject != "" && e.Rec.Subject != want {
			rep.add(CEvents, fmt.Sprintf("published on %s, want %s", e.Rec.Subject, want), e.String())
		}
		if d := seen[e.Rec.MsgID]; d != nil {
			rep.add(CEvents, "the stream holds an event twice", d.String(), e.String())
			continue
		}
		seen[e.Rec.MsgID] = e
		if p := last[e.Shard]; p != nil && (e.LSN < p.LSN || (e.LSN == p.LSN && e.N <= p.N)) {
			rep.add(CEvents, fmt.Sprintf("shard %d: events out of lsn order in the stream", e.Shard), p.String(), e.String())
		}
		last[e.Shard] = e
		if e.Ev.Event == "lease.expired" && e.Ev.Lease != nil {
			expiredCount[e.Ev.Lease.LeaseId]++
		}
		if msg := leaseEventProblem(e); msg != "" {
			rep.add(CEvents, msg, e.String())
		}
	}
	// Slots never go back along a shard's log.
	for shard, l := range w.logs {
		var prev *Event
		for _, lsn := range l.lsns {
			for _, e := range l.entries[lsn].events {
				if prev != nil && e.Ev.Slot < prev.Ev.Slot {
					rep.add(CEvents, fmt.Sprintf("shard %d: slot went back from %d to %d", shard, prev.Ev.Slot, e.Ev.Slot), prev.String(), e.String())
				}
				prev = e
			}
		}
	}
	// Every committed write: its event, or none.
	for _, op := range h.Ops {
		if !op.Write || op.Status != Committed || !op.HasShard || op.Intent == history.IntentHostile {
			continue
		}
		l := w.logs[op.Shard]
		en := l.entries[w.entryLSN(op)]
		want := expectedEvent(op)
		if want == "" {
			if len(en.events) > 0 {
				rep.add(CEvents, fmt.Sprintf("an event for a committed %s that changed nothing", op.Result.Code), append(opLines(op), en.events[0].String())...)
			}
			continue
		}
		if en.op != op {
			continue // another operation owns this lsn: the dedupe checker reports it
		}
		switch len(en.events) {
		case 0:
			rep.add(CEvents, fmt.Sprintf("no %s event for a committed change at shard %d lsn %d", want, op.Shard, w.entryLSN(op)), opLines(op)...)
			continue
		case 1:
		default:
			ex := opLines(op)
			for _, e := range en.events {
				ex = append(ex, e.String())
			}
			rep.add(CEvents, "several events for one entry", ex...)
			continue
		}
		e := en.events[0]
		if e.Ev.Event != want || e.Ev.Tenant != op.Tenant || eventObjectID(e.Ev) != opObjectID(op) {
			rep.add(CEvents, fmt.Sprintf("the event does not match the change: want %s of %s in %s", want, opObjectID(op), op.Tenant), opLines(op)[0], e.String())
			continue
		}
		if op.Fresh() && op.Result.Lease != nil && e.Ev.Lease != nil && !sameLease(op.Result.Lease, e.Ev.Lease) {
			rep.add(CEvents, "the event's lease view differs from the reply's", opLines(op)[0], e.String())
		}
		// deadline_slot = request_slot + ttl_ms in whole slots, rounded up (docs/api.md §3).
		if ms := uint64(h.Meta.SlotMs); ms > 0 && e.Ev.Lease != nil && (op.Verb == VRenew || op.Verb == VReserve && !op.Req.Activate) {
			// A bundle committed in parallel counts from its begin, before the commit's
			// event: its deadline is at most the event's slot plus the TTL.
			parallel := e.LSN != op.Result.Lsn
			if want := e.Ev.Slot + (op.Req.TTLMs+ms-1)/ms; e.Ev.Lease.DeadlineSlot != want && !(parallel && e.Ev.Lease.DeadlineSlot < want) {
				rep.add(CEvents, fmt.Sprintf("deadline_slot %d, want slot %d + ttl %dms in %dms slots = %d", e.Ev.Lease.DeadlineSlot, e.Ev.Slot, op.Req.TTLMs, ms, want),
					opLines(op)[0], e.String())
			}
		}
	}
	// Events without a committed change: only expiries of known reserved leases.
	unresolved := map[string]int{}
	for _, op := range h.Ops {
		if op.Write && op.Status == Unresolved {
			unresolved[op.Tenant+"\x00"+op.Verb]++
		}
	}
	for shard, l := range w.logs {
		for _, lsn := range l.lsns {
			en := l.entries[lsn]
			if en.op != nil || len(en.events) == 0 {
				continue
			}
			for _, e := range en.events {
				if e.Ev.Event == "lease.expired" {
					li := w.Leases[eventObjectID(e.Ev)]
					if li == nil || li.Tenant != e.Ev.Tenant {
						rep.add(CEvents, "an expiry of a lease no committed reserve created", e.String())
					}
					continue
				}
				explained := false
				for _, v := range verbOfEvent[e.Ev.Event] {
					if unresolved[e.Ev.Tenant+"\x00"+v] > 0 {
						explained = true
					}
				}
				if explained {
					rep.Notes = append(rep.Notes, fmt.Sprintf("shard %d lsn %d: %s may belong to an unresolved operation", shard, lsn, e.Ev.Event))
					continue
				}
				rep.add(CEvents, "an event without a committed change", e.String())
			}
		}
	}
	// Every lease read as expired has exactly one expiry event.
	reported := map[string]bool{}
	for _, op := range h.Ops {
		if op.Verb != VLeaseGet || !op.OK() || op.Result.Lease.State != "expired" || op.Intent != "" {
			continue
		}
		id := op.Req.LeaseID
		if n := expiredCount[id]; n != 1 && !reported[id] {
			reported[id] = true
			rep.add(CEvents, fmt.Sprintf("lease %s reads expired but the stream has %d lease.expired events for it", id, n), opLines(op)...)
		}
	}
}

func sameLease(a, b *messages.Lease) bool {
	return proto.Equal(a, b)
}

// checkDoubleGrant walks each shard's log in lsn order and keeps who holds what: a
// lease's members are taken when it is created (lease.reserved, or lease.activated of a
// reserve with activate) and given back when it ends (released, expired, revoked). No
// resource or range value may be taken while held, and a pool's live units may never
// exceed its capacity.
func checkDoubleGrant(w *World, rep *Report) {
	for shard, l := range w.logs {
		holderOf := map[string]string{} // tenant/res/id or tenant/val/range/value → lease id
		poolUse := map[string]uint64{}
		poolCap := map[string]uint64{}
		live := map[string][]*messages.Member{}
		since := map[string]string{} // what holds it, for excerpts
		for _, op := range w.H.Ops {
			if op.Status == Committed && (op.Verb == VPoolCreate || op.Verb == VPoolGet) && op.Result.Pool != nil {
				poolCap[op.Tenant+"/pool/"+op.Result.Pool.PoolId] = op.Result.Pool.Capacity
			}
		}
		for _, lsn := range l.lsns {
			en := l.entries[lsn]
			type change struct {
				kind   string
				tenant string
				lease  *messages.Lease
				pool   *messages.Pool
				object string // the id of the object a create or delete names
				line   string
				ev     *Event // nil for a change known from a reply alone
			}
			var changes []change
			for _, e := range en.events {
				changes = append(changes, change{e.Ev.Event, e.Ev.Tenant, e.Ev.Lease, e.Ev.Pool, eventObjectID(e.Ev), e.String(), e})
			}
			if len(changes) == 0 && en.op != nil && en.op.Fresh() && en.op.OK() {
				if k := expectedEvent(en.op); k != "" {
					changes = append(changes, change{k, en.op.Tenant, en.op.Result.Lease, en.op.Result.Pool, opObjectID(en.op), en.op.String(), nil})
				}
			}
			for _, c := range changes {
				if c.pool != nil && c.kind == "pool.created" {
					poolCap[c.tenant+"/pool/"+c.pool.PoolId] = c.pool.Capacity
				}
				if held := heldAtDelete(c.kind, c.tenant, c.object, holderOf, poolUse); held != "" {
					rep.add(CDoubleGrant, fmt.Sprintf("shard %d lsn %d: %s deleted while %s", shard, lsn, c.object, held), c.line)
				}
				if c.lease == nil {
					continue
				}
				id := c.lease.LeaseId
				switch c.kind {
				case "lease.reserved", "lease.activated":
					if (c.ev == nil && c.lease.CreatedLsn != lsn) || (c.ev != nil && w.creation[id] != c.ev) {
						continue // activation of an existing lease: holdings unchanged
					}
					rep.count(CDoubleGrant, 1)
					for _, m := range c.lease.Members {
						switch {
						case m.ResourceId != "":
							k := c.tenant + "/res/" + m.ResourceId
							if o, held := holderOf[k]; held {
								rep.add(CDoubleGrant, fmt.Sprintf("shard %d lsn %d: resource %s granted to %s while %s holds it", shard, lsn, m.ResourceId, id, o), since[k], c.line)
							}
							holderOf[k], since[k] = id, c.line
						case m.RangeId != "" && m.Value != nil:
							k := fmt.Sprintf("%s/val/%s/%d", c.tenant, m.RangeId, *m.Value)
							if o, held := holderOf[k]; held {
								rep.add(CDoubleGrant, fmt.Sprintf("shard %d lsn %d: value %d of %s granted to %s while %s holds it", shard, lsn, *m.Value, m.RangeId, id, o), since[k], c.line)
							}
							holderOf[k], since[k] = id, c.line
						case m.PoolId != "":
							k := c.tenant + "/pool/" + m.PoolId
							poolUse[k] += m.Quantity
							if cp, ok := poolCap[k]; ok && poolUse[k] > cp {
								rep.add(CDoubleGrant, fmt.Sprintf("shard %d lsn %d: pool %s has %d units granted, capacity %d", shard, lsn, m.PoolId, poolUse[k], cp), c.line)
							}
						}
					}
					live[id] = c.lease.Members
				case "lease.released", "lease.expired", "lease.revoked":
					members, ok := live[id]
					if !ok {
						continue
					}
					delete(live, id)
					for _, m := range members {
						switch {
						case m.ResourceId != "":
							k := c.tenant + "/res/" + m.ResourceId
							if holderOf[k] == id {
								delete(holderOf, k)
							}
						case m.RangeId != "" && m.Value != nil:
							k := fmt.Sprintf("%s/val/%s/%d", c.tenant, m.RangeId, *m.Value)
							if holderOf[k] == id {
								delete(holderOf, k)
							}
						case m.PoolId != "":
							poolUse[c.tenant+"/pool/"+m.PoolId] -= m.Quantity
						}
					}
				}
			}
		}
	}
}

// heldAtDelete says what still held the object a delete event removed ("" when nothing
// did): a delete must find its object idle (docs/api.md §4 "Deleting objects").
func heldAtDelete(kind, tenant, id string, holderOf map[string]string, poolUse map[string]uint64) string {
	switch kind {
	case "resource.deleted":
		if l, held := holderOf[tenant+"/res/"+id]; held {
			return "lease " + l + " holds it"
		}
	case "pool.deleted":
		if n := poolUse[tenant+"/pool/"+id]; n > 0 {
			return fmt.Sprintf("%d of its units are granted", n)
		}
	case "range.deleted":
		prefix := tenant + "/val/" + id + "/"
		for k, l := range holderOf {
			if strings.HasPrefix(k, prefix) {
				return "lease " + l + " holds value " + k[len(prefix):]
			}
		}
	}
	return ""
}

// checkExpiry: expiry comes late, never early, judged on the server's own slots. Every
// lease.expired event's slot is at or past the deadline the lease had; an activate or
// renew answered lease_expired was sequenced at a slot at or past the deadline (the next
// known slot of the shard bounds it from above); and one answered ok was sequenced
// before it.
func checkExpiry(w *World, rep *Report) {
	for shard, l := range w.logs {
		cur := map[string]leaseSnap{}
		var lastEv *Event
		for _, lsn := range l.lsns {
			en := l.entries[lsn]
			for _, e := range en.events {
				v := e.Ev.Lease
				if v == nil {
					continue
				}
				prev := cur[v.LeaseId]
				if e.Ev.Event == "lease.expired" {
					rep.count(CExpiry, 1)
					switch {
					case prev.known && prev.state != "reserved":
						rep.add(CExpiry, fmt.Sprintf("shard %d: a %s lease expired", shard, prev.state), e.String())
					case prev.known && e.Ev.Slot < prev.deadline:
						rep.add(CExpiry, fmt.Sprintf("shard %d: lease %s expired at slot %d, before its deadline slot %d", shard, v.LeaseId, e.Ev.Slot, prev.deadline), e.String())
					case v.DeadlineSlot > 0 && e.Ev.Slot < v.DeadlineSlot:
						rep.add(CExpiry, fmt.Sprintf("shard %d: lease %s expired at slot %d, before its deadline slot %d", shard, v.LeaseId, e.Ev.Slot, v.DeadlineSlot), e.String())
					}
				}
				cur[v.LeaseId] = snapOf(e.Ev.Tenant, v)
				lastEv = e
			}
			_ = lastEv
			op := en.op
			if op == nil || (op.Verb != VActivate && op.Verb != VRenew) || op.Intent != "" {
				continue
			}
			b := w.before[op]
			if !b.known || b.tenant != op.Tenant || b.holder != op.Req.HolderID || b.epoch != op.Req.Epoch || b.state != "reserved" {
				continue
			}
			lo, loOK, hi, hiOK := w.slotBounds(shard, lsn)
			switch op.Code() {
			case "lease_expired":
				rep.count(CExpiry, 1)
				if hiOK && hi < b.deadline {
					rep.add(CExpiry, fmt.Sprintf("shard %d: %s answered lease_expired at a slot ≤ %d, before the deadline slot %d", shard, op.Verb, hi, b.deadline),
						append(opLines(op), neighbours(w, shard, lsn)...)...)
				}
			case messages.CodeOK:
				rep.count(CExpiry, 1)
				if loOK && lo >= b.deadline {
					rep.add(CExpiry, fmt.Sprintf("shard %d: %s accepted at a slot ≥ %d, at or past the deadline slot %d", shard, op.Verb, lo, b.deadline),
						append(opLines(op), neighbours(w, shard, lsn)...)...)
				}
			}
		}
	}
}

// neighbours renders the entries with known slots around lsn.
func neighbours(w *World, shard uint32, lsn uint64) []string {
	l := w.logs[shard]
	i := sort.Search(len(l.lsns), func(i int) bool { return l.lsns[i] >= lsn })
	var out []string
	for j := i - 1; j >= 0; j-- {
		if e := l.entries[l.lsns[j]]; e.hasSlot {
			out = append(out, fmt.Sprintf("previous entry with a slot: lsn %d slot %d", e.lsn, e.slot))
			break
		}
	}
	for j := i; j < len(l.lsns); j++ {
		if e := l.entries[l.lsns[j]]; e.hasSlot && l.lsns[j] != lsn {
			out = append(out, fmt.Sprintf("next entry with a slot: lsn %d slot %d", e.lsn, e.slot))
			break
		}
	}
	return out
}

// checkFencing: a holder-authorized call (activate, renew, release) presenting any epoch
// but the lease's current one at its log position is refused with stale_epoch, never
// ok; one presenting the current epoch is never refused as stale.
func checkFencing(w *World, rep *Report) {
	for _, op := range w.H.Ops {
		if !holderVerb(op.Verb) || op.Status != Committed || op.Intent != "" {
			continue
		}
		b := w.before[op]
		code := op.Code()
		if !b.known || b.tenant != op.Tenant || code == "lease_retired" && terminalState(b.state) {
			continue // existence comes first in the check order; linearizability judges retirement
		}
		rep.count(CFencing, 1)
		var want string
		switch {
		case op.Req.HolderID != b.holder:
			want = "holder_mismatch"
		case op.Req.Epoch != b.epoch:
			want = "stale_epoch"
		}
		ex := append(opLines(op), fmt.Sprintf("lease at that position: %s epoch %d holder %s", b.state, b.epoch, b.holder))
		switch {
		case want != "" && code != want:
			rep.add(CFencing, fmt.Sprintf("%s with holder %s epoch %d answered %s, want %s", op.Verb, op.Req.HolderID, op.Req.Epoch, code, want), ex...)
		case want == "" && (code == "stale_epoch" || code == "holder_mismatch"):
			rep.add(CFencing, fmt.Sprintf("%s with the current holder and epoch answered %s", op.Verb, code), ex...)
		}
	}
}

// wrongTenantList: lease.list in another tenant shows nothing.
func wrongTenantList(op *Op) string {
	if op.Verb == VList && op.OK() && len(op.Result.Leases) > 0 {
		ids := make([]string, len(op.Result.Leases))
		for i, l := range op.Result.Leases {
			ids[i] = l.LeaseId
		}
		return "lease.list in another tenant shows " + strings.Join(ids, ",")
	}
	return ""
}

// leaseEventProblem checks a lease event's view against its own entry: the id is
// <shard>-<created_lsn>, a terminal transition records its own lsn as released_lsn and
// starts the history window after its slot, a live lease has neither, and only a
// reserved lease has a deadline, after the event — but for the grant of a bundle that
// committed in parallel (its id a position before its commit's): its life counts from its
// begin, which its client may have been answered with, and a commit journaled late (a
// home recovering it after a failover) can come after that deadline; the expiry follows.
func leaseEventProblem(e *Event) string {
	l := e.Ev.Lease
	if l == nil {
		if strings.HasPrefix(e.Ev.Event, "lease.") {
			return "a lease event without its lease"
		}
		return ""
	}
	if sh, lsn, ok := contract.ParseLeaseID(l.LeaseId); !ok || sh != e.Ev.Shard || lsn != l.CreatedLsn {
		return fmt.Sprintf("lease id %s does not match shard %d / created_lsn %d", l.LeaseId, e.Ev.Shard, l.CreatedLsn)
	}
	want := map[string]string{"lease.reserved": "reserved", "lease.activated": "active", "lease.renewed": "reserved",
		"lease.released": "released", "lease.expired": "expired", "lease.revoking": "revoking", "lease.revoked": "revoked"}[e.Ev.Event]
	if l.State != want {
		return fmt.Sprintf("%s shows state %s", e.Ev.Event, l.State)
	}
	switch l.State {
	case "released", "expired", "revoked":
		if l.ReleasedLsn != e.Ev.Lsn {
			return fmt.Sprintf("%s at lsn %d records released_lsn %d", e.Ev.Event, e.Ev.Lsn, l.ReleasedLsn)
		}
		if l.RetireAfterSlot <= e.Ev.Slot {
			return fmt.Sprintf("%s at slot %d: retire_after_slot %d is not after it", e.Ev.Event, e.Ev.Slot, l.RetireAfterSlot)
		}
	default:
		if l.ReleasedLsn != 0 || l.RetireAfterSlot != 0 {
			return "a live lease with released_lsn or retire_after_slot"
		}
	}
	if (l.State == "active" || l.State == "revoking") && l.DeadlineSlot != 0 {
		return fmt.Sprintf("a %s lease with deadline_slot %d", l.State, l.DeadlineSlot)
	}
	parallel := e.Ev.Event == "lease.reserved" && l.CreatedLsn < e.Ev.Lsn
	if l.State == "reserved" && l.DeadlineSlot <= e.Ev.Slot && !parallel {
		return fmt.Sprintf("%s at slot %d with its deadline %d already passed", e.Ev.Event, e.Ev.Slot, l.DeadlineSlot)
	}
	return ""
}

func terminalState(s string) bool { return s == "released" || s == "expired" || s == "revoked" }
