package valueset

import "math/bits"

// This file holds the B+tree mechanics behind Set: descent, insertion with
// splits, deletion with borrows and merges, and the moves between the small
// root leaf (Set.small) and the pooled tree.
//
// Shape. All leaves are at depth s.height. While height is 0 the only leaf is
// the root, kept in Set.small and sized to its contents so that small sets
// stay small; leaf index 0 names it. From height 1 on, the root is an inner
// node with at least two children. Every other node holds at least half its
// capacity, except nodes on the rightmost spine (the last node of each
// level), which may hold as little as one entry: when a full rightmost node
// receives an entry at its very end, it is split unevenly, leaving it full
// and starting an almost empty right neighbour. That is what values added in
// ascending order do, and it packs their leaves full instead of half full.
// The relaxation only adds at most one sparse node per level.
//
// Bookkeeping. Each inner node stores, per child, the exact start of the
// first interval beneath it (key) and the number of values beneath it
// (count). A change to a leaf adjusts the counts along its root path; a change
// to a leaf's first start rewrites the key of that leaf in its parent, and in
// each ancestor for which the path took child 0.
//
// Ordering of updates. Add and Remove first apply the change in values to the
// counts along the path (and Set.total), then make the structural change.
// Splits move counts from the parent's slot for the split node to the new
// sibling's slot, so the sums stay right whatever the order of the two steps.

// step records one level of a root-to-leaf descent: the inner node visited
// and the index of the child taken.
type step struct{ node, ci int32 }

// path is a root-to-leaf descent: path[0] is the root step and
// path[height-1] the step into the leaf.
type path [maxHeight]step

// leafData returns the start and end arrays of leaf id (0 is the small root
// leaf) and a pointer to its interval count. len(st) is the leaf's capacity.
func (s *Set) leafData(id int32) (st, en []uint64, n *int32) {
	if id == 0 {
		c := len(s.small) / 2
		return s.small[:c], s.small[c:], &s.smallN
	}
	l := &s.leaves[id]
	return l.start[:], l.end[:], &l.n
}

// lastLE returns the greatest index i with k[i] <= v, or -1 if there is none.
// k must be strictly increasing. The search is branch-free: the comparison
// is the borrow of v - k[mid], turned into a mask, so random keys cause no
// branch mispredictions (a plain if compiles to a jump here).
func lastLE(k []uint64, v uint64) int {
	n := len(k)
	if n == 0 {
		return -1
	}
	lo := 0
	for n > 1 {
		half := n >> 1
		_, above := bits.Sub64(v, k[lo+half], 0) // 1 iff k[lo+half] > v
		lo += half & (int(above) - 1)
		n -= half
	}
	if k[lo] > v {
		return -1 // only possible with lo == 0
	}
	return lo
}

// descend walks from the root to the leaf that holds the last interval
// starting at or before v, recording the path, and returns the leaf and the
// position of that interval in it (-1 if none: v precedes every interval).
func (s *Set) descend(v uint64, p *path) (id int32, pos int) {
	id = s.root
	for l := range int(s.height) {
		x := &s.inners[id]
		ci := max(lastLE(x.key[:x.n], v), 0)
		p[l] = step{id, int32(ci)}
		id = x.child[ci]
	}
	st, _, n := s.leafData(id)
	return id, lastLE(st[:*n], v)
}

// locate is descend without the path, for queries.
func (s *Set) locate(v uint64) (st, en []uint64, pos int) {
	id := s.root
	for range int(s.height) {
		x := &s.inners[id]
		id = x.child[max(lastLE(x.key[:x.n], v), 0)]
	}
	st, en, n := s.leafData(id)
	return st, en, lastLE(st[:*n], v)
}

// addCount adds delta (modulo 2^64: it may "be negative") to the counts on
// the path. Set.total is the caller's business.
func (s *Set) addCount(p *path, delta uint64) {
	for l := range int(s.height) {
		s.inners[p[l].node].count[p[l].ci] += delta
	}
}

// leafKeyChanged records that the first start of the leaf at the end of the
// path is now key: it rewrites the leaf's key in its parent and carries the
// change up while the node whose key changed is its parent's first child,
// since a parent's key for a node is that node's first key.
func (s *Set) leafKeyChanged(p *path, key uint64) {
	for d := int(s.height) - 1; d >= 0; d-- {
		s.inners[p[d].node].key[p[d].ci] = key
		if p[d].ci != 0 {
			return
		}
	}
}

// onSpine reports whether the node at depth d of the path (d = height: the
// leaf) is the last node of its level.
func (s *Set) onSpine(p *path, d int) bool {
	for l := range d {
		if p[l].ci != s.inners[p[l].node].n-1 {
			return false
		}
	}
	return true
}

// nextLeaf returns the leaf after the one at the end of p, writing its path
// to q, or 0 if p ends at the last leaf.
func (s *Set) nextLeaf(p, q *path) int32 {
	h := int(s.height)
	for l := h - 1; l >= 0; l-- {
		x := &s.inners[p[l].node]
		if p[l].ci+1 >= x.n {
			continue
		}
		copy(q[:l], p[:l])
		q[l] = step{p[l].node, p[l].ci + 1}
		id := x.child[p[l].ci+1]
		for m := l + 1; m < h; m++ {
			q[m] = step{id, 0}
			id = s.inners[id].child[0]
		}
		return id
	}
	return 0
}

// leafInsert shifts entries [pos, n) of a leaf's arrays up by one and puts
// [a, b] at pos. The arrays must have room for n+1 entries.
func leafInsert(st, en []uint64, n, pos int, a, b uint64) {
	copy(st[pos+1:n+1], st[pos:n])
	copy(en[pos+1:n+1], en[pos:n])
	st[pos], en[pos] = a, b
}

// insertEntry inserts the interval [a, b] at position pos of leaf id, at the
// end of path p, splitting the leaf (and its ancestors) when full. The counts
// on the path must already include b-a+1.
func (s *Set) insertEntry(p *path, id int32, pos int, a, b uint64) {
	st, en, np := s.leafData(id)
	if n := int(*np); n < len(st) {
		leafInsert(st, en, n, pos, a, b)
		*np = int32(n + 1)
		if pos == 0 {
			s.leafKeyChanged(p, a)
		}
		return
	}
	if id == 0 {
		if len(st) < leafCap {
			s.growSmall()
			s.insertEntry(p, 0, pos, a, b)
			return
		}
		id = s.promote(p)
	} else if pos == leafCap {
		// Past the end of a full leaf, the interval may as well open the next
		// leaf if that has room. This is what undoes a merge across a leaf
		// boundary (Add of the value between two leaves, then Remove of it)
		// without splitting anything.
		var q path
		if nid := s.nextLeaf(p, &q); nid != 0 && s.leaves[nid].n < leafCap {
			w := b - a + 1
			s.addCount(p, -w)
			s.addCount(&q, w)
			s.insertEntry(&q, nid, 0, a, b)
			return
		}
	}
	if at := s.makeRoom(p, id, pos); at >= 0 {
		l := &s.leaves[id]
		leafInsert(l.start[:], l.end[:], int(l.n), at, a, b)
		l.n++
		if at == 0 {
			s.leafKeyChanged(p, a)
		}
		return
	}
	s.splitLeaf(p, id, pos, a, b)
}

// makeRoom tries to avoid splitting the full pooled leaf id, at the end of
// p, for an insertion at pos: it moves entries to a sibling with room under
// the same parent, half of that room, but only entries on the far side of
// pos so the new interval still belongs in this leaf. It returns the
// insertion position afterwards, or -1 if neither sibling can help. Sharing
// the load before splitting (as B*-trees do) keeps randomly filled leaves
// about 86% full instead of 69%, for no measurable cost in time: the
// sibling is only touched when the leaf is full.
func (s *Set) makeRoom(p *path, id int32, pos int) int {
	d := int(s.height) - 1 // id is pooled, so height >= 1
	px := &s.inners[p[d].node]
	ci := int(p[d].ci)
	l := &s.leaves[id]
	if ci+1 < int(px.n) {
		r := &s.leaves[px.child[ci+1]]
		nr := int(r.n)
		if k := min((leafCap-nr+1)/2, leafCap-pos); k > 0 {
			copy(r.start[k:k+nr], r.start[:nr])
			copy(r.end[k:k+nr], r.end[:nr])
			copy(r.start[:k], l.start[leafCap-k:])
			copy(r.end[:k], l.end[leafCap-k:])
			var w uint64
			for j := range k {
				w += r.end[j] - r.start[j] + 1
			}
			r.n, l.n = int32(nr+k), int32(leafCap-k)
			px.count[ci] -= w
			px.count[ci+1] += w
			px.key[ci+1] = r.start[0]
			return pos
		}
	}
	if ci > 0 {
		f := &s.leaves[px.child[ci-1]]
		nf := int(f.n)
		if k := min((leafCap-nf+1)/2, pos); k > 0 {
			copy(f.start[nf:nf+k], l.start[:k])
			copy(f.end[nf:nf+k], l.end[:k])
			copy(l.start[:leafCap-k], l.start[k:])
			copy(l.end[:leafCap-k], l.end[k:])
			var w uint64
			for j := nf; j < nf+k; j++ {
				w += f.end[j] - f.start[j] + 1
			}
			f.n, l.n = int32(nf+k), int32(leafCap-k)
			px.count[ci] -= w
			px.count[ci-1] += w
			px.key[ci] = l.start[0]
			return pos - k
		}
	}
	return -1
}

// growSmall doubles the capacity of the small root leaf, up to leafCap.
func (s *Set) growSmall() {
	c := len(s.small) / 2
	nc := min(max(2*c, 2), leafCap)
	buf := make([]uint64, 2*nc)
	n := int(s.smallN)
	copy(buf[:n], s.small[:n])
	copy(buf[nc:nc+n], s.small[c:c+n])
	s.small = buf
}

// promote moves the full small root leaf into the pool under a new root with
// that single child, sets p to lead to it and returns the leaf. The caller
// splits the leaf next, which gives the root its second child.
func (s *Set) promote(p *path) int32 {
	id := s.allocLeaf()
	l := &s.leaves[id]
	n, c := int(s.smallN), len(s.small)/2
	copy(l.start[:], s.small[:n])
	copy(l.end[:], s.small[c:c+n])
	l.n = int32(n)
	s.smallN = 0
	r := s.allocInner()
	x := &s.inners[r]
	x.n, x.child[0], x.key[0], x.count[0] = 1, id, l.start[0], s.total
	s.root, s.height = r, 1
	p[0] = step{r, 0}
	return id
}

// demote turns the tree of a single leaf id back into the small root leaf.
// The small buffer normally still has room from before the promotion; it is
// only allocated when the tree came from decoding.
func (s *Set) demote(id int32) {
	l := &s.leaves[id]
	n := int(l.n)
	if len(s.small)/2 < n {
		s.small = make([]uint64, 2*leafCap)
	}
	c := len(s.small) / 2
	copy(s.small[:n], l.start[:n])
	copy(s.small[c:c+n], l.end[:n])
	s.smallN = int32(n)
	s.releaseLeaf(id)
	s.root = 0
}

// splitLeaf inserts [a, b] at position pos of the full pooled leaf id by
// splitting it in two, then links the new right half into the parent.
func (s *Set) splitLeaf(p *path, id int32, pos int, a, b uint64) {
	h := int(s.height)
	keep := (leafCap + 1) / 2 // entries the left half ends up with
	if pos == leafCap && s.onSpine(p, h) {
		keep = leafCap // appending at the far right: leave this leaf full
	}
	r := s.allocLeaf()
	l, rl := &s.leaves[id], &s.leaves[r]
	if pos < keep {
		m := copy(rl.start[:], l.start[keep-1:])
		copy(rl.end[:], l.end[keep-1:])
		rl.n = int32(m)
		leafInsert(l.start[:], l.end[:], keep-1, pos, a, b)
		if pos == 0 {
			s.leafKeyChanged(p, a)
		}
	} else {
		m := copy(rl.start[:], l.start[keep:])
		copy(rl.end[:], l.end[keep:])
		leafInsert(rl.start[:], rl.end[:], m, pos-keep, a, b)
		rl.n = int32(m + 1)
	}
	l.n = int32(keep)
	var w uint64
	for j := range int(rl.n) {
		w += rl.end[j] - rl.start[j] + 1
	}
	s.insertChild(p, h-1, r, rl.start[0], w)
}

// innerInsert shifts children [pos, n) of x up by one and puts child c with
// its key and count at pos. x must have room.
func innerInsert(x *inner, n, pos int, c int32, key, count uint64) {
	copy(x.key[pos+1:n+1], x.key[pos:n])
	copy(x.count[pos+1:n+1], x.count[pos:n])
	copy(x.child[pos+1:n+1], x.child[pos:n])
	x.key[pos], x.count[pos], x.child[pos] = key, count, c
}

// insertChild links the new node c, holding w values and starting at key,
// as the right neighbour of the child taken at depth d of the path: it moves
// w from that child's count to c's. A full node is split and the split
// carries on upwards; a split root gets a new root above it.
func (s *Set) insertChild(p *path, d int, c int32, key, w uint64) {
	xi, ci := p[d].node, int(p[d].ci)
	x := &s.inners[xi]
	x.count[ci] -= w
	pos := ci + 1
	if n := int(x.n); n < innerCap {
		innerInsert(x, n, pos, c, key, w)
		x.n++
		return
	}
	keep := (innerCap + 1) / 2
	if pos == innerCap && s.onSpine(p, d) {
		keep = innerCap
	}
	yi := s.allocInner()
	x, y := &s.inners[xi], &s.inners[yi]
	if pos < keep {
		m := copy(y.key[:], x.key[keep-1:])
		copy(y.count[:], x.count[keep-1:])
		copy(y.child[:], x.child[keep-1:])
		y.n = int32(m)
		innerInsert(x, keep-1, pos, c, key, w)
	} else {
		m := copy(y.key[:], x.key[keep:])
		copy(y.count[:], x.count[keep:])
		copy(y.child[:], x.child[keep:])
		innerInsert(y, m, pos-keep, c, key, w)
		y.n = int32(m + 1)
	}
	x.n = int32(keep)
	var wy uint64
	for i := range int(y.n) {
		wy += y.count[i]
	}
	if d > 0 {
		s.insertChild(p, d-1, yi, y.key[0], wy)
		return
	}
	if int(s.height) >= maxHeight {
		panic("valueset: tree too tall")
	}
	ri := s.allocInner()
	x, y = &s.inners[xi], &s.inners[yi]
	root := &s.inners[ri]
	root.n = 2
	root.child[0], root.key[0], root.count[0] = xi, x.key[0], s.total-wy
	root.child[1], root.key[1], root.count[1] = yi, y.key[0], wy
	s.root = ri
	s.height++
}

// deleteEntry removes the interval at position pos of leaf id, at the end of
// path p, and restores the fill invariants. The counts on the path must
// already exclude its values.
func (s *Set) deleteEntry(p *path, id int32, pos int) {
	st, en, np := s.leafData(id)
	n := int(*np) - 1
	copy(st[pos:n], st[pos+1:n+1])
	copy(en[pos:n], en[pos+1:n+1])
	*np = int32(n)
	if id == 0 {
		return
	}
	if pos == 0 && n > 0 {
		s.leafKeyChanged(p, st[0])
	}
	if n < leafCap/2 {
		s.rebalanceLeaf(p)
	}
}

// rebalanceLeaf fixes the leaf at the end of p after it lost an entry and
// fell below half full: an empty rightmost leaf is unlinked, any other
// rightmost leaf may stay sparse, and the rest merge with or borrow from a
// sibling.
func (s *Set) rebalanceLeaf(p *path) {
	d := int(s.height) - 1
	px := &s.inners[p[d].node]
	ci := int(p[d].ci)
	id := px.child[ci]
	if s.onSpine(p, d+1) {
		if s.leaves[id].n == 0 {
			s.removeChild(p, d, ci)
			s.releaseLeaf(id)
			s.rebalanceInner(p, d)
		}
		return
	}
	// Off the spine the parent has another child: a parent off the spine
	// holds innerCap/2 >= 2 of them, one on it has the leaf's right sibling.
	// The leaf itself still holds leafCap/2-1 >= 1 intervals, so whichever
	// way the pair merges, the left one keeps its first interval and the
	// parent's key for it stays right.
	ai := max(ci-1, 0)
	ia, ib := px.child[ai], px.child[ai+1]
	a, b := &s.leaves[ia], &s.leaves[ib]
	na, nb := int(a.n), int(b.n)
	if na+nb <= leafCap {
		copy(a.start[na:], b.start[:nb])
		copy(a.end[na:], b.end[:nb])
		a.n = int32(na + nb)
		px.count[ai] += px.count[ai+1]
		s.removeChild(p, d, ai+1)
		s.releaseLeaf(ib)
		s.rebalanceInner(p, d)
		return
	}
	target := (na + nb) / 2 // a's new size; both halves end >= leafCap/2
	var w uint64
	if na > target {
		k := na - target
		copy(b.start[k:k+nb], b.start[:nb])
		copy(b.end[k:k+nb], b.end[:nb])
		copy(b.start[:k], a.start[target:na])
		copy(b.end[:k], a.end[target:na])
		for j := range k {
			w += b.end[j] - b.start[j] + 1
		}
		px.count[ai] -= w
		px.count[ai+1] += w
	} else {
		k := target - na
		copy(a.start[na:target], b.start[:k])
		copy(a.end[na:target], b.end[:k])
		for j := na; j < target; j++ {
			w += a.end[j] - a.start[j] + 1
		}
		copy(b.start[:nb-k], b.start[k:nb])
		copy(b.end[:nb-k], b.end[k:nb])
		px.count[ai] += w
		px.count[ai+1] -= w
	}
	a.n, b.n = int32(target), int32(na+nb-target)
	px.key[ai+1] = b.start[0]
}

// removeChild unlinks child idx of the inner node at depth d of the path.
// The caller releases the child and adjusts no counts: the child's values
// must already be gone or moved. idx is never 0 unless it is the only
// child (a merge removes the right one of two siblings, an empty rightmost
// node is the last child), so the node's first key never changes here.
func (s *Set) removeChild(p *path, d, idx int) {
	x := &s.inners[p[d].node]
	n := int(x.n) - 1
	copy(x.key[idx:n], x.key[idx+1:n+1])
	copy(x.count[idx:n], x.count[idx+1:n+1])
	copy(x.child[idx:n], x.child[idx+1:n+1])
	x.n = int32(n)
}

// rebalanceInner fixes the inner node at depth d of p after it lost a child,
// as rebalanceLeaf does for leaves; a root left with one child is replaced
// by that child.
func (s *Set) rebalanceInner(p *path, d int) {
	if d == 0 {
		s.shrinkRoot()
		return
	}
	xi := p[d].node
	x := &s.inners[xi]
	if int(x.n) >= innerCap/2 {
		return
	}
	if s.onSpine(p, d) {
		if x.n == 0 {
			s.removeChild(p, d-1, int(p[d-1].ci))
			s.releaseInner(xi)
			s.rebalanceInner(p, d-1)
		}
		return
	}
	px := &s.inners[p[d-1].node]
	ci := int(p[d-1].ci)
	ai := max(ci-1, 0)
	ia, ib := px.child[ai], px.child[ai+1]
	a, b := &s.inners[ia], &s.inners[ib]
	na, nb := int(a.n), int(b.n)
	if na+nb <= innerCap {
		copy(a.key[na:], b.key[:nb])
		copy(a.count[na:], b.count[:nb])
		copy(a.child[na:], b.child[:nb])
		a.n = int32(na + nb)
		px.count[ai] += px.count[ai+1]
		s.removeChild(p, d-1, ai+1)
		s.releaseInner(ib)
		s.rebalanceInner(p, d-1)
		return
	}
	target := (na + nb) / 2
	var w uint64
	if na > target {
		k := na - target
		copy(b.key[k:k+nb], b.key[:nb])
		copy(b.count[k:k+nb], b.count[:nb])
		copy(b.child[k:k+nb], b.child[:nb])
		copy(b.key[:k], a.key[target:na])
		copy(b.count[:k], a.count[target:na])
		copy(b.child[:k], a.child[target:na])
		for j := range k {
			w += b.count[j]
		}
		px.count[ai] -= w
		px.count[ai+1] += w
	} else {
		k := target - na
		copy(a.key[na:target], b.key[:k])
		copy(a.count[na:target], b.count[:k])
		copy(a.child[na:target], b.child[:k])
		for j := na; j < target; j++ {
			w += a.count[j]
		}
		copy(b.key[:nb-k], b.key[k:nb])
		copy(b.count[:nb-k], b.count[k:nb])
		copy(b.child[:nb-k], b.child[k:nb])
		px.count[ai] += w
		px.count[ai+1] -= w
	}
	a.n, b.n = int32(target), int32(na+nb-target)
	px.key[ai+1] = b.key[0]
}

// shrinkRoot replaces a root that has a single child by that child, as often
// as needed; a lone leaf goes back to being the small root leaf.
func (s *Set) shrinkRoot() {
	for s.height > 0 && s.inners[s.root].n == 1 {
		r := s.root
		c := s.inners[r].child[0]
		s.releaseInner(r)
		s.height--
		if s.height == 0 {
			s.demote(c)
		} else {
			s.root = c
		}
	}
}
