package kernel

import "github.com/holdfast/holdfast/contract"

// Parallel commits (docs/design.md "Parallel commits"): the home of a bundle whose begin
// says so answers its client once the begin and every prepare are durable — the bundle is
// then implicitly committed — with the view its commit will give, and journals the commit
// after. These are the kernel's reads for it; the commit itself is decide's, its lease's
// place commitPlace's.

// hasValueFlag marks, in a snapshot (format 11), a remote member of a parallel bundle that
// asked for a specific value.
const hasValueFlag MemberKind = 0x80

func hasValueBit(set bool) byte {
	if set {
		return byte(hasValueFlag)
	}
	return 0
}

// CommitView fills out with what the commit of bundle txn, begun here in parallel and
// undecided, will show — its lease (the skip's position before the begin), every member
// in the reserve's order with the values of members (the decide's, from the votes), its
// state and deadline from the begin's slot — as the answer given before the commit is
// applied. It reports false for any other record: a bundle of an earlier format, or one
// its own members refused, is answered by its decision.
func (k *Kernel) CommitView(txn TxnRef, members []Member, out *Output) bool {
	out.reset(k.lastLSN)
	b := k.bundles[txn.LSN]
	if txn.Shard != k.shard || b == nil || !b.pending || !b.parallel || !b.home(k.shard) || b.failed != contract.CodeOK || b.group != 0 {
		return false // an import's leases are answered together: GroupView
	}
	id := b.earlyID()
	k.viewAsCommitted(txn.LSN, id, members, out)
	out.LSN, out.Code = id, contract.CodeOK
	return true
}

// viewAsCommitted fills out with the view undecided record lsn will have once committed
// as lease id: active or reserved, its deadline by the rule goLive applies (liveTerms),
// its remote members with the values members (the request's, resolved) give.
func (k *Kernel) viewAsCommitted(lsn, id uint64, members []Member, out *Output) {
	b, idx := k.bundles[lsn], k.leaseIdx[lsn]
	l := &k.leases[idx]
	k.viewLease(idx, out)
	out.Lease.LSN, out.Lease.CreatedLSN = id, id
	if b.activate {
		out.Lease.State = LeaseActive
	}
	out.Lease.KeepAliveSlots, out.Lease.DeadlineSlot, _ = liveTerms(l.keepalive, l.deadline, l.created, b.activate, b.ttlSlots, b.keepAliveSlots)
	for _, r := range b.remote {
		if int(r.index) < len(members) && int(r.index) < len(out.Lease.Members) {
			m := &out.Lease.Members[r.index]
			m.Quantity, m.Value = members[r.index].Quantity, members[r.index].Value
		}
	}
}

// BeginCommand rebuilds the reserve of bundle lsn, begun here in parallel and undecided,
// as a restarted home needs it to prepare the bundle again (it cannot abort it: its client
// may have been answered): tenant, holder, every member in the reserve's order with its
// shard, the activation and the age. Nil for any other record.
func (k *Kernel) BeginCommand(lsn uint64) *Command {
	b := k.bundles[lsn]
	if b == nil || !b.pending || !b.parallel || !b.home(k.shard) || b.failed != contract.CodeOK {
		return nil
	}
	l := &k.leases[k.leaseIdx[lsn]]
	tenant, holder := splitKey(k.holders[l.holder].key)
	n := len(l.members) + len(b.remote)
	c := &Command{Verb: contract.VerbReserve, Tenant: tenant, HolderID: holder, Activate: b.activate,
		TTLSlots: b.ttlSlots, KeepAliveSlots: b.keepAliveSlots, Priority: b.priority, Phase: PhaseEnding, Parallel: true,
		Members: make([]Member, n), Shards: make([]uint32, n)}
	remote := make([]bool, n)
	for _, r := range b.remote {
		if int(r.index) < n {
			c.Members[r.index] = Member{Kind: r.kind, ID: r.id, Name: r.name, Quantity: r.quantity, Value: r.value, HasValue: r.hasValue}
			c.Shards[r.index], remote[r.index] = r.shard, true
		}
	}
	j := 0
	for i := range n {
		if remote[i] || j >= len(l.members) {
			continue
		}
		v := k.memberView(l.members[j])
		j++
		c.Members[i] = Member{Kind: v.Kind, ID: v.ID, Name: v.Name, Quantity: v.Quantity, Value: v.Value, HasValue: v.Kind == MemberRange}
		c.Shards[i] = k.shard
	}
	return c
}
