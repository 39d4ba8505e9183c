package kernel

// endedLease is a terminal lease kept readable for the history window: 64 bytes, no
// pointers, its first member inline (most leases have one) and any others in a side
// queue. A live lease carries far more (list links, expiry position, a member slice);
// none of that is needed once it has ended, so end moves it here and frees its slot.
type endedLease struct {
	lsn         uint64 // the lease id's lsn, also created_lsn
	releasedLSN uint64
	retireAfter uint64
	deadline    uint64 // the deadline it had, shown by views
	created     uint64 // the slot of the entry that created it (allocated_at)
	value       uint64 // first member's quantity (pool) or value (range)
	extra       uint64 // sequence number in endedTable.extra of the second member, if any
	epoch       uint32
	holder      int32 // index in holders: the holder's name and tenant
	obj         int32 // first member's object index
	members     uint16
	state       LeaseState
	kind        MemberKind
}

// endedMember is a second or later member of an ended lease.
type endedMember struct {
	value uint64
	obj   int32
	kind  MemberKind
}

// endedTable holds terminal leases in the order they ended, which is also the order they
// retire in (retireAfter keeps it so when the window changes), indexed by lease lsn.
type endedTable struct {
	q     fifo[endedLease]
	extra fifo[endedMember]
	index seqIndex
}

func (t *endedTable) len() int { return t.q.len() }

func (t *endedTable) refHash(ref uint32) uint64 { return t.q.at(seqOf(&t.q, ref)).lsn }

// find returns the index slot and record of lease lsn, or -1.
func (t *endedTable) find(lsn uint64) (int, *endedLease) {
	if t.index.n == 0 {
		return -1, nil
	}
	m := int(t.index.mask())
	for i := t.index.probe(lsn); ; i = (i + 1) & m {
		ref := t.index.slots[i]
		if ref == 0 {
			return -1, nil
		}
		if e := t.q.at(seqOf(&t.q, ref)); e.lsn == lsn {
			return i, e
		}
	}
}

func (t *endedTable) push(e endedLease, members []leaseMember) {
	e.members = uint16(len(members))
	e.extra = t.extra.next()
	if len(members) == 0 {
		// A lease of an import across shards with no member at its home: its members were
		// all its participants'.
		seq := t.q.push(e)
		insertRef(&t.index, t, e.lsn, refOf(0, seq))
		return
	}
	e.kind, e.obj, e.value = members[0].kind, members[0].obj, members[0].quantity+members[0].value
	for _, m := range members[1:] {
		t.extra.push(endedMember{value: m.quantity + m.value, obj: m.obj, kind: m.kind})
	}
	seq := t.q.push(e)
	insertRef(&t.index, t, e.lsn, refOf(0, seq))
}

// retireAfter is the retirement slot of a lease ending now with a history window that
// ends at due: never before the one that ended last, so the table stays in retirement
// order when the window is lowered (the leases ending after the change are then kept a
// little longer than the new window, until the longer windows before them are over:
// late, never early).
func (t *endedTable) retireAfter(due uint64) uint64 {
	if n := t.q.len(); n > 0 {
		return max(due, t.q.nth(n-1).retireAfter)
	}
	return due
}

// popFront drops the lease that ended first, with its side members.
func (t *endedTable) popFront() {
	e := t.q.front()
	if i, _ := t.find(e.lsn); i >= 0 {
		deleteAt(&t.index, t, i)
	}
	for n := 1; n < int(e.members); n++ {
		t.extra.pop()
	}
	t.q.pop()
}

// member returns the i-th member of e.
func (t *endedTable) member(e *endedLease, i int) leaseMember {
	return e.member(i, &t.extra.fifoView)
}

// member returns the i-th member of e, whose side members are in extra.
func (e *endedLease) member(i int, extra *fifoView[endedMember]) leaseMember {
	var kind MemberKind
	var obj int32
	var v uint64
	if i == 0 {
		kind, obj, v = e.kind, e.obj, e.value
	} else {
		m := extra.at(e.extra + uint64(i-1))
		kind, obj, v = m.kind, m.obj, m.value
	}
	lm := leaseMember{kind: kind, obj: obj}
	if kind == MemberPool {
		lm.quantity = v
	} else if kind == MemberRange {
		lm.value = v
	}
	return lm
}
