package kernel

import (
	"slices"

	"github.com/holdfast/holdfast/contract"
)

// Imports across shards (docs/design.md "lease.import across keys"): an import whose
// members fall on several shards is a group — one transaction per lease, begun by one
// entry at the home (the shard of the first lease's first member) and decided by one.
// The import takes 2n positions, 2n-1 skips and its own, the group's name: lease i's id
// is the i-th, its transaction the (n+i)-th, so that the last lease's transaction is the
// import's own position — the layout of a parallel bundle, whose transaction is its begin
// and its id the skip before. Each lease's record holds its home members as intents from
// the begin on, at its transaction, and moves to its id at the commit; each participant
// holds the members of every lease it has any of, lease by lease, in one prepare entry.
// After the commit each lease lives alone: a lease with no member elsewhere is a plain
// lease, any other a bundle lease like a parallel bundle's.

// groupFirst is the transaction of group g's first lease (of n); lease i's is first+i,
// its id first+i-n.
func groupFirst(g uint64, n int) uint64 { return g + 1 - uint64(n) }

// GroupTxn is the transaction of lease i of import g (n leases), g naming the import at
// its home: where the lease's parts are prepared and mirrored.
func GroupTxn(g TxnRef, n, i int) TxnRef {
	return TxnRef{Shard: g.Shard, LSN: groupFirst(g.LSN, n) + uint64(i)}
}

// MarkGroup marks an import whose members fall on several shards (the router gave their
// shards) as a group of bundle leases, ending in two rounds — as Normalize does; the home
// needs it before admission, to know the positions the import will take (SkipsBefore).
func MarkGroup(c *Command) {
	if c.Verb == contract.VerbImport && spansShards(c.Shards) {
		c.Phase, c.Group = PhaseEnding, true
	}
}

// spansShards reports whether shards name more than one shard.
func spansShards(shards []uint32) bool {
	return slices.ContainsFunc(shards, func(s uint32) bool { return s != shards[0] })
}

// importOffsets is where each lease's members start in an import's flattened Shards.
func importOffsets(c *Command) []int {
	off := make([]int, len(c.Imports))
	n := 0
	for i := range c.Imports {
		off[i] = n
		n += len(c.Imports[i].Members)
	}
	return off
}

// holdGroup checks the members of c.Imports that mine selects, lease by lease as one
// shard's import checks them — a pool's units and a range's values counted across the
// leases, so two leases of the import never wait on each other — and holds each lease's
// as intents in a record at at(i) (false: the lease has no record here). It returns each
// lease's record (-1: none), or false with out saying why: refused (the lease in
// ItemIndex, the member in MemberIndex) or waiting for an undecided bundle (Undecided).
func (k *Kernel) holdGroup(e Entry, out *Output, mine func(i, j int) bool, at func(i int) (uint64, bool)) ([]int32, bool) {
	c := e.Cmd
	picks := k.picks[:0]
	defer func() { k.picks = picks[:0] }()
	ends := make([]int, len(c.Imports))
	lsns := make([]uint64, len(c.Imports))
	has := make([]bool, len(c.Imports))
	pending := map[int32]uint64{}
	records := 0
	for i := range c.Imports {
		lsns[i], has[i] = at(i)
		im := &c.Imports[i]
		for j := range im.Members {
			if !mine(i, j) {
				continue
			}
			m := &im.Members[j]
			p, code := k.check(c.Tenant, m, picks, lsns[i], j)
			own := false // refused for the import's own earlier leases alone, definitely
			if code == contract.CodeOK && p.kind == MemberPool {
				pl := &k.pools[p.obj]
				if free := pl.capacity - pl.reserved - pl.active - pl.consumed - pending[p.obj]; free < p.quantity {
					code, own = contract.CodeInsufficientCapacity, true
					// ... unless an undecided bundle's units are what it lacks: wait for them.
					out.Undecided = free+k.intentUnits(MemberPool, pl.key) >= p.quantity
				}
				pending[p.obj] += p.quantity
			}
			if code != contract.CodeOK {
				out.Code, out.ItemIndex, out.MemberIndex = code, i, j
				if !own {
					k.noteIntent(c.Tenant, m, code, out)
				}
				return nil, false
			}
			picks = append(picks, p)
		}
		ends[i] = len(picks)
		if has[i] {
			records++
		}
	}
	if len(k.pending)+records > MaxPendingBundles {
		out.Code = contract.CodeOverloaded
		return nil, false
	}
	if code := k.checkBoundsN(records, len(picks), 0, e.Slot); code != contract.CodeOK {
		out.Code, out.ItemIndex, out.MemberIndex = code, 0, -1
		return nil, false
	}
	idxs := make([]int32, len(c.Imports))
	start := 0
	for i := range c.Imports {
		idxs[i] = -1
		if has[i] {
			idxs[i] = k.intentRecord(lsns[i], e.Slot, c.Tenant, c.Imports[i].HolderID, picks[start:ends[i]])
		}
		start = ends[i]
	}
	return idxs, true
}

// importBegin is a lease.import across shards at its home: every lease gets a record at
// its transaction (its id n positions before) holding its home members as intents,
// undecided, seen by nobody until the group's decision. A retry of a begun import changes
// nothing and is told Pending again; a refusal of the home's members is the import's
// answer (definite, remembered), its participants' prepares void.
func (k *Kernel) importBegin(e Entry, out *Output) {
	c := e.Cmd
	n := len(c.Imports)
	if c.Shards[0] != k.shard || !spansShards(c.Shards) {
		out.Code = contract.CodeInvalidRequest // a runtime fault: not an import this shard is home of
		return
	}
	key := makeOpKey(c.Tenant, c.OperationID)
	if g, ok := k.pendingOps[key]; ok {
		out.Pending, out.Object, out.Lease = true, ObjectLease, LeaseView{Shard: k.shard, LSN: g}
		return
	}
	first, off := groupFirst(e.LSN, n), importOffsets(c)
	home := func(i, j int) bool { return c.Shards[off[i]+j] == k.shard }
	idxs, ok := k.holdGroup(e, out, home, func(i int) (uint64, bool) { return first + uint64(i), true })
	if !ok {
		return
	}
	var hash uint64
	hash, k.hashBuf = commandHash(c, k.hashBuf)
	for i := range c.Imports {
		im, lsn := &c.Imports[i], first+uint64(i)
		b := &bundle{txn: TxnRef{Shard: k.shard, LSN: lsn}, pending: true, priority: c.Priority, op: key, hash: hash,
			activate: im.Activate, ttlSlots: im.TTLSlots, keepAliveSlots: im.KeepAliveSlots, twoRound: true, parallel: true,
			group: e.LSN, lease: lsn - uint64(n)}
		for j := range im.Members {
			if m := &im.Members[j]; !home(i, j) {
				b.remote = append(b.remote, remoteMember{index: uint32(j), shard: c.Shards[off[i]+j], kind: m.Kind, id: m.ID,
					name: m.Name, quantity: m.Quantity, value: m.Value, hasValue: m.HasValue})
			}
		}
		k.leases[idxs[i]].labels = k.internLabels(im.Labels)
		k.bundles[lsn], k.begins[lsn], k.pending[lsn] = b, lsn, true
	}
	k.pendingOps[key] = e.LSN
	out.Pending, out.Object, out.Lease = true, ObjectLease, LeaseView{Shard: k.shard, LSN: e.LSN}
}

// prepareGroup holds a participant's members of import c.Txn (its group), lease by lease,
// each lease's in a part of its own at the positions this entry and its skips take, under
// the lease's transaction; or refuses as one shard's import would (the lease in
// ItemIndex, its member in MemberIndex). A prepare of parts already held changes nothing
// and answers the same; parts of a lost begin at the same positions (another priority)
// are freed first.
func (k *Kernel) prepareGroup(e Entry, out *Output) {
	c := e.Cmd
	n := len(c.Imports)
	if c.Txn.Shard == k.shard || c.Txn.LSN < uint64(2*n) || !k.afterSkips(e) {
		out.Code = contract.CodeInvalidRequest // a runtime fault, or a journal's
		return
	}
	txn := func(i int) TxnRef { return GroupTxn(c.Txn, n, i) }
	for i := range c.Imports {
		lsn, held := k.txns[txn(i)]
		if !held || len(c.Imports[i].Members) == 0 {
			continue
		}
		b := k.bundles[lsn]
		switch {
		case c.Priority == 0 || b.priority == c.Priority:
			out.Pending = b.pending
			k.viewParts(c, txn, out)
			return
		case !b.pending:
			out.Code = contract.CodeInvalidRequest // a decided transaction's position is never reused
			return
		}
	}
	for i := range c.Imports {
		if lsn, held := k.txns[txn(i)]; held && k.bundles[lsn].pending {
			k.dropIntents(k.leaseIdx[lsn], false)
			delete(k.txns, txn(i))
		}
	}
	next := e.LSN + 1 - uint64(groupParts(c))
	at := func(i int) (uint64, bool) {
		if len(c.Imports[i].Members) == 0 {
			return 0, false
		}
		next++
		return next - 1, true
	}
	idxs, ok := k.holdGroup(e, out, func(int, int) bool { return true }, at)
	if !ok {
		return
	}
	for i, idx := range idxs {
		if idx < 0 {
			continue
		}
		lsn := k.leases[idx].lsn
		k.bundles[lsn] = &bundle{txn: txn(i), pending: true, priority: c.Priority, activate: c.Imports[i].Activate}
		k.txns[txn(i)], k.pending[lsn] = lsn, true
	}
	out.Pending = true
	k.viewParts(c, txn, out)
}

// viewParts lists a participant's parts of an import in out.Parts, lease by lease.
func (k *Kernel) viewParts(c *Command, txn func(int) TxnRef, out *Output) {
	for i := range c.Imports {
		var v Output
		if lsn, ok := k.txns[txn(i)]; ok {
			k.viewLease(k.leaseIdx[lsn], &v)
		}
		out.Parts = append(out.Parts, v.Lease)
	}
}

// decideGroup records import c.Txn's outcome at its home, for every lease of it at once
// (c.Limit of them). A commit makes each lease live with every member (the remote ones
// as c.Imports resolves them), its deadline counted from the begin's slot — a lease
// with no member elsewhere is a plain lease from now on — and remembers ok for retries,
// naming the last lease's id; an abort frees the intents and drops the records, remembering
// a definite refusal when c.Refusal names one (the lease in c.Value, plus one). A group
// not undecided here is a no-op.
func (k *Kernel) decideGroup(e Entry, out *Output) {
	c := e.Cmd
	g, n := c.Txn.LSN, int(c.Limit)
	first := groupFirst(g, n)
	b0 := k.bundles[first]
	if c.Txn.Shard != k.shard || g < uint64(2*n) || b0 == nil || !b0.pending || b0.group != g || !b0.home(k.shard) {
		out.Code = contract.CodeNoop
		return
	}
	delete(k.pendingOps, b0.op)
	if !c.Commit {
		for i := range n {
			if lsn := first + uint64(i); k.bundles[lsn] != nil && k.bundles[lsn].group == g {
				k.dropIntents(k.leaseIdx[lsn], false) // still undecided as it frees: no version moves
			}
		}
		if c.Refusal != contract.CodeOK {
			k.rememberDecision(b0, c.Refusal, int16(c.RefusalMember)-1, 0, e, c.Value)
		}
		return
	}
	for i := range n {
		lsn := first + uint64(i)
		b, idx := k.bundles[lsn], k.leaseIdx[lsn]
		b.pending = false
		delete(k.pending, lsn)
		if i < len(c.Imports) {
			resolve(b, c.Imports[i].Members)
		}
		k.versions(idx, +1) // the grant is the change
		k.commitValues(idx)
		ev := EventLeaseReserved
		if b.activate {
			k.moveMembers(idx, LeaseActive)
			k.versions(idx, -1) // one change: available → active
			ev = EventLeaseActivated
		}
		k.indexMembers(idx, false) // goLive indexes owner and members together
		k.rekey(idx, b.lease)
		k.goLive(idx, k.leases[idx].created, b.activate, b.ttlSlots, b.keepAliveSlots)
		if len(b.remote) == 0 { // every member here: a plain lease
			delete(k.bundles, b.lease)
			delete(k.begins, lsn)
		}
		var v Output
		k.viewLease(idx, &v)
		out.Changes = append(out.Changes, LeaseChange{Event: ev, Lease: v.Lease})
	}
	out.Mirror = true
	out.LSN = g - uint64(n) // the last lease's id, as the early answer's and a retry's
	k.rememberDecision(b0, contract.CodeOK, -1, 1, e, out.LSN)
}

// resolve takes the values the participants chose into a committing record's remote
// members (members: the lease's, in its request order).
func resolve(b *bundle, members []Member) {
	for i := range b.remote {
		r := &b.remote[i]
		if int(r.index) < len(members) {
			m := &members[r.index]
			r.quantity, r.value = m.Quantity, m.Value
		}
	}
}

// allRemote reports whether record lsn is a lease of an import across shards at its home
// whose members may all be elsewhere: the one lease record that may hold none here.
func (k *Kernel) allRemote(lsn uint64) bool {
	b := k.bundles[lsn]
	return b != nil && b.group != 0 && b.home(k.shard) && len(b.remote) > 0
}

// GroupOf is the group of undecided record lsn begun here (0: none, or not a lease of an
// import across shards) and how many leases it has.
func (k *Kernel) GroupOf(lsn uint64) (g uint64, n int) {
	b := k.bundles[lsn]
	if b == nil || b.group == 0 || !b.home(k.shard) || !b.pending {
		return 0, 0
	}
	return b.group, int(b.txn.LSN - b.lease) // a lease's transaction is its id's n positions on
}

// GroupView fills out with what the commit of import g (n leases), begun here and
// undecided, will show — each lease as its decision will make it, in out.Changes, with
// the values members gives (a lease's, from the votes) — as the answer given before the
// commit is applied. It reports false for any other group.
func (k *Kernel) GroupView(g uint64, n int, members [][]Member, out *Output) bool {
	out.reset(k.lastLSN)
	first := groupFirst(g, n)
	for i := range n {
		lsn := first + uint64(i)
		b := k.bundles[lsn]
		if b == nil || !b.pending || b.group != g || !b.home(k.shard) {
			return false
		}
		var ms []Member
		if i < len(members) {
			ms = members[i]
		}
		var v Output
		k.viewAsCommitted(lsn, b.lease, ms, &v)
		ev := EventLeaseReserved
		if b.activate {
			ev = EventLeaseActivated
		}
		out.Changes = append(out.Changes, LeaseChange{Event: ev, Lease: v.Lease})
	}
	out.Code, out.LSN = contract.CodeOK, groupFirst(g, n)-1 // the last lease's id, as one shard's import's entry is
	return true
}

// GroupCommand rebuilds import g (n leases), begun here and undecided, as a restarted
// home needs it to prepare the group again: tenant, each lease's holder, labels, terms
// and members in its order with their shards, the age. Nil for any other group.
func (k *Kernel) GroupCommand(g uint64, n int) *Command {
	first := groupFirst(g, n)
	c := &Command{Verb: contract.VerbImport, Phase: PhaseEnding, Group: true}
	for i := range n {
		lsn := first + uint64(i)
		b := k.bundles[lsn]
		if b == nil || !b.pending || b.group != g || !b.home(k.shard) {
			return nil
		}
		one := k.BeginCommand(lsn)
		if one == nil {
			return nil
		}
		c.Tenant, c.Priority = one.Tenant, b.priority
		l := &k.leases[k.leaseIdx[lsn]]
		c.Imports = append(c.Imports, ImportLease{HolderID: one.HolderID, Members: one.Members, Activate: b.activate,
			TTLSlots: b.ttlSlots, KeepAliveSlots: b.keepAliveSlots, Labels: k.labelsOf(l.labels)})
		c.Shards = append(c.Shards, one.Shards...)
	}
	return c
}
