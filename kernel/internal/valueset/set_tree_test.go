package valueset

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"testing"
)

// bitModel is a second reference for Set, for large sets where the sorted
// slice model would be quadratic: one bit per value of a window [base,
// base+u) (values outside it are never added), so updates are O(1) and
// queries word-at-a-time scans.
type bitModel struct {
	base, u uint64
	words   []uint64
}

func newBitModel(base, u uint64) *bitModel {
	return &bitModel{base: base, u: u, words: make([]uint64, (u+63)/64)}
}

func (m *bitModel) has(v uint64) bool {
	i := v - m.base
	return v >= m.base && i < m.u && m.words[i/64]>>(i%64)&1 != 0
}

func (m *bitModel) add(v uint64) bool {
	if m.has(v) {
		return false
	}
	i := v - m.base
	m.words[i/64] |= 1 << (i % 64)
	return true
}

func (m *bitModel) remove(v uint64) bool {
	if !m.has(v) {
		return false
	}
	i := v - m.base
	m.words[i/64] &^= 1 << (i % 64)
	return true
}

func (m *bitModel) len() uint64 {
	var n int
	for _, w := range m.words {
		n += bits.OnesCount64(w)
	}
	return uint64(n)
}

func (m *bitModel) intervals() [][2]uint64 {
	var iv [][2]uint64
	for i := uint64(0); i < m.u; i++ {
		if m.words[i/64] == 0 {
			i |= 63 // skip the empty word
			continue
		}
		if m.has(m.base + i) {
			v := m.base + i
			if k := len(iv); k > 0 && iv[k-1][1] == v-1 {
				iv[k-1][1] = v
			} else {
				iv = append(iv, [2]uint64{v, v})
			}
		}
	}
	return iv
}

// inside clamps [lo, hi] to the window, as offsets; ok is false if they do
// not meet.
func (m *bitModel) inside(lo, hi uint64) (a, b uint64, ok bool) {
	last := m.base + m.u - 1
	if lo > hi || hi < m.base || lo > last {
		return 0, 0, false
	}
	return max(lo, m.base) - m.base, min(hi, last) - m.base, true
}

// zerosIn returns, as a mask, the absent offsets of word w that lie in
// [a, b].
func (m *bitModel) zerosIn(w, a, b uint64) uint64 { return ^m.words[w] & rangeMask(w, a, b) }

func (m *bitModel) absentCount(lo, hi uint64) (uint64, bool) {
	if lo > hi {
		return 0, false
	}
	var present uint64
	if a, b, ok := m.inside(lo, hi); ok {
		for w := a / 64; w <= b/64; w++ {
			present += uint64(bits.OnesCount64(m.words[w] & rangeMask(w, a, b)))
		}
	}
	if lo == 0 && hi == math.MaxUint64 && present == 0 {
		return 0, true
	}
	return hi - lo + 1 - present, false
}

// rangeMask has the bits of word w that lie in [a, b].
func rangeMask(w, a, b uint64) uint64 {
	mask := ^uint64(0)
	if w*64 < a {
		mask &= ^uint64(0) << (a - w*64)
	}
	if b < w*64+63 {
		mask &= ^uint64(0) >> (63 - (b - w*64))
	}
	return mask
}

func (m *bitModel) firstAbsent(lo, hi uint64) (uint64, bool) {
	return m.nthAbsent(lo, hi, 0)
}

// nthAbsent walks the absent values of [lo, hi] in three stretches: below
// the window, inside it, above it.
func (m *bitModel) nthAbsent(lo, hi, n uint64) (uint64, bool) {
	if lo > hi {
		return 0, false
	}
	if lo < m.base {
		top := min(hi, m.base-1)
		if n <= top-lo {
			return lo + n, true
		}
		if top == hi {
			return 0, false
		}
		n -= top - lo + 1
		lo = m.base
	}
	last := m.base + m.u - 1
	if lo <= last {
		a, b, _ := m.inside(lo, hi)
		for w := a / 64; w <= b/64; w++ {
			z := m.zerosIn(w, a, b)
			if c := uint64(bits.OnesCount64(z)); n >= c {
				n -= c
				continue
			}
			for range n {
				z &= z - 1
			}
			return m.base + w*64 + uint64(bits.TrailingZeros64(z)), true
		}
		if hi <= last {
			return 0, false
		}
		lo = last + 1
	}
	if n <= hi-lo {
		return lo + n, true
	}
	return 0, false
}

// compareAll checks s against m: invariants, every interval, Len, and a
// sample of every query drawn with r around the window.
func compareAll(t *testing.T, s *Set, m *bitModel, r *Rand, what string) {
	t.Helper()
	if err := checkSet(s); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if got, want := intervals(s), m.intervals(); !slices.Equal(got, want) {
		t.Fatalf("%s: %d intervals, model has %d", what, len(got), len(want))
	}
	if got, want := s.Len(), m.len(); got != want {
		t.Fatalf("%s: Len() = %d, want %d", what, got, want)
	}
	// Bounds: inside the window, just outside it, or the extremes.
	bound := func() uint64 {
		switch r.Below(8) {
		case 0:
			return 0
		case 1:
			return math.MaxUint64
		case 2:
			return m.base - min(m.base, r.Below(3))
		}
		return m.base + r.Below(m.u+min(math.MaxUint64-m.base-m.u+1, 3))
	}
	for range 100 {
		lo, hi := bound(), bound()
		if lo > hi && r.Below(4) != 0 {
			lo, hi = hi, lo
		}
		v := m.base + r.Below(m.u)
		if got, want := s.Contains(v), m.has(v); got != want {
			t.Fatalf("%s: Contains(%d) = %v, want %v", what, v, got, want)
		}
		gv, gok := s.FirstAbsent(lo, hi)
		wv, wok := m.firstAbsent(lo, hi)
		if gv != wv || gok != wok {
			t.Fatalf("%s: FirstAbsent(%d, %d) = %d, %v; want %d, %v", what, lo, hi, gv, gok, wv, wok)
		}
		gn, gfull := s.AbsentCount(lo, hi)
		wn, wfull := m.absentCount(lo, hi)
		if gn != wn || gfull != wfull {
			t.Fatalf("%s: AbsentCount(%d, %d) = %d, %v; want %d, %v", what, lo, hi, gn, gfull, wn, wfull)
		}
		n := r.Below(wn + 2) // mostly valid ranks, sometimes one past the end
		if r.Below(8) == 0 {
			n = math.MaxUint64 - r.Below(4)
		}
		gv, gok = s.NthAbsent(lo, hi, n)
		wv, wok = m.nthAbsent(lo, hi, n)
		if gv != wv || gok != wok {
			t.Fatalf("%s: NthAbsent(%d, %d, %d) = %d, %v; want %d, %v", what, lo, hi, n, gv, gok, wv, wok)
		}
	}
}

// TestLargeTreeMatchesBitmap drives sets of hundreds of thousands of
// intervals (trees three inner levels deep with the real node capacities)
// through growth, churn, a decode round trip, shrinking back to a single
// leaf, and ascending and descending sweeps, comparing them with the bitmap
// model throughout. The small universes of TestSetMatchesModel only reach
// deep trees under -tags valueset_small; this reaches them in every build.
func TestLargeTreeMatchesBitmap(t *testing.T) {
	if testing.Short() {
		t.Skip("large")
	}
	cases := []struct {
		name    string
		base, u uint64
	}{
		{"bottom", 0, 1 << 20},
		{"top", math.MaxUint64 - (1 << 18) + 1, 1 << 18},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var s Set
			m := newBitModel(c.base, c.u)
			r := NewRand(c.u)
			op := func(add bool, v uint64) {
				if add {
					if got, want := s.Add(v), m.add(v); got != want {
						t.Fatalf("Add(%d) = %v, want %v", v, got, want)
					}
				} else if got, want := s.Remove(v), m.remove(v); got != want {
					t.Fatalf("Remove(%d) = %v, want %v", v, got, want)
				}
			}
			// Growth to about half density: ~u/4 intervals.
			for i := range c.u * 7 / 10 {
				op(true, c.base+r.Below(c.u))
				if i%(c.u/4) == 0 {
					compareAll(t, &s, m, &r, "growing")
				}
			}
			compareAll(t, &s, m, &r, "grown")
			if c.u == 1<<20 && s.height < 3 {
				t.Fatalf("height %d with %d intervals: tree too shallow for this test", s.height, s.Intervals())
			}
			// Continue on a decoded copy: full leaves from the bulk load,
			// splitting everywhere. The original must not see its changes.
			enc := s.AppendBinary(nil)
			var d Set
			if _, err := d.DecodeBinary(enc); err != nil {
				t.Fatal(err)
			}
			compareAll(t, &d, m, &r, "decoded")
			orig := s.Clone()
			s = d
			// Churn around half density.
			for i := range 300_000 {
				op(r.Below(2) == 0, c.base+r.Below(c.u))
				if i%100_000 == 0 {
					compareAll(t, &s, m, &r, "churning")
				}
			}
			compareAll(t, &s, m, &r, "churned")
			if !bytes.Equal(orig.AppendBinary(nil), enc) {
				t.Fatal("changes to the decoded set reached the original's clone")
			}
			// Shrink: remove in a scattered order until one value is left,
			// which takes the tree back down to the small leaf.
			const stride = 7919 // prime, so i*stride covers the window
			left := m.len()
			every := left/3 + 1000
			for i := range c.u {
				v := c.base + i*stride%c.u
				if m.has(v) && left > 1 {
					op(false, v)
					left--
					if left%every == 0 {
						compareAll(t, &s, m, &r, "shrinking")
					}
				}
			}
			compareAll(t, &s, m, &r, "shrunk")
			if s.height != 0 {
				t.Fatalf("height %d with %d intervals left", s.height, s.Intervals())
			}
			// Ascending sweep of every third value over a quarter of the
			// window (packs rightmost leaves), then a descending sweep filling
			// the gaps in another quarter (merges, prepends at leaf fronts).
			for i := uint64(0); i < c.u/4; i += 3 {
				op(true, c.base+i)
			}
			compareAll(t, &s, m, &r, "ascending sweep")
			for i := c.u / 2; i > c.u/4; i-- {
				op(true, c.base+i)
			}
			compareAll(t, &s, m, &r, "descending sweep")
			// Remove everything: from the top down to u/8, through the
			// scattered stretch (emptying rightmost nodes, which are only
			// unlinked once empty), then the rest from the bottom up
			// (merging leftmost nodes).
			for i := c.u; i > c.u/8; i-- {
				op(false, c.base+i-1)
			}
			compareAll(t, &s, m, &r, "top removed")
			for i := range c.u / 8 {
				op(false, c.base+i)
			}
			compareAll(t, &s, m, &r, "emptied")
			if s.Len() != 0 || s.Intervals() != 0 || s.height != 0 {
				t.Fatalf("emptied set: Len %d, %d intervals, height %d", s.Len(), s.Intervals(), s.height)
			}
		})
	}
}

// TestAscendStops: Ascend stops as soon as fn returns false, whether the
// set is a single leaf or a tree, and visits in ascending order.
func TestAscendStops(t *testing.T) {
	for _, n := range []uint64{10, 10_000} {
		var s Set
		for v := range n {
			s.Add(3 * v)
		}
		for _, stop := range []uint64{0, 1, n / 2, n - 1} {
			var seen []uint64
			s.Ascend(func(a, b uint64) bool {
				seen = append(seen, a)
				return a != 3*stop
			})
			if uint64(len(seen)) != stop+1 || seen[len(seen)-1] != 3*stop {
				t.Fatalf("%d intervals, stop at %d: visited %d, last %d", n, stop, len(seen), seen[len(seen)-1])
			}
			for i, a := range seen {
				if a != 3*uint64(i) {
					t.Fatalf("visit %d: start %d", i, a)
				}
			}
		}
	}
}

// TestDecodedFullLeaves: a decoded set of a multiple of leafCap intervals has
// every leaf full, so every insertion splits or shares with a sibling,
// including at the front of the first leaf and the back of the last one.
// Each step is checked against the slice model.
func TestDecodedFullLeaves(t *testing.T) {
	var m model
	for i := range uint64(70 * leafCap) {
		m.add(10 + 4*i) // gaps of 3 leave room for non-merging inserts
	}
	var s Set
	if _, err := s.DecodeBinary(encodeModel(&m)); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, &s)
	last := m.vals[len(m.vals)-1]
	mid := m.vals[len(m.vals)/2]
	for _, v := range []uint64{0, 2, 1, 3, 5, last + 2, last + 4, mid + 2, mid + 1, 4, mid + 3, 9, 8} {
		if got, want := s.Add(v), m.add(v); got != want {
			t.Fatalf("Add(%d) = %v, want %v", v, got, want)
		}
		mustCheck(t, &s)
		if got, want := intervals(&s), m.intervals(); !slices.Equal(got, want) {
			t.Fatalf("after Add(%d): intervals differ", v)
		}
	}
}

// encodeModel spells out the canonical encoding of the model's set.
func encodeModel(m *model) []byte {
	iv := m.intervals()
	enc := binary.AppendUvarint(nil, uint64(len(iv)))
	for i, x := range iv {
		if i == 0 {
			enc = binary.AppendUvarint(enc, x[0])
		} else {
			enc = binary.AppendUvarint(enc, x[0]-iv[i-1][1]-2)
		}
		enc = binary.AppendUvarint(enc, x[1]-x[0])
	}
	return enc
}
