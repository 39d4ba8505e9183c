package kernel

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/holdfast/holdfast/contract"
)

// snapshotFormat is the version byte of a snapshot payload.
// 2: operations remember the failing member of a reserve; 3: ended leases in their own
// table, outcomes in two queues with the reply's epoch and without verb or object; 4: runs
// and work shards after the ranges; 5: deleted objects — graves and free slots before the
// tables, a free slot as an empty key (name, for a work shard), each run's list of work
// shards (slots are reused, so creation order is no longer slot order); 6: the shape in
// force (kernel.Shape) after the header, so a restore needs no setting from its caller.
// Restore still reads 2 to 5, under the shape its caller gives. 7: each lease's labels
// after its members, and the allocator state (pools' consumed units; ranges' exclusions,
// static band and format); outcomes carry the lease a value verb named. 8: each work
// shard's endedBy (the claim that ended it) after its reason; each lease's created slot
// (allocated_at) after its labels, live and ended. 9: the bundle records (bundles across
// shards) before the live leases, which they tell apart from the leases a client names.
// 10: each bundle record's endings flags (endings in two rounds). 11: the flags' bit 4,
// a bundle that commits in parallel. 12: the flags' bit 5, a lease of an import across
// shards, its group's position after the flags.
const snapshotFormat = snapshotFormatGroup

// snapshotFormatWithoutBundles is what a shard with no bundle record writes: format 8,
// byte for byte what format 9 is without its bundle table, so that a node of the previous
// build can still load a shard a newer node snapshotted while a cluster is upgraded node
// by node (docs/operations.md "Upgrades"), unless the shard has begun using what only this
// build reads.
const snapshotFormatWithoutBundles = 8

// snapshotFormatEndings is 9 with each bundle record's endings flags (ending.go) after it;
// a shard whose records have none writes 9, byte for byte.
const snapshotFormatEndings = 10

// snapshotFormatParallel is 10 whose flags may say a bundle commits in parallel; a shard
// with no such record writes 10 (or less), byte for byte.
const snapshotFormatParallel = 11

// snapshotFormatGroup is 11 whose flags may say a record is a lease of an import across
// shards (its group after them); a shard with no such record writes 11 (or less).
const snapshotFormatGroup = 12

// Snapshot encodes the whole shard state. The encoding is canonical: tables by slot (which
// the ended leases refer to), leases by lsn, retention queues in retirement order, so the same state always
// gives the same bytes however it was reached (directly, or restored and replayed).
// It is a hand-written binary format rather than msgpack or protobuf because the kernel
// imports only the standard library and a canonical byte order matters more here than
// schema tooling; docs/design.md records the choice.
func (k *Kernel) Snapshot(b []byte) []byte {
	return k.Capture(nil).AppendTo(b)
}

// SnapshotCapture is a snapshot taken at one lsn whose bulk is encoded later, possibly on
// another goroutine while the shard goes on (Kernel's single-owner rule otherwise holds).
// The tables that change in place — objects, live leases, the holder names — are encoded
// or copied by Capture; the retention queues, which are append-only with records never
// written after their push (fifo.go), are held as frozen views. At a shard's full default
// bounds this turns a ~140 ms stall of its writes into one of a few ms.
type SnapshotCapture struct {
	head    []byte
	holders []string          // holder names by index, as they were at the capture
	labels  map[uint64]string // ended leases' labels by lsn, as they were at the capture
	ended   fifoView[endedLease]
	extra   fifoView[endedMember]
	ops     [2]fifoView[outcome]
}

// Capture takes a snapshot of the shard at its last applied entry; head, if not nil, is a
// buffer for the part encoded now.
func (k *Kernel) Capture(head []byte) *SnapshotCapture {
	c := &SnapshotCapture{ended: k.ended.q.freeze(), extra: k.ended.extra.freeze(),
		ops: [2]fifoView[outcome]{k.ops.q[0].freeze(), k.ops.q[1].freeze()}}
	c.holders = make([]string, len(k.holders))
	for i := range k.holders {
		c.holders[i] = k.holders[i].key
	}
	if len(k.endedLabels) > 0 {
		c.labels = make(map[uint64]string, len(k.endedLabels))
		for lsn, ref := range k.endedLabels {
			c.labels[lsn] = k.labelSets[ref-1].key
		}
	}
	format := byte(snapshotFormat)
	switch flags := k.bundleFlags(); {
	case len(k.bundles) == 0:
		format = snapshotFormatWithoutBundles
	case flags == 0:
		format = snapshotFormatEndings - 1
	case flags&parallelFlag == 0:
		format = snapshotFormatEndings
	case flags&groupFlag == 0:
		format = snapshotFormatParallel
	}
	b := head[:0]
	b = append(b, format)
	b = appendUvarint(b, uint64(k.shard))
	b = appendUvarint(b, k.lastLSN)
	b = appendUvarint(b, k.lastSlot)
	b = appendUvarint(b, k.retired)
	b = appendShape(b, &k.shape)
	b = appendUvarint(b, k.skipRun)
	b = k.appendGraves(b)

	b = k.appendResources(b)
	b = k.appendPools(b)
	b = k.appendRanges(b)
	b = k.appendWork(b)
	if format >= 9 {
		b = k.appendBundles(b, format >= snapshotFormatEndings)
	}
	b = k.appendLeases(b)
	c.head = b
	return c
}

// The tables, in the order Capture writes them and restorer reads them.

// appendSlots writes a table of keyed slots: their count, then each one's key — "" for a
// free slot — and, for a slot in use, what row writes of it.
func appendSlots[T any](b []byte, rows []T, key func(*T) string, row func([]byte, *T) []byte) []byte {
	b = appendUvarint(b, uint64(len(rows)))
	for i := range rows {
		r := &rows[i]
		if b = appendString(b, key(r)); key(r) != "" {
			b = row(b, r)
		}
	}
	return b
}

func (k *Kernel) appendResources(b []byte) []byte {
	return appendSlots(b, k.res, func(r *resource) string { return r.key }, func(b []byte, r *resource) []byte {
		b = append(b, byte(r.state))
		b = appendUvarint(b, r.lease)
		return appendUvarint(b, r.version)
	})
}

func (k *Kernel) appendPools(b []byte) []byte {
	return appendSlots(b, k.pools, func(p *pool) string { return p.key }, func(b []byte, p *pool) []byte {
		b = appendUvarint(b, p.capacity)
		b = appendUvarint(b, p.reserved)
		b = appendUvarint(b, p.active)
		return appendUvarint(b, p.consumed)
	})
}

func (k *Kernel) appendRanges(b []byte) []byte {
	return appendSlots(b, k.ranges, func(r *valueRange) string { return r.key }, func(b []byte, r *valueRange) []byte {
		b = appendUvarint(b, r.first)
		b = appendUvarint(b, r.last)
		b = append(b, byte(r.strategy))
		b = r.allocated.AppendBinary(b)
		b = r.used.AppendBinary(b)
		b = r.freed.AppendBinary(b)
		b = appendUvarint(b, uint64(len(r.excluded)))
		for _, iv := range r.excluded {
			b = appendUvarint(appendUvarint(b, iv.First), iv.Last)
		}
		b = appendBool(b, r.hasBand)
		b = appendUvarint(appendUvarint(b, r.band.First), r.band.Last)
		return appendString(b, r.format)
	})
}

// appendLeases writes the live leases in lsn order: the slots' order depends on how the
// table was filled, and the bytes must not. Walking the slots (lsn 0: free) and sorting
// (lsn, slot) pairs avoids a map lookup per lease, which dominated snapshots of a full
// table.
func (k *Kernel) appendLeases(b []byte) []byte {
	live := make([]leaseSlot, 0, len(k.leaseIdx))
	for i := range k.leases {
		if lsn := k.leases[i].lsn; lsn != 0 {
			live = append(live, leaseSlot{lsn: lsn, slot: int32(i)})
		}
	}
	slices.SortFunc(live, func(a, b leaseSlot) int { return cmp.Compare(a.lsn, b.lsn) })
	b = appendUvarint(b, uint64(len(live)))
	for _, ls := range live {
		l := &k.leases[ls.slot]
		b = appendUvarint(b, l.lsn)
		b = appendString(b, k.holders[l.holder].key)
		b = append(b, byte(l.state))
		b = appendUvarint(b, l.epoch)
		b = appendUvarint(b, l.deadline)
		b = appendUvarint(b, l.keepalive)
		b = appendMembers(b, len(l.members), func(i int) leaseMember { return l.members[i] })
		b = appendString(b, k.labelKeyOf(l.labels))
		b = appendUvarint(b, l.created)
	}
	return b
}

// Size is about how many bytes AppendTo adds: a buffer of it grows at most once.
func (c *SnapshotCapture) Size() int {
	return len(c.head) + 56*c.ended.len() + 44*(c.ops[0].len()+c.ops[1].len()) + 32
}

// AppendTo appends the whole snapshot to b.
func (c *SnapshotCapture) AppendTo(b []byte) []byte {
	b = append(b, c.head...)

	// Ended leases in the order they ended: the order they retire in.
	b = appendUvarint(b, uint64(c.ended.len()))
	for i := 0; i < c.ended.len(); i++ {
		e := c.ended.nth(i)
		b = appendUvarint(b, e.lsn)
		b = appendString(b, c.holders[e.holder])
		b = append(b, byte(e.state))
		b = appendUvarint(b, uint64(e.epoch))
		b = appendUvarint(b, e.deadline)
		b = appendUvarint(b, e.releasedLSN)
		b = appendUvarint(b, e.retireAfter)
		b = appendMembers(b, int(e.members), func(j int) leaseMember { return e.member(j, &c.extra) })
		b = appendString(b, c.labels[e.lsn])
		b = appendUvarint(b, e.created)
	}
	// Both counts first, so a restore sizes the index once.
	b = appendUvarint(b, uint64(c.ops[0].len()))
	b = appendUvarint(b, uint64(c.ops[1].len()))
	for qi := range c.ops {
		q := &c.ops[qi]
		for i := 0; i < q.len(); i++ {
			op := q.nth(i)
			b = binary.LittleEndian.AppendUint64(b, op.keyHi)
			b = binary.LittleEndian.AppendUint32(b, op.keyLo)
			b = binary.LittleEndian.AppendUint64(b, op.hash)
			b = append(b, byte(op.code))
			b = appendUvarint(b, uint64(op.member+1))
			b = appendUvarint(b, uint64(op.epoch))
			b = appendUvarint(b, op.lsn)
			b = appendUvarint(b, op.retireAfter)
			b = appendUvarint(b, op.ref)
		}
	}
	return b
}

func appendMembers(b []byte, n int, member func(int) leaseMember) []byte {
	b = appendUvarint(b, uint64(n))
	for i := 0; i < n; i++ {
		m := member(i)
		b = append(b, byte(m.kind))
		b = appendUvarint(b, uint64(m.obj))
		b = appendUvarint(b, m.quantity)
		b = appendUvarint(b, m.value)
	}
	return b
}

type leaseSlot struct {
	lsn  uint64
	slot int32
}

// ErrBadSnapshot is returned for bytes that are not a consistent snapshot.
var ErrBadSnapshot = errors.New("kernel: malformed snapshot")

func badSnapshot(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrBadSnapshot, fmt.Sprintf(format, args...))
}

// validMemberRef reports whether a member names a slot in use: a live object or a grave,
// never a free slot.
func (k *Kernel) validMemberRef(kind MemberKind, obj uint64) bool {
	switch kind {
	case MemberResource:
		return obj < uint64(len(k.res)) && k.res[obj].key != ""
	case MemberPool:
		return obj < uint64(len(k.pools)) && k.pools[obj].key != ""
	case MemberRange:
		return obj < uint64(len(k.ranges)) && k.ranges[obj].key != ""
	case MemberWork:
		return obj < uint64(len(k.works)) && k.works[obj].key != ""
	}
	return false
}

// appendWork encodes the runs, each with its work shards in creation order, then the work
// shards by slot. A work shard's children are not stored: they are in creation order, so
// restore rebuilds them from the runs' lists and each work shard's parent.
func (k *Kernel) appendWork(b []byte) []byte {
	b = appendSlots(b, k.runs, func(r *run) string { return r.key }, func(b []byte, r *run) []byte {
		b = append(b, byte(r.status))
		b = appendString(b, r.reason)
		b = appendUvarint(b, uint64(len(r.work)))
		for _, w := range r.work {
			b = appendUvarint(b, uint64(w))
		}
		return b
	})
	b = appendUvarint(b, uint64(len(k.works)))
	for i := range k.works {
		w := &k.works[i]
		b = appendString(b, w.name)
		if w.key == "" {
			continue
		}
		b = appendUvarint(b, uint64(w.run))
		b = appendString(b, w.start)
		b = appendString(b, w.end)
		b = appendString(b, w.metadata)
		b = append(b, byte(w.status))
		b = appendUvarint(b, w.lease)
		b = appendUvarint(b, w.claims)
		b = appendBool(b, w.cursor.set)
		b = appendString(b, w.cursor.key)
		b = appendString(b, w.cursor.token)
		b = appendUvarint(b, uint64(w.parent+1))
		b = appendUvarint(b, uint64(w.splits))
		b = appendString(b, w.reason)
		b = appendUvarint(b, w.endedBy)
	}
	return b
}

// restoreWork reads what appendWork wrote, checking counts against the bounds and every
// reference against the tables (the invariants check the rest). Format 4 had no free
// slots and no run lists: its slots were in creation order.
func (k *Kernel) restoreWork(d *decoder, format byte, buried map[grave]bool) error {
	lists, err := k.restoreRuns(d, format, buried)
	if err != nil {
		return err
	}
	n := d.uvarint()
	if n > maxTableBound || n > uint64(len(d.b)) {
		return badSnapshot("%d work shards: more than the snapshot holds", n)
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		if !k.restoreWorkShard(d, format, n) {
			break
		}
	}
	if format >= 5 && d.err == nil {
		k.linkWork(d, lists)
	}
	return nil
}

// restoreRuns reads the runs, and from format 5 on each run's list of work shards.
func (k *Kernel) restoreRuns(d *decoder, format byte, buried map[grave]bool) ([][]int32, error) {
	n := d.uvarint()
	if n > maxTableBound || n > uint64(len(d.b)) {
		return nil, badSnapshot("%d runs: more than the snapshot holds", n)
	}
	var lists [][]int32 // format 5: each run's work shards
	for i := uint64(0); i < n && d.err == nil; i++ {
		r := run{key: d.string(2*maxEncodedString + 1)}
		if format >= 5 && r.key == "" {
			k.runs = append(k.runs, r)
			lists = append(lists, nil)
			continue
		}
		r.status, r.reason = RunStatus(d.byte()), d.string(maxEncodedString)
		if format >= 5 {
			m := d.uvarint()
			if m > maxTableBound || m > uint64(len(d.b)) {
				d.fail()
				break
			}
			list := make([]int32, 0, m)
			for j := uint64(0); j < m && d.err == nil; j++ {
				w := d.uvarint()
				if w >= maxTableBound {
					d.fail()
				}
				list = append(list, int32(w))
			}
			lists = append(lists, list)
		}
		if r.status < RunActive || r.status > RunCancelled {
			d.fail()
			break
		}
		if !buried[grave{kind: graveRun, idx: int32(i)}] {
			if _, dup := k.runIdx[r.key]; dup {
				d.fail()
				break
			}
			k.runIdx[r.key] = int32(i)
		}
		k.runs = append(k.runs, r)
	}
	return lists, nil
}

// restoreWorkShard reads one work shard of n (a free slot from format 5 on), checking its
// run and parent; false when the bytes are not a work shard.
func (k *Kernel) restoreWorkShard(d *decoder, format byte, n uint64) bool {
	w := work{name: d.string(maxEncodedString), readyPos: -1, heldPos: -1}
	if format >= 5 && w.name == "" {
		k.works = append(k.works, w) // a free slot
		return true
	}
	r := d.uvarint()
	w.start, w.end, w.metadata = d.string(maxEncodedString), d.string(maxEncodedString), d.string(maxEncodedBlob)
	w.status = WorkStatus(d.byte())
	w.lease, w.claims = d.uvarint(), d.uvarint()
	w.cursor = cursor{set: d.bool(), key: d.string(maxEncodedString), token: d.string(maxEncodedBlob)}
	parent, splits := d.uvarint(), d.uvarint()
	w.reason = d.string(maxEncodedString)
	if format >= 8 {
		w.endedBy = d.uvarint()
	}
	idx := int32(len(k.works))
	if r >= uint64(len(k.runs)) || k.runs[r].key == "" || parent > n || (format < 5 && parent > uint64(idx)) ||
		splits > 1<<31 || w.status < WorkActive || w.status > WorkParked {
		d.fail()
		return false
	}
	w.run, w.parent, w.splits = int32(r), int32(parent)-1, uint32(splits)
	t, runID := splitKey(k.runs[w.run].key)
	w.key = t + "\x00" + contract.WorkID(runID, w.name)
	if k.liveRun(w.run) {
		if _, dup := k.workIdx[w.key]; dup {
			d.fail()
			return false
		}
		k.workIdx[w.key] = idx
	}
	k.works = append(k.works, w)
	if format < 5 {
		k.runs[w.run].work = append(k.runs[w.run].work, idx) // queues: rebuildWorkQueues, once leases are back
		if w.parent >= 0 {
			k.works[w.parent].children = append(k.works[w.parent].children, idx)
		}
	}
	return true
}

// linkWork gives each run its work shards and each work shard its children, in creation
// order, from the runs' lists: every work shard in use is in its own run's list once,
// after its parent.
func (k *Kernel) linkWork(d *decoder, lists [][]int32) {
	listed := make([]bool, len(k.works))
	inUse := 0
	for i := range k.works {
		if k.works[i].key != "" {
			inUse++
		}
	}
	for r, list := range lists {
		for _, w := range list {
			if int(w) >= len(k.works) || listed[w] || k.works[w].key == "" || k.works[w].run != int32(r) {
				d.fail()
				return
			}
			if p := k.works[w].parent; p >= 0 {
				if int(p) >= len(k.works) || !listed[p] || k.works[p].run != int32(r) {
					d.fail()
					return
				}
				k.works[p].children = append(k.works[p].children, w)
			}
			listed[w] = true
			inUse--
		}
		k.runs[r].work = list
	}
	if inUse != 0 {
		d.fail()
	}
}
