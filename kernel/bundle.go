package kernel

import (
	"fmt"
	"math"
	"slices"

	"github.com/holdfast/holdfast/contract"
)

// Bundles across shards (docs/design.md "Bundles across shards"): a reserve whose members
// fall on several shards is a transaction. Its home — the shard of its first member —
// journals the begin (its own members held as intents) and the decision; every other
// shard journals a prepare (its members held as intents) and then mirrors of the lease's
// state. This file is the kernel's part: the entries and what they do to one shard. The
// runtime carries the messages between shards.

// MaxPendingBundles bounds the undecided transactions one shard holds intents for, as
// home or participant: past it a begin or a prepare is answered overloaded and holds
// nothing.
const MaxPendingBundles = 1024

// bundle is what a lease record of a bundle across shards keeps besides an ordinary
// lease's fields: at the home, the transaction, its members on other shards and, while
// undecided, what its commit needs; at a participant, the transaction whose members the
// record holds.
type bundle struct {
	txn      TxnRef
	pending  bool // undecided: the members are intents, listed and expired by nobody
	priority uint64
	// lease is, at a participant, the lease's lsn at its home once committed (the commit
	// entry's: a lease id is its committing entry's position); 0 while undecided. At the
	// home of a lease of an import across shards, its id from the begin on (group.go).
	lease uint64
	// failed is, for a begin whose own members or tables refused it, the refusal (and
	// failedMember its member, -1 for a table): not the bundle's answer yet — a member of
	// another shard earlier in the request may be refused too, and the answer names the
	// first, as one shard's would. Such a record holds nothing and has no lease record.
	failed       Code
	failedMember int16
	// The home's: the members on other shards, in the reserve's order (values as chosen
	// once committed), and what the commit needs.
	remote         []remoteMember
	op             opKey
	hash           uint64
	activate       bool
	ttlSlots       uint64
	keepAliveSlots uint64
	// Endings in two rounds (ending.go): twoRound says the home's lease ends so (its begin
	// said so: command format 7), and freeing that it ended and its rounds are not over;
	// ending says a part's members are an ended lease's still, read by nobody until its
	// free; ownPart marks the home's own part of its ended lease.
	twoRound bool
	freeing  bool
	ending   bool
	ownPart  bool
	// parallel says the home's bundle commits in parallel (its begin said so: command
	// format 8): its lease's id is the skip's position right before the begin, its
	// deadline counts from the begin, and a restarted home prepares it again rather than
	// abort it (docs/design.md "Parallel commits").
	parallel bool
	// group is, for a lease of an import across shards at its home, the import's
	// position (the group's name, after its leases' ids and transactions): its leases are
	// decided together (group.go). Kept after the decision, when it says only that the
	// lease's id is in lease, not the position before its transaction.
	group uint64
}

// remoteMember is a member of a home's bundle that another shard holds.
type remoteMember struct {
	index    uint32 // in the reserve's members
	shard    uint32
	kind     MemberKind
	id, name string
	quantity uint64
	value    uint64
	hasValue bool // a specific value was asked for (kept for a parallel bundle's recovery: BeginCommand)
}

// home reports whether the record is its transaction's at the home (shard): a shard is
// never a participant of its own bundles.
func (b *bundle) home(shard uint32) bool { return b.txn.Shard == shard && !b.ownPart }

// begin is a reserve over members of several shards, at its home: it holds the home's
// members as intents (checked as a reserve checks them) under the lease the bundle will
// be, undecided and seen by nobody until bundle.decide. A retry of a begun bundle changes
// nothing and is told Pending again.
func (k *Kernel) begin(e Entry, out *Output) {
	c := e.Cmd
	if len(c.Shards) != len(c.Members) || c.Shards[0] != k.shard || !slices.ContainsFunc(c.Shards, k.foreign) {
		out.Code = contract.CodeInvalidRequest // a runtime fault: not a bundle this shard is home of
		return
	}
	key := makeOpKey(c.Tenant, c.OperationID)
	if lsn, ok := k.pendingOps[key]; ok {
		out.Pending = true
		if idx, held := k.leaseIdx[lsn]; held {
			k.viewLease(idx, out)
		} else {
			out.Object, out.Lease = ObjectLease, LeaseView{Shard: k.shard, LSN: lsn} // a failed begin's
		}
		return
	}
	b := &bundle{txn: TxnRef{Shard: k.shard, LSN: e.LSN}, pending: true, priority: c.Priority, op: key,
		activate: c.Activate, ttlSlots: c.TTLSlots, keepAliveSlots: c.KeepAliveSlots, twoRound: c.Phase == PhaseEnding,
		parallel: c.Parallel}
	b.hash, k.hashBuf = commandHash(c, k.hashBuf)
	idx, ok := k.holdIntents(e, out, func(i int) bool { return c.Shards[i] == k.shard })
	if !ok {
		if out.Undecided || out.Code.IsRejection() {
			return // nothing to decide: the caller waits and tries again, or it is refused
		}
		b.failed, b.failedMember = out.Code, int16(out.MemberIndex)
		k.bundles[e.LSN], k.begins[e.LSN], k.pendingOps[key], k.pending[e.LSN] = b, e.LSN, e.LSN, true
		out.Pending, out.Object, out.Lease.Shard, out.Lease.LSN = true, ObjectLease, k.shard, e.LSN
		return
	}
	for i := range c.Members {
		if m := &c.Members[i]; c.Shards[i] != k.shard {
			b.remote = append(b.remote, remoteMember{index: uint32(i), shard: c.Shards[i], kind: m.Kind, id: m.ID,
				name: m.Name, quantity: m.Quantity, value: m.Value, hasValue: m.HasValue && c.Parallel})
		}
	}
	k.leases[idx].labels = k.internLabels(c.Labels)
	k.bundles[e.LSN] = b
	k.begins[e.LSN] = e.LSN
	k.pendingOps[key] = e.LSN
	k.pending[e.LSN] = true
	k.viewLease(idx, out)
}

func (k *Kernel) foreign(s uint32) bool { return s != k.shard }

// prepare holds a participant's members of transaction c.Txn as intents, or refuses as a
// reserve would (the member's index in c.Members). A prepare of a transaction it already
// holds changes nothing and answers the same. A transaction is its home's begin position
// and its priority: a home that lost a begin in a crash (the prepares leave before the
// begin is journaled) writes another entry there, maybe another begin, and a prepare of
// that one finds the lost one's intents under the same position — they are freed first.
func (k *Kernel) prepare(e Entry, out *Output) {
	c := e.Cmd
	if c.Group {
		k.prepareGroup(e, out)
		return
	}
	if lsn, ok := k.txns[c.Txn]; ok {
		b := k.bundles[lsn]
		switch {
		case c.Priority == 0 || b.priority == c.Priority:
			out.Pending = b.pending
			k.viewLease(k.leaseIdx[lsn], out)
			return
		case !b.pending: // a decided transaction's begin is durable: its position is never reused
			out.Code = contract.CodeInvalidRequest
			return
		}
		k.dropIntents(k.leaseIdx[lsn], false)
		delete(k.txns, c.Txn)
	}
	if c.Txn.Shard == k.shard || len(c.Members) == 0 {
		out.Code = contract.CodeInvalidRequest // a runtime fault: a shard is never its own participant
		return
	}
	idx, ok := k.holdIntents(e, out, func(int) bool { return true })
	if !ok {
		return
	}
	k.bundles[e.LSN] = &bundle{txn: c.Txn, pending: true, priority: c.Priority, activate: c.Activate}
	k.txns[c.Txn] = e.LSN
	k.pending[e.LSN] = true
	k.viewLease(idx, out)
}

// holdIntents checks the members of e's command that mine selects, as a reserve does, and
// holds them as intents under a new, undecided lease record lsn e.LSN: counted against
// the tables' bounds and the undecided bound, indexed by member, listed by nobody.
func (k *Kernel) holdIntents(e Entry, out *Output, mine func(int) bool) (int32, bool) {
	c := e.Cmd
	if len(k.pending) >= MaxPendingBundles {
		out.Code = contract.CodeOverloaded
		return 0, false
	}
	picks := k.picks[:0]
	defer func() { k.picks = picks[:0] }()
	for i := range c.Members {
		if !mine(i) {
			continue
		}
		p, code := k.check(c.Tenant, &c.Members[i], picks, e.LSN, i)
		if code != contract.CodeOK {
			out.Code, out.MemberIndex, out.EarliestDeadlineSlot = code, i, k.blocked
			k.noteIntent(c.Tenant, &c.Members[i], code, out)
			return 0, false
		}
		picks = append(picks, p)
	}
	if code := k.checkBounds(len(picks), c.Activate && c.KeepAliveSlots == 0, e.Slot); code != contract.CodeOK {
		out.Code = code
		return 0, false
	}
	idx := k.intentRecord(e.LSN, e.Slot, c.Tenant, c.HolderID, picks)
	out.Pending = true
	return idx, true
}

// intentRecord makes the undecided record lsn of tenant's holder, holding picks as
// intents: in the tables and the member index, seen by no reader, no version moved.
func (k *Kernel) intentRecord(lsn, slot uint64, tenant, holderID string, picks []pick) int32 {
	idx := k.newLease(lsn, k.tenantKey(tenant, holderID))
	k.leases[idx].created = slot
	k.holdMembers(idx, picks, LeaseReserved, true)
	for _, p := range picks {
		if p.kind == MemberWork {
			k.enqueue(p.obj, qHeld) // first in the run's held queue: an intent has no deadline
		}
	}
	k.versions(idx, -1) // an intent is no change a reader may see: its resources keep their version
	k.indexMembers(idx, true)
	return idx
}

// commitValues takes a committed bundle's least_recently_freed range values in the
// range's order of use, as allocateValue does a one-shard grant's.
func (k *Kernel) commitValues(idx int32) {
	for _, m := range k.leases[idx].members {
		if m.kind != MemberRange {
			continue
		}
		if r := &k.ranges[m.obj]; r.strategy == StrategyLeastRecentlyFreed {
			if r.freed.Remove(m.value) {
				k.rangeValues--
			} else {
				r.used.Add(m.value)
			}
		}
	}
}

// versions moves the versions of the resources record idx holds by d: an intent's holding
// and freeing are no change (-1 after holdMembers, freeMembers), its commit is (+1).
func (k *Kernel) versions(idx int32, d int) {
	for _, m := range k.leases[idx].members {
		if m.kind == MemberResource {
			k.res[m.obj].version += uint64(d) // two's complement: -1 steps back
		}
	}
}

// decide records transaction c.Txn's outcome at its home. A commit makes the lease live
// with every member (the remote ones as c.Members resolves them), its deadline counted
// from this entry, and remembers ok for retries; an abort frees the intents and drops the
// record, remembering the participant's refusal when c.Refusal names one. A transaction
// not undecided here is a no-op.
func (k *Kernel) decide(e Entry, out *Output) {
	c := e.Cmd
	if c.Group {
		k.decideGroup(e, out)
		return
	}
	b := k.bundles[c.Txn.LSN] // undecided: the record is still at its begin's lsn
	if c.Txn.Shard != k.shard || b == nil || !b.pending || !b.home(k.shard) {
		out.Code = contract.CodeNoop
		return
	}
	delete(k.pendingOps, b.op)
	if b.failed != contract.CodeOK { // held nothing: only the record to forget
		delete(k.bundles, c.Txn.LSN)
		delete(k.begins, c.Txn.LSN)
		delete(k.pending, c.Txn.LSN)
		if c.Refusal != contract.CodeOK {
			k.rememberDecision(b, c.Refusal, int16(c.RefusalMember)-1, 0, e, 0)
		}
		return
	}
	idx := k.leaseIdx[c.Txn.LSN]
	if !c.Commit {
		k.dropIntents(idx, false) // still undecided as it frees: no version moves
		b.pending = false
		if c.Refusal != contract.CodeOK {
			k.rememberDecision(b, c.Refusal, int16(c.RefusalMember)-1, 0, e, 0)
		}
		return
	}
	b.pending = false
	delete(k.pending, c.Txn.LSN)
	resolve(b, c.Members)
	k.versions(idx, +1) // the grant is the change
	k.commitValues(idx)
	id, slot := k.commitPlace(b, idx, e)
	out.Event = EventLeaseReserved
	if b.activate {
		k.moveMembers(idx, LeaseActive)
		k.versions(idx, -1) // one change: available → active, as a one-shard reserve
		out.Event = EventLeaseActivated
	}
	k.indexMembers(idx, false) // goLive indexes owner and members together
	w := k.leaseWork(leaseRef{idx: idx})
	if w >= 0 {
		k.dequeue(w, qHeld) // its key, the claim's deadline and lease, changes below
	}
	k.rekey(idx, id)
	k.leases[idx].created = slot
	k.goLive(idx, slot, b.activate, b.ttlSlots, b.keepAliveSlots)
	k.viewLease(idx, out)
	if w >= 0 { // a claim across placement keys: its work is here, at the home
		k.works[w].claims++
		k.enqueue(w, qHeld)
		k.showClaim(w, out)
	}
	out.Mirror = true
	var ref uint64 // a parallel commit's lease is not at its position: the outcome names it
	if id != e.LSN {
		ref, out.LSN = id, id // and the answer's lsn is its id, as the early answer's and a retry's
	}
	k.rememberDecision(b, contract.CodeOK, -1, 1, e, ref)
}

// commitPlace is where a committing bundle's lease lives and when its life starts: the
// commit's position and slot, or — committing in parallel, its client answered before
// the commit was durable — the skip's position before its begin and the begin's slot,
// which the answer already showed and a commit after a restart keeps.
func (k *Kernel) commitPlace(b *bundle, idx int32, e Entry) (id, slot uint64) {
	if id := b.earlyID(); id != 0 {
		return id, k.leases[idx].created
	}
	return e.LSN, e.Slot
}

// earlyID is the lease id of a home's record answered before its commit — an import's
// lease's, kept in the record; a parallel bundle's, the skip's position right before its
// begin — or 0 for one whose id is its commit's position.
func (b *bundle) earlyID() uint64 {
	switch {
	case b.group != 0:
		return b.lease
	case b.parallel:
		return b.txn.LSN - 1
	}
	return 0
}

// rekey moves a committed bundle's record from its begin's lsn to the commit's, the
// lease's id (a lease id is its committing entry's position), with every reference to it:
// the lease table, its resources and work claims, the bundle lookups. Not indexed yet.
func (k *Kernel) rekey(idx int32, lsn uint64) {
	l := &k.leases[idx]
	old := l.lsn
	delete(k.leaseIdx, old)
	k.leaseIdx[lsn] = idx
	l.lsn = lsn
	for _, m := range l.members {
		switch m.kind {
		case MemberResource:
			k.res[m.obj].lease = lsn
		case MemberWork:
			k.works[m.obj].lease = lsn
		}
	}
	b := k.bundles[old]
	delete(k.bundles, old)
	k.bundles[lsn] = b
	k.begins[b.txn.LSN] = lsn
}

// rememberDecision remembers a decided reserve's outcome for its retries, as Apply does a
// one-shard reserve's: at the decision's lsn, the entry that made the change (and, with
// ok, the lease's id — or, a bundle committed in parallel, ref: its lease, at the position
// before its begin; the retry cache keeps its outcomes in lsn order, so the outcome stays
// at the decision's).
func (k *Kernel) rememberDecision(b *bundle, code Code, member int16, epoch uint8, e Entry, ref uint64) {
	if !k.opRoom(e.Slot) {
		return
	}
	k.ops.push(outcome{keyHi: b.op.hi, keyLo: b.op.lo, hash: b.hash, code: code, member: member,
		lsn: e.LSN, ref: ref, epoch: epoch, retireAfter: satAdd(e.Slot, k.shape.DedupeWindowSlots)})
}

// mirror applies the home's state of transaction c.Txn to this participant's part: a
// live state (the first one also decides it: committed) moves its members, a terminal
// one — or an abort, State 0 — frees them and drops the record. A transaction this shard
// does not hold is a no-op.
func (k *Kernel) mirror(e Entry, out *Output) {
	c := e.Cmd
	if c.Txn.Shard == k.shard {
		k.freeOwn(c, out)
		return
	}
	lsn, ok := k.txns[c.Txn]
	if !ok || !k.sameTxn(lsn, c.Priority) {
		out.Code = contract.CodeNoop
		return
	}
	idx := k.leaseIdx[lsn]
	b := k.bundles[lsn]
	if b.ending {
		if c.Phase != PhaseFree {
			out.Code = contract.CodeNoop // ending already: only its free changes it
			return
		}
		k.dropIntents(idx, c.State == LeaseConsumed)
		delete(k.txns, c.Txn)
		return
	}
	if c.LeaseLSN != 0 {
		b.lease = c.LeaseLSN
	}
	if b.pending && c.State != 0 {
		// The commit, perhaps learnt only with a later state (a mirror lost, then resent
		// as the lease is now): the grant is a change of its own, and takes its values
		// in their range's order of use, whatever came after.
		b.pending = false
		delete(k.pending, lsn)
		k.versions(idx, +1)
		k.commitValues(idx)
		if c.State == LeaseActive && b.activate {
			k.versions(idx, -1) // granted active: one change, as at the home
		}
	}
	if !c.State.Live() && c.Phase == PhaseEnding {
		b.ending, k.ending[lsn] = true, true // held still, read by nobody, until its free
		return
	}
	if !c.State.Live() {
		k.dropIntents(idx, c.State == LeaseConsumed)
		delete(k.txns, c.Txn)
		return
	}
	l := &k.leases[idx]
	l.deadline = c.Deadline
	if c.State != l.state {
		if c.State == LeaseRevoking {
			l.epoch++
		}
		k.moveMembers(idx, c.State)
	}
	k.viewLease(idx, out)
}

// dropIntents frees the members of a record that never went live (an aborted bundle's
// intents, at home or a participant) or of a participant's part (whatever its state),
// and forgets the record: the lease, if it ever was one, lives on at its home.
func (k *Kernel) dropIntents(idx int32, consume bool) {
	l := &k.leases[idx]
	k.indexMembers(idx, false)
	k.freeMembers(idx, consume, k.pending[l.lsn])
	if k.pending[l.lsn] {
		k.versions(idx, -1) // freeing an intent is no change either
	}
	b := k.bundles[l.lsn]
	if b == nil || !b.ownPart {
		k.members -= len(l.members) // an own part's are counted by its ended lease (holdEnding)
	}
	if l.labels != 0 {
		k.releaseLabels(l.labels)
	}
	if b != nil && b.home(k.shard) {
		delete(k.begins, b.txn.LSN)
	}
	delete(k.bundles, l.lsn)
	delete(k.pending, l.lsn)
	delete(k.ending, l.lsn)
	k.releaseHolder(l.holder)
	k.freeLiveSlot(idx)
}

// noteIntent marks a refusal of member m (code) as caused by an undecided bundle's
// intents when it is: the member is held by one, or without the intents the pool would
// have the units or the range a free value.
func (k *Kernel) noteIntent(tenant string, m *Member, code Code, out *Output) {
	var holder uint64
	switch {
	case m.Kind == MemberResource && code == contract.CodeResourceBusy:
		holder = k.res[k.resIdx[string(k.tenantKey(tenant, m.ID))]].lease
	case m.Kind == MemberRange && m.HasValue && code == contract.CodeValueBusy:
		obj := k.rangeIdx[string(k.tenantKey(tenant, m.ID))]
		holder = k.ix.values[valueKey{obj, m.Value}]
	case m.Kind == MemberPool && code == contract.CodeInsufficientCapacity:
		p := &k.pools[k.poolIdx[string(k.tenantKey(tenant, m.ID))]]
		out.Undecided = p.capacity-p.reserved-p.active-p.consumed+k.intentUnits(MemberPool, p.key) >= m.Quantity
		return
	case m.Kind == MemberRange && code == contract.CodeRangeExhausted:
		out.Undecided = k.intentUnits(MemberRange, k.ranges[k.rangeIdx[string(k.tenantKey(tenant, m.ID))]].key) > 0
		return
	case m.Kind == MemberWork && code == contract.CodeResourceBusy:
		w, _ := k.findWork(tenant, m.ID, m.Name)
		holder = k.works[w].lease
	case m.Kind == MemberWork && code == contract.CodeNoneAvailable:
		r, _ := k.findRun(tenant, m.ID)
		out.Undecided = k.runHasIntent(r)
		return
	default:
		return
	}
	k.bundles[holder].waitFor(out)
}

// intentUnits is how many units of pool key (or values of range key) undecided intents
// hold. It walks the undecided records, at most MaxPendingBundles of them, only when a
// member is refused.
func (k *Kernel) intentUnits(kind MemberKind, key string) uint64 {
	var n uint64
	for _, set := range [2]map[uint64]bool{k.pending, k.ending} {
		for lsn := range set { // a sum: the order cannot reach the output
			idx, ok := k.leaseIdx[lsn]
			if !ok {
				continue // a failed begin holds nothing
			}
			for _, m := range k.leases[idx].members {
				switch {
				case m.kind == kind && kind == MemberPool && k.pools[m.obj].key == key:
					n += m.quantity
				case m.kind == kind && kind == MemberRange && k.ranges[m.obj].key == key:
					n++
				}
			}
		}
	}
	return n
}

// awayFrom reports whether record lsn, holding a value a verb by value names, is not a
// lease this shard answers for, and says why in out: an undecided bundle's intent
// (Undecided) or a participant's part of a lease living at its home (Elsewhere).
func (k *Kernel) awayFrom(lsn uint64, out *Output) bool {
	b := k.bundles[lsn]
	switch {
	case b == nil || k.leaseLike(lsn):
		return false
	case b.waitFor(out):
	default:
		out.Elsewhere, out.Txn = true, TxnRef{Shard: b.txn.Shard, LSN: b.lease}
	}
	out.Code = contract.CodeNoop // never an answer: the flags say what to do
	return true
}

// leaseID is the lease id (shard, lsn) of record lsn: its own, or for a participant's
// part of a bundle the lease's at its home.
// No lease (lsn 0) is (0, 0).
func (k *Kernel) leaseID(lsn uint64) (uint32, uint64) {
	if lsn == 0 {
		return 0, 0
	}
	if b := k.bundles[lsn]; b != nil && !b.home(k.shard) {
		if b.lease != 0 {
			return b.txn.Shard, b.lease
		}
		return b.txn.Shard, b.txn.LSN // undecided: its readers wait
	}
	return k.shard, lsn
}

// noteMirror sets out.Mirror when the entry changed a bundle's lease at its home (Lease,
// or one of Changes): its participants are to learn the new state.
func (k *Kernel) noteMirror(out *Output) {
	if len(k.bundles) == 0 || (out.Event == EventNone && len(out.Changes) == 0) {
		return
	}
	mine := func(l *LeaseView) bool {
		b := k.bundles[l.LSN]
		return l.Shard == k.shard && b != nil && b.home(k.shard) && !b.pending
	}
	if out.ShowsLease() && mine(&out.Lease) {
		out.Mirror = true
	}
	for i := range out.Changes {
		if mine(&out.Changes[i].Lease) {
			out.Mirror = true
		}
	}
}

// remoteAll reports whether every member of lease lsn on another shard (none: any lease
// but a bundle's at its home) is of kind.
func (k *Kernel) remoteAll(lsn uint64, kind MemberKind) bool {
	if b := k.bundles[lsn]; b != nil {
		for _, r := range b.remote {
			if r.kind != kind {
				return false
			}
		}
	}
	return true
}

// BundleShards appends the shards other than this one that hold members of lease lsn, a
// bundle's at its home, ascending: where a bundle.mirror goes. Nothing for any other lease.
func (k *Kernel) BundleShards(lsn uint64, dst []uint32) []uint32 {
	b := k.bundles[lsn]
	if b == nil || !b.home(k.shard) {
		return dst
	}
	start := len(dst)
	for _, r := range b.remote {
		if !slices.Contains(dst[start:], r.shard) {
			dst = append(dst, r.shard)
		}
	}
	slices.Sort(dst[start:])
	return dst
}

// UndecidedBundles is how many transactions this shard holds undecided intents or ending
// parts for: the records its readers and writers may wait for.
func (k *Kernel) UndecidedBundles() int { return len(k.pending) + len(k.ending) }

// Undecided appends the transactions this shard holds undecided intents for, at home or
// as a participant, ordered: what the runtime decides, asks or resends after a restart.
func (k *Kernel) Undecided(dst []TxnRef) []TxnRef {
	start := len(dst)
	for lsn := range k.pending { // sorted below: the order cannot reach the output
		dst = append(dst, k.bundles[lsn].txn)
	}
	slices.SortFunc(dst[start:], TxnRef.Compare)
	return dst
}

// remoteViews appends the remote members of bundle lease lsn, at its home, to a view's
// members in the reserve's order (the home's own members first kept their relative order).
func (k *Kernel) remoteViews(lsn uint64, members []MemberView) []MemberView {
	b := k.bundles[lsn]
	if b == nil || !b.home(k.shard) {
		return members
	}
	for _, r := range b.remote {
		members = slices.Insert(members, min(int(r.index), len(members)),
			MemberView{Kind: r.kind, ID: r.id, Name: r.name, Quantity: r.quantity, Value: r.value})
	}
	return members
}

// checkBundles verifies the bundle records: each names a lease record (live, or ended at
// its home) and its transaction — the home's own, or another shard's at a participant,
// found by it; undecided ones are live records, at most MaxPendingBundles, and an
// undecided begin is found by its operation.
func (k *Kernel) checkBundles() error {
	for lsn, b := range k.bundles { // every record is checked: the order reaches no output
		idx, live := k.leaseIdx[lsn]
		_, ended := k.ended.find(lsn)
		home := b.home(k.shard)
		switch {
		case live == (b.failed != contract.CodeOK) && b.pending:
			return fmt.Errorf("bundle record %d: undecided, failed %s, with a lease record %v", lsn, b.failed, live)
		case !live && b.failed == contract.CodeOK && (ended == nil || !home || b.pending):
			return fmt.Errorf("bundle record %d: no lease record", lsn)
		case b.pending != k.pending[lsn]:
			return fmt.Errorf("bundle record %d: undecided %v, counted %v", lsn, b.pending, k.pending[lsn])
		case home && b.pending && k.pendingOps[b.op] != max(b.group, lsn):
			return fmt.Errorf("bundle record %d: undecided begin not found by its operation", lsn)
		case b.group != 0 && (!home || b.lease == 0 || b.lease >= b.txn.LSN || b.group < b.txn.LSN || !b.parallel || !b.twoRound ||
			b.failed != contract.CodeOK || (b.pending && lsn != b.txn.LSN) || (!b.pending && lsn != b.lease)):
			return fmt.Errorf("bundle record %d: a lease of import %d, but at home %v, its transaction at %d, its id %d", lsn, b.group, home, b.txn.LSN, b.lease)
		case !home && (k.txns[b.txn] != lsn || len(b.remote) != 0):
			return fmt.Errorf("bundle record %d: a participant's part not found by its transaction", lsn)
		case home && (k.begins[b.txn.LSN] != lsn || (b.pending && lsn != b.txn.LSN) || (!b.pending && !b.parallel && lsn <= b.txn.LSN) ||
			(!b.pending && b.parallel && b.group == 0 && lsn != b.txn.LSN-1)):
			return fmt.Errorf("bundle record %d: its begin at %d does not lead to it", lsn, b.txn.LSN)
		case live && b.pending && k.leases[idx].state != LeaseReserved:
			return fmt.Errorf("bundle record %d: undecided intents in state %s", lsn, k.leases[idx].state)
		case b.ending != k.ending[lsn] || (b.ending && (home || b.pending || !live)) || (b.ownPart && (!b.ending || b.txn.Shard != k.shard)):
			return fmt.Errorf("bundle record %d: ending %v (counted %v), own part %v, at home %v, undecided %v", lsn, b.ending, k.ending[lsn], b.ownPart, home, b.pending)
		case b.freeing && (!home || !b.twoRound || live):
			return fmt.Errorf("bundle record %d: its end's rounds not over, but at home %v, in two rounds %v, live %v", lsn, home, b.twoRound, live)
		case b.ownPart && (k.bundles[k.begins[b.txn.LSN]] == nil || !k.bundles[k.begins[b.txn.LSN]].freeing):
			return fmt.Errorf("bundle record %d: an own part of a lease whose end's rounds are over", lsn)
		}
	}
	switch {
	case len(k.pending) > MaxPendingBundles:
		return fmt.Errorf("%d undecided bundles, bound %d", len(k.pending), MaxPendingBundles)
	case len(k.pendingOps)+len(k.txns) > len(k.bundles) || len(k.begins)+len(k.txns) != len(k.bundles):
		return fmt.Errorf("bundle lookups hold more than the records")
	}
	for lsn := range k.pending {
		if k.bundles[lsn] == nil {
			return fmt.Errorf("undecided bundle %d without a record", lsn)
		}
	}
	return nil
}

// appendBundles writes the bundle records in lsn order (snapshot format 9), with each
// record's endings flags after it in format 10 (flags).
func (k *Kernel) appendBundles(b []byte, flags bool) []byte {
	lsns := make([]uint64, 0, len(k.bundles))
	for lsn := range k.bundles {
		lsns = append(lsns, lsn)
	}
	slices.Sort(lsns)
	b = appendUvarint(b, uint64(len(lsns)))
	for _, lsn := range lsns {
		r := k.bundles[lsn]
		b = appendUvarint(b, lsn)
		b = appendUvarint(appendUvarint(b, uint64(r.txn.Shard)), r.txn.LSN)
		b = appendBool(b, r.pending)
		b = appendUvarint(b, r.priority)
		b = appendUvarint(b, r.lease)
		b = append(b, byte(r.failed))
		b = appendUvarint(b, uint64(r.failedMember+1))
		b = appendUvarint(b, uint64(len(r.remote)))
		for _, m := range r.remote {
			b = appendUvarint(appendUvarint(b, uint64(m.index)), uint64(m.shard))
			b = append(b, byte(m.kind)|hasValueBit(m.hasValue)) // set only in a parallel bundle's: format 11
			b = appendString(appendString(b, m.id), m.name)
			b = appendUvarint(appendUvarint(b, m.quantity), m.value)
		}
		b = appendUvarint(appendUvarint(b, r.op.hi), uint64(r.op.lo))
		b = appendUvarint(b, r.hash)
		b = appendBool(b, r.activate)
		b = appendUvarint(appendUvarint(b, r.ttlSlots), r.keepAliveSlots)
		if flags {
			b = append(b, r.endFlags())
		}
		if r.group != 0 {
			b = appendUvarint(b, r.group)
		}
	}
	return b
}

// endFlags is a record's endings flags as snapshot format 10 writes them (0: a bundle
// that ends in one round, as format 9 knew them), and format 11 with bit 4: it commits in
// parallel.
func (b *bundle) endFlags() byte {
	var f byte
	for i, set := range [6]bool{b.twoRound, b.ending, b.ownPart, b.freeing, b.parallel, b.group != 0} {
		if set {
			f |= 1 << i
		}
	}
	return f
}

// parallelFlag is endFlags' bit of a bundle that commits in parallel (snapshot format 11),
// groupFlag of a lease of an import across shards (format 12).
const (
	parallelFlag = 1 << 4
	groupFlag    = 1 << 5
)

// bundleFlags is every flag any record has (endFlags, or-ed; the order reaches no output):
// with none the snapshot keeps format 9, without bit 4 format 10, else it needs 11.
func (k *Kernel) bundleFlags() byte {
	var f byte
	for _, b := range k.bundles {
		f |= b.endFlags()
	}
	return f
}

// bundles reads what appendBundles wrote and rebuilds the lookups by transaction and by
// operation; the invariants check the records against the leases once those are back.
func (r *restorer) bundles() {
	k, d := r.k, &r.d
	var prev uint64
	for i, n := 0, r.count("bundles"); i < n && d.err == nil; i++ {
		lsn := d.uvarint()
		if lsn <= prev {
			d.fail()
			return
		}
		prev = lsn
		b := &bundle{txn: TxnRef{Shard: uint32(d.count(math.MaxUint32)), LSN: d.uvarint()}, pending: d.bool(), priority: d.uvarint(),
			lease: d.uvarint(), failed: Code(d.byte())}
		b.failedMember = int16(d.count(maxEncodedMembers)) - 1
		m := d.count(maxEncodedMembers)
		for j := uint64(0); j < m && d.err == nil; j++ {
			rm := remoteMember{index: uint32(d.count(maxEncodedMembers)), shard: uint32(d.count(math.MaxUint32)),
				kind: MemberKind(d.byte()), id: d.string(maxEncodedString), name: d.string(maxEncodedString)}
			if rm.kind&hasValueFlag != 0 && r.format >= snapshotFormatParallel {
				rm.kind, rm.hasValue = rm.kind&^hasValueFlag, true
			}
			rm.quantity, rm.value = d.uvarint(), d.uvarint()
			b.remote = append(b.remote, rm)
		}
		b.op = opKey{hi: d.uvarint(), lo: uint32(d.count(math.MaxUint32))}
		b.hash, b.activate = d.uvarint(), d.bool()
		b.ttlSlots, b.keepAliveSlots = d.uvarint(), d.uvarint()
		if r.format >= snapshotFormatEndings {
			f := d.byte()
			b.twoRound, b.ending, b.ownPart, b.freeing, b.parallel = f&1 != 0, f&2 != 0, f&4 != 0, f&8 != 0, f&parallelFlag != 0
			top := byte(parallelFlag - 1)
			switch {
			case r.format >= snapshotFormatGroup:
				top = 2*groupFlag - 1
			case r.format >= snapshotFormatParallel:
				top = 2*parallelFlag - 1
			}
			if f > top || (b.ownPart && !b.ending) || (b.freeing && !b.twoRound) || (b.parallel && !b.twoRound) {
				d.fail()
			}
			if f&groupFlag != 0 {
				if b.group = d.uvarint(); b.group == 0 || !b.parallel {
					d.fail()
				}
			}
		}
		if d.err != nil {
			return
		}
		k.bundles[lsn] = b
		home := b.home(k.shard)
		if home {
			k.begins[b.txn.LSN] = lsn
		} else {
			k.txns[b.txn] = lsn
		}
		if b.ending {
			k.ending[lsn] = true
		}
		if b.pending {
			k.pending[lsn] = true
			if home {
				k.pendingOps[b.op] = lsn
			}
		}
	}
}

// sameTxn reports whether the part at record lsn is of the transaction of priority p (0:
// a mirror journaled before mirrors named it, which is the part's).
func (k *Kernel) sameTxn(lsn, p uint64) bool { return p == 0 || k.bundles[lsn].priority == p }

// TxnPriority is the priority of the transaction this participant holds a part of under
// txn (0: none): with the position, what names it to its home.
func (k *Kernel) TxnPriority(txn TxnRef) uint64 {
	if lsn, ok := k.txns[txn]; ok {
		return k.bundles[lsn].priority
	}
	return 0
}

// BeginPriority is the priority of the transaction this home began at lsn (0: none begun
// there, or forgotten).
func (k *Kernel) BeginPriority(lsn uint64) uint64 {
	if rec, ok := k.begins[lsn]; ok {
		return k.bundles[rec].priority
	}
	return 0
}

// MirrorChanges reports whether a mirror of transaction txn of priority p (the lease's
// state, deadline and id at its home) would change this participant: its part is
// undecided, or differs in any of them, or ends. A transaction it holds no part of
// changes nothing.
func (k *Kernel) MirrorChanges(txn TxnRef, p uint64, state LeaseState, deadline, lease uint64, phase Phase) bool {
	lsn, ok := k.txns[txn]
	if !ok || !k.sameTxn(lsn, p) {
		return false
	}
	b, l := k.bundles[lsn], &k.leases[k.leaseIdx[lsn]]
	if b.ending {
		return phase == PhaseFree
	}
	return b.pending || !state.Live() || l.state != state || l.deadline != deadline || (lease != 0 && b.lease != lease)
}

// BundleState is what the home knows of the transaction it began at lsn, for a
// participant that asks: its lease (the commit's lsn), the lease's state and deadline
// (terminal once ended), pending while undecided, or state 0 when no bundle of that lsn is
// known here (never begun, aborted, or retired): its intents are to be freed.
func (k *Kernel) BundleState(lsn uint64) (state LeaseState, deadline, lease uint64, pending bool) {
	rec, ok := k.begins[lsn]
	if !ok {
		return 0, 0, 0, false
	}
	if k.bundles[rec].pending {
		return 0, 0, 0, true
	}
	if idx, ok := k.leaseIdx[rec]; ok {
		return k.leases[idx].state, k.leases[idx].deadline, rec, false
	}
	if _, e := k.ended.find(rec); e != nil {
		return e.state, e.deadline, rec, false
	}
	return 0, 0, 0, false
}

// BundleLeases appends the leases of the bundles this shard is home of and has decided
// (live, or ended within their history), ascending.
func (k *Kernel) BundleLeases(dst []uint64) []uint64 {
	start := len(dst)
	for lsn, b := range k.bundles { // sorted below: the order cannot reach the output
		if b.home(k.shard) && !b.pending {
			dst = append(dst, lsn)
		}
	}
	slices.Sort(dst[start:])
	return dst
}

// BundleTxn is the transaction of lease lsn, a bundle's at its home (zero for any other).
func (k *Kernel) BundleTxn(lsn uint64) TxnRef {
	if b := k.bundles[lsn]; b != nil && b.home(k.shard) {
		return b.txn
	}
	return TxnRef{}
}

// ShowsIntents reports whether a read's view (a resource, pool, range, run or work shard)
// counts a member an undecided bundle, or the part of an ending lease, holds: the read
// waits for the decision (or the free) rather than show it.
func (k *Kernel) ShowsIntents(out *Output) bool {
	if k.UndecidedBundles() == 0 {
		return false
	}
	switch out.Object {
	case ObjectResource:
		idx, ok := k.resIdx[string(k.tenantKey(out.Resource.Tenant, out.Resource.ID))]
		return ok && k.waiting(k.res[idx].lease)
	case ObjectPool:
		return k.intentUnits(MemberPool, string(k.tenantKey(out.Pool.Tenant, out.Pool.ID))) > 0
	case ObjectRange:
		return k.intentUnits(MemberRange, string(k.tenantKey(out.Range.Tenant, out.Range.ID))) > 0
	case ObjectWork:
		w, ok := k.findWork(out.Work.Tenant, out.Work.RunID, out.Work.Name)
		return ok && k.waiting(k.works[w].lease)
	case ObjectRun:
		r, ok := k.findRun(out.Run.Tenant, out.Run.ID)
		return ok && k.runHasIntent(r)
	}
	return false
}

// runHasIntent reports whether an undecided claim holds a work shard of run r: an intent
// has no deadline, so it comes first in the run's held queue.
func (k *Kernel) runHasIntent(r int32) bool {
	held := k.runs[r].held
	return len(held) > 0 && k.waiting(k.works[held[0]].lease)
}

// PageShowsIntents reports whether a listing's page counts a member an undecided bundle
// or an ending part holds (a resource, a pool's or range's units, a run's or its work
// shard's claim, a lease record of one), or a lease whose end's rounds are not over: the
// listing waits for the decision (or the free) rather than show it.
func (k *Kernel) PageShowsIntents(p *ListPage) bool {
	if k.UndecidedBundles() == 0 {
		return false
	}
	if showsAny(k, p.Resources, func(o *Output, v *ResourceView) { o.Object, o.Resource = ObjectResource, *v }) ||
		showsAny(k, p.Pools, func(o *Output, v *PoolView) { o.Object, o.Pool = ObjectPool, *v }) ||
		showsAny(k, p.Ranges, func(o *Output, v *RangeView) { o.Object, o.Range = ObjectRange, *v }) ||
		showsAny(k, p.Runs, func(o *Output, v *RunView) { o.Object, o.Run = ObjectRun, *v }) ||
		showsAny(k, p.Works, func(o *Output, v *WorkView) { o.Object, o.Work = ObjectWork, *v }) {
		return true
	}
	for i := range p.Leases {
		l := &p.Leases[i]
		lsn := l.LSN
		if l.Shard != k.shard {
			lsn = k.txns[TxnRef{Shard: l.Shard, LSN: l.LSN}]
		} else if k.Freeing(lsn) {
			return true // an ended lease whose end's rounds are not over
		}
		if k.waiting(lsn) {
			return true
		}
	}
	return false
}

// showsAny reports whether the view of any of items (put into an output by view) counts
// a member an undecided bundle or an ending part holds.
func showsAny[T any](k *Kernel, items []T, view func(*Output, *T)) bool {
	var out Output
	for i := range items {
		view(&out, &items[i])
		if k.ShowsIntents(&out) {
			return true
		}
	}
	return false
}

// intentValues is the values of range obj that undecided bundles hold (nil: none).
func (k *Kernel) intentValues(obj int32) map[uint64]bool {
	var vs map[uint64]bool
	for lsn := range k.pending { // a set: the order cannot reach an output (ending parts' values are committed: not these)
		idx, ok := k.leaseIdx[lsn]
		if !ok {
			continue // a failed begin holds nothing
		}
		for _, m := range k.leases[idx].members {
			if m.kind == MemberRange && m.obj == obj {
				if vs == nil {
					vs = map[uint64]bool{}
				}
				vs[m.value] = true
			}
		}
	}
	return vs
}

// HeldByUndecided reports whether a member of members on this shard (every one when mine
// is nil) would be refused now only because an undecided bundle other than self holds it
// — what a reserve or prepare of it would be told (check, then noteIntent: Output.Undecided)
// — and which: its transaction and priority, zero for a pool's units or a range's "any"
// value, whose intents are not told apart. A read of the applied state: the runtime asks
// before it sequences a write or prepare again, so one that would only wait again waits
// without a journal entry.
func (k *Kernel) HeldByUndecided(tenant string, members []Member, mine func(int) bool, self TxnRef) (txn TxnRef, priority uint64, held bool) {
	if k.UndecidedBundles() == 0 {
		return TxnRef{}, 0, false
	}
	var out Output
	for i := range members {
		if mine != nil && !mine(i) {
			continue
		}
		_, code := k.check(tenant, &members[i], nil, k.lastLSN+1, i)
		out.Undecided, out.Txn, out.TxnPriority = false, TxnRef{}, 0
		k.noteIntent(tenant, &members[i], code, &out)
		if out.Undecided && (out.Txn == TxnRef{} || out.Txn != self) {
			return out.Txn, out.TxnPriority, true
		}
	}
	return TxnRef{}, 0, false
}
