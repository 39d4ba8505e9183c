package kernel

import (
	"slices"

	"github.com/holdfast/holdfast/contract"
)

// The reference model's side of the allocator verbs (docs/api.md Part IV) it covers:
// labels on leases, range.lookup, release, revoke and reclaim by value, lease.consume
// and pool.resize — the reservation core's consumed capacity (seed 002) with its
// invariants checked after every step (mCheckConsumed). Exclusions, bands, imports and
// the bulk verbs have their own property test (alloc_property_test.go).

var mAllocVerbs = map[Verb]bool{contract.VerbReleaseValue: true, contract.VerbRevokeValue: true,
	contract.VerbReclaimValue: true, contract.VerbConsume: true, contract.VerbResizePool: true}

func mValueVerb(v Verb) bool {
	return v == contract.VerbReleaseValue || v == contract.VerbRevokeValue || v == contract.VerbReclaimValue
}

func mValidLabels(ls []Label) bool {
	if len(ls) > contract.MaxLabels {
		return false
	}
	for i, l := range ls {
		if !contract.ValidLabelKey(l.Key) || !contract.ValidLabelValue(l.Value) || (i > 0 && ls[i-1].Key >= l.Key) {
			return false
		}
	}
	return true
}

func (m *refModel) validateAlloc(c *Command) Code {
	switch c.Verb {
	case contract.VerbReleaseValue:
		if !mValidID(c.ObjectID, 128) || !mValidID(c.HolderID, 128) {
			return contract.CodeInvalidRequest
		}
	case contract.VerbRevokeValue, contract.VerbReclaimValue:
		if !mValidID(c.ObjectID, 128) {
			return contract.CodeInvalidRequest
		}
	case contract.VerbResizePool:
		if !mValidID(c.ObjectID, 128) || c.Capacity == 0 {
			return contract.CodeInvalidRequest
		}
	}
	return contract.CodeOK
}

// valueLease is the live lease of tenant holding value v of range id.
func (m *refModel) valueLease(tenant, id string, v uint64) *mLease {
	for _, l := range m.leases {
		if !mLive(l.state) || l.tenant != tenant {
			continue
		}
		for _, mv := range l.members {
			if mv.Kind == MemberRange && mv.ID == id && mv.Value == v {
				return l
			}
		}
	}
	return nil
}

func (m *refModel) lookupState(tenant, id string, v uint64) string {
	rg := m.ranges[mKey(tenant, id)]
	switch {
	case rg == nil || v < rg.first || v > rg.last:
		return ""
	case m.valueLease(tenant, id, v) != nil:
		return contract.ValueHeld
	}
	return contract.ValueFree
}

func (m *refModel) lookup(r mRead, out *Output) {
	rg := m.ranges[mKey(r.tenant, r.id)]
	switch {
	case rg == nil:
		out.Code = contract.CodeRangeNotFound
	case r.value < rg.first || r.value > rg.last:
		out.Code = contract.CodeValueOutOfRange
	default:
		if l := m.valueLease(r.tenant, r.id, r.value); l != nil {
			out.Object, out.Lease = ObjectLease, m.leaseView(l)
		}
	}
}

// valueVerb: range.release (the holder's: holder, then epoch when given, then state, then
// the lease's other members), range.revoke and range.reclaim (the operator's).
func (m *refModel) valueVerb(slot, lsn uint64, c *Command, out *Output) {
	rg := m.ranges[mKey(c.Tenant, c.ObjectID)]
	if rg == nil {
		out.Code = contract.CodeRangeNotFound
		return
	}
	if c.Value < rg.first || c.Value > rg.last {
		out.Code = contract.CodeValueOutOfRange
		return
	}
	l := m.valueLease(c.Tenant, c.ObjectID, c.Value)
	if l == nil {
		out.Code = contract.CodeValueFree
		return
	}
	if c.Verb == contract.VerbReleaseValue && l.holder != c.HolderID {
		out.Code = contract.CodeHolderMismatch
		return
	}
	// The lease named must be the value's lease now: a late call meant for an earlier
	// lease of the value (same holder, same starting epoch) never acts on the next.
	if (c.LeaseLSN != 0 && c.LeaseLSN != l.lsn) || (c.Epoch != 0 && c.Epoch != l.epoch) {
		out.Code = contract.CodeStaleEpoch
		return
	}
	switch c.Verb {
	case contract.VerbReleaseValue:
		switch {
		case l.state != LeaseReserved && l.state != LeaseActive:
			out.Code = contract.CodeInvalidState
		case len(l.members) > 1 && !c.WholeLease:
			out.Code = contract.CodeLeaseHasOtherMembers
			out.Object, out.Lease = ObjectLease, m.leaseView(l)
			return
		default:
			m.end(l, lsn, slot, LeaseReleased, true)
			out.Event = EventLeaseReleased
		}
	case contract.VerbRevokeValue:
		if l.state != LeaseActive {
			out.Code = contract.CodeInvalidState
		} else {
			l.state = LeaseRevoking
			l.epoch++
			out.Event = EventLeaseRevoking
		}
	case contract.VerbReclaimValue:
		if l.state != LeaseRevoking {
			out.Code = contract.CodeInvalidState
		} else {
			m.end(l, lsn, slot, LeaseRevoked, false)
			out.Event = EventLeaseRevoked
		}
	}
	if out.Code == contract.CodeOK {
		out.Object, out.Lease = ObjectLease, m.leaseView(l)
	}
}

// consume: fenced as lease.release; a reserved lease before its deadline or an active
// one, of pool units only, ends as consumed and its units leave their pools for good.
func (m *refModel) consume(slot, lsn uint64, c *Command, out *Output) {
	l, code := m.find(c.Tenant, c.LeaseLSN, slot)
	switch {
	case code != contract.CodeOK:
		out.Code = code
	case l.holder != c.HolderID:
		out.Code = contract.CodeHolderMismatch
	case l.epoch != c.Epoch:
		out.Code = contract.CodeStaleEpoch
	case l.state != LeaseReserved && l.state != LeaseActive:
		out.Code = contract.CodeInvalidState
	case l.state == LeaseReserved && slot >= l.deadline:
		out.Code = contract.CodeLeaseExpired
	case slices.ContainsFunc(l.members, func(mv MemberView) bool { return mv.Kind != MemberPool }):
		out.Code = contract.CodeInvalidState
	default:
		for _, mv := range l.members {
			m.consumed[mKey(l.tenant, mv.ID)] += mv.Quantity
		}
		m.end(l, lsn, slot, LeaseConsumed, true)
		out.Event = EventLeaseConsumed
		out.Object, out.Lease = ObjectLease, m.leaseView(l)
	}
}

func (m *refModel) resizePool(c *Command, out *Output) {
	key := mKey(c.Tenant, c.ObjectID)
	if _, ok := m.pools[key]; !ok {
		out.Code = contract.CodePoolNotFound
		return
	}
	r, a := m.poolUse(c.Tenant, c.ObjectID)
	if c.Capacity < r+a+m.consumed[key] {
		out.Code = contract.CodeObjectInUse
	} else {
		m.pools[key] = c.Capacity
		out.Event = EventPoolResized
	}
	out.Object, out.Pool = ObjectPool, m.poolView(c.Tenant, c.ObjectID)
}

// mCheckConsumed checks seed 002's invariants on every pool of the model: held plus
// consumed never exceeds the capacity, and consumed units never come back (consumed
// never decreases while the pool exists).
func (h *mHarness) mCheckConsumed() {
	h.t.Helper()
	for key, c := range h.m.pools {
		t, id, _ := cutKey(key)
		v := h.m.poolView(t, id)
		if v.Reserved+v.Active+v.Consumed > c {
			h.fail("pool %s: held %d + consumed %d > capacity %d", key, v.Reserved+v.Active, v.Consumed, c)
		}
		if prev, ok := h.consumedSeen[key]; ok && v.Consumed < prev {
			h.fail("pool %s: consumed went back from %d to %d", key, prev, v.Consumed)
		}
		h.consumedSeen[key] = v.Consumed
	}
	for key := range h.consumedSeen {
		if _, ok := h.m.pools[key]; !ok {
			delete(h.consumedSeen, key) // deleted: a new pool of that id starts afresh
		}
	}
}

func cutKey(key string) (tenant, id string, ok bool) {
	for i := 0; i < len(key); i++ {
		if key[i] == 0 {
			return key[:i], key[i+1:], true
		}
	}
	return "", key, false
}

// labels draws a lease's labels: mostly none or an owner's, now and then invalid ones.
func (g *mGen) labels() []Label {
	switch x := g.r.IntN(100); {
	case x < 55:
		return nil
	case x < 95:
		ls := []Label{{"owner_uuid", mPick(g, []string{"u1", "u2"})}}
		if g.pct(50) {
			ls = append([]Label{{"owner_type", "vm"}}, ls...)
		}
		return ls
	case x < 98:
		return []Label{{"zone", "a"}, {"owner_uuid", "u1"}} // unsorted
	default:
		return []Label{{"-bad", "x"}}
	}
}

// allocVerb draws a write of the allocator verbs the model covers, aimed at what exists.
func (g *mGen) allocVerb(c *Command) {
	switch x := g.r.IntN(100); {
	case x < 30:
		c.Verb = contract.VerbConsume
		var l *mLease
		c.LeaseLSN, l = g.lease(c.Tenant, LeaseReserved, LeaseActive)
		if g.pct(70) { // a hold of pool units, the only kind a consume takes
			for _, x := range g.m.liveLeases() {
				if x.tenant == c.Tenant && x.state != LeaseRevoking &&
					!slices.ContainsFunc(x.members, func(mv MemberView) bool { return mv.Kind != MemberPool }) {
					c.LeaseLSN, l = x.lsn, x
				}
			}
		}
		c.HolderID, c.Epoch = g.holder(), 1+g.r.Uint64N(3)
		if l != nil && g.pct(85) {
			c.HolderID, c.Epoch = l.holder, l.epoch
		}
	case x < 80:
		c.Verb = mPick(g, []Verb{contract.VerbReleaseValue, contract.VerbReleaseValue, contract.VerbRevokeValue, contract.VerbReclaimValue})
		s := mPick(g, mRanges)
		c.ObjectID, c.Value = s.id, g.value(s)
		if g.pct(60) { // a value a live lease of the tenant holds
			var held []MemberView
			for _, x := range g.m.liveLeases() {
				for _, mv := range x.members {
					if x.tenant == c.Tenant && mv.Kind == MemberRange {
						held = append(held, mv)
					}
				}
			}
			if len(held) > 0 {
				mv := mPick(g, held)
				c.ObjectID, c.Value = mv.ID, mv.Value
			}
		}
		// The lease named: the value's own, or an earlier or other one (the late call).
		if l := g.m.valueLease(c.Tenant, c.ObjectID, c.Value); l != nil && g.pct(30) {
			c.LeaseLSN = l.lsn
		} else if g.pct(15) && g.m.lastLSN > 0 {
			c.LeaseLSN = 1 + g.r.Uint64N(g.m.lastLSN)
		}
		if c.Verb != contract.VerbReleaseValue {
			return
		}
		c.HolderID = g.holder()
		if l := g.m.valueLease(c.Tenant, c.ObjectID, c.Value); l != nil {
			if g.pct(85) {
				c.HolderID = l.holder
			}
			if g.pct(40) {
				c.Epoch = l.epoch
			}
		}
		if g.pct(10) {
			c.Epoch = 1 + g.r.Uint64N(3)
		}
		c.WholeLease = g.pct(50)
	default:
		p := mPick(g, mPools)
		c.Verb, c.ObjectID = contract.VerbResizePool, p.id
		r, a := g.m.poolUse(c.Tenant, p.id)
		used := r + a + g.m.consumed[mKey(c.Tenant, p.id)]
		c.Capacity = used + g.r.Uint64N(4)
		if c.Capacity == 0 && g.pct(80) {
			c.Capacity = 1
		}
		if used > 0 && g.pct(25) {
			c.Capacity = used - 1
		}
	}
}
