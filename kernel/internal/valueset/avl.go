package valueset

// This file holds the AVL balancing. AVL (rather than red-black or a treap)
// keeps the tree strictly height-balanced with no randomness at all and its
// rebalancing fits in a recursive insert/delete that recomputes the count
// augmentation on the way back up, which is where counts need fixing anyway.
// Recursion depth is bounded by the tree height (< 46 for 2^31 nodes).

// fix recomputes the height and subtree count of node i from its children.
func (s *Set) fix(i int32) {
	n := &s.nodes[i]
	l, r := &s.nodes[n.left], &s.nodes[n.right]
	n.height = 1 + max(l.height, r.height)
	n.count = l.count + r.count + n.width()
}

func (s *Set) rotateRight(i int32) int32 {
	l := s.nodes[i].left
	s.nodes[i].left = s.nodes[l].right
	s.nodes[l].right = i
	s.fix(i)
	s.fix(l)
	return l
}

func (s *Set) rotateLeft(i int32) int32 {
	r := s.nodes[i].right
	s.nodes[i].right = s.nodes[r].left
	s.nodes[r].left = i
	s.fix(i)
	s.fix(r)
	return r
}

// balance restores the AVL property at i, whose subtrees are balanced and
// differ in height by at most 2, and returns the new subtree root.
func (s *Set) balance(i int32) int32 {
	s.fix(i)
	n := &s.nodes[i]
	l, r := n.left, n.right
	switch bf := s.nodes[l].height - s.nodes[r].height; {
	case bf > 1:
		if s.nodes[s.nodes[l].left].height < s.nodes[s.nodes[l].right].height {
			s.nodes[i].left = s.rotateLeft(l)
		}
		return s.rotateRight(i)
	case bf < -1:
		if s.nodes[s.nodes[r].right].height < s.nodes[s.nodes[r].left].height {
			s.nodes[i].right = s.rotateRight(r)
		}
		return s.rotateLeft(i)
	}
	return i
}

// insert links the detached node x into the subtree rooted at i and returns
// the new subtree root. x's interval must not overlap any stored one.
func (s *Set) insert(i, x int32) int32 {
	if i == 0 {
		return x
	}
	if s.nodes[x].start < s.nodes[i].start {
		l := s.insert(s.nodes[i].left, x)
		s.nodes[i].left = l
	} else {
		r := s.insert(s.nodes[i].right, x)
		s.nodes[i].right = r
	}
	return s.balance(i)
}

// delete unlinks and releases the node whose interval starts at start, which
// must be present in the subtree rooted at i, and returns the new subtree root.
func (s *Set) delete(i int32, start uint64) int32 {
	n := &s.nodes[i]
	switch {
	case start < n.start:
		l := s.delete(n.left, start)
		s.nodes[i].left = l
	case start > n.start:
		r := s.delete(n.right, start)
		s.nodes[i].right = r
	default:
		l, r := n.left, n.right
		s.release(i)
		if l == 0 {
			return r
		}
		if r == 0 {
			return l
		}
		// Two children: the in-order successor takes i's place. Moving the
		// node rather than copying its interval keeps every other index valid.
		r, m := s.detachMin(r)
		s.nodes[m].left, s.nodes[m].right = l, r
		return s.balance(m)
	}
	return s.balance(i)
}

// detachMin unlinks the leftmost node of the subtree rooted at i, without
// releasing it, and returns the new subtree root and the detached node.
func (s *Set) detachMin(i int32) (root, m int32) {
	l := s.nodes[i].left
	if l == 0 {
		return s.nodes[i].right, i
	}
	l, m = s.detachMin(l)
	s.nodes[i].left = l
	return s.balance(i), m
}

// build links nodes[lo..hi], already in ascending order, into a perfectly
// balanced tree and returns its root (0 for an empty range). Sibling
// subtrees differ in size by at most one, so the result is a valid AVL tree.
func (s *Set) build(lo, hi int32) int32 {
	if lo > hi {
		return 0
	}
	mid := lo + (hi-lo)/2
	l := s.build(lo, mid-1)
	r := s.build(mid+1, hi)
	s.nodes[mid].left, s.nodes[mid].right = l, r
	s.fix(mid)
	return mid
}
