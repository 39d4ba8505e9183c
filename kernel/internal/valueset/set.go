package valueset

import "math"

// Set is an ordered set of uint64 values stored as maximal disjoint
// intervals [start, end]: no two stored intervals overlap or touch, so the
// representation of a given set is unique. Memory is proportional to the
// number of intervals, whatever the span of the values.
//
// The intervals sit in a B+tree keyed by start (see btree.go). Leaves hold
// up to leafCap intervals in sorted arrays; inner nodes hold, per child, the
// start of its first interval and the number of values beneath it, so
// membership, insertion, removal and rank queries over the complement (see
// FirstAbsent, AbsentCount, NthAbsent) are all O(log n) in the number of
// intervals while touching a few contiguous blocks of memory rather than one
// cache line per level of a binary tree. Nodes live in slice-backed pools
// indexed by int32 with free lists: no per-node pointers for the garbage
// collector to trace, and no heap allocation once the pools have grown to
// their working size. A set of at most leafCap intervals is a single leaf
// sized to its contents, with no pools at all.
//
// The zero value is an empty set ready to use. A Set is not safe for
// concurrent use.
type Set struct {
	// small is the root leaf while height is 0: capacity c = len(small)/2,
	// starts in small[:c], ends in small[c:]. It is kept, unused, while the
	// set is a tree, for when the tree shrinks back to a single leaf.
	small  []uint64
	leaves []leaf  // leaf pool; index 0 unused
	inners []inner // inner node pool; index 0 unused
	// total is the number of values held, modulo 2^64: it wraps to 0 only
	// for [0, MaxUint64].
	total     uint64
	intervals int
	root      int32 // root inner node; 0 while height is 0
	height    int32 // inner levels above the leaves
	smallN    int32 // intervals in small
	freeLeaf  int32 // head of the free-leaf list, 0 when empty
	freeInner int32 // head of the free-inner-node list, 0 when empty
}

// Len returns the number of values in the set. The full set [0, MaxUint64]
// holds 2^64 values, which does not fit; Len saturates at MaxUint64 then.
func (s *Set) Len() uint64 {
	if s.full() {
		return math.MaxUint64
	}
	return s.total
}

// Intervals returns the number of stored (maximal) intervals.
func (s *Set) Intervals() int { return s.intervals }

// full reports whether the set is [0, MaxUint64], the one case in which the
// 2^64 values covered do not fit a uint64 count: a single interval whose
// width is 0 modulo 2^64.
func (s *Set) full() bool { return s.intervals == 1 && s.total == 0 }

// Contains reports whether v is in the set.
func (s *Set) Contains(v uint64) bool {
	_, en, pos := s.locate(v)
	return pos >= 0 && en[pos] >= v
}

// Add inserts v and reports whether it was absent. An interval ending at
// v-1 and one starting at v+1 are merged with v so intervals stay maximal.
func (s *Set) Add(v uint64) bool {
	var p path
	id, pos := s.descend(v, &p)
	st, en, np := s.leafData(id)
	if pos >= 0 && en[pos] >= v {
		return false
	}
	// The predecessor, if any, is at pos in this leaf: a leaf's parent key is
	// its first start, so the descent only ends left of a leaf's first
	// interval in the very first leaf. pred.end < v, so v > 0 when it exists;
	// succ.start > v, so v < MaxUint64 when succ exists: neither v-1 nor v+1
	// below can wrap.
	joinLeft := pos >= 0 && en[pos] == v-1
	s.total++
	if next := pos + 1; next < int(*np) {
		s.addCount(&p, 1)
		joinRight := st[next] == v+1
		switch {
		case joinLeft && joinRight:
			en[pos] = en[next]
			s.intervals--
			s.deleteEntry(&p, id, next)
		case joinLeft:
			en[pos] = v
		case joinRight:
			st[next] = v
			if next == 0 {
				s.leafKeyChanged(&p, v)
			}
		default:
			s.intervals++
			s.insertEntry(&p, id, next, v, v)
		}
		return true
	}
	// The successor, if any, opens the next leaf.
	var q path
	nid := s.nextLeaf(&p, &q)
	var nl *leaf
	if nid != 0 {
		nl = &s.leaves[nid]
	}
	joinRight := nl != nil && nl.start[0] == v+1
	switch {
	case joinLeft && joinRight:
		// The successor's values move to this leaf, then it is deleted.
		w := nl.end[0] - nl.start[0] + 1
		en[pos] = nl.end[0]
		s.addCount(&p, w+1)
		s.addCount(&q, -w)
		s.intervals--
		s.deleteEntry(&q, nid, 0)
	case joinLeft:
		s.addCount(&p, 1)
		en[pos] = v
	case joinRight:
		s.addCount(&q, 1)
		nl.start[0] = v
		s.leafKeyChanged(&q, v)
	default:
		s.addCount(&p, 1)
		s.intervals++
		s.insertEntry(&p, id, pos+1, v, v)
	}
	return true
}

// Remove deletes v and reports whether it was present. Removing an interior
// value splits its interval in two.
func (s *Set) Remove(v uint64) bool {
	var p path
	id, pos := s.descend(v, &p)
	if pos < 0 {
		return false
	}
	st, en, _ := s.leafData(id)
	start, end := st[pos], en[pos]
	if end < v {
		return false
	}
	s.total--
	s.addCount(&p, ^uint64(0))
	// start <= v <= end, so v+1 and v-1 below never wrap.
	switch {
	case start == end:
		s.intervals--
		s.deleteEntry(&p, id, pos)
	case v == start:
		st[pos] = v + 1
		if pos == 0 {
			s.leafKeyChanged(&p, v+1)
		}
	case v == end:
		en[pos] = v - 1
	default:
		en[pos] = v - 1
		s.intervals++
		s.insertEntry(&p, id, pos+1, v+1, end)
	}
	return true
}

// Ascend calls fn for each interval in ascending order until fn returns
// false.
func (s *Set) Ascend(fn func(start, end uint64) bool) {
	if s.height == 0 {
		c := len(s.small) / 2
		for j := range int(s.smallN) {
			if !fn(s.small[j], s.small[c+j]) {
				return
			}
		}
		return
	}
	s.ascend(s.root, int(s.height), fn)
}

// AscendFrom calls fn for the intervals that end at or after v, in ascending order, the
// first cut to start at v, until fn returns false: a page of a set's values from a
// cursor in O(log n) plus what it visits.
func (s *Set) AscendFrom(v uint64, fn func(start, end uint64) bool) {
	if s.intervals == 0 {
		return
	}
	var p, q path
	id, pos := s.descend(v, &p)
	pos = max(pos, 0)
	for {
		st, en, n := s.leafData(id)
		for ; pos < int(*n); pos++ {
			if en[pos] < v {
				continue
			}
			if !fn(max(st[pos], v), en[pos]) {
				return
			}
		}
		if s.height == 0 {
			return
		}
		if id = s.nextLeaf(&p, &q); id == 0 {
			return
		}
		p, pos = q, 0
	}
}

// ascend visits the subtree of inner node i, h levels above the leaves.
func (s *Set) ascend(i int32, h int, fn func(start, end uint64) bool) bool {
	x := &s.inners[i]
	for _, c := range x.child[:x.n] {
		if h > 1 {
			if !s.ascend(c, h-1, fn) {
				return false
			}
			continue
		}
		l := &s.leaves[c]
		for j := range int(l.n) {
			if !fn(l.start[j], l.end[j]) {
				return false
			}
		}
	}
	return true
}

// MemoryBytes approximates the bytes held by the set: the small leaf and the
// node pools, including spare capacity and free nodes, plus the Set header.
func (s *Set) MemoryBytes() int {
	return setHeaderBytes + 8*cap(s.small) + cap(s.leaves)*leafBytes + cap(s.inners)*innerBytes
}

// Clone returns a deep copy of s, sharing no memory with it, so snapshots
// can be taken while the original keeps changing.
func (s *Set) Clone() *Set {
	c := *s
	if s.small != nil {
		c.small = append([]uint64(nil), s.small...)
	}
	if s.leaves != nil {
		c.leaves = append([]leaf(nil), s.leaves...)
	}
	if s.inners != nil {
		c.inners = append([]inner(nil), s.inners...)
	}
	return &c
}
