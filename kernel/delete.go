package kernel

import (
	"math"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel/internal/valueset"
)

// Deleting objects (docs/api.md §4 "Deleting objects"). A delete of an idle object takes
// its name out of the index at once — a get answers *_not_found, a create of the same id
// makes a new object — but its slot stays behind as a grave: ended leases in their
// history window name their members by slot (endedLease.obj), and their views must still
// show the deleted object's name. No live lease can name it (a delete needs the object
// idle), so the only readers left are the ended leases at the time of the delete; once
// the ended table's front has passed the last of them, the slot is free and the next
// create of that kind reuses it. Tables therefore stay bounded by their Config bounds,
// counting graves, whatever the rate of creates and deletes.

// graveKind is the table a grave's slot is in.
type graveKind uint8

const (
	graveResource graveKind = iota + 1
	gravePool
	graveRange
	graveRun // the run's slot and the slots of all its work shards
	graveKindEnd
)

// grave is a deleted object's slot waiting for the ended leases that may name it to
// retire.
type grave struct {
	// freeAfter is the ended table's sequence number at the delete: every lease that
	// can name the slot ended before it, so once the table's front sequence reaches
	// it the slot is unreferenced.
	freeAfter uint64
	idx       int32
	kind      graveKind
}

// freeSlots are the free slots of each object table, reused last freed first.
type freeSlots struct {
	res, pools, ranges, runs, works []int32
}

// takeSlot returns the slot a new record of a table of n slots goes in: a free one, else
// n (append). ok is false when the slots in use (n less the free ones) have reached the
// bound.
func takeSlot(free *[]int32, n, bound int) (idx int32, ok bool) {
	f := *free
	if n-len(f) >= bound {
		return 0, false // the slots in use: a bound lowered below them refuses new objects
	}
	if len(f) > 0 {
		*free = f[:len(f)-1]
		return f[len(f)-1], true
	}
	return int32(n), true
}

// reuse takes the last freed slot of rows, or appends a zero one: the tables without a
// bound of their own (a lease's records, holders and label sets count against others).
func reuse[T any](rows *[]T, free *[]int32) int32 {
	idx, _ := takeSlot(free, len(*rows), math.MaxInt)
	if int(idx) == len(*rows) {
		var zero T
		*rows = append(*rows, zero)
	}
	return idx
}

// put stores v at slot idx of table t, appending when idx is one past its end.
func put[T any](t *[]T, idx int32, v T) {
	if int(idx) == len(*t) {
		*t = append(*t, v)
		return
	}
	(*t)[idx] = v
}

// bury leaves a deleted object's slot as a grave.
func (k *Kernel) bury(kind graveKind, idx int32) {
	k.graves.push(grave{freeAfter: k.ended.q.next(), idx: idx, kind: kind})
}

// freeGraves frees at most budget graves whose readers have all retired. Each entry
// digs at most one grave, so a budget above one drains any backlog.
func (k *Kernel) freeGraves(budget int) {
	for i := 0; i < budget && k.graves.len() > 0; i++ {
		g := *k.graves.front()
		if g.freeAfter > k.ended.q.base {
			return
		}
		k.graves.pop()
		switch g.kind {
		case graveResource:
			k.res[g.idx] = resource{}
			k.free.res = append(k.free.res, g.idx)
		case gravePool:
			k.pools[g.idx] = pool{}
			k.free.pools = append(k.free.pools, g.idx)
		case graveRange:
			k.ranges[g.idx] = valueRange{}
			k.free.ranges = append(k.free.ranges, g.idx)
		case graveRun:
			for _, w := range k.runs[g.idx].work {
				k.works[w] = work{}
				k.free.works = append(k.free.works, w)
			}
			k.runs[g.idx] = run{}
			k.free.runs = append(k.free.runs, g.idx)
		}
	}
}

// graveOfDelete is the table each delete verb removes from.
var graveOfDelete = map[Verb]graveKind{contract.VerbDeleteResource: graveResource, contract.VerbDeletePool: gravePool,
	contract.VerbDeleteRange: graveRange, contract.VerbDeleteRun: graveRun}

// What a delete answers and emits, by table.
var (
	deleteNotFound = [graveKindEnd]Code{graveResource: contract.CodeResourceNotFound, gravePool: contract.CodePoolNotFound,
		graveRange: contract.CodeRangeNotFound, graveRun: contract.CodeRunNotFound}
	deleteEvent = [graveKindEnd]EventKind{graveResource: EventResourceDeleted, gravePool: EventPoolDeleted,
		graveRange: EventRangeDeleted, graveRun: EventRunDeleted}
)

// deleteObject deletes the idle resource, pool, range or run the command names; a held
// one answers object_in_use. Either way the reply shows the object as it was.
func (k *Kernel) deleteObject(c *Command, out *Output) {
	g := graveOfDelete[c.Verb]
	index := k.slotIndex(g)
	idx, ok := index[string(k.tenantKey(c.Tenant, c.ObjectID))]
	if !ok {
		out.Code = deleteNotFound[g]
		return
	}
	var key string
	var inUse bool
	switch g {
	case graveResource:
		k.viewResource(idx, out)
		key, inUse = k.res[idx].key, k.res[idx].state != ResourceAvailable
	case gravePool:
		k.viewPool(idx, out)
		p := &k.pools[idx]
		key, inUse = p.key, p.reserved+p.active != 0
	case graveRange:
		k.viewRange(idx, out)
		key, inUse = k.ranges[idx].key, k.ranges[idx].allocated.Len() != 0
	case graveRun:
		k.viewRun(idx, out)
		r := &k.runs[idx]
		key, inUse = r.key, !r.status.Terminal() || len(r.held) != 0
	}
	if inUse {
		out.Code = contract.CodeObjectInUse
		// Held only by what an undecided bundle or an ending part holds: whether it is
		// in use is theirs to decide, so the delete waits for it (Undecided), as a
		// reserve of an intent does.
		out.Undecided = k.usedOnlyByWaiting(g, idx)
		return
	}
	delete(index, key)
	k.ix.objects[objectKind(g)].Delete(objItem{key: key})
	switch g {
	case graveRange:
		// The remembered freed values count against MaxRangeValues; an ended lease's
		// view of the grave reads only its key.
		r := &k.ranges[idx]
		k.rangeValues -= r.freed.Len()
		r.used, r.freed = valueset.Set{}, valueset.FreedQueue{}
	case graveRun:
		// Its work shards go with it: out of the index and out of its queues.
		r := &k.runs[idx]
		for _, w := range r.work {
			delete(k.workIdx, k.works[w].key)
			k.works[w].readyPos = -1
		}
		r.ready, r.held = nil, nil
	}
	k.bury(g, idx)
	out.Event = deleteEvent[g]
}

// slotIndex is the name index of a table.
func (k *Kernel) slotIndex(g graveKind) map[string]int32 {
	switch g {
	case gravePool:
		return k.poolIdx
	case graveRange:
		return k.rangeIdx
	case graveRun:
		return k.runIdx
	}
	return k.resIdx
}

// liveRun reports whether run slot r holds a run that is not deleted.
func (k *Kernel) liveRun(r int32) bool {
	idx, ok := k.runIdx[k.runs[r].key]
	return ok && idx == r && k.runs[r].key != ""
}

// appendGraves encodes the graves in the order they free, each with how many ended
// leases must still retire before it (sequence numbers are internal), then each table's
// free slots in the order they are reused from.
func (k *Kernel) appendGraves(b []byte) []byte {
	b = appendUvarint(b, uint64(k.graves.len()))
	base := k.ended.q.base
	for i := 0; i < k.graves.len(); i++ {
		g := k.graves.nth(i)
		b = append(b, byte(g.kind))
		b = appendUvarint(b, uint64(g.idx))
		b = appendUvarint(b, g.freeAfter-min(g.freeAfter, base))
	}
	for _, f := range k.free.lists() {
		b = appendUvarint(b, uint64(len(*f)))
		for _, idx := range *f {
			b = appendUvarint(b, uint64(idx))
		}
	}
	return b
}

func (f *freeSlots) lists() [5]*[]int32 {
	return [5]*[]int32{&f.res, &f.pools, &f.ranges, &f.runs, &f.works}
}

// restoreGraves reads what appendGraves wrote and returns the set of graves (kind and
// slot) for the tables' restore; the invariants check them against the tables.
func (k *Kernel) restoreGraves(d *decoder) map[grave]bool {
	n := d.uvarint()
	if n > 4*maxTableBound || n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	buried := make(map[grave]bool, n)
	for i := uint64(0); i < n && d.err == nil; i++ {
		kind, idx, after := graveKind(d.byte()), d.uvarint(), d.uvarint()
		g := grave{kind: kind, idx: int32(idx)}
		if kind < graveResource || kind >= graveKindEnd || idx > math.MaxInt32 || buried[g] ||
			(i > 0 && after < k.graves.nth(int(i-1)).freeAfter) {
			d.fail()
			break
		}
		buried[g] = true
		g.freeAfter = after
		k.graves.push(g)
	}
	for _, f := range k.free.lists() {
		m := d.uvarint()
		if m > maxTableBound || m > uint64(len(d.b)) {
			d.fail()
			return nil
		}
		for j := uint64(0); j < m && d.err == nil; j++ {
			idx := d.uvarint()
			if idx >= maxTableBound {
				d.fail()
			}
			*f = append(*f, int32(idx))
		}
	}
	return buried
}

// graveOf is the grave kind of a member's table (work shards are buried with their run).
func graveOf(kind MemberKind) graveKind {
	switch kind {
	case MemberResource:
		return graveResource
	case MemberPool:
		return gravePool
	case MemberRange:
		return graveRange
	}
	return graveRun
}
