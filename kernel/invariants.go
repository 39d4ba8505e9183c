package kernel

import "fmt"

// CheckInvariants verifies every structural and domain invariant of the shard. It is
// O(state) and meant for tests (after every step) and for Restore; it walks the slabs in
// index order, never a map, so even its error is deterministic.
func (k *Kernel) CheckInvariants() error {
	cfg := &k.cfg
	switch {
	case len(k.res) > cfg.MaxResources, len(k.pools) > cfg.MaxPools, len(k.ranges) > cfg.MaxRanges:
		return fmt.Errorf("object table over its bound")
	case len(k.leaseIdx) > cfg.MaxLeases, k.members > cfg.MaxMembers, k.ops.len() > cfg.MaxOperations:
		return fmt.Errorf("lease, member or operation table over its bound")
	case k.expiry.len() > cfg.MaxExpirations:
		return fmt.Errorf("expiry index over its bound")
	case len(k.resIdx) != len(k.res), len(k.poolIdx) != len(k.pools), len(k.rangeIdx) != len(k.ranges):
		return fmt.Errorf("object index and table differ in size")
	}

	poolReserved := make([]uint64, len(k.pools))
	poolActive := make([]uint64, len(k.pools))
	rangeValues := make([]uint64, len(k.ranges))
	rangeHeld := make([]map[uint64]uint64, len(k.ranges)) // value → the lease holding it
	resOwner := make([]uint64, len(k.res))
	holderRefs := make([]int32, len(k.holders))
	holderLive := make([]int32, len(k.holders))
	members, inTable, reserved, terminal := 0, 0, 0, 0
	for i := range k.leases {
		l := &k.leases[i]
		if l.lsn == 0 {
			continue // on the free list
		}
		inTable++
		if idx, ok := k.leaseIdx[l.lsn]; !ok || idx != int32(i) {
			return fmt.Errorf("lease %d: not indexed at its slot", l.lsn)
		}
		if l.lsn > k.lastLSN {
			return fmt.Errorf("lease %d: issued after the last lsn %d", l.lsn, k.lastLSN)
		}
		holderRefs[l.holder]++
		members += len(l.members)
		if len(l.members) == 0 || len(l.members) > cfg.MaxBundle {
			return fmt.Errorf("lease %d: %d members", l.lsn, len(l.members))
		}
		// The epoch starts at 1 and moves exactly once, on the way out of holder authority.
		wantEpoch := uint64(1)
		if l.state == LeaseRevoking || l.state.Terminal() {
			wantEpoch = 2
		}
		if l.epoch != wantEpoch {
			return fmt.Errorf("lease %d: %s with epoch %d", l.lsn, l.state, l.epoch)
		}
		switch {
		case l.state == LeaseReserved:
			reserved++
			if l.heapPos < 0 || int(l.heapPos) >= k.expiry.len() || k.expiry.h[l.heapPos] != int32(i) {
				return fmt.Errorf("lease %d: reserved but not in the expiry index", l.lsn)
			}
		case l.heapPos >= 0:
			return fmt.Errorf("lease %d: %s but in the expiry index", l.lsn, l.state)
		}
		if l.state.Terminal() {
			terminal++
			if l.releasedLSN == 0 || l.releasedLSN > k.lastLSN || l.retireAfter == 0 {
				return fmt.Errorf("lease %d: terminal without released_lsn or retirement", l.lsn)
			}
			continue
		}
		if !l.state.Live() {
			return fmt.Errorf("lease %d: unknown state %d", l.lsn, l.state)
		}
		holderLive[l.holder]++
		for _, m := range l.members {
			switch m.kind {
			case MemberResource:
				if resOwner[m.obj] != 0 {
					return fmt.Errorf("resource %q: owned by leases %d and %d", k.res[m.obj].key, resOwner[m.obj], l.lsn)
				}
				resOwner[m.obj] = l.lsn
				if r := &k.res[m.obj]; r.lease != l.lsn || r.state != resourceStateOf(l.state) {
					return fmt.Errorf("resource %q: %s/%d but lease %d is %s", r.key, r.state, r.lease, l.lsn, l.state)
				}
			case MemberPool:
				if l.state == LeaseReserved {
					poolReserved[m.obj] += m.quantity
				} else {
					poolActive[m.obj] += m.quantity
				}
			case MemberRange:
				r := &k.ranges[m.obj]
				if m.value < r.first || m.value > r.last || !r.allocated.Contains(m.value) {
					return fmt.Errorf("range %q: lease %d holds %d which is not allocated", r.key, l.lsn, m.value)
				}
				rangeValues[m.obj]++
				if rangeHeld[m.obj] == nil {
					rangeHeld[m.obj] = map[uint64]uint64{}
				}
				if other, dup := rangeHeld[m.obj][m.value]; dup {
					return fmt.Errorf("range %q: value %d held by leases %d and %d", r.key, m.value, other, l.lsn)
				}
				rangeHeld[m.obj][m.value] = l.lsn
			}
		}
	}
	if inTable != len(k.leaseIdx) || members != k.members {
		return fmt.Errorf("lease table: %d records for %d ids, %d members counted as %d", inTable, len(k.leaseIdx), members, k.members)
	}
	if reserved != k.expiry.len() {
		return fmt.Errorf("expiry index holds %d leases, %d are reserved", k.expiry.len(), reserved)
	}
	for i := 1; i < k.expiry.len(); i++ {
		if k.expiryLess(k.expiry.h[i], k.expiry.h[(i-1)/2]) {
			return fmt.Errorf("expiry index: heap order broken at %d", i)
		}
	}
	if terminal != k.ended.len() {
		return fmt.Errorf("%d terminal leases, %d queued for retirement", terminal, k.ended.len())
	}
	queued := make(map[uint64]bool, k.ended.len())
	for i := 0; i < k.ended.len(); i++ {
		lsn := *k.ended.at(i)
		idx, ok := k.leaseIdx[lsn]
		if !ok || !k.leases[idx].state.Terminal() || queued[lsn] {
			return fmt.Errorf("retirement queue names lease %d which is not terminal or is queued twice", lsn)
		}
		queued[lsn] = true
	}
	for i := range k.res {
		r := &k.res[i]
		if (r.state == ResourceAvailable) != (r.lease == 0) || resOwner[i] != r.lease {
			return fmt.Errorf("resource %q: %s with lease %d, owned by %d", r.key, r.state, r.lease, resOwner[i])
		}
	}
	for i := range k.pools {
		p := &k.pools[i]
		if p.reserved != poolReserved[i] || p.active != poolActive[i] {
			return fmt.Errorf("pool %q: counts %d/%d, leases hold %d/%d", p.key, p.reserved, p.active, poolReserved[i], poolActive[i])
		}
		if p.reserved+p.active > p.capacity || p.reserved+p.active < p.reserved {
			return fmt.Errorf("pool %q: reserved %d + active %d > capacity %d", p.key, p.reserved, p.active, p.capacity)
		}
	}
	freed := 0
	for i := range k.ranges {
		r := &k.ranges[i]
		if r.allocated.Len() != rangeValues[i] {
			return fmt.Errorf("range %q: %d allocated, leases hold %d", r.key, r.allocated.Len(), rangeValues[i])
		}
		freed += r.freed.Len()
		var bad error
		r.allocated.Ascend(func(lo, hi uint64) bool {
			if lo < r.first || hi > r.last {
				bad = fmt.Errorf("range %q: allocated [%d,%d] outside [%d,%d]", r.key, lo, hi, r.first, r.last)
			}
			return bad == nil
		})
		if bad != nil {
			return bad
		}
		if r.strategy != StrategyLeastRecentlyFreed {
			if r.freed.Len() != 0 || r.used.Len() != 0 {
				return fmt.Errorf("range %q: freed-order state on a %s range", r.key, r.strategy)
			}
			continue
		}
		// used = allocated ∪ freed, disjointly: every allocated value is used, every freed
		// value is used and not allocated, and the counts add up.
		r.allocated.Ascend(func(lo, hi uint64) bool {
			for v := lo; ; v++ {
				if !r.used.Contains(v) {
					bad = fmt.Errorf("range %q: allocated value %d not marked used", r.key, v)
					return false
				}
				if v == hi {
					return true
				}
			}
		})
		if bad != nil {
			return bad
		}
		if r.used.Len() != r.allocated.Len()+uint64(r.freed.Len()) {
			return fmt.Errorf("range %q: used %d != allocated %d + freed %d", r.key, r.used.Len(), r.allocated.Len(), r.freed.Len())
		}
		r.freed.Each(func(v uint64) bool {
			if r.allocated.Contains(v) || !r.used.Contains(v) {
				bad = fmt.Errorf("range %q: freed value %d allocated or not used", r.key, v)
			}
			return bad == nil
		})
		if bad != nil {
			return bad
		}
	}
	if freed != k.rangeValues || freed > cfg.MaxRangeValues {
		return fmt.Errorf("remembered freed values %d, counted %d", freed, k.rangeValues)
	}
	for i := range k.holders {
		h := &k.holders[i]
		if h.refs != holderRefs[i] || h.live != holderLive[i] {
			return fmt.Errorf("holder %q: refs %d/%d live %d/%d", h.key, h.refs, holderRefs[i], h.live, holderLive[i])
		}
		if h.refs == 0 {
			continue
		}
		if idx, ok := k.holderIdx[h.key]; !ok || idx != int32(i) {
			return fmt.Errorf("holder %q: not indexed", h.key)
		}
		n, prev := int32(0), uint64(0)
		for idx := h.head; idx >= 0; idx = k.leases[idx].nextLive {
			l := &k.leases[idx]
			if l.holder != int32(i) || !l.state.Live() || l.lsn <= prev {
				return fmt.Errorf("holder %q: live list out of order or holds lease %d (%s)", h.key, l.lsn, l.state)
			}
			prev = l.lsn
			n++
		}
		if n != h.live {
			return fmt.Errorf("holder %q: live list has %d, counted %d", h.key, n, h.live)
		}
	}
	for i := 0; i < k.ops.len(); i++ {
		op := k.ops.q.at(i)
		seq, ok := k.ops.index[op.key]
		if !ok || seq < k.ops.base || seq >= k.ops.base+uint64(k.ops.len()) {
			if ok {
				return fmt.Errorf("operation index points outside the table")
			}
			continue // superseded by a newer record after its window ended
		}
		if i > 0 && k.ops.q.at(i-1).lsn >= op.lsn {
			return fmt.Errorf("operation table out of lsn order")
		}
		if op.lsn > k.lastLSN || !op.verb.IsWrite() || op.code.IsRejection() || op.code >= codeCount {
			return fmt.Errorf("operation at lsn %d: verb %d code %d", op.lsn, op.verb, op.code)
		}
		if op.ref != noRef {
			limit := -1
			switch op.verb {
			case VerbCreateResource:
				limit = len(k.res)
			case VerbCreatePool:
				limit = len(k.pools)
			case VerbCreateRange:
				limit = len(k.ranges)
			}
			if limit >= 0 && op.ref >= uint64(limit) {
				return fmt.Errorf("operation at lsn %d names object %d of %d", op.lsn, op.ref, limit)
			}
		}
	}
	return nil
}
