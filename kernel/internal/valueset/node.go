package valueset

import "math"

// node is one stored interval [start, end] and its AVL bookkeeping.
//
// Nodes live in Set.nodes and refer to each other by int32 index rather than
// by pointer: the pool is a single pointer-free allocation, so the garbage
// collector never scans it, and a released node is recycled through the free
// list instead of being handed back to the allocator. Index 0 is a sentinel
// "nil" node whose zero height and count let the tree code read children
// without checking for absence.
type node struct {
	start, end uint64
	// count is the number of values covered by the subtree rooted here,
	// modulo 2^64. It only wraps for the single interval [0, MaxUint64];
	// Set detects that case explicitly (see Set.full).
	count       uint64
	left, right int32
	height      int32
}

// nodeBytes is unsafe.Sizeof(node{}), kept as a constant so the package does
// not import unsafe; a test pins the two together.
const nodeBytes = 40

// width returns the number of values in [start, end], modulo 2^64.
func (n *node) width() uint64 { return n.end - n.start + 1 }

// alloc returns the index of a node holding [start, end] with no children.
// It takes a node from the free list when one is available, so a steady
// state of adds and removes does not allocate.
func (s *Set) alloc(start, end uint64) int32 {
	x := node{start: start, end: end, count: end - start + 1, height: 1}
	if i := s.free; i != 0 {
		s.free = s.nodes[i].left
		s.nodes[i] = x
		return i
	}
	if len(s.nodes) == 0 {
		s.nodes = append(s.nodes, node{}) // the nil sentinel
	}
	if len(s.nodes) > math.MaxInt32 {
		panic("valueset: more than 2^31-1 intervals")
	}
	s.nodes = append(s.nodes, x)
	return int32(len(s.nodes) - 1)
}

// release puts node i on the free list, chained through its left field.
func (s *Set) release(i int32) {
	s.nodes[i] = node{left: s.free}
	s.free = i
}
