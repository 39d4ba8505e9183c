package kernel

import (
	"encoding/binary"
	"fmt"

	"github.com/holdfast/holdfast/contract"
)

// Restore rebuilds a shard from a snapshot taken with Snapshot. The shape in force is the
// snapshot's own (cfg.Shape only for a format before 6, which did not carry it); counts
// are checked against what the bytes can hold, since a bound lowered after a table filled
// leaves the table above it, and every reference against the tables. It returns an error
// rather than a state that breaks an invariant. It reads the tables in the order Capture
// writes them, one method of restorer each.
func Restore(cfg Config, b []byte) (*Kernel, error) {
	k, err := New(cfg)
	if err != nil {
		return nil, err
	}
	r := &restorer{k: k, d: decoder{b: b}}
	if err := r.header(); err != nil {
		return nil, err
	}
	r.resources()
	r.pools()
	r.ranges()
	if r.format >= 4 && r.d.err == nil {
		if e := k.restoreWork(&r.d, r.format, r.buried); e != nil && r.err == nil {
			r.err = e
		}
	}
	if r.format >= 9 {
		r.bundles()
	}
	r.leases()
	r.endedLeases()
	r.outcomes()
	if r.err != nil {
		return nil, r.err
	}
	if r.d.err != nil || len(r.d.b) != 0 {
		return nil, badSnapshot("truncated or trailing bytes")
	}
	k.rebuildWorkQueues()
	k.rebuildIndex()
	k.raiseCeilings()
	// Restore built the indexes itself (refusing duplicate lease ids on the way), so it
	// checks every record and table against the others but not each index entry again —
	// except the retry cache's: which record of a key is the newest, and that every older
	// one is past its window, is a property of the records, not of building the index
	// (a fuzzed snapshot with two live outcomes of one key was accepted without it).
	if err := k.checkInvariants(false); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	if err := k.checkRetryCache(true); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	return k, nil
}

// restorer reads one snapshot into k: the decoder, the snapshot's format, the graves, and
// the first error found beside the decoder's.
type restorer struct {
	k      *Kernel
	d      decoder
	format byte
	buried map[grave]bool // (kind, idx) of every grave, freeAfter zero
	err    error
	// Format 2 kept ended leases among the live ones, then their order of ending.
	v2ended   map[uint64]endedLease
	v2members map[uint64][]leaseMember
}

// header reads the format, the shard, the positions, the shape (format 6 on) and the
// graves (format 5 on).
func (r *restorer) header() error {
	k, d := r.k, &r.d
	r.format = d.byte()
	if r.format > snapshotFormat {
		return fmt.Errorf("%w: snapshot format %d, and this build reads formats 2 to %d", ErrNewerFormat, r.format, snapshotFormat)
	}
	if r.format < 2 {
		return badSnapshot("unknown format %d", r.format)
	}
	if shard := d.uvarint(); shard != uint64(k.shard) {
		return badSnapshot("snapshot of shard %d restored as shard %d", shard, k.shard)
	}
	k.lastLSN, k.lastSlot, k.retired = d.uvarint(), d.uvarint(), d.uvarint()
	if r.format >= 6 {
		s := d.shape()
		if e := s.Validate(); e != nil && d.err == nil {
			return badSnapshot("shape: %v", e)
		}
		k.shape, k.configured = s, true
	}
	if r.format >= 7 {
		k.skipRun = d.uvarint()
	}
	if r.format >= 5 {
		r.buried = k.restoreGraves(d)
	}
	return nil
}

// count reads a table's length. Every record takes at least a byte: a count beyond the
// bytes left is corrupt, and nothing is sized from it.
func (r *restorer) count(what string) int {
	n := r.d.uvarint()
	if n > maxTableBound || n > uint64(len(r.d.b)) {
		r.d.fail()
		if r.err == nil {
			r.err = badSnapshot("%d %s: more than the snapshot holds", n, what)
		}
		return 0
	}
	return int(n)
}

// free reports whether a slot's key marks it free (format 5 on).
func (r *restorer) free(key string) bool { return r.format >= 5 && key == "" }

// isBuried reports whether slot idx of a table is a grave: a live object's key goes in
// its index, a grave's does not (the invariants check the one against the other).
func (r *restorer) isBuried(kind graveKind, idx int) bool {
	return r.buried[grave{kind: kind, idx: int32(idx)}]
}

func (r *restorer) resources() {
	k, d := r.k, &r.d
	for i, n := 0, r.count("resources"); i < n && d.err == nil; i++ {
		res := resource{key: d.string(maxEncodedString)}
		if !r.free(res.key) {
			res.state, res.lease, res.version = ResourceState(d.byte()), d.uvarint(), d.uvarint()
			if !r.isBuried(graveResource, i) {
				k.resIdx[res.key] = int32(i)
			}
		}
		k.res = append(k.res, res)
	}
}

func (r *restorer) pools() {
	k, d := r.k, &r.d
	for i, n := 0, r.count("pools"); i < n && d.err == nil; i++ {
		p := pool{key: d.string(maxEncodedString)}
		if !r.free(p.key) {
			p.capacity, p.reserved, p.active = d.uvarint(), d.uvarint(), d.uvarint()
			if r.format >= 7 {
				p.consumed = d.uvarint()
			}
			if !r.isBuried(gravePool, i) {
				k.poolIdx[p.key] = int32(i)
			}
		}
		k.pools = append(k.pools, p)
	}
}

func (r *restorer) ranges() {
	k, d := r.k, &r.d
	for i, n := 0, r.count("ranges"); i < n && d.err == nil; i++ {
		k.ranges = append(k.ranges, valueRange{key: d.string(maxEncodedString)})
		rg := &k.ranges[len(k.ranges)-1]
		if r.free(rg.key) {
			continue
		}
		rg.first, rg.last, rg.strategy = d.uvarint(), d.uvarint(), Strategy(d.byte())
		if !r.isBuried(graveRange, i) {
			k.rangeIdx[rg.key] = int32(i)
		}
		for _, dec := range []func([]byte) ([]byte, error){rg.allocated.DecodeBinary, rg.used.DecodeBinary, rg.freed.DecodeBinary} {
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
		if r.format >= 7 {
			r.rangeShape(rg)
		}
		k.rangeValues += rg.freed.Len()
	}
}

// rangeShape reads a range's exclusions, static band and format (format 7 on).
func (r *restorer) rangeShape(rg *valueRange) {
	d := &r.d
	for j, m := 0, d.count(contract.MaxExcluded); j < int(m) && d.err == nil; j++ {
		rg.excluded = append(rg.excluded, Interval{First: d.uvarint(), Last: d.uvarint()})
	}
	rg.setExcluded(rg.excluded)
	rg.hasBand = d.bool()
	rg.band = Interval{First: d.uvarint(), Last: d.uvarint()}
	rg.format = d.string(contract.MaxFormatLen)
	if !contract.ValidFormat(rg.format) {
		d.fail()
	}
}

// members reads a lease's members, each referring to a live table slot.
func (r *restorer) members() []leaseMember {
	d := &r.d
	var ms []leaseMember
	n := r.count("members")
	if n > maxEncodedMembers {
		d.fail()
	}
	for j := 0; j < n && d.err == nil; j++ {
		lm := leaseMember{kind: MemberKind(d.byte())}
		obj := d.uvarint()
		lm.quantity, lm.value = d.uvarint(), d.uvarint()
		if !r.k.validMemberRef(lm.kind, obj) {
			d.fail()
			break
		}
		lm.obj = int32(obj)
		ms = append(ms, lm)
	}
	if len(ms) == 0 && r.format < snapshotFormatGroup { // since 12, a lease of an import across shards may hold none here
		d.fail()
	}
	return ms
}

// leases reads the live leases, in lsn order (format 2: the ended ones too, kept aside
// for endedLeases).
func (r *restorer) leases() {
	k, d := r.k, &r.d
	var prev uint64
	for i, n := 0, r.count("leases"); i < n && d.err == nil; i++ {
		lsn := d.uvarint()
		if lsn <= prev {
			d.fail()
			break
		}
		prev = lsn
		hkey := d.string(2*maxEncodedString + 1)
		state := LeaseState(d.byte())
		epoch, deadline := d.uvarint(), d.uvarint()
		var released, retireAfter, keepalive uint64
		if r.format == 2 {
			released, retireAfter = d.uvarint(), d.uvarint()
		}
		if r.format >= 4 {
			keepalive = d.uvarint()
		}
		ms := r.members()
		labels := k.restoreLabels(d, r.format)
		var created uint64
		if r.format >= 8 {
			created = d.uvarint()
		}
		if d.err != nil {
			break
		}
		if state.Terminal() && r.format == 2 {
			if r.v2ended == nil {
				r.v2ended, r.v2members = map[uint64]endedLease{}, map[uint64][]leaseMember{}
			}
			r.v2ended[lsn] = endedLease{lsn: lsn, holder: k.internHolder([]byte(hkey)), state: state,
				epoch: uint32(epoch), deadline: deadline, releasedLSN: released, retireAfter: retireAfter}
			r.v2members[lsn] = ms
			continue
		}
		if !state.Live() {
			d.fail()
			break
		}
		idx := k.newLease(lsn, []byte(hkey))
		l := &k.leases[idx]
		l.state, l.epoch, l.deadline, l.keepalive, l.labels, l.created = state, epoch, deadline, keepalive, labels, created
		l.members = append(l.members, ms...)
		if b := k.bundles[lsn]; b == nil || !b.ownPart {
			k.members += len(l.members) // an own part's are its ended lease's (holdEnding)
		}
		if !k.leaseLike(lsn) {
			continue // a bundle's record: counted, listed and expired by nobody
		}
		k.live[state]++
		k.linkLive(idx)
		if l.state == LeaseReserved || (l.state == LeaseActive && l.keepalive > 0) {
			k.expiry.push(k, idx)
		}
	}
}

// endedLeases reads the ended leases in the order they ended: the order they retire in.
func (r *restorer) endedLeases() {
	k, d := r.k, &r.d
	ended := r.count("ended leases")
	k.ended.index.reserve(ended)
	for i := 0; i < ended && d.err == nil; i++ {
		e, ms := r.endedLease()
		if d.err != nil {
			break
		}
		k.ended.push(e, ms)
		k.members += len(ms)
	}
	if len(r.v2ended) != 0 {
		d.fail() // a terminal lease format 2 did not queue for retirement
	}
}

func (r *restorer) endedLease() (endedLease, []leaseMember) {
	k, d := r.k, &r.d
	if r.format == 2 {
		lsn := d.uvarint()
		v2, ok := r.v2ended[lsn]
		if !ok {
			d.fail()
			return v2, nil
		}
		ms := r.v2members[lsn]
		delete(r.v2ended, lsn)
		return v2, ms
	}
	var e endedLease
	e.lsn = d.uvarint()
	e.holder = k.internHolder([]byte(d.string(2*maxEncodedString + 1)))
	e.state = LeaseState(d.byte())
	epoch := d.uvarint()
	e.epoch = uint32(epoch)
	e.deadline, e.releasedLSN, e.retireAfter = d.uvarint(), d.uvarint(), d.uvarint()
	ms := r.members()
	if ref := k.restoreLabels(d, r.format); ref != 0 {
		k.endedLabels[e.lsn] = ref
	}
	if r.format >= 8 {
		e.created = d.uvarint()
	}
	if epoch != uint64(e.epoch) || !e.state.Terminal() {
		d.fail()
	}
	if _, dup := k.ended.find(e.lsn); dup != nil {
		d.fail()
	}
	if _, live := k.leaseIdx[e.lsn]; live {
		d.fail()
	}
	return e, ms
}

// outcomes reads the retry cache: both queues' counts first, so the index is sized once
// (format 2: one list in commit order, restoreOutcomesV2).
func (r *restorer) outcomes() {
	k, d := r.k, &r.d
	if r.format == 2 {
		restoreOutcomesV2(k, d, r.count("operations"))
		return
	}
	counts := [2]int{r.count("operations"), r.count("operations")}
	k.ops.index.reserve(counts[0] + counts[1])
	for qi := range k.ops.q {
		for i, n := 0, counts[qi]; i < n && d.err == nil; i++ {
			if len(d.b) < 20 {
				d.fail()
				break
			}
			op := outcome{keyHi: binary.LittleEndian.Uint64(d.b), keyLo: binary.LittleEndian.Uint32(d.b[8:]),
				hash: binary.LittleEndian.Uint64(d.b[12:])}
			d.b = d.b[20:]
			op.code = Code(d.byte())
			member, epoch := d.uvarint(), d.uvarint()
			if member > maxEncodedMembers || epoch > 2 || (qi == forgettableQueue) != forgettable(op.code) {
				d.fail()
				break
			}
			op.member, op.epoch = int16(member)-1, uint8(epoch)
			op.lsn, op.retireAfter = d.uvarint(), d.uvarint()
			if r.format >= 7 {
				op.ref = d.uvarint()
			}
			k.ops.push(op)
		}
	}
}
