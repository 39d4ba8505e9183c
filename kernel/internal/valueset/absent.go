package valueset

import "math/bits"

// This file answers questions about the complement of the set within a
// window [lo, hi]: these are the allocator's queries, since the set holds
// allocated values and the free ones are whatever is absent.

// below returns the number of set values strictly less than x. It is exact
// whenever the set is not full (a non-full set holds fewer than 2^64 values).
func (s *Set) below(x uint64) uint64 {
	if x == 0 {
		return 0
	}
	var r uint64
	id := s.root
	for range int(s.height) {
		n := &s.inners[id]
		// Children before the last one starting below x lie wholly below x.
		c := lastLE(n.key[:n.n], x-1)
		if c < 0 {
			return r // only at the root: every interval starts at or above x
		}
		for _, w := range n.count[:c] {
			r += w
		}
		id = n.child[c]
	}
	st, en, np := s.leafData(id)
	for j := range int(*np) {
		if st[j] >= x {
			break
		}
		if en[j] >= x {
			return r + (x - st[j])
		}
		r += en[j] - st[j] + 1
	}
	return r
}

// FirstAbsent returns the lowest value in [lo, hi] that is not in the set,
// or false if every value there is present (or lo > hi). This is the
// lowest_free strategy.
func (s *Set) FirstAbsent(lo, hi uint64) (uint64, bool) {
	if lo > hi {
		return 0, false
	}
	_, en, pos := s.locate(lo)
	if pos < 0 || en[pos] < lo {
		return lo, true
	}
	// Intervals are maximal, so end+1 is absent; end < hi rules out wrap.
	if end := en[pos]; end < hi {
		return end + 1, true
	}
	return 0, false
}

// AbsentCount returns how many values in [lo, hi] are not in the set. The
// only count that does not fit a uint64 is 2^64 (lo = 0, hi = MaxUint64 and
// the set empty); it is reported as n = 0, full = true. lo > hi yields 0.
func (s *Set) AbsentCount(lo, hi uint64) (n uint64, full bool) {
	if lo > hi || s.full() {
		return 0, false
	}
	present := s.below(hi) - s.below(lo)
	if s.Contains(hi) {
		present++
	}
	span := hi - lo // the window holds span+1 values
	if present == 0 && span == ^uint64(0) {
		return 0, true
	}
	return span - present + 1, false // present <= span+1, so no wrap
}

// NthAbsent returns the n-th (0-based, ascending) value in [lo, hi] that is
// not in the set, or false if there are at most n of them. Together with
// AbsentCount and Rand.Below it implements the random strategy.
func (s *Set) NthAbsent(lo, hi, n uint64) (uint64, bool) {
	if lo > hi || s.full() {
		return 0, false
	}
	// Number every absent value of [0, MaxUint64] by its rank among them;
	// the answer is the absent value of rank t.
	t, carry := bits.Add64(lo-s.below(lo), n, 0)
	if carry != 0 {
		return 0, false
	}
	// With P_j the values in intervals before interval j = [s_j, e_j],
	// s_j - P_j absent values lie below s_j; that is increasing in j. The
	// answer is t + P_{j+1} for the last j with s_j - P_j <= t (t if none),
	// and exists iff that sum does not pass 2^64. An inner node's key and
	// count give s_j - P_j for the first interval of each child, so each
	// level picks the last child whose first interval qualifies.
	var p uint64     // values in intervals left of the current node
	var after uint64 // P_{j+1} for the best j so far
	id := s.root
	for range int(s.height) {
		x := &s.inners[id]
		if x.key[0]-p > t {
			// Not even the first interval qualifies. Below the root the
			// parent chose this node for its first interval, so this only
			// happens at the root: the answer is t itself.
			return nthResult(t, 0, hi)
		}
		i, last := 0, int(x.n)-1
		for i < last && x.key[i+1]-(p+x.count[i]) <= t {
			p += x.count[i]
			i++
		}
		id = x.child[i]
	}
	st, en, np := s.leafData(id)
	for j := range int(*np) {
		if st[j]-p > t {
			break
		}
		p += en[j] - st[j] + 1
		after = p
	}
	return nthResult(t, after, hi)
}

// nthResult finishes NthAbsent: the absent value of rank t is t+after, if
// that neither passes 2^64 nor hi.
func nthResult(t, after, hi uint64) (uint64, bool) {
	v, carry := bits.Add64(t, after, 0)
	if carry != 0 || v > hi {
		return 0, false
	}
	return v, true
}

// RandomAbsent returns a value drawn uniformly from the absent values of
// [lo, hi] using r, or false if there is none. It covers the case where the
// window holds 2^64 free values, which Rand.Below cannot draw from.
func (s *Set) RandomAbsent(lo, hi uint64, r *Rand) (uint64, bool) {
	n, full := s.AbsentCount(lo, hi)
	if full {
		return r.Uint64(), true // every value of [0, MaxUint64] is free
	}
	if n == 0 {
		return 0, false
	}
	return s.NthAbsent(lo, hi, r.Below(n))
}
