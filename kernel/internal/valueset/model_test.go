package valueset

import (
	"math"
	"slices"
)

// model is the obviously correct reference for Set: a sorted slice of the
// values present, with every query answered by brute force.
type model struct{ vals []uint64 }

func (m *model) contains(v uint64) bool {
	_, ok := slices.BinarySearch(m.vals, v)
	return ok
}

func (m *model) add(v uint64) bool {
	i, ok := slices.BinarySearch(m.vals, v)
	if ok {
		return false
	}
	m.vals = slices.Insert(m.vals, i, v)
	return true
}

func (m *model) remove(v uint64) bool {
	i, ok := slices.BinarySearch(m.vals, v)
	if !ok {
		return false
	}
	m.vals = slices.Delete(m.vals, i, i+1)
	return true
}

// firstAbsent steps upwards from lo; it terminates quickly because only
// len(vals) values can be skipped.
func (m *model) firstAbsent(lo, hi uint64) (uint64, bool) {
	for v := lo; v <= hi; v++ {
		if !m.contains(v) {
			return v, true
		}
		if v == math.MaxUint64 {
			break
		}
	}
	return 0, false
}

func (m *model) absentCount(lo, hi uint64) (uint64, bool) {
	if lo > hi {
		return 0, false
	}
	var present uint64
	for _, v := range m.vals {
		if lo <= v && v <= hi {
			present++
		}
	}
	if lo == 0 && hi == math.MaxUint64 && present == 0 {
		return 0, true
	}
	return hi - lo + 1 - present, false
}

// nthAbsent starts at lo+n and moves past each present value at or below the
// candidate, in ascending order.
func (m *model) nthAbsent(lo, hi, n uint64) (uint64, bool) {
	if lo > hi || lo+n < lo {
		return 0, false
	}
	v := lo + n
	for _, p := range m.vals {
		if p < lo {
			continue
		}
		if p > v {
			break
		}
		if v == math.MaxUint64 {
			return 0, false
		}
		v++
	}
	if v > hi {
		return 0, false
	}
	return v, true
}

// intervals groups the values into maximal runs.
func (m *model) intervals() [][2]uint64 {
	var iv [][2]uint64
	for _, v := range m.vals {
		if k := len(iv); k > 0 && iv[k-1][1]+1 == v && iv[k-1][1] != math.MaxUint64 {
			iv[k-1][1] = v
		} else {
			iv = append(iv, [2]uint64{v, v})
		}
	}
	return iv
}
