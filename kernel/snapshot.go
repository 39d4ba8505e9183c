package kernel

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
)

// snapshotFormat is the version byte of a snapshot payload.
const snapshotFormat = 2 // 2: operations remember the failing member of a reserve

// Snapshot encodes the whole shard state. The encoding is canonical: tables in creation
// order, leases by lsn, retention queues in retirement order, so the same state always
// gives the same bytes however it was reached (directly, or restored and replayed).
// It is a hand-written binary format rather than msgpack or protobuf because the kernel
// imports only the standard library and a canonical byte order matters more here than
// schema tooling; docs/design.md records the choice.
func (k *Kernel) Snapshot(b []byte) []byte {
	b = append(b, snapshotFormat)
	b = appendUvarint(b, uint64(k.cfg.Shard))
	b = appendUvarint(b, k.lastLSN)
	b = appendUvarint(b, k.lastSlot)
	b = appendUvarint(b, k.retired)

	b = appendUvarint(b, uint64(len(k.res)))
	for i := range k.res {
		r := &k.res[i]
		b = appendString(b, r.key)
		b = append(b, byte(r.state))
		b = appendUvarint(b, r.lease)
		b = appendUvarint(b, r.version)
	}
	b = appendUvarint(b, uint64(len(k.pools)))
	for i := range k.pools {
		p := &k.pools[i]
		b = appendString(b, p.key)
		b = appendUvarint(b, p.capacity)
		b = appendUvarint(b, p.reserved)
		b = appendUvarint(b, p.active)
	}
	b = appendUvarint(b, uint64(len(k.ranges)))
	for i := range k.ranges {
		r := &k.ranges[i]
		b = appendString(b, r.key)
		b = appendUvarint(b, r.first)
		b = appendUvarint(b, r.last)
		b = append(b, byte(r.strategy))
		b = r.allocated.AppendBinary(b)
		b = r.used.AppendBinary(b)
		b = r.freed.AppendBinary(b)
	}

	// Leases in lsn order: the slots' order depends on how the table was filled, and
	// the bytes must not. Walking the slots (lsn 0: free) and sorting (lsn, slot) pairs
	// avoids a map lookup per lease, which dominated snapshots of a full table.
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
		b = appendUvarint(b, l.releasedLSN)
		b = appendUvarint(b, l.retireAfter)
		b = appendUvarint(b, uint64(len(l.members)))
		for _, m := range l.members {
			b = append(b, byte(m.kind))
			b = appendUvarint(b, uint64(m.obj))
			b = appendUvarint(b, m.quantity)
			b = appendUvarint(b, m.value)
		}
	}
	b = appendUvarint(b, uint64(k.ended.len()))
	for i := 0; i < k.ended.len(); i++ {
		b = appendUvarint(b, *k.ended.at(i))
	}
	b = appendUvarint(b, uint64(k.ops.len()))
	for i := 0; i < k.ops.len(); i++ {
		op := k.ops.q.at(i)
		b = binary.LittleEndian.AppendUint64(b, op.key.hi)
		b = binary.LittleEndian.AppendUint64(b, op.key.lo)
		b = binary.LittleEndian.AppendUint64(b, op.hash)
		b = append(b, byte(op.verb), byte(op.code))
		b = appendUvarint(b, uint64(op.member+1))
		b = appendUvarint(b, op.lsn)
		b = appendUvarint(b, op.ref)
		b = appendUvarint(b, op.retireAfter)
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

// Restore rebuilds a shard from a snapshot taken with Snapshot. It checks every count
// against cfg's bounds and every reference against the tables, and returns an error
// rather than a state that breaks an invariant.
func Restore(cfg Config, b []byte) (*Kernel, error) {
	k, err := New(cfg)
	if err != nil {
		return nil, err
	}
	d := decoder{b: b}
	if d.byte() != snapshotFormat {
		return nil, badSnapshot("unknown format")
	}
	if shard := d.uvarint(); shard != uint64(cfg.Shard) {
		return nil, badSnapshot("snapshot of shard %d restored as shard %d", shard, cfg.Shard)
	}
	k.lastLSN, k.lastSlot, k.retired = d.uvarint(), d.uvarint(), d.uvarint()
	count := func(max int, what string) int {
		n := d.uvarint()
		if n > uint64(max) {
			d.fail()
			if err == nil {
				err = badSnapshot("%d %s exceed the bound %d", n, what, max)
			}
			return 0
		}
		return int(n)
	}
	for i, n := 0, count(cfg.MaxResources, "resources"); i < n && d.err == nil; i++ {
		r := resource{key: d.string(maxEncodedString), state: ResourceState(d.byte()), lease: d.uvarint(), version: d.uvarint()}
		k.resIdx[r.key] = int32(len(k.res))
		k.res = append(k.res, r)
	}
	for i, n := 0, count(cfg.MaxPools, "pools"); i < n && d.err == nil; i++ {
		p := pool{key: d.string(maxEncodedString), capacity: d.uvarint(), reserved: d.uvarint(), active: d.uvarint()}
		k.poolIdx[p.key] = int32(len(k.pools))
		k.pools = append(k.pools, p)
	}
	for i, n := 0, count(cfg.MaxRanges, "ranges"); i < n && d.err == nil; i++ {
		k.ranges = append(k.ranges, valueRange{key: d.string(maxEncodedString), first: d.uvarint(), last: d.uvarint(), strategy: Strategy(d.byte())})
		r := &k.ranges[len(k.ranges)-1]
		k.rangeIdx[r.key] = int32(len(k.ranges) - 1)
		for _, dec := range []func([]byte) ([]byte, error){r.allocated.DecodeBinary, r.used.DecodeBinary, r.freed.DecodeBinary} {
			if d.err != nil {
				break
			}
			rest, e := dec(d.b)
			if e != nil {
				d.fail()
				break
			}
			d.b = rest
		}
		k.rangeValues += r.freed.Len()
	}
	var prev uint64
	for i, n := 0, count(cfg.MaxLeases, "leases"); i < n && d.err == nil; i++ {
		lsn := d.uvarint()
		if lsn <= prev {
			d.fail()
			break
		}
		prev = lsn
		hkey := d.string(2*maxEncodedString + 1)
		idx := k.newLease(lsn, []byte(hkey))
		l := &k.leases[idx]
		l.state = LeaseState(d.byte())
		l.epoch, l.deadline, l.releasedLSN, l.retireAfter = d.uvarint(), d.uvarint(), d.uvarint(), d.uvarint()
		for j, m := 0, count(cfg.MaxBundle, "members"); j < m && d.err == nil; j++ {
			lm := leaseMember{kind: MemberKind(d.byte())}
			obj := d.uvarint()
			lm.quantity, lm.value = d.uvarint(), d.uvarint()
			if !k.validMemberRef(lm.kind, obj) {
				d.fail()
				break
			}
			lm.obj = int32(obj)
			l.members = append(l.members, lm)
		}
		k.members += len(l.members)
		if l.state.Live() {
			k.linkLive(idx)
		}
		if l.state == LeaseReserved {
			k.expiry.push(k, idx)
		}
	}
	for i, n := 0, count(cfg.MaxLeases, "ended leases"); i < n && d.err == nil; i++ {
		k.ended.push(d.uvarint())
	}
	for i, n := 0, count(cfg.MaxOperations, "operations"); i < n && d.err == nil; i++ {
		var op operation
		if len(d.b) < 24 {
			d.fail()
			break
		}
		op.key.hi = binary.LittleEndian.Uint64(d.b)
		op.key.lo = binary.LittleEndian.Uint64(d.b[8:])
		op.hash = binary.LittleEndian.Uint64(d.b[16:])
		d.b = d.b[24:]
		op.verb, op.code = Verb(d.byte()), Code(d.byte())
		member := d.uvarint()
		if member > uint64(cfg.MaxBundle) {
			d.fail()
			break
		}
		op.member = int16(member) - 1
		op.lsn, op.ref, op.retireAfter = d.uvarint(), d.uvarint(), d.uvarint()
		k.ops.push(op)
	}
	if err != nil {
		return nil, err
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, badSnapshot("truncated or trailing bytes")
	}
	if err := k.CheckInvariants(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	return k, nil
}

func (k *Kernel) validMemberRef(kind MemberKind, obj uint64) bool {
	switch kind {
	case MemberResource:
		return obj < uint64(len(k.res))
	case MemberPool:
		return obj < uint64(len(k.pools))
	case MemberRange:
		return obj < uint64(len(k.ranges))
	}
	return false
}
