package valueset

import "encoding/binary"

// The encoding of a FreedQueue lists its values front to back, which is the
// state that matters (the order of future reuse); it never depends on the
// map. Layout, all uvarints: count, then for each value the zigzag-encoded
// difference from the previous value (the first from 0), so runs of values
// freed in ascending or descending order stay one or two bytes each.

func zigzag(d uint64) uint64   { return d<<1 ^ uint64(int64(d)>>63) }
func unzigzag(z uint64) uint64 { return z>>1 ^ -(z & 1) }

// AppendBinary appends the encoding of q, in queue order, to b.
func (q *FreedQueue) AppendBinary(b []byte) []byte {
	b = binary.AppendUvarint(b, uint64(q.Len()))
	var prev uint64
	q.Each(func(v uint64) bool {
		b = binary.AppendUvarint(b, zigzag(v-prev))
		prev = v
		return true
	})
	return b
}

// DecodeBinary replaces the contents of q with the queue encoded at the
// front of b and returns the bytes after it. Truncated input, overlong
// varints, duplicate values or a count the input cannot hold yield an error
// wrapping ErrMalformed and leave q unchanged.
func (q *FreedQueue) DecodeBinary(b []byte) ([]byte, error) {
	count, b, err := readUvarint(b)
	if err != nil {
		return nil, err
	}
	// One byte per value at least; checked before allocating anything.
	if count > uint64(len(b)) || count >= 1<<31-1 {
		return nil, malformed("value count exceeds input")
	}
	var d FreedQueue
	if count > 0 {
		d.nodes = make([]qnode, 1, count+1)
		d.index = make(map[uint64]int32, count)
	}
	var prev uint64
	for range count {
		var z uint64
		if z, b, err = readUvarint(b); err != nil {
			return nil, err
		}
		v := prev + unzigzag(z)
		if d.Contains(v) {
			return nil, malformed("duplicate value")
		}
		d.PushBack(v)
		prev = v
	}
	*q = d
	return b, nil
}
