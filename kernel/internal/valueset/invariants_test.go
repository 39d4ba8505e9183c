package valueset

import "fmt"

// checkSet verifies every structural invariant of s: AVL heights and balance,
// key order, maximal disjoint non-adjacent intervals, subtree counts, the
// interval tally, and that live plus free nodes account for the whole pool.
func checkSet(s *Set) error {
	if len(s.nodes) > 0 && s.nodes[0] != (node{}) {
		return fmt.Errorf("sentinel modified: %+v", s.nodes[0])
	}
	seen := make(map[int32]bool)
	var prevEnd uint64
	havePrev := false
	var walk func(i int32) (height int32, count uint64, err error)
	walk = func(i int32) (int32, uint64, error) {
		if i == 0 {
			return 0, 0, nil
		}
		if i < 0 || int(i) >= len(s.nodes) || seen[i] {
			return 0, 0, fmt.Errorf("bad or repeated node index %d", i)
		}
		seen[i] = true
		n := s.nodes[i]
		lh, lc, err := walk(n.left)
		if err != nil {
			return 0, 0, err
		}
		if n.start > n.end {
			return 0, 0, fmt.Errorf("node %d: start %d > end %d", i, n.start, n.end)
		}
		if havePrev && (prevEnd >= n.start || n.start-prevEnd < 2) {
			return 0, 0, fmt.Errorf("node %d [%d,%d] overlaps or touches previous end %d", i, n.start, n.end, prevEnd)
		}
		prevEnd, havePrev = n.end, true
		rh, rc, err := walk(n.right)
		if err != nil {
			return 0, 0, err
		}
		if d := lh - rh; d < -1 || d > 1 {
			return 0, 0, fmt.Errorf("node %d unbalanced: %d vs %d", i, lh, rh)
		}
		h := 1 + max(lh, rh)
		if n.height != h {
			return 0, 0, fmt.Errorf("node %d height %d, want %d", i, n.height, h)
		}
		c := lc + rc + (n.end - n.start + 1)
		if n.count != c {
			return 0, 0, fmt.Errorf("node %d count %d, want %d", i, n.count, c)
		}
		return h, c, nil
	}
	if _, _, err := walk(s.root); err != nil {
		return err
	}
	if len(seen) != s.intervals {
		return fmt.Errorf("tree has %d nodes, intervals = %d", len(seen), s.intervals)
	}
	free := 0
	for i := s.free; i != 0; i = s.nodes[i].left {
		if seen[i] || free > len(s.nodes) {
			return fmt.Errorf("free list reaches live node %d or loops", i)
		}
		free++
	}
	if len(s.nodes) > 0 && free+s.intervals != len(s.nodes)-1 {
		return fmt.Errorf("pool of %d: %d live + %d free", len(s.nodes)-1, s.intervals, free)
	}
	return nil
}

// checkQueue verifies the list is a consistent circular list whose entries
// match the index map exactly and that free nodes account for the rest.
func checkQueue(q *FreedQueue) error {
	if len(q.nodes) == 0 {
		if len(q.index) != 0 {
			return fmt.Errorf("index without nodes")
		}
		return nil
	}
	n := 0
	prev := int32(0)
	for i := q.nodes[0].next; i != 0; i = q.nodes[i].next {
		if n > len(q.nodes) {
			return fmt.Errorf("list loops")
		}
		if q.nodes[i].prev != prev {
			return fmt.Errorf("node %d prev %d, want %d", i, q.nodes[i].prev, prev)
		}
		if j, ok := q.index[q.nodes[i].v]; !ok || j != i {
			return fmt.Errorf("node %d value %d indexed at %d (%v)", i, q.nodes[i].v, j, ok)
		}
		prev = i
		n++
	}
	if q.nodes[0].prev != prev {
		return fmt.Errorf("tail %d, want %d", q.nodes[0].prev, prev)
	}
	if n != len(q.index) {
		return fmt.Errorf("list has %d values, index %d", n, len(q.index))
	}
	free := 0
	for i := q.free; i != 0; i = q.nodes[i].next {
		if free > len(q.nodes) {
			return fmt.Errorf("free list loops")
		}
		free++
	}
	if free+n != len(q.nodes)-1 {
		return fmt.Errorf("pool of %d: %d live + %d free", len(q.nodes)-1, n, free)
	}
	return nil
}

// queueValues lists q front to back.
func queueValues(q *FreedQueue) []uint64 {
	var vs []uint64
	q.Each(func(v uint64) bool { vs = append(vs, v); return true })
	return vs
}

// intervals lists s as [start, end] pairs.
func intervals(s *Set) [][2]uint64 {
	var iv [][2]uint64
	s.Ascend(func(a, b uint64) bool { iv = append(iv, [2]uint64{a, b}); return true })
	return iv
}
