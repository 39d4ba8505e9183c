package kernel

import (
	"strings"

	"github.com/google/btree"
)

// ixKind names a kind of entry of the kernel's ordered index (index). Its order is the
// index's first sort key, so each kind is one contiguous run of entries.
type ixKind uint8

const (
	ixResource ixKind = iota + 1 // key: "tenant\x00id"; val: the object's slot
	ixPool                       // the same, pools
	ixRange                      // the same, ranges
	ixRun                        // the same, runs
	ixHolder                     // key: "tenant\x00holder_id"; n: lease lsn (live leases)
	ixLabel                      // key: "tenant\x00key=value"; n: lease lsn (live leases)
	ixState                      // key: tenant; a: lease state; n: lease lsn (live leases)
	ixHolding                    // a: pool slot; n: lease lsn (live leases holding units of it)
	ixValue                      // a: range slot; n: value; val: lease lsn (allocated values)
)

// ixItem is one entry of the index. Entries order by kind, key, a, n: a listing or a
// lookup is a seek and an ascent, O(log n) plus what it returns.
type ixItem struct {
	key  string
	a    uint64
	n    uint64
	val  uint64
	kind ixKind
}

func ixLess(x, y ixItem) bool {
	switch {
	case x.kind != y.kind:
		return x.kind < y.kind
	case x.key != y.key:
		return x.key < y.key
	case x.a != y.a:
		return x.a < y.a
	}
	return x.n < y.n
}

// index is the shard's ordered index: objects by id (listings by prefix), live leases by
// holder, by label and by state, pools' holdings, and ranges' allocated values with the
// lease holding each (range.lookup). It is derived from the tables — rebuilt on Restore,
// never in a snapshot — and google/btree keeps it ordered: deterministic, O(log n) per
// change. Its memory is measured in docs/benchmarks.md.
type index struct {
	t *btree.BTreeG[ixItem]
}

func newIndex() index { return index{t: btree.NewG(32, ixLess)} }

func (ix index) put(it ixItem)    { ix.t.ReplaceOrInsert(it) }
func (ix index) remove(it ixItem) { ix.t.Delete(it) }
func (ix index) len() int         { return ix.t.Len() }

// get returns the entry with it's kind, key, a and n.
func (ix index) get(it ixItem) (ixItem, bool) { return ix.t.Get(it) }

// ascend calls fn for the entries of kind and key from (a, n) on, in order, until fn
// returns false or the key changes.
func (ix index) ascend(kind ixKind, key string, a, n uint64, fn func(ixItem) bool) {
	ix.t.AscendGreaterOrEqual(ixItem{kind: kind, key: key, a: a, n: n}, func(it ixItem) bool {
		if it.kind != kind || it.key != key {
			return false
		}
		return fn(it)
	})
}

// ascendPrefix calls fn for the entries of kind whose key starts with prefix, from key
// from on (exclusive when after), in key order, until fn returns false.
func (ix index) ascendPrefix(kind ixKind, prefix, from string, after bool, fn func(ixItem) bool) {
	start := ixItem{kind: kind, key: max(prefix, from)}
	ix.t.AscendGreaterOrEqual(start, func(it ixItem) bool {
		if it.kind != kind || !strings.HasPrefix(it.key, prefix) {
			return false
		}
		if after && it.key == from {
			return true
		}
		return fn(it)
	})
}
