package kernel

import (
	"strings"

	"github.com/google/btree"
)

// index is the shard's index, derived from the tables — rebuilt on Restore, never in a
// snapshot — for listings and lookups (docs/api.md Part IV): objects by id (listings by
// prefix), live leases by holder and by label, pools' holdings — each a google/btree of
// small fixed items, so a listing is a seek and an ascent, O(log n) plus what it returns
// — and the lease holding each allocated range value (range.lookup), a map: the range's
// own value set gives the order, so a reserve pays O(1) for it. Its memory is measured
// in docs/benchmarks.md.
type index struct {
	objects  [objectKinds]*btree.BTreeG[objItem] // resources, pools, ranges, runs
	holders  *btree.BTreeG[pairItem]             // (holder slot, lease lsn)
	holdings *btree.BTreeG[pairItem]             // (pool slot, lease lsn)
	labels   *btree.BTreeG[labelItem]            // ("tenant\x00key=value", lease lsn)
	// The bulk verbs' trees (bulk.go): under each label, live leases by state, and a
	// holder's releasable (reserved or active) ones, so that a step of lease.revoke_all or
	// lease.release_all meets only leases it acts on and every call makes progress.
	labelStates  *btree.BTreeG[labelPairItem] // ("tenant\x00key=value", state, lease lsn)
	labelHolders *btree.BTreeG[labelPairItem] // ("tenant\x00key=value", holder slot, lease lsn)
	// values maps an allocated value of a range to the lease holding it. Never iterated:
	// listings walk the range's allocated set in order and look each value up.
	values map[valueKey]uint64
}

// objKind is an object table of the index.
type objKind uint8

const (
	objResource objKind = iota
	objPool
	objRange
	objRun
	objectKinds
)

// objItem is an object by its "tenant\x00id" key (the table's own string: no copy).
type objItem struct {
	key  string
	slot int32
}

// pairItem is a lease under a holder or a pool slot.
type pairItem struct{ a, lsn uint64 }

// labelItem is a lease under one of its labels.
type labelItem struct {
	key string
	lsn uint64
}

// labelPairItem is a lease under one of its labels and a second key: its state, or its
// holder.
type labelPairItem struct {
	key string
	a   uint64
	lsn uint64
}

// valueKey is an allocated value of a range (by slot).
type valueKey struct {
	rng   int32
	value uint64
}

const btreeDegree = 32

func newIndex() index {
	var ix index
	for i := range ix.objects {
		ix.objects[i] = btree.NewG(btreeDegree, func(x, y objItem) bool { return x.key < y.key })
	}
	pairLess := func(x, y pairItem) bool { return x.a < y.a || (x.a == y.a && x.lsn < y.lsn) }
	ix.holders = btree.NewG(btreeDegree, pairLess)
	ix.holdings = btree.NewG(btreeDegree, pairLess)
	ix.labels = btree.NewG(btreeDegree, func(x, y labelItem) bool { return x.key < y.key || (x.key == y.key && x.lsn < y.lsn) })
	labelPairLess := func(x, y labelPairItem) bool {
		return x.key < y.key || (x.key == y.key && (x.a < y.a || (x.a == y.a && x.lsn < y.lsn)))
	}
	ix.labelStates = btree.NewG(btreeDegree, labelPairLess)
	ix.labelHolders = btree.NewG(btreeDegree, labelPairLess)
	ix.values = map[valueKey]uint64{}
	return ix
}

// len is the number of entries over all trees.
func (ix *index) len() int {
	n := ix.holders.Len() + ix.holdings.Len() + ix.labels.Len() + len(ix.values) +
		ix.labelStates.Len() + ix.labelHolders.Len()
	for _, t := range ix.objects {
		n += t.Len()
	}
	return n
}

// ascendObjects calls fn for the objects of kind whose keys start with prefix, from key
// from on (exclusive when after), in key order, until fn returns false.
func (ix *index) ascendObjects(kind objKind, prefix, from string, after bool, fn func(objItem) bool) {
	ix.objects[kind].AscendGreaterOrEqual(objItem{key: max(prefix, from)}, func(it objItem) bool {
		if !strings.HasPrefix(it.key, prefix) {
			return false
		}
		if after && it.key == from {
			return true
		}
		return fn(it)
	})
}

// ascendPairs calls fn for the leases under a in t from lsn from on, in lsn order.
func ascendPairs(t *btree.BTreeG[pairItem], a, from uint64, fn func(lsn uint64) bool) {
	t.AscendGreaterOrEqual(pairItem{a: a, lsn: from}, func(it pairItem) bool {
		return it.a == a && fn(it.lsn)
	})
}

// ascendLabel calls fn for the leases under label key from lsn from on, in lsn order.
func (ix *index) ascendLabel(key string, from uint64, fn func(lsn uint64) bool) {
	ix.labels.AscendGreaterOrEqual(labelItem{key: key, lsn: from}, func(it labelItem) bool {
		return it.key == key && fn(it.lsn)
	})
}

// ascendLabelPair calls fn for the leases under label key and second key a in t from lsn
// from on, in lsn order, until fn returns false.
func ascendLabelPair(t *btree.BTreeG[labelPairItem], key string, a, from uint64, fn func(lsn uint64) bool) {
	t.AscendGreaterOrEqual(labelPairItem{key: key, a: a, lsn: from}, func(it labelPairItem) bool {
		return it.key == key && it.a == a && fn(it.lsn)
	})
}

// ascendValues calls fn for range r's allocated values from value from on, in order,
// with the lease holding each.
func (k *Kernel) ascendValues(r int32, from uint64, fn func(value, lsn uint64) bool) {
	k.ranges[r].allocated.AscendFrom(from, func(a, b uint64) bool {
		for v := a; ; v++ {
			if !fn(v, k.ix.values[valueKey{r, v}]) {
				return false
			}
			if v == b {
				return true
			}
		}
	})
}
