package valueset

import (
	"encoding/binary"
	"math"
	"slices"
	"testing"
	"unsafe"
)

const maxU = math.MaxUint64

func mustCheck(t *testing.T, s *Set) {
	t.Helper()
	if err := checkSet(s); err != nil {
		t.Fatal(err)
	}
}

func TestNodeSizes(t *testing.T) {
	if got := unsafe.Sizeof(leaf{}); got != leafBytes {
		t.Errorf("sizeof(leaf) = %d, leafBytes = %d", got, leafBytes)
	}
	if got := unsafe.Sizeof(inner{}); got != innerBytes {
		t.Errorf("sizeof(inner) = %d, innerBytes = %d", got, innerBytes)
	}
	if got := unsafe.Sizeof(Set{}); got != setHeaderBytes {
		t.Errorf("sizeof(Set) = %d, setHeaderBytes = %d", got, setHeaderBytes)
	}
	if got := unsafe.Sizeof(qnode{}); got != qnodeBytes {
		t.Errorf("sizeof(qnode) = %d, qnodeBytes = %d", got, qnodeBytes)
	}
}

func TestZeroSet(t *testing.T) {
	var s Set
	if s.Len() != 0 || s.Intervals() != 0 || s.Contains(0) || s.Contains(maxU) {
		t.Fatal("zero Set not empty")
	}
	if v, ok := s.FirstAbsent(0, maxU); !ok || v != 0 {
		t.Fatalf("FirstAbsent = %d, %v", v, ok)
	}
	if n, full := s.AbsentCount(0, maxU); n != 0 || !full {
		t.Fatalf("AbsentCount(all) = %d, %v; want 0, true", n, full)
	}
	if n, full := s.AbsentCount(1, maxU); n != maxU || full {
		t.Fatalf("AbsentCount(1, max) = %d, %v", n, full)
	}
	if v, ok := s.NthAbsent(0, maxU, maxU); !ok || v != maxU {
		t.Fatalf("NthAbsent(0, max, max) = %d, %v", v, ok)
	}
	if s.Remove(5) {
		t.Fatal("Remove from empty set")
	}
	if enc := s.AppendBinary(nil); !slices.Equal(enc, []byte{0}) {
		t.Fatalf("empty encoding %x", enc)
	}
	mustCheck(t, s.Clone())
}

func TestExtremes(t *testing.T) {
	var s Set
	if !s.Add(maxU) || !s.Add(0) || s.Add(maxU) {
		t.Fatal("Add of extremes")
	}
	mustCheck(t, &s)
	if got := intervals(&s); !slices.Equal(got, [][2]uint64{{0, 0}, {maxU, maxU}}) {
		t.Fatalf("intervals %v", got)
	}
	if v, ok := s.FirstAbsent(maxU, maxU); ok {
		t.Fatalf("FirstAbsent(max, max) = %d", v)
	}
	if v, ok := s.FirstAbsent(maxU-1, maxU); !ok || v != maxU-1 {
		t.Fatalf("FirstAbsent(max-1, max) = %d, %v", v, ok)
	}
	if n, full := s.AbsentCount(0, maxU); n != maxU-1 || full {
		t.Fatalf("AbsentCount = %d, %v", n, full)
	}
	// Absent values are 1..max-1: index max-2 is the last one.
	if v, ok := s.NthAbsent(0, maxU, maxU-2); !ok || v != maxU-1 {
		t.Fatalf("NthAbsent(max-2) = %d, %v", v, ok)
	}
	if _, ok := s.NthAbsent(0, maxU, maxU-1); ok {
		t.Fatal("NthAbsent past the last absent value")
	}
	if v, ok := s.NthAbsent(maxU, maxU, 0); ok {
		t.Fatalf("NthAbsent(max, max, 0) = %d", v)
	}
	if !s.Remove(maxU) || !s.Remove(0) || s.Remove(0) {
		t.Fatal("Remove of extremes")
	}
	mustCheck(t, &s)
}

func TestFullRange(t *testing.T) {
	// Add cannot build a 2^64-value interval in reasonable time, so decode
	// it; decoding also has to replace what s held before.
	var s Set
	s.Add(maxU - 1)
	s.Add(1)
	if _, err := s.DecodeBinary(encodeInterval(0, maxU)); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, &s)
	if s.Len() != maxU || s.Intervals() != 1 || !s.Contains(0) || !s.Contains(maxU) {
		t.Fatalf("full set: Len %d, Intervals %d", s.Len(), s.Intervals())
	}
	if _, ok := s.FirstAbsent(0, maxU); ok {
		t.Fatal("FirstAbsent in full set")
	}
	if n, full := s.AbsentCount(0, maxU); n != 0 || full {
		t.Fatalf("AbsentCount in full set = %d, %v", n, full)
	}
	if _, ok := s.NthAbsent(0, maxU, 0); ok {
		t.Fatal("NthAbsent in full set")
	}
	// Splitting the 2^64-value interval, then healing it.
	if !s.Remove(1 << 63) {
		t.Fatal("Remove from full set")
	}
	mustCheck(t, &s)
	if s.Len() != maxU || s.Intervals() != 2 {
		t.Fatalf("after split: Len %d, Intervals %d", s.Len(), s.Intervals())
	}
	if v, ok := s.NthAbsent(0, maxU, 0); !ok || v != 1<<63 {
		t.Fatalf("NthAbsent after split = %d, %v", v, ok)
	}
	if !s.Add(1 << 63) {
		t.Fatal("Add back")
	}
	mustCheck(t, &s)
	if !s.full() || s.Len() != maxU {
		t.Fatal("not full again")
	}
	if !s.Remove(0) || !s.Remove(maxU) || s.Len() != maxU-1 {
		t.Fatalf("trimming ends: Len %d", s.Len())
	}
	mustCheck(t, &s)
	if v, ok := s.NthAbsent(0, maxU, 1); !ok || v != maxU {
		t.Fatalf("NthAbsent(1) = %d, %v", v, ok)
	}
}

// encodeInterval returns the encoding of the set holding just [a, b].
func encodeInterval(a, b uint64) []byte {
	enc := binary.AppendUvarint(nil, 1)
	enc = binary.AppendUvarint(enc, a)
	return binary.AppendUvarint(enc, b-a)
}

func TestMergeAndSplit(t *testing.T) {
	var s Set
	for _, v := range []uint64{10, 12, 11} { // 11 merges both neighbours
		s.Add(v)
	}
	mustCheck(t, &s)
	if got := intervals(&s); !slices.Equal(got, [][2]uint64{{10, 12}}) {
		t.Fatalf("after merge %v", got)
	}
	s.Remove(11) // split in the middle
	mustCheck(t, &s)
	if got := intervals(&s); !slices.Equal(got, [][2]uint64{{10, 10}, {12, 12}}) {
		t.Fatalf("after split %v", got)
	}
	s.Add(11)
	s.Remove(10) // left endpoint
	s.Remove(12) // right endpoint
	mustCheck(t, &s)
	if got := intervals(&s); !slices.Equal(got, [][2]uint64{{11, 11}}) {
		t.Fatalf("after trimming %v", got)
	}
	if v, ok := s.FirstAbsent(11, 11); ok {
		t.Fatalf("FirstAbsent(11, 11) = %d", v)
	}
	if v, ok := s.FirstAbsent(11, 12); !ok || v != 12 {
		t.Fatalf("FirstAbsent(11, 12) = %d, %v", v, ok)
	}
	if v, ok := s.FirstAbsent(12, 11); ok {
		t.Fatalf("FirstAbsent(lo > hi) = %d", v)
	}
}

// TestNodeReuse checks that a steady state of adds and removes recycles
// pool nodes instead of growing the pool.
func TestNodeReuse(t *testing.T) {
	var s Set
	for v := uint64(0); v < 1000; v += 2 {
		s.Add(v)
	}
	leaves, inners := len(s.leaves), len(s.inners)
	for v := uint64(1); v < 999; v += 2 {
		s.Add(v) // merge: drops an interval, may merge leaves
		s.Remove(v)
	}
	mustCheck(t, &s)
	if len(s.leaves) != leaves || len(s.inners) != inners {
		t.Fatalf("pools grew from %d+%d to %d+%d nodes", leaves, inners, len(s.leaves), len(s.inners))
	}
	allocs := testing.AllocsPerRun(100, func() {
		s.Add(501)
		s.Remove(501)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per add+remove", allocs)
	}
}

// TestMemoryGrowsWithValues: the widest possible ranges cost nothing.
func TestMemoryGrowsWithValues(t *testing.T) {
	var s Set
	empty := s.MemoryBytes()
	s.Add(0)
	s.Add(maxU)
	s.Add(1 << 40)
	// The same bound as with the former 40-byte AVL nodes: 8 of them.
	if got := s.MemoryBytes(); got > empty+8*40 {
		t.Fatalf("3 values take %d bytes", got)
	}
}

// TestLongRandomRun runs many operations over a wider universe than the
// property test so that trees get deep (thousands of intervals) and every
// rotation case is exercised, checking against the model periodically.
func TestLongRandomRun(t *testing.T) {
	for _, base := range []uint64{0, maxU - 5000} {
		var s Set
		var m model
		r := NewRand(base + 7)
		for step := range 40000 {
			v := base + r.Below(5001)
			switch r.Below(3) {
			case 0, 1:
				if s.Add(v) != m.add(v) {
					t.Fatalf("Add(%d) disagrees", v)
				}
			case 2:
				if s.Remove(v) != m.remove(v) {
					t.Fatalf("Remove(%d) disagrees", v)
				}
			}
			if step%2000 == 0 {
				mustCheck(t, &s)
				if got, want := intervals(&s), m.intervals(); !slices.Equal(got, want) {
					t.Fatalf("step %d: %d intervals, want %d", step, len(got), len(want))
				}
				lo := base + r.Below(5001)
				for range 50 {
					n := r.Below(6000)
					gv, gok := s.NthAbsent(lo, maxU, n)
					wv, wok := m.nthAbsent(lo, maxU, n)
					if gv != wv || gok != wok {
						t.Fatalf("NthAbsent(%d, max, %d) = %d, %v; want %d, %v", lo, n, gv, gok, wv, wok)
					}
				}
			}
		}
		mustCheck(t, &s)
		if s.Intervals() < 500 {
			t.Fatalf("only %d intervals: run too shallow", s.Intervals())
		}
	}
}

func TestRandomAbsent(t *testing.T) {
	var s Set
	r := NewRand(1)
	// Empty set, whole range: 2^64 free values.
	if _, ok := s.RandomAbsent(0, maxU, &r); !ok {
		t.Fatal("RandomAbsent on empty full range")
	}
	for v := uint64(0); v < 10; v++ {
		if v != 3 && v != 7 {
			s.Add(v)
		}
	}
	hit := map[uint64]int{}
	for range 200 {
		v, ok := s.RandomAbsent(0, 9, &r)
		if !ok || (v != 3 && v != 7) {
			t.Fatalf("RandomAbsent = %d, %v", v, ok)
		}
		hit[v]++
	}
	if hit[3] < 50 || hit[7] < 50 {
		t.Fatalf("skewed: %v", hit)
	}
	s.Add(3)
	s.Add(7)
	if v, ok := s.RandomAbsent(0, 9, &r); ok {
		t.Fatalf("RandomAbsent in full window = %d", v)
	}
}

// AscendFrom visits exactly the values at or after v, in order, over leaves of a tree.
func TestAscendFrom(t *testing.T) {
	var s Set
	var want []uint64
	for i := uint64(0); i < 5000; i++ {
		if i%3 != 0 {
			s.Add(i * 2)
			want = append(want, i*2)
		}
	}
	for _, from := range []uint64{0, 1, 2, 3, 777, 5000, 9996, 9998, 10000} {
		var got []uint64
		s.AscendFrom(from, func(a, b uint64) bool {
			for x := a; x <= b; x++ {
				got = append(got, x)
			}
			return true
		})
		var w []uint64
		for _, x := range want {
			if x >= from {
				w = append(w, x)
			}
		}
		if len(got) != len(w) {
			t.Fatalf("from %d: %d values, want %d", from, len(got), len(w))
		}
		for i := range w {
			if got[i] != w[i] {
				t.Fatalf("from %d: [%d] = %d, want %d", from, i, got[i], w[i])
			}
		}
	}
	n := 0
	s.AscendFrom(10, func(a, b uint64) bool { n++; return n < 3 })
	if n != 3 {
		t.Fatalf("stopped after %d intervals", n)
	}
	var empty Set
	empty.AscendFrom(0, func(a, b uint64) bool { t.Fatal("visited an empty set"); return false })
}
