package kernel

import (
	"math"

	"github.com/holdfast/holdfast/contract"
)

// lease is the one authority object of a claim: one holder, one lifecycle, one fencing
// epoch, over one or more members granted all-or-nothing. This is a live lease; when it
// ends it moves to the compact endedTable for its history window (ended.go).
type lease struct {
	lsn      uint64 // with the shard, the lease id; also created_lsn
	holder   int32  // index in holders (tenant and holder id)
	state    LeaseState
	epoch    uint64
	deadline uint64 // reserved leases, and active ones with a keep-alive
	created  uint64 // the slot of the entry that created it (allocated_at)
	// keepalive is an active lease's keep-alive in slots (0: none, the lease never
	// expires): renewals move its deadline, and when the deadline passes the lease goes
	// to revoking (docs/api.md Part III).
	keepalive uint64
	members   []leaseMember
	labels    int32 // the label set (labelSets index + 1; 0: none)
	heapPos   int32 // position in the expiry heap, -1 when not in it
	prevLive  int32 // the holder's live leases, in lsn order
	nextLive  int32
}

type leaseMember struct {
	kind     MemberKind
	obj      int32 // index in res, pools or ranges
	quantity uint64
	value    uint64
}

// holder interns "tenant\x00holder_id" for the leases that name it and links the live ones
// in lsn order for lease.list. It lives while any lease in the table refers to it.
type holder struct {
	key  string
	refs int32
	head int32
	tail int32
	live int32
}

// newLease takes a lease record from the free list (reusing its members' capacity).
func (k *Kernel) newLease(lsn uint64, holderKey []byte) int32 {
	idx := reuse(&k.leases, &k.leaseFree)
	l := &k.leases[idx]
	*l = lease{lsn: lsn, holder: k.internHolder(holderKey), epoch: 1, members: l.members[:0],
		heapPos: -1, prevLive: -1, nextLive: -1}
	k.leaseIdx[lsn] = idx
	return idx
}

// freeLiveSlot returns an ended lease's live record to the free list; its holder reference
// and member count have moved to its endedLease.
func (k *Kernel) freeLiveSlot(idx int32) {
	l := &k.leases[idx]
	delete(k.leaseIdx, l.lsn)
	members := l.members[:0]
	*l = lease{members: members, heapPos: -1}
	k.leaseFree = append(k.leaseFree, idx)
}

// leaseCount is the lease table's fill: live leases and ended ones still retained.
func (k *Kernel) leaseCount() int { return len(k.leaseIdx) + k.ended.len() }

func (k *Kernel) internHolder(key []byte) int32 {
	if idx, ok := k.holderIdx[string(key)]; ok {
		k.holders[idx].refs++
		return idx
	}
	idx := reuse(&k.holders, &k.holderFree)
	s := string(key)
	k.holders[idx] = holder{key: s, refs: 1, head: -1, tail: -1}
	k.holderIdx[s] = idx
	return idx
}

func (k *Kernel) releaseHolder(idx int32) {
	h := &k.holders[idx]
	h.refs--
	if h.refs > 0 {
		return
	}
	delete(k.holderIdx, h.key)
	*h = holder{head: -1, tail: -1}
	k.holderFree = append(k.holderFree, idx)
}

// linkLive puts a new lease in its holder's live list, which is in lsn order: at its end,
// as leases are created in lsn order — except one of a bundle committed in parallel,
// whose id (the position before its begin) may be older than leases granted since, and
// goes back past those.
func (k *Kernel) linkLive(idx int32) {
	l := &k.leases[idx]
	h := &k.holders[l.holder]
	prev := h.tail
	for prev >= 0 && k.leases[prev].lsn > l.lsn {
		prev = k.leases[prev].prevLive
	}
	next := h.head
	if prev >= 0 {
		next = k.leases[prev].nextLive
	}
	l.prevLive, l.nextLive = prev, next
	if prev >= 0 {
		k.leases[prev].nextLive = idx
	} else {
		h.head = idx
	}
	if next >= 0 {
		k.leases[next].prevLive = idx
	} else {
		h.tail = idx
	}
	h.live++
}

func (k *Kernel) unlinkLive(idx int32) {
	l := &k.leases[idx]
	h := &k.holders[l.holder]
	if l.prevLive >= 0 {
		k.leases[l.prevLive].nextLive = l.nextLive
	} else {
		h.head = l.nextLive
	}
	if l.nextLive >= 0 {
		k.leases[l.nextLive].prevLive = l.prevLive
	} else {
		h.tail = l.prevLive
	}
	l.prevLive, l.nextLive = -1, -1
	h.live--
}

// leaseRef is a lease found by id: live (idx ≥ 0) or ended (a record of the ended table).
type leaseRef struct {
	idx   int32
	ended *endedLease
}

// findLease resolves a lease id for tenant at slot. Another tenant's lease behaves exactly
// as if it did not exist; an ended lease past its history window, or an id at or below
// the retired watermark that is not held, reads lease_retired; any other unknown id
// lease_not_found.
func (k *Kernel) findLease(tenant string, lsn, slot uint64) (leaseRef, Code) {
	if idx, ok := k.leaseIdx[lsn]; ok && k.leaseLike(lsn) {
		if t, _ := splitKey(k.holders[k.leases[idx].holder].key); t == tenant {
			return leaseRef{idx: idx}, contract.CodeOK
		}
	} else if _, e := k.ended.find(lsn); e != nil {
		if t, _ := splitKey(k.holders[e.holder].key); t == tenant {
			if e.retireAfter < slot {
				return leaseRef{idx: -1}, contract.CodeLeaseRetired // retire has not dropped it yet
			}
			return leaseRef{idx: -1, ended: e}, contract.CodeOK
		}
	}
	if lsn <= k.retired {
		return leaseRef{idx: -1}, contract.CodeLeaseRetired
	}
	return leaseRef{idx: -1}, contract.CodeLeaseNotFound
}

// namedLease finds the lease a verb names, as findLease does, and says in out why not. A
// lease not found whose id an undecided bundle begun here in parallel will take makes the
// verb wait for the decision instead (Undecided): its client may hold the id from the
// early answer already, and a restarted home prepares such a bundle again and commits it
// (docs/api.md §2: nothing after the answer misses the lease).
func (k *Kernel) namedLease(tenant string, lsn, slot uint64, out *Output) (leaseRef, bool) {
	r, code := k.findLease(tenant, lsn, slot)
	if code == contract.CodeLeaseNotFound && k.undecidedID(tenant, lsn).waitFor(out) {
		return r, false
	}
	out.Code = code
	return r, code == contract.CodeOK
}

// undecidedID is tenant's undecided record, begun here in parallel, whose lease will have
// id lsn once committed — a bundle's, its begin one past its id, or a lease of an import
// across shards, its id kept in the record — or nil. A walk of the undecided records, at
// most MaxPendingBundles, only for a lease not found; at most one has the id.
func (k *Kernel) undecidedID(tenant string, lsn uint64) *bundle {
	for txn := range k.pending {
		b := k.bundles[txn]
		if b == nil || !b.home(k.shard) || b.failed != contract.CodeOK || b.earlyID() != lsn {
			continue
		}
		if idx, ok := k.leaseIdx[txn]; ok {
			if t, _ := splitKey(k.holders[k.leases[idx].holder].key); t == tenant {
				return b
			}
		}
		return nil
	}
	return nil
}

// leaseLike reports whether live record lsn is a lease a client may name: not a bundle's
// undecided begin, nor a participant's part of a bundle whose lease lives at its home.
func (k *Kernel) leaseLike(lsn uint64) bool {
	b := k.bundles[lsn]
	return b == nil || (!b.pending && b.home(k.shard))
}

// view fills the current view of a found lease.
func (k *Kernel) view(r leaseRef, out *Output) {
	if r.ended != nil {
		k.viewEnded(r.ended, out)
	} else {
		k.viewLease(r.idx, out)
	}
}

func (k *Kernel) memberView(m leaseMember) MemberView {
	mv := MemberView{Kind: m.kind, Quantity: m.quantity, Value: m.value}
	switch m.kind {
	case MemberResource:
		_, mv.ID = splitKey(k.res[m.obj].key)
	case MemberPool:
		_, mv.ID = splitKey(k.pools[m.obj].key)
	case MemberRange:
		_, mv.ID = splitKey(k.ranges[m.obj].key)
	case MemberWork:
		w := &k.works[m.obj]
		_, mv.ID = splitKey(k.runs[w.run].key)
		mv.Name = w.name
	}
	return mv
}

func (k *Kernel) viewLease(idx int32, out *Output) {
	l := &k.leases[idx]
	t, h := splitKey(k.holders[l.holder].key)
	out.Object = ObjectLease
	members := out.Lease.Members[:0]
	for _, m := range l.members {
		members = append(members, k.memberView(m))
	}
	members = k.remoteViews(l.lsn, members)
	shard, lsn := k.leaseID(l.lsn) // a participant's part shows the lease at its home
	out.Lease = LeaseView{Shard: shard, LSN: lsn, Tenant: t, HolderID: h, State: l.state,
		Epoch: l.epoch, CreatedLSN: lsn, DeadlineSlot: l.deadline, KeepAliveSlots: l.keepalive, Members: members,
		Labels: k.labelsOf(l.labels), AllocatedAtMillis: k.slotMillis(l.created)}
}

func (k *Kernel) viewEnded(e *endedLease, out *Output) {
	t, h := splitKey(k.holders[e.holder].key)
	out.Object = ObjectLease
	members := out.Lease.Members[:0]
	for i := 0; i < int(e.members); i++ {
		members = append(members, k.memberView(k.ended.member(e, i)))
	}
	members = k.remoteViews(e.lsn, members)
	out.Lease = LeaseView{Shard: k.shard, LSN: e.lsn, Tenant: t, HolderID: h, State: e.state,
		Epoch: uint64(e.epoch), CreatedLSN: e.lsn, DeadlineSlot: e.deadline, ReleasedLSN: e.releasedLSN,
		RetireAfterSlot: e.retireAfter, Members: members, Labels: k.labelsOf(k.endedLabels[e.lsn]),
		AllocatedAtMillis: k.slotMillis(e.created)}
}

// slotMillis is slot s as Unix milliseconds (slots count from the Unix epoch, docs/api.md
// §3): a lease's allocated_at, arithmetic on its journaled slot, no clock. 0 stays 0 (a
// lease restored from a snapshot older than format 8 has no recorded slot), and so does a
// slot past any time a clock shows (beyond 2^63 ms).
func (k *Kernel) slotMillis(s uint64) uint64 {
	if s == 0 || s > math.MaxInt64/max(k.shape.SlotMillis, 1) {
		return 0
	}
	return s * k.shape.SlotMillis
}

// GetLease reads a lease of tenant at slot: ok, lease_not_found or lease_retired.
func (k *Kernel) GetLease(tenant string, lsn, slot uint64, out *Output) {
	out.reset(k.lastLSN)
	r, ok := k.namedLease(tenant, lsn, slot, out)
	if !ok {
		return
	}
	k.view(r, out)
}

// ListLeases appends the live leases (reserved, active, revoking) of tenant's holder, in
// lsn order, at most limit of them; truncated reports that limit cut the list. It is
// lease.list by holder without a cursor (List).
func (k *Kernel) ListLeases(tenant, holderID string, limit int, dst []LeaseView) ([]LeaseView, bool) {
	var p ListPage
	k.List(&ListQuery{Verb: contract.VerbListLeases, Tenant: tenant, ID: holderID, Limit: limit}, &p)
	return append(dst, p.Leases...), p.More
}

// leaseVerb runs activate, renew, release, revoke and reclaim in the contract's check
// order: existence (tenant-scoped), holder, epoch, state, deadline.
func (k *Kernel) leaseVerb(e Entry, out *Output) {
	c := e.Cmd
	r, ok := k.namedLease(c.Tenant, c.LeaseLSN, e.Slot, out)
	if !ok {
		return
	}
	if c.Verb == contract.VerbActivate || c.Verb == contract.VerbRenew || c.Verb == contract.VerbRelease {
		if out.Code = k.checkFence(r, c); out.Code != contract.CodeOK {
			return
		}
	}
	if r.ended != nil {
		out.Code = contract.CodeInvalidState // every verb needs a live lease
		return
	}
	idx := r.idx
	l := &k.leases[idx]
	switch c.Verb {
	case contract.VerbActivate, contract.VerbRenew:
		// A renew also keeps an active lease with a keep-alive alive.
		renewActive := c.Verb == contract.VerbRenew && l.state == LeaseActive && l.keepalive > 0
		if l.state != LeaseReserved && !renewActive {
			out.Code = contract.CodeInvalidState
			return
		}
		if e.Slot >= l.deadline {
			out.Code = contract.CodeLeaseExpired
			return
		}
		if c.Verb == contract.VerbActivate && k.leaseWork(leaseRef{idx: idx}) >= 0 {
			out.Code = contract.CodeInvalidState // a work claim keeps its deadline
			return
		}
		switch {
		case c.Verb == contract.VerbActivate && c.KeepAliveSlots > 0:
			l.keepalive, l.deadline = c.KeepAliveSlots, e.Slot+c.KeepAliveSlots
			k.expiry.fix(k, idx)
			k.setMembersState(idx, LeaseActive)
			out.Event = EventLeaseActivated
		case c.Verb == contract.VerbActivate:
			k.expiry.remove(k, idx)
			l.deadline = 0
			k.setMembersState(idx, LeaseActive)
			out.Event = EventLeaseActivated
		default:
			// A renew never shortens a work claim or a keep-alive: their holders may
			// have planned by the deadline they were given (docs/api.md Part III).
			w := k.leaseWork(leaseRef{idx: idx})
			if d := e.Slot + c.TTLSlots; d > l.deadline || (!renewActive && w < 0) {
				l.deadline = d
			}
			k.expiry.fix(k, idx)
			if w >= 0 {
				k.requeue(w, qHeld)
			}
			out.Event = EventLeaseRenewed
		}
	case contract.VerbRelease, contract.VerbRevoke, contract.VerbReclaim:
		if out.Code = endableFrom(c.Verb, l.state); out.Code != contract.CodeOK {
			return
		}
		k.endStep(c.Verb, idx, e, out)
		return
	}
	k.viewLease(idx, out)
}

// endableFrom is the state release, revoke and reclaim each need of a live lease:
// reserved or active, active, revoking; invalid_state otherwise.
func endableFrom(v Verb, s LeaseState) Code {
	ok := false
	switch v {
	case contract.VerbRelease:
		ok = s == LeaseReserved || s == LeaseActive
	case contract.VerbRevoke:
		ok = s == LeaseActive
	case contract.VerbReclaim:
		ok = s == LeaseRevoking
	}
	if !ok {
		return contract.CodeInvalidState
	}
	return contract.CodeOK
}

// endStep carries out release, revoke or reclaim of live lease idx once its checks have
// passed (endableFrom last): released, moved to revoking under a new epoch, or revoked,
// with the lease's view and event. lease.* and range.* by value share it.
func (k *Kernel) endStep(v Verb, idx int32, e Entry, out *Output) {
	switch v {
	case contract.VerbRelease:
		k.viewEnded(k.end(idx, e, LeaseReleased, true), out)
		out.Event = EventLeaseReleased
	case contract.VerbRevoke:
		k.leases[idx].epoch++
		k.setMembersState(idx, LeaseRevoking)
		out.Event = EventLeaseRevoking
		k.viewLease(idx, out)
	case contract.VerbReclaim:
		k.viewEnded(k.end(idx, e, LeaseRevoked, false), out)
		out.Event = EventLeaseRevoked
	}
}

// checkFence is the holder-authorized verbs' check after existence: the holder, then the
// epoch (docs/api.md §4's order), for the lease verbs and the work verbs alike.
func (k *Kernel) checkFence(r leaseRef, c *Command) Code {
	holder, epoch := k.leaseHolderEpoch(r)
	if _, h := splitKey(k.holders[holder].key); h != c.HolderID {
		return contract.CodeHolderMismatch
	}
	if c.Epoch != epoch {
		return contract.CodeStaleEpoch
	}
	return contract.CodeOK
}

func (k *Kernel) leaseHolderEpoch(r leaseRef) (int32, uint64) {
	if r.ended != nil {
		return r.ended.holder, uint64(r.ended.epoch)
	}
	l := &k.leases[r.idx]
	return l.holder, l.epoch
}

// expire ends a reserved lease whose deadline has come. Anything else — renewed, activated,
// released, retired, or a deadline still ahead — is a deterministic no-op.
func (k *Kernel) expire(e Entry, out *Output) {
	c := e.Cmd
	idx, ok := k.leaseIdx[c.LeaseLSN]
	if !ok {
		out.Code = contract.CodeNoop
		return
	}
	l := &k.leases[idx]
	keptAlive := l.state == LeaseActive && l.keepalive > 0
	if !(l.state == LeaseReserved || keptAlive) || l.deadline != c.Deadline || e.Slot < l.deadline {
		out.Code = contract.CodeNoop
		return
	}
	if keptAlive {
		// Its holder stopped renewing but may still be using what it holds: the lease
		// goes to revoking (its epoch fences the holder out), and an operator reclaims.
		k.expiry.remove(k, idx)
		l.deadline = 0
		l.epoch++
		k.setMembersState(idx, LeaseRevoking)
		out.Event = EventLeaseRevoking
		k.viewLease(idx, out)
		return
	}
	k.viewEnded(k.end(idx, e, LeaseExpired, true), out)
	out.Event = EventLeaseExpired
}

// end moves a live lease to a terminal state: its members return to use, it leaves its
// holder's live list and the expiry index, and it moves to the ended table for its
// history window, taking its holder reference and member count along.
func (k *Kernel) end(idx int32, e Entry, to LeaseState, bumpEpoch bool) *endedLease {
	l := &k.leases[idx]
	if l.heapPos >= 0 {
		k.expiry.remove(k, idx)
	}
	k.unindexLease(idx)
	if l.labels != 0 {
		k.endedLabels[l.lsn] = l.labels // the ended lease keeps the reference
	}
	if k.endsInTwoRounds(idx) {
		k.holdEnding(idx) // freed by the home's own free, once every part is ending
	} else {
		k.freeMembers(idx, to == LeaseConsumed, false)
	}
	k.unlinkLive(idx)
	k.live[l.state]--
	if bumpEpoch {
		l.epoch++
	}
	k.ended.push(endedLease{lsn: l.lsn, releasedLSN: e.LSN,
		retireAfter: k.ended.retireAfter(satAdd(e.Slot, k.shape.HistoryWindowSlots)), // an expire is not bounded by CheckSlots
		deadline:    l.deadline, created: l.created, epoch: uint32(l.epoch), holder: l.holder, state: to}, l.members)
	k.freeLiveSlot(idx)
	return k.ended.q.at(k.ended.q.next() - 1)
}
