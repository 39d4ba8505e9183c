package kernel

import (
	"math"
	"slices"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel/internal/valueset"
)

// pick is a member of a reserve as checked and chosen, before anything is changed.
type pick struct {
	kind     MemberKind
	obj      int32
	quantity uint64
	value    uint64
}

// reserve grants a bundle all-or-nothing. It checks members in request order — existence,
// then availability — choosing "any" range values as it goes; then the table bounds; and
// only when everything holds does it change state, so a failed reserve changes nothing.
func (k *Kernel) reserve(e Entry, out *Output) {
	c := e.Cmd
	if slices.ContainsFunc(c.Shards, k.foreign) {
		k.begin(e, out)
		return
	}
	picks := k.picks[:0]
	defer func() { k.picks = picks[:0] }()
	for i := range c.Members {
		m := &c.Members[i]
		p, code := k.check(c.Tenant, m, picks, e.LSN, i)
		if code != contract.CodeOK {
			out.Code, out.MemberIndex, out.EarliestDeadlineSlot = code, i, k.blocked
			k.noteIntent(c.Tenant, m, code, out)
			return
		}
		picks = append(picks, p)
	}
	if code := k.checkBounds(len(picks), c.Activate && c.KeepAliveSlots == 0, e.Slot); code != contract.CodeOK {
		out.Code = code
		return
	}
	idx := k.grant(e.LSN, e.Slot, c.Tenant, c.HolderID, c.Labels, picks, c.Activate, c.TTLSlots, c.KeepAliveSlots)
	out.Event = EventLeaseReserved
	if c.Activate {
		out.Event = EventLeaseActivated
	}
	k.viewLease(idx, out)
	for _, p := range picks {
		if p.kind == MemberWork {
			k.enqueue(p.obj, qHeld) // now that the claim has its deadline
			k.showClaim(p.obj, out)
		}
	}
}

// showClaim fills a granted claim's reply beside its lease: the work shard it holds and
// the run's capacity.
func (k *Kernel) showClaim(w int32, out *Output) {
	out.Work, out.HasWork = k.workView(w, nil), true
	out.Capacity = k.capacity(k.works[w].run)
}

// grant creates the lease lsn of tenant's holder over picks (checked, bounds too) and
// takes its members: reserved with a deadline ttlSlots from slot, or active (with a
// keep-alive when keepAliveSlots is set).
func (k *Kernel) grant(lsn, slot uint64, tenant, holderID string, labels []Label, picks []pick, activate bool, ttlSlots, keepAliveSlots uint64) int32 {
	state := LeaseReserved
	if activate {
		state = LeaseActive // one state change: available → active
	}
	idx := k.newLease(lsn, k.tenantKey(tenant, holderID))
	l := &k.leases[idx]
	l.labels, l.created = k.internLabels(labels), slot
	k.holdMembers(idx, picks, state, false)
	k.goLive(idx, slot, activate, ttlSlots, keepAliveSlots)
	return idx
}

// holdMembers makes the lease record idx the holder of picks, in state: what a granted
// lease and a bundle's intents share.
// An undecided bundle's intent (intent) takes a least_recently_freed range's value without
// touching the range's order of use: a bundle never granted leaves no trace there either
// (commitValues takes it in that order at the commit).
func (k *Kernel) holdMembers(idx int32, picks []pick, state LeaseState, intent bool) {
	l := &k.leases[idx]
	for _, p := range picks {
		l.members = append(l.members, leaseMember(p))
		switch p.kind {
		case MemberResource:
			r := &k.res[p.obj]
			r.state, r.lease = resourceStateOf(state), l.lsn
			r.version++
		case MemberPool:
			if state == LeaseActive {
				k.pools[p.obj].active += p.quantity
			} else {
				k.pools[p.obj].reserved += p.quantity
			}
		case MemberRange:
			if intent {
				k.ranges[p.obj].allocated.Add(p.value)
			} else {
				k.allocateValue(&k.ranges[p.obj], p.value)
			}
		case MemberWork:
			k.dequeue(p.obj, qReady)
			k.works[p.obj].lease = l.lsn
			if !intent {
				k.works[p.obj].claims++ // an intent's claim counts once committed (decide)
			}
		}
	}
	k.members += len(picks)
	l.state = state
}

// goLive makes a lease holding its members visible: counted, in its holder's list and the
// index, and with its deadline (reserved, or active with a keep-alive) in the expiry heap.
func (k *Kernel) goLive(idx int32, slot uint64, activate bool, ttlSlots, keepAliveSlots uint64) {
	l := &k.leases[idx]
	k.live[l.state]++
	k.linkLive(idx)
	k.indexLease(idx)
	var timed bool
	if l.keepalive, l.deadline, timed = liveTerms(l.keepalive, l.deadline, slot, activate, ttlSlots, keepAliveSlots); timed {
		k.expiry.push(k, idx)
	}
}

// liveTerms is a lease's keep-alive and deadline from slot, when it goes live, and whether
// it expires: an active lease with a keep-alive, or a reserved one with its TTL; an active
// one without keeps what it had (no deadline). One rule for goLive and for the answer a
// parallel commit gives before it is applied (CommitView).
func liveTerms(keepalive, deadline, slot uint64, activate bool, ttlSlots, keepAliveSlots uint64) (uint64, uint64, bool) {
	switch {
	case activate && keepAliveSlots > 0:
		return keepAliveSlots, slot + keepAliveSlots, true
	case !activate:
		return keepalive, slot + ttlSlots, true
	}
	return keepalive, deadline, false
}

// check resolves one member: existence first, then availability. When a claim is in the
// way, k.blocked is the earliest slot at which it may end (0: not by itself).
func (k *Kernel) check(tenant string, m *Member, picks []pick, lsn uint64, i int) (pick, Code) {
	k.blocked = 0
	switch m.Kind {
	case MemberWork:
		p, code, blocked := k.checkWork(tenant, m)
		k.blocked = blocked
		return p, code
	case MemberResource:
		idx, ok := k.resIdx[string(k.tenantKey(tenant, m.ID))]
		if !ok {
			return pick{}, contract.CodeResourceNotFound
		}
		if k.res[idx].state != ResourceAvailable {
			k.blocked = k.claimDeadline(k.res[idx].lease)
			return pick{}, contract.CodeResourceBusy
		}
		return pick{kind: MemberResource, obj: idx}, contract.CodeOK
	case MemberPool:
		idx, ok := k.poolIdx[string(k.tenantKey(tenant, m.ID))]
		if !ok {
			return pick{}, contract.CodePoolNotFound
		}
		p := &k.pools[idx]
		if p.capacity-p.reserved-p.active-p.consumed < m.Quantity {
			return pick{}, contract.CodeInsufficientCapacity
		}
		return pick{kind: MemberPool, obj: idx, quantity: m.Quantity}, contract.CodeOK
	case MemberRange:
		idx, ok := k.rangeIdx[string(k.tenantKey(tenant, m.ID))]
		if !ok {
			return pick{}, contract.CodeRangeNotFound
		}
		r := &k.ranges[idx]
		if m.HasValue {
			if m.Value < r.first || m.Value > r.last {
				return pick{}, contract.CodeValueOutOfRange
			}
			if r.allocated.Contains(m.Value) || picked(picks, idx, m.Value) {
				return pick{}, contract.CodeValueBusy
			}
			if r.excludedAt(m.Value) >= 0 {
				return pick{}, contract.CodeValueExcluded
			}
			return pick{kind: MemberRange, obj: idx, value: m.Value}, contract.CodeOK
		}
		if k.UndecidedBundles() > 0 && k.intentUnits(MemberRange, r.key) > 0 {
			// Which value "any" takes depends on the values undecided bundles and ending
			// parts hold (the lowest, the least recently freed, a draw among the free): it
			// waits for their decision or free, as a reserve of a held value does
			// (noteIntent: Undecided).
			return pick{}, contract.CodeRangeExhausted
		}
		v, ok := k.chooseValue(r, idx, picks, lsn, i)
		if !ok {
			return pick{}, contract.CodeRangeExhausted
		}
		return pick{kind: MemberRange, obj: idx, value: v}, contract.CodeOK
	}
	return pick{}, contract.CodeInvalidRequest
}

// checkBounds is the reserve's table-bound check, after every member held. Terminal
// leases past their window are dropped first so a full table is never reported while
// retirable history fills it. activate says the lease takes no deadline (no expiry entry).
func (k *Kernel) checkBounds(members int, activate bool, slot uint64) Code {
	for k.leaseCount() >= k.shape.MaxLeases && k.retireLease(slot) {
	}
	if k.leaseCount() >= k.shape.MaxLeases {
		return contract.CodeLeaseTableFull
	}
	for k.members+members > k.shape.MaxMembers && k.retireLease(slot) {
	}
	if k.members+members > k.shape.MaxMembers {
		return contract.CodeLeaseMemberTableFull
	}
	if !activate && k.expiry.len() >= k.shape.MaxExpirations {
		return contract.CodeExpirationIndexFull
	}
	return contract.CodeOK
}

func picked(picks []pick, obj int32, v uint64) bool {
	for _, p := range picks {
		if p.kind == MemberRange && p.obj == obj && p.value == v {
			return true
		}
	}
	return false
}

// chooseValue picks a free value by the range's strategy, never one an earlier member of
// the same reserve took.
func (k *Kernel) chooseValue(r *valueRange, obj int32, picks []pick, lsn uint64, member int) (uint64, bool) {
	if !r.plain() {
		return k.chooseShaped(r, obj, picks, lsn, member)
	}
	switch r.strategy {
	case StrategyRandom:
		return k.chooseRandom(r, obj, picks, lsn, member)
	case StrategyLeastRecentlyFreed:
		if v, ok := firstAbsentExcept(&r.used, r.first, r.last, picks, obj, &r.allocated); ok {
			return v, true
		}
		var v uint64
		found := false
		r.freed.Each(func(x uint64) bool {
			if picked(picks, obj, x) || r.allocated.Contains(x) { // an intent keeps its place
				return true
			}
			v, found = x, true
			return false
		})
		return v, found
	}
	return firstAbsentExcept(&r.allocated, r.first, r.last, picks, obj, nil)
}

// firstAbsentExcept is the lowest value of [lo, hi] absent from s and not picked.
// skip, when set, holds more values not to take: a least_recently_freed range's values
// held by undecided bundles, which keep their place in its order (holdMembers).
func firstAbsentExcept(s *valueset.Set, lo, hi uint64, picks []pick, obj int32, skip *valueset.Set) (uint64, bool) {
	for {
		v, ok := s.FirstAbsent(lo, hi)
		if !ok {
			return 0, false
		}
		if !picked(picks, obj, v) && (skip == nil || !skip.Contains(v)) {
			return v, true
		}
		if v == hi {
			return 0, false
		}
		lo = v + 1
	}
}

// chooseRandom draws uniformly among the free values not yet picked, from a generator
// seeded with the entry's lsn and the member's index: replay makes the same choice.
func (k *Kernel) chooseRandom(r *valueRange, obj int32, picks []pick, lsn uint64, member int) (uint64, bool) {
	var taken uint64
	for _, p := range picks {
		if p.kind == MemberRange && p.obj == obj {
			taken++
		}
	}
	free, full := r.freeCount()
	rng := valueset.NewRand(lsn*0x9E3779B97F4A7C15 ^ uint64(member))
	var n uint64
	switch {
	case full && taken == 0:
		n = rng.Uint64() // 2^64 values: every u64 is a valid draw
	case full:
		n = rng.Below(math.MaxUint64 - taken + 1)
	case free <= taken:
		return 0, false
	default:
		n = rng.Below(free - taken)
	}
	// The n-th free value skipping picked ones: each picked value at or below the
	// candidate shifts the rank by one; iterate until the count settles.
	var skipped uint64
	for {
		v, ok := r.allocated.NthAbsent(r.first, r.last, n+skipped)
		if !ok {
			return 0, false
		}
		var below uint64
		for _, p := range picks {
			if p.kind == MemberRange && p.obj == obj && p.value <= v {
				below++
			}
		}
		if below == skipped {
			return v, true
		}
		skipped = below
	}
}

// freeCount is the number of free values of r; full reports exactly 2^64 (the whole u64
// space, nothing allocated), which does not fit. Every allocated value lies in
// [first, last], so this is the span minus the allocated count: O(1), no tree walk.
func (r *valueRange) freeCount() (uint64, bool) {
	span := r.last - r.first + 1               // 0 means 2^64
	n := r.allocated.Len() + r.excludedTotal() // disjoint: at most the span
	if span != 0 && n > span {
		n = span
	}
	if span == 0 {
		if n == 0 {
			return 0, true
		}
		return math.MaxUint64 - n + 1, false
	}
	return span - n, false
}

// allocateValue marks v allocated in r.
func (k *Kernel) allocateValue(r *valueRange, v uint64) {
	r.allocated.Add(v)
	if r.strategy == StrategyLeastRecentlyFreed {
		if r.freed.Remove(v) {
			k.rangeValues--
		} else {
			r.used.Add(v)
		}
	}
}

// freeValue returns v to r. least_recently_freed remembers the freeing order; past
// MaxRangeValues remembered values the oldest freed one is forgotten (it becomes
// "never used" again), which keeps memory bounded and only makes the least recently
// freed value reusable a little sooner.
func (k *Kernel) freeValue(r *valueRange, v uint64) {
	r.allocated.Remove(v)
	if r.strategy != StrategyLeastRecentlyFreed {
		return
	}
	r.freed.PushBack(v)
	k.rangeValues++
	if k.rangeValues > k.shape.MaxRangeValues {
		if w, ok := r.freed.Front(); ok {
			r.freed.Remove(w)
			r.used.Remove(w)
			k.rangeValues--
		}
	}
}

// setMembersState moves a live lease and its members to a new live state.
func (k *Kernel) setMembersState(idx int32, to LeaseState) {
	l := &k.leases[idx]
	k.indexBulk(idx, false)
	defer k.indexBulk(idx, true)
	k.live[l.state]--
	k.live[to]++
	k.moveMembers(idx, to)
}

// moveMembers moves a lease record and its members to a new live state: a live lease's
// (setMembersState), or a bundle's record that no listing or count knows.
func (k *Kernel) moveMembers(idx int32, to LeaseState) {
	l := &k.leases[idx]
	for _, m := range l.members {
		switch m.kind {
		case MemberResource:
			r := &k.res[m.obj]
			r.state = resourceStateOf(to)
			r.version++
		case MemberPool:
			p := &k.pools[m.obj]
			if l.state == LeaseReserved && to != LeaseReserved {
				p.reserved -= m.quantity
				p.active += m.quantity
			}
		}
	}
	l.state = to
}

// freeMembers returns every member of a live lease to use — or, for a lease being
// consumed, moves its pool units to the pool's consumed (never to be held again).
// An intent's (intent) range values are only unallocated: they never took a place in the
// range's order of use.
func (k *Kernel) freeMembers(idx int32, consume, intent bool) {
	l := &k.leases[idx]
	for _, m := range l.members {
		switch m.kind {
		case MemberResource:
			r := &k.res[m.obj]
			r.state, r.lease = ResourceAvailable, 0
			r.version++
		case MemberPool:
			p := &k.pools[m.obj]
			if l.state == LeaseReserved {
				p.reserved -= m.quantity
			} else {
				p.active -= m.quantity
			}
			if consume {
				p.consumed += m.quantity
			}
		case MemberRange:
			if intent {
				k.ranges[m.obj].allocated.Remove(m.value)
			} else {
				k.freeValue(&k.ranges[m.obj], m.value)
			}
		case MemberWork:
			if w := &k.works[m.obj]; w.lease == l.lsn {
				k.dequeue(m.obj, qHeld)
				w.lease = 0
				if w.status == WorkActive {
					k.enqueue(m.obj, qReady)
				}
			}
		}
	}
}
