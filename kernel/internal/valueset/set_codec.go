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
	nodes := make([]node, count+1)
	var prevEnd uint64
	for j := 1; j <= int(count); j++ {
		var start, length uint64
		if start, b, err = readUvarint(b); err != nil {
			return nil, err
		}
		if j > 1 {
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
		nodes[j] = node{start: start, end: end}
		prevEnd = end
	}
	*s = Set{nodes: nodes, intervals: int(count)}
	s.root = s.build(1, int32(count))
	return b, nil
}
