package kernel

import (
	"fmt"
	"slices"
)

// CheckInvariants verifies every structural and domain invariant of the shard. It is
// O(state) and meant for tests (after every step) and for Restore; it walks the slabs in
// index order, never a map, so even its error is deterministic.
func (k *Kernel) CheckInvariants() error { return k.checkInvariants(true) }

// checkInvariants is CheckInvariants; indexes says whether to look every record up in
// the retention indexes too (one probe each: the bulk of a large restore's check).
func (k *Kernel) checkInvariants(indexes bool) error {
	// Each table within its bound — or, after a configure entry lowered the bound below
	// what the table held, within what it held then: a table over its bound never grows.
	st, c := k.Stats(), &k.ceil
	switch {
	case st.Resources > c.resources, st.Pools > c.pools, st.Ranges > c.ranges:
		return fmt.Errorf("object table over its bound")
	case st.Leases > c.leases, st.Members > c.members, st.Operations > c.operations:
		return fmt.Errorf("lease, member or operation table over its bound")
	case st.Expirations > c.expirations:
		return fmt.Errorf("expiry index over its bound")
	case st.Runs > c.runs || st.Work > c.work:
		return fmt.Errorf("run or work table over its bound")
	}
	graves, err := k.checkSlots()
	if err != nil {
		return err
	}
	t := k.newTally()
	for i := range k.leases {
		if l := &k.leases[i]; l.lsn != 0 { // else on the free list
			if err := k.checkLease(int32(i), l, t, &graves); err != nil {
				return err
			}
		}
	}
	for _, check := range []func() error{
		func() error { return k.checkLeaseCounts(t, indexes) },
		func() error { return k.checkResources(t) },
		func() error { return k.checkPools(t) },
		func() error { return k.checkRanges(t, graves[graveRange]) },
		func() error { return k.checkHolders(t) },
		func() error { return k.checkWorkTables(graves[graveRun]) },
		k.checkLabels,
		k.checkBundles,
	} {
		if err := check(); err != nil {
			return err
		}
	}
	if indexes {
		if err := k.checkIndex(); err != nil {
			return err
		}
	}
	return k.checkRetryCache(indexes)
}

// tally is what the live leases add up to, for the tables to be checked against.
type tally struct {
	poolReserved, poolActive []uint64
	rangeValues              []uint64
	rangeHeld                []map[uint64]uint64 // value → the lease holding it
	resOwner                 []uint64
	holderRefs, holderLive   []int32
	members, inTable         int
	reserved                 int // leases with a deadline: in the expiry index
}

func (k *Kernel) newTally() *tally {
	return &tally{poolReserved: make([]uint64, len(k.pools)), poolActive: make([]uint64, len(k.pools)),
		rangeValues: make([]uint64, len(k.ranges)), rangeHeld: make([]map[uint64]uint64, len(k.ranges)),
		resOwner: make([]uint64, len(k.res)), holderRefs: make([]int32, len(k.holders)), holderLive: make([]int32, len(k.holders))}
}

// checkLease checks live lease l at slot i — indexed, its epoch, its place in the expiry
// index — and adds it up.
func (k *Kernel) checkLease(i int32, l *lease, t *tally, graves *[graveKindEnd][]bool) error {
	t.inTable++
	if idx, ok := k.leaseIdx[l.lsn]; !ok || idx != i {
		return fmt.Errorf("lease %d: not indexed at its slot", l.lsn)
	}
	if l.lsn > k.lastLSN {
		return fmt.Errorf("lease %d: issued after the last lsn %d", l.lsn, k.lastLSN)
	}
	t.holderRefs[l.holder]++
	if b := k.bundles[l.lsn]; b == nil || !b.ownPart {
		t.members += len(l.members) // an own part's members are its ended lease's (holdEnding)
	}
	if (len(l.members) == 0 && !k.allRemote(l.lsn)) || len(l.members) > maxEncodedMembers {
		return fmt.Errorf("lease %d: %d members", l.lsn, len(l.members))
	}
	// The epoch starts at 1 and moves exactly once, on the way out of holder authority.
	wantEpoch := uint64(1)
	if l.state == LeaseRevoking {
		wantEpoch = 2
	}
	if l.epoch != wantEpoch {
		return fmt.Errorf("lease %d: %s with epoch %d", l.lsn, l.state, l.epoch)
	}
	listed := k.leaseLike(l.lsn) // else a bundle's intents or a participant's part
	switch {
	case !listed:
		if l.heapPos >= 0 || l.keepalive != 0 || l.prevLive >= 0 || l.nextLive >= 0 {
			return fmt.Errorf("lease record %d of a bundle: expiring or listed", l.lsn)
		}
	case l.state == LeaseReserved || (l.state == LeaseActive && l.keepalive > 0):
		t.reserved++
		if l.heapPos < 0 || int(l.heapPos) >= k.expiry.len() || k.expiry.h[l.heapPos] != i {
			return fmt.Errorf("lease %d: %s with a deadline but not in the expiry index", l.lsn, l.state)
		}
	case l.heapPos >= 0:
		return fmt.Errorf("lease %d: %s but in the expiry index", l.lsn, l.state)
	case l.deadline != 0:
		return fmt.Errorf("lease %d: %s with deadline %d", l.lsn, l.state, l.deadline)
	}
	if l.keepalive > 0 && l.state == LeaseReserved {
		return fmt.Errorf("lease %d: a keep-alive on a reserved lease", l.lsn)
	}
	if !l.state.Live() {
		return fmt.Errorf("lease %d: unknown state %d", l.lsn, l.state)
	}
	if listed {
		t.holderLive[l.holder]++
	}
	for _, m := range l.members {
		if !k.validMemberRef(m.kind, uint64(m.obj)) || m.kind != MemberWork && graves[graveOf(m.kind)][m.obj] {
			return fmt.Errorf("lease %d: a member names a deleted object", l.lsn)
		}
		if err := k.tallyMember(l, m, t); err != nil {
			return err
		}
	}
	return nil
}

// tallyMember adds up what member m of live lease l holds: a resource owned once, pool
// units by state, a range value allocated and held once.
func (k *Kernel) tallyMember(l *lease, m leaseMember, t *tally) error {
	switch m.kind {
	case MemberResource:
		if t.resOwner[m.obj] != 0 {
			return fmt.Errorf("resource %q: owned by leases %d and %d", k.res[m.obj].key, t.resOwner[m.obj], l.lsn)
		}
		t.resOwner[m.obj] = l.lsn
		if r := &k.res[m.obj]; r.lease != l.lsn || r.state != resourceStateOf(l.state) {
			return fmt.Errorf("resource %q: %s/%d but lease %d is %s", r.key, r.state, r.lease, l.lsn, l.state)
		}
	case MemberPool:
		if l.state == LeaseReserved {
			t.poolReserved[m.obj] += m.quantity
		} else {
			t.poolActive[m.obj] += m.quantity
		}
	case MemberRange:
		r := &k.ranges[m.obj]
		if m.value < r.first || m.value > r.last || !r.allocated.Contains(m.value) {
			return fmt.Errorf("range %q: lease %d holds %d which is not allocated", r.key, l.lsn, m.value)
		}
		t.rangeValues[m.obj]++
		if t.rangeHeld[m.obj] == nil {
			t.rangeHeld[m.obj] = map[uint64]uint64{}
		}
		if other, dup := t.rangeHeld[m.obj][m.value]; dup {
			return fmt.Errorf("range %q: value %d held by leases %d and %d", r.key, m.value, other, l.lsn)
		}
		t.rangeHeld[m.obj][m.value] = l.lsn
	}
	return nil
}

// checkLeaseCounts checks the lease tables' counts against the tally: live leases by
// state, records per id, members (the ended ones' too), the expiry index and its order.
func (k *Kernel) checkLeaseCounts(t *tally, indexes bool) error {
	var byState [LeaseRevoking + 1]int
	for i := range k.leases {
		if l := &k.leases[i]; l.lsn != 0 && l.state.Live() && k.leaseLike(l.lsn) {
			byState[l.state]++
		}
	}
	if byState != k.live {
		return fmt.Errorf("live leases by state %v, counted %v", byState, k.live)
	}
	if t.inTable != len(k.leaseIdx) {
		return fmt.Errorf("lease table: %d records for %d ids", t.inTable, len(k.leaseIdx))
	}
	if err := k.checkEnded(t.holderRefs, &t.members, indexes); err != nil {
		return err
	}
	if t.members != k.members {
		return fmt.Errorf("lease tables hold %d members, counted %d", t.members, k.members)
	}
	if t.reserved != k.expiry.len() {
		return fmt.Errorf("expiry index holds %d leases, %d are reserved", k.expiry.len(), t.reserved)
	}
	for i := 1; i < k.expiry.len(); i++ {
		if k.expiryLess(k.expiry.h[i], k.expiry.h[(i-1)/2]) {
			return fmt.Errorf("expiry index: heap order broken at %d", i)
		}
	}
	return nil
}

func (k *Kernel) checkResources(t *tally) error {
	for i := range k.res {
		r := &k.res[i]
		if (r.state == ResourceAvailable) != (r.lease == 0) || t.resOwner[i] != r.lease {
			return fmt.Errorf("resource %q: %s with lease %d, owned by %d", r.key, r.state, r.lease, t.resOwner[i])
		}
	}
	return nil
}

func (k *Kernel) checkPools(t *tally) error {
	for i := range k.pools {
		p := &k.pools[i]
		if p.key == "" && *p != (pool{}) {
			return fmt.Errorf("pool slot %d: free but not cleared", i)
		}
		if p.reserved != t.poolReserved[i] || p.active != t.poolActive[i] {
			return fmt.Errorf("pool %q: counts %d/%d, leases hold %d/%d", p.key, p.reserved, p.active, t.poolReserved[i], t.poolActive[i])
		}
		// The reservation engine's invariant: held and consumed never pass the capacity.
		if used := p.reserved + p.active + p.consumed; used > p.capacity || used < p.reserved || used < p.consumed {
			return fmt.Errorf("pool %q: reserved %d + active %d + consumed %d > capacity %d", p.key, p.reserved, p.active, p.consumed, p.capacity)
		}
	}
	return nil
}

// checkRanges checks each range against the values its leases hold, and the freed
// values remembered over all ranges against their count and bound.
func (k *Kernel) checkRanges(t *tally, deleted []bool) error {
	freed := 0
	for i := range k.ranges {
		r := &k.ranges[i]
		if (r.key == "" || deleted[i]) && (r.used.Len() != 0 || r.freed.Len() != 0) {
			return fmt.Errorf("range slot %d: deleted but remembers freed values", i)
		}
		if r.allocated.Len() != t.rangeValues[i] {
			return fmt.Errorf("range %q: %d allocated, leases hold %d", r.key, r.allocated.Len(), t.rangeValues[i])
		}
		freed += r.freed.Len()
		if err := r.check(k.intentValues(int32(i))); err != nil {
			return err
		}
	}
	if freed != k.rangeValues || freed > k.ceil.rangeValues {
		return fmt.Errorf("remembered freed values %d, counted %d", freed, k.rangeValues)
	}
	return nil
}

// check verifies a range's own state: allocations inside its bounds, its exclusions and
// band, and for least_recently_freed used = allocated ∪ freed, disjointly — but for the
// values undecided bundles hold (intents), which keep their place in that order.
func (r *valueRange) check(intents map[uint64]bool) error {
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
	if err := r.checkShape(); err != nil {
		return err
	}
	if r.strategy != StrategyLeastRecentlyFreed {
		if r.freed.Len() != 0 || r.used.Len() != 0 {
			return fmt.Errorf("range %q: freed-order state on a %s range", r.key, r.strategy)
		}
		return nil
	}
	// Every allocated value is used, every freed value is used and not allocated, and the
	// counts add up.
	r.allocated.Ascend(func(lo, hi uint64) bool {
		for v := lo; ; v++ {
			if !r.used.Contains(v) && !intents[v] {
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
	if r.used.Len() != r.allocated.Len()-uint64(len(intents))+uint64(r.freed.Len()) {
		return fmt.Errorf("range %q: used %d != allocated %d - intents %d + freed %d", r.key, r.used.Len(), r.allocated.Len(),
			len(intents), r.freed.Len())
	}
	r.freed.Each(func(v uint64) bool {
		if (r.allocated.Contains(v) && !intents[v]) || !r.used.Contains(v) {
			bad = fmt.Errorf("range %q: freed value %d allocated or not used", r.key, v)
		}
		return bad == nil
	})
	return bad
}

// checkHolders checks each holder's counts against the tally and its live list: indexed,
// in lsn order, only its own live leases.
func (k *Kernel) checkHolders(t *tally) error {
	for i := range k.holders {
		h := &k.holders[i]
		if h.refs != t.holderRefs[i] || h.live != t.holderLive[i] {
			return fmt.Errorf("holder %q: refs %d/%d live %d/%d", h.key, h.refs, t.holderRefs[i], h.live, t.holderLive[i])
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
	return nil
}

// checkWorkTables verifies runs and work shards: indexed, bounded, linked both ways; a work
// shard is claimed by at most one live lease, and by exactly the one that holds it; a
// claimed work shard is active (done, split and parked ones are never held); a cursor
// stays inside its range.
func (k *Kernel) checkWorkTables(deletedRun []bool) error {
	inRun, liveWork := 0, 0
	listed := make([]bool, len(k.works))
	for i := range k.runs {
		n, live, err := k.checkRun(int32(i), listed, deletedRun[i])
		if err != nil {
			return err
		}
		inRun, liveWork = inRun+n, liveWork+live
	}
	if inRun != len(k.works)-len(k.free.works) || liveWork != len(k.workIdx) {
		return fmt.Errorf("work shards in runs %d (%d live), in the table %d (%d free), indexed %d",
			inRun, liveWork, len(k.works), len(k.free.works), len(k.workIdx))
	}
	for i := range k.works {
		if w := &k.works[i]; w.key != "" { // else free: checkSlots
			if err := k.checkWorkShard(int32(i), w, deletedRun[w.run]); err != nil {
				return err
			}
		}
	}
	for i := range k.leases {
		if l := &k.leases[i]; l.lsn != 0 {
			if err := k.checkClaims(l); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkRun checks run i: a free slot cleared, its work list its own (parents listed
// first), a deleted run ended with empty queues, a live one's queues in heap order. It
// returns how many work shards it lists, and how many of them are live.
func (k *Kernel) checkRun(i int32, listed []bool, deleted bool) (inRun, live int, err error) {
	r := &k.runs[i]
	if r.key == "" {
		if len(r.work) != 0 || len(r.ready) != 0 || len(r.held) != 0 {
			return 0, 0, fmt.Errorf("run slot %d: free but not cleared", i)
		}
		return 0, 0, nil
	}
	for _, w := range r.work {
		if w < 0 || w >= int32(len(k.works)) || listed[w] || k.works[w].key == "" || k.works[w].run != i {
			return 0, 0, fmt.Errorf("run %q: work list names a foreign, free or repeated work shard", r.key)
		}
		if p := k.works[w].parent; p >= 0 && !listed[p] {
			return 0, 0, fmt.Errorf("run %q: work shard %q listed before its parent", r.key, k.works[w].key)
		}
		listed[w] = true
	}
	if deleted {
		if len(r.ready) != 0 || len(r.held) != 0 || !r.status.Terminal() {
			return 0, 0, fmt.Errorf("deleted run %q: %s, or work in its queues", r.key, r.status)
		}
		return len(r.work), 0, nil
	}
	for _, q := range []workQueue{qReady, qHeld} {
		h := *k.queue(i, q)
		for j, w := range h {
			if w < 0 || w >= int32(len(k.works)) || k.works[w].run != i || *k.queuePos(w, q) != int32(j) {
				return 0, 0, fmt.Errorf("run %q: queue %d entry %d broken", r.key, q, j)
			}
			if j > 0 && k.queueLess(q, w, h[(j-1)/2]) {
				return 0, 0, fmt.Errorf("run %q: queue %d out of heap order at %d", r.key, q, j)
			}
		}
	}
	return len(r.work), len(r.work), nil
}

// checkWorkShard checks work shard i: indexed unless its run is deleted, its range and cursor,
// its links both ways, its place in the queues, and the lease claiming it.
func (k *Kernel) checkWorkShard(i int32, w *work, deleted bool) error {
	if idx, ok := k.workIdx[w.key]; !deleted && (!ok || idx != i) || deleted && ok && idx == i {
		return fmt.Errorf("work %q: not indexed at its slot, or indexed while its run is deleted", w.key)
	}
	if w.end != "" && w.start >= w.end {
		return fmt.Errorf("work %q: empty range", w.key)
	}
	if w.cursor.set && (w.cursor.key < w.start || (w.end != "" && w.cursor.key >= w.end && w.status == WorkActive)) {
		return fmt.Errorf("work %q: cursor outside its range", w.key)
	}
	if w.parent >= int32(len(k.works)) || (w.parent >= 0 && (k.works[w.parent].run != w.run || !slices.Contains(k.works[w.parent].children, i))) {
		return fmt.Errorf("work %q: parent link broken", w.key)
	}
	for _, ch := range w.children {
		if k.works[ch].parent != i {
			return fmt.Errorf("work %q: child link broken", w.key)
		}
	}
	ready, held := w.status == WorkActive && w.lease == 0 && !deleted, w.lease != 0
	if (w.readyPos >= 0) != ready || (w.heldPos >= 0) != held {
		return fmt.Errorf("work %q: in the ready queue %v, held queue %v; %s with lease %d", w.key, w.readyPos >= 0, w.heldPos >= 0, w.status, w.lease)
	}
	if w.lease == 0 {
		return nil
	}
	if w.status != WorkActive {
		return fmt.Errorf("work %q: %s and claimed by lease %d", w.key, w.status, w.lease)
	}
	if li, ok := k.leaseIdx[w.lease]; !ok || k.leaseWork(leaseRef{idx: li}) != i {
		return fmt.Errorf("work %q: claimed by lease %d, which does not hold it", w.key, w.lease)
	}
	return nil
}

// checkClaims checks a live lease's work members: at most one, naming the lease back,
// on a reserved lease (a claim is never activated).
func (k *Kernel) checkClaims(l *lease) error {
	n := 0
	for _, m := range l.members {
		if m.kind != MemberWork {
			continue
		}
		n++
		if k.works[m.obj].lease != l.lsn {
			return fmt.Errorf("lease %d: holds work %q, which names lease %d", l.lsn, k.works[m.obj].key, k.works[m.obj].lease)
		}
		if l.state != LeaseReserved {
			return fmt.Errorf("lease %d: a work claim %s", l.lsn, l.state)
		}
	}
	if n > 1 {
		return fmt.Errorf("lease %d: %d work members", l.lsn, n)
	}
	return nil
}

// checkEnded verifies the ended table: terminal records in retirement order, each indexed
// once and not live, counting their holder references and members.
func (k *Kernel) checkEnded(holderRefs []int32, members *int, indexes bool) error {
	t := &k.ended
	var prevRetire uint64
	extra := t.extra.base
	for i := 0; i < t.len(); i++ {
		e := t.q.nth(i)
		if !e.state.Terminal() || e.epoch < 1 || e.epoch > 2 || int(e.members) > maxEncodedMembers {
			return fmt.Errorf("ended lease %d: %s, epoch %d, %d members", e.lsn, e.state, e.epoch, e.members)
		}
		if e.releasedLSN < e.lsn || e.releasedLSN > k.lastLSN || e.retireAfter < prevRetire {
			return fmt.Errorf("ended lease %d: released at %d, retires after %d (previous %d)", e.lsn, e.releasedLSN, e.retireAfter, prevRetire)
		}
		prevRetire = e.retireAfter
		if _, live := k.leaseIdx[e.lsn]; live {
			return fmt.Errorf("lease %d: both live and ended", e.lsn)
		}
		if indexes {
			if _, found := t.find(e.lsn); found != e {
				return fmt.Errorf("ended lease %d: not indexed", e.lsn)
			}
		}
		if e.holder < 0 || int(e.holder) >= len(holderRefs) {
			return fmt.Errorf("ended lease %d: holder %d", e.lsn, e.holder)
		}
		holderRefs[e.holder]++
		if e.members > 1 && e.extra != extra {
			return fmt.Errorf("ended lease %d: side members at %d, expected %d", e.lsn, e.extra, extra)
		}
		extra += uint64(max(e.members, 1)) - 1
		for j := 0; j < int(e.members); j++ {
			if m := t.member(e, j); !k.validMemberRef(m.kind, uint64(m.obj)) {
				return fmt.Errorf("ended lease %d: member %d names no object", e.lsn, j)
			}
		}
		*members += int(e.members)
	}
	if extra != t.extra.next() || t.index.len() != t.len() {
		return fmt.Errorf("ended table: %d side members used of %d, %d indexed of %d", extra-t.extra.base, t.extra.len(), t.index.len(), t.len())
	}
	return nil
}

// checkRetryCache verifies both queues of the retry cache: commit order, the right queue
// for each code, and an index naming the newest record of every key.
func (k *Kernel) checkRetryCache(indexes bool) error {
	t := &k.ops
	keys := 0
	for qi := range t.q {
		q := &t.q[qi]
		for i := 0; i < q.len(); i++ {
			op := q.nth(i)
			if i > 0 && q.nth(i-1).lsn >= op.lsn {
				return fmt.Errorf("retry cache queue %d out of lsn order", qi)
			}
			if op.lsn > k.lastLSN || op.code.IsRejection() || !op.code.Valid() || (qi == forgettableQueue) != forgettable(op.code) {
				return fmt.Errorf("outcome at lsn %d: code %d in queue %d", op.lsn, op.code, qi)
			}
			if !indexes {
				continue
			}
			// The index names the newest record of each key; an older one was past its
			// window when the newer one was remembered, and waits only to retire.
			_, cur := t.find(op.key())
			if cur == op {
				keys++
			} else if (cur != nil && cur.lsn <= op.lsn) || op.retireAfter >= k.lastSlot {
				return fmt.Errorf("outcome at lsn %d: its key is not indexed to its newest record", op.lsn)
			}
		}
	}
	if indexes && keys != t.index.len() {
		return fmt.Errorf("retry cache index holds %d keys, %d records are newest for theirs", t.index.len(), keys)
	}
	return nil
}

// checkSlots verifies the object tables' slots: each is free (cleared, on its table's free
// list once), a grave (named by one grave, its key out of the index) or live (indexed at
// its slot); graves free in order, never before the ended leases that may name them. It
// returns which slots of each table are graves.
func (k *Kernel) checkSlots() (graves [graveKindEnd][]bool, err error) {
	keys := [graveKindEnd]func(int) string{
		graveResource: func(i int) string { return k.res[i].key },
		gravePool:     func(i int) string { return k.pools[i].key },
		graveRange:    func(i int) string { return k.ranges[i].key },
		graveRun:      func(i int) string { return k.runs[i].key },
	}
	sizes := [graveKindEnd]int{graveResource: len(k.res), gravePool: len(k.pools), graveRange: len(k.ranges), graveRun: len(k.runs)}
	for kind := graveResource; kind < graveKindEnd; kind++ {
		graves[kind] = make([]bool, sizes[kind])
	}
	var prev uint64
	for i := 0; i < k.graves.len(); i++ {
		g := k.graves.nth(i)
		if g.kind < graveResource || g.kind >= graveKindEnd || g.idx < 0 || int(g.idx) >= sizes[g.kind] ||
			graves[g.kind][g.idx] || keys[g.kind](int(g.idx)) == "" {
			return graves, fmt.Errorf("grave %d: kind %d slot %d names no deleted object, or again", i, g.kind, g.idx)
		}
		if g.freeAfter < prev || g.freeAfter > k.ended.q.next() {
			return graves, fmt.Errorf("grave %d: frees after %d (previous %d, ended table next %d)", i, g.freeAfter, prev, k.ended.q.next())
		}
		prev = g.freeAfter
		graves[g.kind][g.idx] = true
	}
	lists := k.free.lists()
	for kind := graveResource; kind < graveKindEnd; kind++ {
		onList := make([]bool, sizes[kind])
		for _, idx := range *lists[kind-1] {
			if idx < 0 || int(idx) >= sizes[kind] || onList[idx] || keys[kind](int(idx)) != "" {
				return graves, fmt.Errorf("free list %d: slot %d in use, out of the table or listed twice", kind, idx)
			}
			onList[idx] = true
		}
		live := 0
		for i := 0; i < sizes[kind]; i++ {
			key := keys[kind](i)
			if key == "" {
				if !onList[i] {
					return graves, fmt.Errorf("table %d: slot %d free but not on the free list", kind, i)
				}
				continue
			}
			idx, ok := k.slotIndex(kind)[key]
			at := ok && idx == int32(i)
			if at == graves[kind][i] {
				return graves, fmt.Errorf("%q: a grave %v, indexed at its slot %v", key, graves[kind][i], at)
			}
			if at {
				live++
			}
		}
		if live != len(k.slotIndex(kind)) {
			return graves, fmt.Errorf("table %d: %d live objects, %d indexed", kind, live, len(k.slotIndex(kind)))
		}
	}
	onList := make([]bool, len(k.works))
	for _, idx := range k.free.works {
		if idx < 0 || int(idx) >= len(k.works) || onList[idx] || k.works[idx].key != "" {
			return graves, fmt.Errorf("free work slot %d in use, out of the table or listed twice", idx)
		}
		onList[idx] = true
	}
	for i := range k.works {
		if w := &k.works[i]; (w.key == "") != onList[i] || w.key != "" && (w.run < 0 || int(w.run) >= len(k.runs) || k.runs[w.run].key == "") {
			return graves, fmt.Errorf("work slot %d: free %v, on the free list %v, or of no run", i, w.key == "", onList[i])
		}
	}
	return graves, nil
}
