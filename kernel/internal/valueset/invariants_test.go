package valueset

import "fmt"

// checkSet verifies every structural invariant of s: intervals sorted,
// maximal, disjoint and non-adjacent; all leaves at the same depth (a node's
// pool, leaf or inner, follows from its depth, so the walk checks that by
// construction); node fill
// bounds (root inner node >= 2 children, every other node at least half full
// unless it is the last of its level, which may hold as little as one entry);
// inner keys equal to the first start beneath each child and counts equal to
// the values beneath it; the value and interval tallies; no node reachable
// twice; and free lists that are loop-free, disjoint from the tree and
// together with it account for each whole pool.
func checkSet(s *Set) error {
	if len(s.leaves) > 0 && s.leaves[0] != (leaf{}) {
		return fmt.Errorf("unused leaf 0 modified")
	}
	if len(s.inners) > 0 && s.inners[0] != (inner{}) {
		return fmt.Errorf("unused inner node 0 modified")
	}
	if s.height < 0 || s.height > maxHeight {
		return fmt.Errorf("height %d", s.height)
	}
	var prevEnd, total uint64
	intervals := 0
	// visit checks one interval against the previous one.
	visit := func(start, end uint64) error {
		if start > end {
			return fmt.Errorf("interval [%d,%d] reversed", start, end)
		}
		if intervals > 0 && (prevEnd >= start || start-prevEnd < 2) {
			return fmt.Errorf("interval [%d,%d] overlaps or touches previous end %d", start, end, prevEnd)
		}
		prevEnd = end
		total += end - start + 1
		intervals++
		return nil
	}
	seenLeaf := make(map[int32]bool)
	seenInner := make(map[int32]bool)
	if s.height == 0 {
		if s.root != 0 {
			return fmt.Errorf("height 0 with root %d", s.root)
		}
		c := len(s.small) / 2
		if len(s.small)%2 != 0 || c > leafCap || s.smallN < 0 || int(s.smallN) > c {
			return fmt.Errorf("small leaf of %d words holds %d intervals", len(s.small), s.smallN)
		}
		for j := range int(s.smallN) {
			if err := visit(s.small[j], s.small[c+j]); err != nil {
				return err
			}
		}
	} else {
		if s.smallN != 0 {
			return fmt.Errorf("tree with %d intervals left in the small leaf", s.smallN)
		}
		// walk checks the subtree of node i at depth d and returns its first
		// start and value count. spine: i is the last node of its level.
		var walk func(i int32, d int, spine bool) (uint64, uint64, error)
		walk = func(i int32, d int, spine bool) (uint64, uint64, error) {
			if d == int(s.height) {
				if i <= 0 || int(i) >= len(s.leaves) || seenLeaf[i] {
					return 0, 0, fmt.Errorf("bad or repeated leaf index %d", i)
				}
				seenLeaf[i] = true
				l := &s.leaves[i]
				if l.n < 1 || l.n > leafCap || (!spine && l.n < leafCap/2) {
					return 0, 0, fmt.Errorf("leaf %d holds %d intervals (spine %v)", i, l.n, spine)
				}
				before := total
				for j := range int(l.n) {
					if err := visit(l.start[j], l.end[j]); err != nil {
						return 0, 0, fmt.Errorf("leaf %d: %w", i, err)
					}
				}
				return l.start[0], total - before, nil
			}
			if i <= 0 || int(i) >= len(s.inners) || seenInner[i] {
				return 0, 0, fmt.Errorf("bad or repeated inner index %d", i)
			}
			seenInner[i] = true
			x := &s.inners[i]
			lowest := int32(1)
			switch {
			case d == 0:
				lowest = 2
			case !spine:
				lowest = innerCap / 2
			}
			if x.n < lowest || x.n > innerCap {
				return 0, 0, fmt.Errorf("inner node %d at depth %d has %d children", i, d, x.n)
			}
			var sum uint64
			for j := range int(x.n) {
				first, count, err := walk(x.child[j], d+1, spine && j == int(x.n)-1)
				if err != nil {
					return 0, 0, err
				}
				if x.key[j] != first {
					return 0, 0, fmt.Errorf("inner node %d key %d = %d, first start below is %d", i, j, x.key[j], first)
				}
				if x.count[j] != count {
					return 0, 0, fmt.Errorf("inner node %d count %d = %d, values below are %d", i, j, x.count[j], count)
				}
				sum += count
			}
			return x.key[0], sum, nil
		}
		if _, _, err := walk(s.root, 0, true); err != nil {
			return err
		}
	}
	if intervals != s.intervals {
		return fmt.Errorf("%d intervals stored, intervals = %d", intervals, s.intervals)
	}
	if total != s.total {
		return fmt.Errorf("%d values stored, total = %d", total, s.total)
	}
	for i := s.freeLeaf; i != 0; i = s.leaves[i].next {
		if i < 0 || int(i) >= len(s.leaves) || seenLeaf[i] || s.leaves[i].n != 0 {
			return fmt.Errorf("free leaf list reaches live, bad or repeated leaf %d", i)
		}
		seenLeaf[i] = true
	}
	if len(s.leaves) > 0 && len(seenLeaf) != len(s.leaves)-1 {
		return fmt.Errorf("leaf pool of %d: %d live or free", len(s.leaves)-1, len(seenLeaf))
	}
	for i := s.freeInner; i != 0; i = s.inners[i].next {
		if i < 0 || int(i) >= len(s.inners) || seenInner[i] || s.inners[i].n != 0 {
			return fmt.Errorf("free inner list reaches live, bad or repeated node %d", i)
		}
		seenInner[i] = true
	}
	if len(s.inners) > 0 && len(seenInner) != len(s.inners)-1 {
		return fmt.Errorf("inner pool of %d: %d live or free", len(s.inners)-1, len(seenInner))
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
