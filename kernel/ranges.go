package kernel

import (
	"fmt"
	"math"
	"sort"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel/internal/valueset"
)

// Exclusions, the static band and the value verbs of ranges (docs/api.md Part IV).
//
// A range's excluded values are a sorted list of disjoint intervals, never allocated:
// excluding a held value is refused, reserving an excluded one answers value_excluded.
// The static band is an interval whose values "any" takes only when none outside it is
// free (as Kubernetes keeps a static band of service IPs and node ports). A range with
// neither chooses exactly as ranges always did (chooseValue), so old journals replay to
// the same values.

// excludedAt returns the position of the excluded interval holding v, or -1.
func (r *valueRange) excludedAt(v uint64) int {
	i := sort.Search(len(r.excluded), func(i int) bool { return r.excluded[i].Last >= v })
	if i < len(r.excluded) && r.excluded[i].First <= v {
		return i
	}
	return -1
}

// excludedCount is how many values of [lo, hi] are excluded, saturating at 2^64-1.
func (r *valueRange) excludedCount(lo, hi uint64) uint64 {
	var n uint64
	i := sort.Search(len(r.excluded), func(i int) bool { return r.excluded[i].Last >= lo })
	for ; i < len(r.excluded) && r.excluded[i].First <= hi; i++ {
		d := min(r.excluded[i].Last, hi) - max(r.excluded[i].First, lo) + 1
		if d == 0 || n+d < n {
			return math.MaxUint64 // all of u64, or past it
		}
		n += d
	}
	return n
}

// setExcluded replaces r's exclusions and counts their values once, so the views and
// the free counts of a reserve never walk the intervals.
func (r *valueRange) setExcluded(ivs []Interval) {
	r.excluded = ivs
	r.nExcluded = 0
	r.nExcluded = r.excludedCount(r.first, r.last)
}

// excludedTotal is how many values of r are excluded.
func (r *valueRange) excludedTotal() uint64 { return r.nExcluded }

// plain reports whether r chooses as ranges always did: no exclusions, no band.
func (r *valueRange) plain() bool { return len(r.excluded) == 0 && !r.hasBand }

// windows are where "any" looks, in order: the parts of [first, last] outside the band,
// then the band.
func (r *valueRange) windows() [][2]uint64 {
	if !r.hasBand {
		return [][2]uint64{{r.first, r.last}}
	}
	var w [][2]uint64
	if r.band.First > r.first {
		w = append(w, [2]uint64{r.first, r.band.First - 1})
	}
	if r.band.Last < r.last {
		w = append(w, [2]uint64{r.band.Last + 1, r.last})
	}
	return append(w, [2]uint64{r.band.First, r.band.Last})
}

// chooseShaped picks a free value of a range with exclusions or a band: by strategy, in
// the windows' order, never an excluded value nor one an earlier member took.
func (k *Kernel) chooseShaped(r *valueRange, obj int32, picks []pick, lsn uint64, member int) (uint64, bool) {
	rng := valueset.NewRand(lsn*0x9E3779B97F4A7C15 ^ uint64(member))
	for _, w := range r.windows() {
		var v uint64
		var ok bool
		switch r.strategy {
		case StrategyRandom:
			v, ok = r.randomIn(w[0], w[1], obj, picks, &rng)
		case StrategyLeastRecentlyFreed:
			if v, ok = r.firstFree(&r.used, w[0], w[1], obj, picks, &r.allocated); !ok {
				r.freed.Each(func(x uint64) bool {
					if x < w[0] || x > w[1] || picked(picks, obj, x) || r.allocated.Contains(x) {
						return true
					}
					v, ok = x, true
					return false
				})
			}
		default:
			v, ok = r.firstFree(&r.allocated, w[0], w[1], obj, picks, nil)
		}
		if ok {
			return v, true
		}
	}
	return 0, false
}

// firstFree is the lowest value of [lo, hi] absent from s, not excluded and not picked.
// Each step passes an interval of s, an exclusion or a pick: bounded by their count.
// skip, when set, holds more values not to take (firstAbsentExcept).
func (r *valueRange) firstFree(s *valueset.Set, lo, hi uint64, obj int32, picks []pick, skip *valueset.Set) (uint64, bool) {
	for {
		v, ok := s.FirstAbsent(lo, hi)
		if !ok {
			return 0, false
		}
		next := v
		if i := r.excludedAt(v); i >= 0 {
			next = r.excluded[i].Last
		} else if !picked(picks, obj, v) && (skip == nil || !skip.Contains(v)) {
			return v, true
		}
		if next >= hi {
			return 0, false
		}
		lo = next + 1
	}
}

// freeIn is how many values of [lo, hi] are free: neither allocated nor excluded. A
// window of a shaped range is never all of u64 (a band or an exclusion takes part of it),
// but a range of all u64 with exclusions can be: full then means 2^64 - excluded.
func (r *valueRange) freeIn(lo, hi uint64) uint64 {
	n, full := r.allocated.AbsentCount(lo, hi)
	ex := r.excludedCount(lo, hi)
	if full {
		return math.MaxUint64 - ex + 1
	}
	return n - ex
}

// nthFree is the n-th (0-based) free value of [lo, hi]: the gaps between exclusions
// are walked, each counted by the allocated set.
func (r *valueRange) nthFree(lo, hi, n uint64) (uint64, bool) {
	i := sort.Search(len(r.excluded), func(i int) bool { return r.excluded[i].Last >= lo })
	for {
		gapHi := hi
		if i < len(r.excluded) && r.excluded[i].First <= hi {
			if r.excluded[i].First == 0 {
				gapHi = 0
			} else {
				gapHi = r.excluded[i].First - 1
			}
		}
		if i >= len(r.excluded) || r.excluded[i].First > lo {
			c, full := r.allocated.AbsentCount(lo, gapHi)
			if full || n < c {
				return r.allocated.NthAbsent(lo, gapHi, n)
			}
			n -= c
		}
		if i >= len(r.excluded) || r.excluded[i].First > hi || r.excluded[i].Last >= hi {
			return 0, false
		}
		lo = r.excluded[i].Last + 1
		i++
	}
}

// randomIn draws uniformly among the free values of [lo, hi] not yet picked.
func (r *valueRange) randomIn(lo, hi uint64, obj int32, picks []pick, rng *valueset.Rand) (uint64, bool) {
	var taken uint64
	for _, p := range picks {
		if p.kind == MemberRange && p.obj == obj && p.value >= lo && p.value <= hi {
			taken++
		}
	}
	free := r.freeIn(lo, hi)
	if free <= taken {
		return 0, false
	}
	n := rng.Below(free - taken)
	var skipped uint64
	for {
		v, ok := r.nthFree(lo, hi, n+skipped)
		if !ok {
			return 0, false
		}
		var below uint64
		for _, p := range picks {
			if p.kind == MemberRange && p.obj == obj && p.value >= lo && p.value <= v {
				below++
			}
		}
		if below == skipped {
			return v, true
		}
		skipped = below
	}
}

// excludeInterval adds [first, last] to r's exclusions, merging what it touches. The
// caller has checked that no value of it is allocated and that the count stays bounded.
func (k *Kernel) excludeInterval(r *valueRange, iv Interval) {
	// Freed values remembered for least_recently_freed are forgotten first: an excluded
	// value is never handed out, so neither used nor freed.
	if r.used.Len() > r.allocated.Len() {
		k.forgetFreed(r, func(v uint64) bool { return v >= iv.First && v <= iv.Last })
	}
	r.setExcluded(mergeInterval(r.excluded, iv))
}

// forgetFreed drops the freed values least_recently_freed remembers for which gone holds
// (values that can no longer be handed out: excluded, or outside a resized range).
func (k *Kernel) forgetFreed(r *valueRange, gone func(v uint64) bool) {
	if r.strategy != StrategyLeastRecentlyFreed {
		return
	}
	var drop []uint64
	r.freed.Each(func(v uint64) bool {
		if gone(v) {
			drop = append(drop, v)
		}
		return true
	})
	for _, v := range drop {
		r.freed.Remove(v)
		r.used.Remove(v)
		k.rangeValues--
	}
}

// mergeInterval inserts iv into sorted disjoint intervals, merging overlapping and
// adjacent ones.
func mergeInterval(ivs []Interval, iv Interval) []Interval {
	i := sort.Search(len(ivs), func(i int) bool { return ivs[i].Last >= iv.First || ivs[i].Last+1 == iv.First })
	j := i
	for j < len(ivs) && (ivs[j].First <= iv.Last || (iv.Last != math.MaxUint64 && ivs[j].First == iv.Last+1)) {
		iv.First, iv.Last = min(iv.First, ivs[j].First), max(iv.Last, ivs[j].Last)
		j++
	}
	out := append(ivs[:i:i], iv)
	return append(out, ivs[j:]...)
}

// cutInterval removes iv from sorted disjoint intervals.
func cutInterval(ivs []Interval, iv Interval) []Interval {
	var out []Interval
	for _, x := range ivs {
		if x.Last < iv.First || x.First > iv.Last {
			out = append(out, x)
			continue
		}
		if x.First < iv.First {
			out = append(out, Interval{x.First, iv.First - 1})
		}
		if x.Last > iv.Last {
			out = append(out, Interval{iv.Last + 1, x.Last})
		}
	}
	return out
}

// mergedCount is how many intervals ivs would hold with iv merged in.
func mergedCount(ivs []Interval, iv Interval) int {
	return len(mergeInterval(append([]Interval(nil), ivs...), iv))
}

// valueLease is the lsn of the live lease holding value v of range slot obj, or 0.
func (k *Kernel) valueLease(obj int32, v uint64) uint64 {
	if lsn, ok := k.ix.values[valueKey{obj, v}]; ok {
		return lsn
	}
	return 0
}

// LookupValue reads what value v of tenant's range is: free, held (with the lease's
// view) or excluded. Codes: ok, range_not_found, value_out_of_range. A value an undecided
// bundle or an ending part holds says so (Undecided): the read waits for the decision or
// the free rather than show it.
func (k *Kernel) LookupValue(tenant, rangeID string, v uint64, out *Output) (state string) {
	out.reset(k.lastLSN)
	idx, ok := k.rangeIdx[string(k.tenantKey(tenant, rangeID))]
	if !ok {
		out.Code = contract.CodeRangeNotFound
		return ""
	}
	r := &k.ranges[idx]
	if v < r.first || v > r.last {
		out.Code = contract.CodeValueOutOfRange
		return ""
	}
	if lsn := k.valueLease(idx, v); lsn != 0 {
		k.viewLease(k.leaseIdx[lsn], out)
		out.Undecided = k.waiting(lsn)
		return contract.ValueHeld
	}
	if r.excludedAt(v) >= 0 {
		return contract.ValueExcluded
	}
	return contract.ValueFree
}

// valueVerb runs range.release, range.revoke and range.reclaim: the lease holding the
// value, then what lease.release, lease.revoke and lease.reclaim do with it. A release is
// the holder's: holder_id must be the lease's holder (holder_mismatch: nobody frees
// another holder's value by naming it); the lease named, when one is, must be the lease
// holding the value and the epoch, when given, its current epoch (stale_epoch); a
// lease holding more than the value is released whole only when asked (whole_lease),
// since a hold is never released in part. Revoke and reclaim are the operator's.
func (k *Kernel) valueVerb(e Entry, out *Output) {
	c := e.Cmd
	idx, ok := k.rangeIdx[string(k.tenantKey(c.Tenant, c.ObjectID))]
	if !ok {
		out.Code = contract.CodeRangeNotFound
		return
	}
	r := &k.ranges[idx]
	if c.Value < r.first || c.Value > r.last {
		out.Code = contract.CodeValueOutOfRange
		return
	}
	lsn := k.valueLease(idx, c.Value)
	if lsn == 0 {
		out.Code = contract.CodeValueFree
		return
	}
	if k.awayFrom(lsn, out) {
		return
	}
	li := k.leaseIdx[lsn]
	l := &k.leases[li]
	v := byValue[c.Verb] // the lease verb this one does by value
	if v == contract.VerbRelease {
		if _, h := splitKey(k.holders[l.holder].key); h != c.HolderID {
			out.Code = contract.CodeHolderMismatch
			return
		}
	}
	// The fence of §4 by value: the lease named (LeaseLSN, when given) must be the one
	// holding the value now — a late call meant for an earlier lease of the value never
	// acts on the next — and the epoch, when given, its current one.
	if (c.LeaseLSN != 0 && c.LeaseLSN != lsn) || (c.Epoch != 0 && c.Epoch != l.epoch) {
		out.Code = contract.CodeStaleEpoch
		return
	}
	if out.Code = endableFrom(v, l.state); out.Code != contract.CodeOK {
		return
	}
	if v == contract.VerbRelease && len(l.members) > 1 && !c.WholeLease {
		out.Code = contract.CodeLeaseHasOtherMembers
		k.viewLease(li, out)
		return
	}
	k.endStep(v, li, e, out)
}

// LeaseVerbByValue is the lease verb a verb by value (range.release, range.revoke,
// range.reclaim) does to the lease holding the value; VerbInvalid for any other.
func LeaseVerbByValue(v Verb) Verb { return byValue[v] }

// byValue is the lease verb each by-value verb does to the lease holding the value.
var byValue = map[Verb]Verb{contract.VerbReleaseValue: contract.VerbRelease,
	contract.VerbRevokeValue: contract.VerbRevoke, contract.VerbReclaimValue: contract.VerbReclaim}

// checkShape verifies a range's exclusions and band: sorted, disjoint, not adjacent,
// inside the range, bounded, never allocated, never remembered as freed.
func (r *valueRange) checkShape() error {
	if n := r.excludedCount(r.first, r.last); n != r.nExcluded {
		return fmt.Errorf("range %q: %d excluded values counted, %d in the intervals", r.key, r.nExcluded, n)
	}
	if len(r.excluded) > contract.MaxExcluded {
		return fmt.Errorf("range %q: %d excluded intervals", r.key, len(r.excluded))
	}
	for i, iv := range r.excluded {
		if iv.First > iv.Last || iv.First < r.first || iv.Last > r.last {
			return fmt.Errorf("range %q: excluded [%d,%d] outside [%d,%d]", r.key, iv.First, iv.Last, r.first, r.last)
		}
		if i > 0 && r.excluded[i-1].Last+1 >= iv.First {
			return fmt.Errorf("range %q: excluded intervals out of order or touching at %d", r.key, iv.First)
		}
		if n, _ := r.allocated.AbsentCount(iv.First, iv.Last); !r.allocatedNone(iv, n) {
			return fmt.Errorf("range %q: an allocated value in excluded [%d,%d]", r.key, iv.First, iv.Last)
		}
	}
	var bad error
	r.freed.Each(func(v uint64) bool {
		if r.excludedAt(v) >= 0 {
			bad = fmt.Errorf("range %q: freed value %d is excluded", r.key, v)
		}
		return bad == nil
	})
	if bad != nil {
		return bad
	}
	if r.hasBand && (r.band.First > r.band.Last || r.band.First < r.first || r.band.Last > r.last) {
		return fmt.Errorf("range %q: band [%d,%d] outside [%d,%d]", r.key, r.band.First, r.band.Last, r.first, r.last)
	}
	return nil
}
