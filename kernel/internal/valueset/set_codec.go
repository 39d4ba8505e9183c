package valueset

import (
	"encoding/binary"
	"math"
	"math/bits"
)

// The encoding of a Set is canonical: the interval representation of a set
// is unique (maximal, sorted, disjoint), so equal sets encode to equal bytes
// whatever their history or tree shape. Layout, all uvarints:
//
//	count
//	start_1, end_1 - start_1
//	start_j - end_{j-1} - 2, end_j - start_j   for j = 2..count
//
// Gaps are stored minus 2 because maximal intervals are never adjacent; the
// deltas keep dense sets small.

// AppendBinary appends the canonical encoding of s to b.
func (s *Set) AppendBinary(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(s.intervals))
	first := true
	var prevEnd uint64
	s.Ascend(func(start, end uint64) bool {
		if first {
			b = binary.AppendUvarint(b, start)
			first = false
		} else {
			b = binary.AppendUvarint(b, start-prevEnd-2)
		}
		b = binary.AppendUvarint(b, end-start)
		prevEnd = end
		return true
	})
	return b
}

// DecodeBinary replaces the contents of s with the set encoded at the front
// of b and returns the bytes after it. Input that is not exactly what
// AppendBinary produces (truncated, overlapping, adjacent or unsorted
// intervals, overlong varints, counts the input cannot hold) yields an error
// wrapping ErrMalformed and leaves s unchanged.
func (s *Set) DecodeBinary(b []byte) (rest []byte, err error) {
	count, b, err := readUvarint(b)
	if err != nil {
		return nil, err
	}
	// Each interval takes at least two bytes; checking before allocating
	// stops a forged count from reserving huge memory.
	if count > uint64(len(b))/2 || count >= math.MaxInt32 {
		return nil, malformed("interval count exceeds input")
	}
	// Intervals go straight to their final place: a small root leaf sized
	// to them, or leaves filled as evenly as possible (so each holds at
	// least leafCap/2) under inner nodes built bottom-up.
	n := int(count)
	var d Set
	var per, extra int // intervals per leaf; the first extra leaves take one more
	if n > leafCap {
		nl := (n + leafCap - 1) / leafCap
		d.leaves = make([]leaf, nl+1)
		per, extra = n/nl, n%nl
	} else if n > 0 {
		d.small = make([]uint64, 2*n)
	}
	li, pos := 1, 0 // next leaf and position in it
	var prevEnd uint64
	for j := 0; j < n; j++ {
		var start, length uint64
		if start, b, err = readUvarint(b); err != nil {
			return nil, err
		}
		if j > 0 {
			// The next start is prevEnd + 2 + gap; both additions must fit.
			base, c1 := bits.Add64(prevEnd, 2, 0)
			sum, c2 := bits.Add64(base, start, 0)
			if c1|c2 != 0 {
				return nil, malformed("interval beyond MaxUint64")
			}
			start = sum
		}
		if length, b, err = readUvarint(b); err != nil {
			return nil, err
		}
		end, carry := bits.Add64(start, length, 0)
		if carry != 0 {
			return nil, malformed("interval beyond MaxUint64")
		}
		d.total += length + 1 // wraps to 0 only for [0, MaxUint64]
		prevEnd = end
		if d.leaves == nil {
			d.small[j], d.small[n+j] = start, end
			continue
		}
		l := &d.leaves[li]
		l.start[pos], l.end[pos] = start, end
		pos++
		if size := per + btoi(li <= extra); pos == size {
			l.n = int32(size)
			li, pos = li+1, 0
		}
	}
	d.intervals = n
	if d.leaves == nil {
		d.smallN = int32(n)
	} else {
		d.build(len(d.leaves) - 1)
	}
	*s = d
	return b, nil
}

// build links leaves 1..nl, already filled in order, under inner nodes
// filled as evenly as possible level by level, so every node but the root
// holds at least half its capacity and the root at least two children.
func (s *Set) build(nl int) {
	total := 0
	for k := nl; k > 1; {
		k = (k + innerCap - 1) / innerCap
		total += k
	}
	s.inners = make([]inner, total+1)
	first, next := int32(1), int32(1) // first node of the level below; next free
	for k := nl; k > 1; {
		m := (k + innerCap - 1) / innerCap
		per, extra := k/m, k%m
		c := first
		for i := range m {
			x := &s.inners[next+int32(i)]
			x.n = int32(per + btoi(i < extra))
			for j := range int(x.n) {
				x.child[j] = c
				if s.height == 0 {
					l := &s.leaves[c]
					x.key[j] = l.start[0]
					for e := range int(l.n) {
						x.count[j] += l.end[e] - l.start[e] + 1
					}
				} else {
					y := &s.inners[c]
					x.key[j] = y.key[0]
					for _, w := range y.count[:y.n] {
						x.count[j] += w
					}
				}
				c++
			}
		}
		first, next, k = next, next+int32(m), m
		s.height++
	}
	s.root = first
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
