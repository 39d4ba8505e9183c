package valueset

import "math"

// Set is an ordered set of uint64 values stored as maximal disjoint
// intervals [start, end]: no two stored intervals overlap or touch, so the
// representation of a given set is unique. Memory is proportional to the
// number of intervals, whatever the span of the values.
//
// The intervals sit in an AVL tree keyed by start, each node augmented with
// the number of values its subtree covers, so membership, insertion,
// removal and rank queries over the complement (see FirstAbsent,
// AbsentCount, NthAbsent) are all O(log n) in the number of intervals.
// Nodes live in a slice-backed pool indexed by int32 with a free list: no
// per-node pointers for the garbage collector to trace, and no heap
// allocation once the pool has grown to its working size.
//
// The zero value is an empty set ready to use. A Set is not safe for
// concurrent use.
type Set struct {
	nodes     []node // nodes[0] is the nil sentinel once the pool exists
	root      int32
	free      int32 // head of the free-node list, 0 when empty
	intervals int
}

// setHeaderBytes is unsafe.Sizeof(Set{}); a test pins the two together.
const setHeaderBytes = 40

// Len returns the number of values in the set. The full set [0, MaxUint64]
// holds 2^64 values, which does not fit; Len saturates at MaxUint64 then.
func (s *Set) Len() uint64 {
	switch {
	case s.intervals == 0:
		return 0 // the pool may not exist yet
	case s.full():
		return math.MaxUint64
	}
	return s.nodes[s.root].count
}

// Intervals returns the number of stored (maximal) intervals.
func (s *Set) Intervals() int { return s.intervals }

// full reports whether the set is [0, MaxUint64], the one case in which the
// 2^64 values covered do not fit a uint64 count (the root count wraps to 0).
func (s *Set) full() bool {
	if s.intervals != 1 {
		return false
	}
	n := &s.nodes[s.root]
	return n.start == 0 && n.end == math.MaxUint64
}

// floor returns the node with the greatest start <= v, or 0 if none.
func (s *Set) floor(v uint64) int32 {
	var found int32
	for i := s.root; i != 0; {
		if n := &s.nodes[i]; n.start <= v {
			found, i = i, n.right
		} else {
			i = n.left
		}
	}
	return found
}

// containing returns the node whose interval holds v, or 0 if none.
func (s *Set) containing(v uint64) int32 {
	if i := s.floor(v); i != 0 && s.nodes[i].end >= v {
		return i
	}
	return 0
}

// Contains reports whether v is in the set.
func (s *Set) Contains(v uint64) bool { return s.containing(v) != 0 }

// Add inserts v and reports whether it was absent. An interval ending at
// v-1 and one starting at v+1 are merged with v so intervals stay maximal.
func (s *Set) Add(v uint64) bool {
	var pred, succ int32
	for i := s.root; i != 0; {
		if n := &s.nodes[i]; n.start <= v {
			pred, i = i, n.right
		} else {
			succ, i = i, n.left
		}
	}
	if pred != 0 && s.nodes[pred].end >= v {
		return false
	}
	// pred.end < v, so v > 0 when pred exists; succ.start > v, so v < MaxUint64
	// when succ exists: neither v-1 nor v+1 below can wrap.
	joinLeft := pred != 0 && s.nodes[pred].end == v-1
	joinRight := succ != 0 && s.nodes[succ].start == v+1
	switch {
	case joinLeft && joinRight:
		end := s.nodes[succ].end
		s.root = s.delete(s.root, s.nodes[succ].start)
		s.intervals--
		s.resize(pred, s.nodes[pred].start, end)
	case joinLeft:
		s.resize(pred, s.nodes[pred].start, v)
	case joinRight:
		s.resize(succ, v, s.nodes[succ].end)
	default:
		x := s.alloc(v, v)
		s.root = s.insert(s.root, x)
		s.intervals++
	}
	return true
}

// Remove deletes v and reports whether it was present. Removing an interior
// value splits its interval in two.
func (s *Set) Remove(v uint64) bool {
	i := s.containing(v)
	if i == 0 {
		return false
	}
	start, end := s.nodes[i].start, s.nodes[i].end
	// start <= v <= end, so v+1 and v-1 below never wrap.
	switch {
	case start == end:
		s.root = s.delete(s.root, start)
		s.intervals--
	case v == start:
		s.resize(i, v+1, end)
	case v == end:
		s.resize(i, start, v-1)
	default:
		s.resize(i, start, v-1)
		x := s.alloc(v+1, end)
		s.root = s.insert(s.root, x)
		s.intervals++
	}
	return true
}

// resize changes node i's interval to [start, end] and corrects the counts
// on the path from the root to it. The new interval must keep i in the same
// in-order position, so the shape of the tree is untouched.
func (s *Set) resize(i int32, start, end uint64) {
	n := &s.nodes[i]
	delta := (end - start + 1) - n.width() // modular: may "be negative"
	key := n.start
	for j := s.root; ; {
		m := &s.nodes[j]
		m.count += delta
		if j == i {
			break
		}
		if key < m.start {
			j = m.left
		} else {
			j = m.right
		}
	}
	n.start, n.end = start, end
}

// Ascend calls fn for each interval in ascending order until fn returns
// false.
func (s *Set) Ascend(fn func(start, end uint64) bool) {
	s.ascend(s.root, fn)
}

func (s *Set) ascend(i int32, fn func(start, end uint64) bool) bool {
	if i == 0 {
		return true
	}
	n := &s.nodes[i]
	return s.ascend(n.left, fn) && fn(n.start, n.end) && s.ascend(n.right, fn)
}

// MemoryBytes approximates the bytes held by the set: the node pool,
// including spare capacity and free nodes, plus the Set header.
func (s *Set) MemoryBytes() int {
	return setHeaderBytes + cap(s.nodes)*nodeBytes
}

// Clone returns a deep copy of s, sharing no memory with it, so snapshots
// can be taken while the original keeps changing.
func (s *Set) Clone() *Set {
	c := *s
	if s.nodes != nil {
		c.nodes = append([]node(nil), s.nodes...)
	}
	return &c
}
