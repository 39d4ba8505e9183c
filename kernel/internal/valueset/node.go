package valueset

import "math"

// leaf holds up to leafCap intervals [start[j], end[j]], j < n, in ascending
// order. Starts and ends sit in separate arrays so a search over the starts
// touches as few cache lines as possible.
//
// Leaves and inner nodes live in Set.leaves and Set.inners and refer to each
// other by int32 index rather than by pointer: each pool is a single
// pointer-free allocation that the garbage collector never scans, and a
// released node is recycled through a free list instead of being handed back
// to the allocator. Index 0 of each pool is never used, so 0 can mean "none"
// (and, for leaves, the root leaf held in Set.small).
type leaf struct {
	n     int32 // intervals held
	next  int32 // free-list link while the leaf is free
	start [leafCap]uint64
	end   [leafCap]uint64
}

// inner holds up to innerCap children, in key order, with what the queries
// need to pick a child without visiting it.
type inner struct {
	n    int32 // children held
	next int32 // free-list link while the node is free
	// key[i] is the start of the first interval under child[i], exactly:
	// NthAbsent needs it to know how many absent values lie before the child.
	key [innerCap]uint64
	// count[i] is the number of values covered under child[i], modulo 2^64.
	// It only wraps when the set is [0, MaxUint64], a single interval that
	// never needs an inner node.
	count [innerCap]uint64
	child [innerCap]int32
}

// The rebalancing relies on capacities of at least 4: a node off the
// rightmost spine that drops below half full still has an entry, and an inner
// node off the spine has at least two children. (A negative constant does
// not convert to uint: smaller capacities fail to compile.)
const _ = uint(leafCap-4) + uint(innerCap-4)

// leafBytes, innerBytes and setHeaderBytes are unsafe.Sizeof of leaf, inner
// and Set, kept as constants so the package does not import unsafe; a test
// pins them together.
const (
	leafBytes      = 8 + 16*leafCap
	innerBytes     = 8 + 20*innerCap + 4*(innerCap%2)
	setHeaderBytes = 112
)

// allocLeaf returns the index of an empty leaf, taken from the free list when
// one is available, so a steady state of adds and removes does not allocate.
func (s *Set) allocLeaf() int32 {
	if i := s.freeLeaf; i != 0 {
		l := &s.leaves[i]
		s.freeLeaf, l.next, l.n = l.next, 0, 0
		return i
	}
	if len(s.leaves) == 0 {
		s.leaves = append(s.leaves, leaf{}) // index 0: never used
	}
	if len(s.leaves) > math.MaxInt32 {
		panic("valueset: more than 2^31-1 leaves")
	}
	s.leaves = append(s.leaves, leaf{})
	return int32(len(s.leaves) - 1)
}

// releaseLeaf puts leaf i on the free list.
func (s *Set) releaseLeaf(i int32) {
	l := &s.leaves[i]
	l.n, l.next = 0, s.freeLeaf
	s.freeLeaf = i
}

// allocInner returns the index of an empty inner node, reusing a free one.
func (s *Set) allocInner() int32 {
	if i := s.freeInner; i != 0 {
		x := &s.inners[i]
		s.freeInner, x.next, x.n = x.next, 0, 0
		return i
	}
	if len(s.inners) == 0 {
		s.inners = append(s.inners, inner{}) // index 0: never used
	}
	if len(s.inners) > math.MaxInt32 {
		panic("valueset: more than 2^31-1 inner nodes")
	}
	s.inners = append(s.inners, inner{})
	return int32(len(s.inners) - 1)
}

// releaseInner puts inner node i on the free list.
func (s *Set) releaseInner(i int32) {
	x := &s.inners[i]
	x.n, x.next = 0, s.freeInner
	s.freeInner = i
}
