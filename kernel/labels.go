package kernel

import (
	"fmt"
	"strings"

	"github.com/holdfast/holdfast/contract"
)

// labelSet interns one lease label set, "key=value\x00key=value..." sorted by key, for the
// leases that carry it (many leases share one: an owner's). It lives while a lease in the
// table refers to it.
type labelSet struct {
	key    string
	labels []Label // key parsed once; views share it, read-only
	refs   int32
}

// labelsKey is the canonical form of labels (sorted by key, unique: Validate checks).
func labelsKey(ls []Label) string {
	var b strings.Builder
	for i, l := range ls {
		if i > 0 {
			b.WriteByte(0)
		}
		b.WriteString(l.Key)
		b.WriteByte('=')
		b.WriteString(l.Value)
	}
	return b.String()
}

// parseLabelsKey is labelsKey's inverse.
func parseLabelsKey(s string) []Label {
	if s == "" {
		return nil
	}
	parts := strings.Split(s, "\x00")
	ls := make([]Label, len(parts))
	for i, p := range parts {
		k, v, _ := strings.Cut(p, "=")
		ls[i] = Label{Key: k, Value: v}
	}
	return ls
}

// internLabels returns the label set reference for ls: 0 for none, else index+1.
func (k *Kernel) internLabels(ls []Label) int32 {
	if len(ls) == 0 {
		return 0
	}
	key := labelsKey(ls)
	if idx, ok := k.labelIdx[key]; ok {
		k.labelSets[idx].refs++
		return idx + 1
	}
	idx := reuse(&k.labelSets, &k.labelFree)
	k.labelSets[idx] = labelSet{key: key, labels: parseLabelsKey(key), refs: 1}
	k.labelIdx[key] = idx
	return idx + 1
}

func (k *Kernel) releaseLabels(ref int32) {
	if ref == 0 {
		return
	}
	s := &k.labelSets[ref-1]
	s.refs--
	if s.refs > 0 {
		return
	}
	delete(k.labelIdx, s.key)
	*s = labelSet{}
	k.labelFree = append(k.labelFree, ref-1)
}

// labelsOf is a label set reference's labels, as a view shows them.
func (k *Kernel) labelsOf(ref int32) []Label {
	if ref == 0 {
		return nil
	}
	return k.labelSets[ref-1].labels
}

// labelEntries calls fn with "tenant\x00key=value" for each label of set ref.
func (k *Kernel) labelEntries(tenant string, ref int32, fn func(string)) {
	if ref == 0 {
		return
	}
	for _, p := range strings.Split(k.labelSets[ref-1].key, "\x00") {
		fn(tenant + "\x00" + p)
	}
}

// validateLabels checks a lease's labels: at most MaxLabels, valid keys and values,
// sorted by key without repeats (the canonical form the journal holds; the bridge sorts).
func validateLabels(field string, ls []Label) *Rejection {
	if len(ls) > contract.MaxLabels {
		return reject(contract.CodeInvalidRequest, "%s: at most %d labels", field, contract.MaxLabels)
	}
	for i, l := range ls {
		if !contract.ValidLabelKey(l.Key) {
			return reject(contract.CodeInvalidRequest, "%s: key %q: 1-%d characters of A-Z a-z 0-9 _ - . /, starting alphanumeric",
				field, l.Key, contract.MaxLabelKeyLen)
		}
		if !contract.ValidLabelValue(l.Value) {
			return reject(contract.CodeInvalidRequest, "%s.%s: 1-%d bytes of printable UTF-8 text, not starting or ending with a space",
				field, l.Key, contract.MaxLabelValueLen)
		}
		if i > 0 && ls[i-1].Key >= l.Key {
			return reject(contract.CodeInvalidRequest, "%s: keys sorted and unique (%q after %q)", field, l.Key, ls[i-1].Key)
		}
	}
	return nil
}

// indexLease enters a new live lease in the index: under its holder, under each label,
// in each pool it holds units of, at each range value it holds.
func (k *Kernel) indexLease(idx int32) {
	k.indexOwner(idx, true)
	k.indexMembers(idx, true)
}

// unindexLease removes a live lease from the index as it ends.
func (k *Kernel) unindexLease(idx int32) {
	k.indexOwner(idx, false)
	k.indexMembers(idx, false)
}

// indexOwner enters (add) or removes a lease under its holder and its labels: what lists
// it. A bundle's intents and a participant's part of a bundle are listed by nobody.
func (k *Kernel) indexOwner(idx int32, add bool) {
	l := &k.leases[idx]
	tenant, _ := splitKey(k.holders[l.holder].key)
	holder := pairItem{a: uint64(l.holder), lsn: l.lsn}
	if add {
		k.ix.holders.ReplaceOrInsert(holder)
	} else {
		k.ix.holders.Delete(holder)
	}
	k.labelEntries(tenant, l.labels, func(s string) {
		if add {
			k.ix.labels.ReplaceOrInsert(labelItem{key: s, lsn: l.lsn})
		} else {
			k.ix.labels.Delete(labelItem{key: s, lsn: l.lsn})
		}
		k.bulkEntry(l, s, add)
	})
}

// indexMembers enters (add) or removes a lease record's members: in each pool it holds
// units of, at each range value it holds.
func (k *Kernel) indexMembers(idx int32, add bool) {
	l := &k.leases[idx]
	for _, m := range l.members {
		switch {
		case m.kind == MemberPool && add:
			k.ix.holdings.ReplaceOrInsert(pairItem{a: uint64(m.obj), lsn: l.lsn})
		case m.kind == MemberPool:
			k.ix.holdings.Delete(pairItem{a: uint64(m.obj), lsn: l.lsn})
		case m.kind == MemberRange && add:
			k.ix.values[valueKey{m.obj, m.value}] = l.lsn
		case m.kind == MemberRange:
			delete(k.ix.values, valueKey{m.obj, m.value})
		}
	}
}

// indexBulk enters (add) or removes a live lease's entries in the bulk verbs' trees, as
// its current state makes them: under each label by state, and under each label by holder
// while its holder may release it. A state change removes them before and adds them after.
func (k *Kernel) indexBulk(idx int32, add bool) {
	l := &k.leases[idx]
	if l.labels == 0 {
		return
	}
	tenant, _ := splitKey(k.holders[l.holder].key)
	k.labelEntries(tenant, l.labels, func(s string) { k.bulkEntry(l, s, add) })
}

// bulkEntry enters or removes lease l's bulk entries under label entry s.
func (k *Kernel) bulkEntry(l *lease, s string, add bool) {
	byState := labelPairItem{key: s, a: uint64(l.state), lsn: l.lsn}
	byHolder := labelPairItem{key: s, a: uint64(l.holder), lsn: l.lsn}
	if !add {
		k.ix.labelStates.Delete(byState)
		k.ix.labelHolders.Delete(byHolder)
		return
	}
	k.ix.labelStates.ReplaceOrInsert(byState)
	if endableFrom(contract.VerbRelease, l.state) == contract.CodeOK {
		k.ix.labelHolders.ReplaceOrInsert(byHolder)
	}
}

// objectKind is the index table of a create or delete verb's table.
func objectKind(g graveKind) objKind {
	switch g {
	case graveResource:
		return objResource
	case gravePool:
		return objPool
	case graveRange:
		return objRange
	}
	return objRun
}

// checkIndex verifies the index against the tables: every live object and live lease
// has exactly its entries, and nothing else is there (the invariants run it).
func (k *Kernel) checkIndex() error {
	want := 0
	objects := func(kind objKind, n int, key func(int) string, live map[string]int32) error {
		for i := 0; i < n; i++ {
			if idx, ok := live[key(i)]; !ok || idx != int32(i) {
				continue // a free slot or a grave
			}
			want++
			if it, ok := k.ix.objects[kind].Get(objItem{key: key(i)}); !ok || it.slot != int32(i) {
				return fmt.Errorf("index: object %q (kind %d) missing or at another slot", key(i), kind)
			}
		}
		return nil
	}
	for _, err := range []error{
		objects(objResource, len(k.res), func(i int) string { return k.res[i].key }, k.resIdx),
		objects(objPool, len(k.pools), func(i int) string { return k.pools[i].key }, k.poolIdx),
		objects(objRange, len(k.ranges), func(i int) string { return k.ranges[i].key }, k.rangeIdx),
		objects(objRun, len(k.runs), func(i int) string { return k.runs[i].key }, k.runIdx),
	} {
		if err != nil {
			return err
		}
	}
	for i := range k.leases {
		l := &k.leases[i]
		if l.lsn == 0 {
			continue
		}
		tenant, _ := splitKey(k.holders[l.holder].key)
		if k.leaseLike(l.lsn) { // a bundle's intents and a participant's part: listed by nobody
			want++
			if !k.ix.holders.Has(pairItem{a: uint64(l.holder), lsn: l.lsn}) {
				return fmt.Errorf("index: lease %d missing under its holder", l.lsn)
			}
			n, err := k.checkLabelEntries(tenant, l)
			if err != nil {
				return err
			}
			want += n
		}
		for _, m := range l.members {
			switch m.kind {
			case MemberPool:
				want++
				if !k.ix.holdings.Has(pairItem{a: uint64(m.obj), lsn: l.lsn}) {
					return fmt.Errorf("index: lease %d missing among pool %d's holdings", l.lsn, m.obj)
				}
			case MemberRange:
				want++
				if lsn, ok := k.ix.values[valueKey{m.obj, m.value}]; !ok || lsn != l.lsn {
					return fmt.Errorf("index: value %d of range %d not under lease %d", m.value, m.obj, l.lsn)
				}
			}
		}
	}
	if got := k.ix.len(); got != want {
		return fmt.Errorf("index holds %d entries, the tables %d", got, want)
	}
	return nil
}

// checkLabelEntries verifies a live lease's entries under its labels — in the label
// tree, the bulk verbs' tree by state, and while releasable the one by holder — and
// returns how many there are.
func (k *Kernel) checkLabelEntries(tenant string, l *lease) (int, error) {
	var err error
	n := 0
	releasable := endableFrom(contract.VerbRelease, l.state) == contract.CodeOK
	k.labelEntries(tenant, l.labels, func(s string) {
		n += 2
		switch {
		case err != nil:
		case !k.ix.labels.Has(labelItem{key: s, lsn: l.lsn}):
			err = fmt.Errorf("index: lease %d missing under label %q", l.lsn, s)
		case !k.ix.labelStates.Has(labelPairItem{key: s, a: uint64(l.state), lsn: l.lsn}):
			err = fmt.Errorf("index: lease %d missing under label %q as %s", l.lsn, s, l.state)
		case releasable && !k.ix.labelHolders.Has(labelPairItem{key: s, a: uint64(l.holder), lsn: l.lsn}):
			err = fmt.Errorf("index: releasable lease %d missing under label %q and its holder", l.lsn, s)
		}
		if releasable {
			n++
		}
	})
	return n, err
}

// labelKeyOf is a label set reference's canonical string ("" for none).
func (k *Kernel) labelKeyOf(ref int32) string {
	if ref == 0 {
		return ""
	}
	return k.labelSets[ref-1].key
}

// restoreLabels reads a lease's labels from a snapshot (format 7 on) and interns them; a
// set the rules refuse fails the decoder.
func (k *Kernel) restoreLabels(d *decoder, format byte) int32 {
	if format < 7 {
		return 0
	}
	s := d.string(contract.MaxLabels * (contract.MaxLabelKeyLen + contract.MaxLabelValueLen + 2))
	if s == "" || d.err != nil {
		return 0
	}
	ls := parseLabelsKey(s)
	if validateLabels("labels", ls) != nil || labelsKey(ls) != s {
		d.fail()
		return 0
	}
	return k.internLabels(ls)
}

// rebuildIndex enters every live object and live lease in the index (Restore).
func (k *Kernel) rebuildIndex() {
	k.ix = newIndex()
	for kind, idx := range [objectKinds]map[string]int32{k.resIdx, k.poolIdx, k.rangeIdx, k.runIdx} {
		for key, slot := range idx {
			k.ix.objects[kind].ReplaceOrInsert(objItem{key: key, slot: slot})
		}
	}
	for i := range k.leases {
		if lsn := k.leases[i].lsn; lsn != 0 {
			if k.leaseLike(lsn) { // else a bundle's record: indexed by member only
				k.indexOwner(int32(i), true)
			}
			k.indexMembers(int32(i), true)
		}
	}
}

// checkLabels verifies the label sets' reference counts against the leases that name
// them, live and ended.
func (k *Kernel) checkLabels() error {
	refs := make([]int32, len(k.labelSets))
	for i := range k.leases {
		if l := &k.leases[i]; l.lsn != 0 && l.labels != 0 {
			if int(l.labels) > len(refs) {
				return fmt.Errorf("lease %d: label set %d of %d", l.lsn, l.labels, len(refs))
			}
			refs[l.labels-1]++
		}
	}
	for i := 0; i < k.ended.len(); i++ {
		lsn := k.ended.q.nth(i).lsn
		if ref, ok := k.endedLabels[lsn]; ok {
			if ref <= 0 || int(ref) > len(refs) {
				return fmt.Errorf("ended lease %d: label set %d of %d", lsn, ref, len(refs))
			}
			refs[ref-1]++
		}
	}
	n := 0
	for i := range k.labelSets {
		s := &k.labelSets[i]
		if s.refs != refs[i] {
			return fmt.Errorf("label set %q: %d references, %d leases", s.key, s.refs, refs[i])
		}
		if s.refs > 0 {
			n++
			if idx, ok := k.labelIdx[s.key]; !ok || idx != int32(i) {
				return fmt.Errorf("label set %q: not indexed", s.key)
			}
		}
	}
	if n != len(k.labelIdx) {
		return fmt.Errorf("%d label sets indexed, %d in use", len(k.labelIdx), n)
	}
	return nil
}
