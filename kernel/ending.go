package kernel

import (
	"math"

	"github.com/holdfast/holdfast/contract"
)

// Endings in two rounds (docs/design.md "Endings in two rounds"). A bundle lease across
// shards ends at its home — its state terminal at once, as any lease's — but its members
// are freed only once every shard of it has marked its part ending: until then a part
// holds its members for nobody to read or take (readers and writers wait, as for an
// intent), so no reader sees one member freed by the end and then another still held.
// At the home the part is its own: the lease's members on the home move, at the end, to
// a record like a participant's part (holdEnding), freed by the home's own free.

// waiting reports whether record lsn holds its members for nobody to see: an undecided
// bundle's intents, or the part of an ending lease.
func (k *Kernel) waiting(lsn uint64) bool { return k.pending[lsn] || k.ending[lsn] }

// endsInTwoRounds reports whether lease record idx, ending now, is a bundle's at its home
// whose end keeps its members held by the home's own part.
func (k *Kernel) endsInTwoRounds(idx int32) bool {
	b := k.bundles[k.leases[idx].lsn]
	return b != nil && b.twoRound && b.home(k.shard) && !b.pending
}

// holdEnding moves the members of bundle lease idx, which is ending, to the home's own
// part of its transaction: a record at the begin's lsn (no lease's id: a lease id is its
// committing entry's) holding them in the state they were held in, ending, which no lease
// verb, listing or expiry sees. A work shard the end finished (done, parked or split) is
// not kept: it is the end's, held by no one. With no member left there is no part; the
// home's record says the rounds are not over (freeing) either way. The part's members are
// counted by the ended lease's record (its member count), not again.
func (k *Kernel) holdEnding(idx int32) {
	b := k.bundles[k.leases[idx].lsn]
	b.freeing = true
	key := b.txn.LSN
	var part []leaseMember
	for _, m := range k.leases[idx].members {
		if m.kind == MemberWork {
			w := &k.works[m.obj]
			k.dequeue(m.obj, qHeld)
			if w.status != WorkActive {
				w.lease = 0
				continue
			}
			w.lease = key
			k.enqueue(m.obj, qHeld) // deadline 0 (the part's): first in its run's held queue
		}
		part = append(part, m)
	}
	if len(part) == 0 {
		return
	}
	holder := []byte(k.holders[k.leases[idx].holder].key)
	p := k.newLease(key, holder) // may move k.leases: l is taken after it
	l, own := &k.leases[idx], &k.leases[p]
	own.state, own.epoch, own.created = l.state, l.epoch, l.created
	own.members = append(own.members, part...)
	for _, m := range part {
		if m.kind == MemberResource {
			k.res[m.obj].lease = key
		}
	}
	k.indexMembers(p, true) // the lease's own entries are gone (end: unindexLease)
	k.bundles[key] = &bundle{txn: b.txn, priority: b.priority, lease: l.lsn, ending: true, ownPart: true}
	k.txns[b.txn] = key
	k.ending[key] = true
}

// freeOwn is the home's own free (a bundle.mirror of PhaseFree for a transaction it is
// home of): every participant's part is ending, so the home frees its own and its record
// says the rounds are over. A transaction whose rounds are over changes nothing.
func (k *Kernel) freeOwn(c *Command, out *Output) {
	rec, ok := k.begins[c.Txn.LSN]
	b := k.bundles[rec]
	if !ok || !b.freeing || c.Phase != PhaseFree || !k.sameTxn(rec, c.Priority) {
		out.Code = contract.CodeNoop
		return
	}
	b.freeing = false
	if lsn, ok := k.txns[c.Txn]; ok {
		k.dropIntents(k.leaseIdx[lsn], c.State == LeaseConsumed)
		delete(k.txns, c.Txn)
	}
}

// usedOnlyByWaiting reports whether object idx of table g, in use, is held only by
// records that wait for a decision or a free: a resource's holder, a pool's every unit,
// a range's every value. A run's work is never such alone here (false).
func (k *Kernel) usedOnlyByWaiting(g graveKind, idx int32) bool {
	if k.UndecidedBundles() == 0 {
		return false
	}
	switch g {
	case graveResource:
		return k.waiting(k.res[idx].lease)
	case gravePool:
		p := &k.pools[idx]
		return p.reserved+p.active == k.intentUnits(MemberPool, p.key)
	case graveRange:
		r := &k.ranges[idx]
		return r.allocated.Len() == k.intentUnits(MemberRange, r.key)
	}
	return false
}

// EndPhase is, for the bundle lease lsn at its home, what its participants are to do
// with their parts: PhaseEnding while its rounds are not over (mark them ending; the
// frees follow), PhaseFree once over (free them) — and at once when one shard besides
// the home holds members (the short end: the home's own part, ending from the end on, is
// the one every reader waits for, so that one shard may free its part right away) —
// PhaseNone for a live lease or one that ends in one round.
func (k *Kernel) EndPhase(lsn uint64) Phase {
	b := k.bundles[lsn]
	switch {
	case b == nil || !b.home(k.shard) || !b.twoRound || b.pending:
		return PhaseNone
	case b.freeing && !b.short():
		return PhaseEnding
	}
	if _, live := k.leaseIdx[lsn]; live {
		return PhaseNone
	}
	return PhaseFree
}

// Freeing reports whether bundle lease lsn, ended at its home, has its end's rounds not
// over: its own free is still to be journaled. Such a lease does not retire (its record
// names its participants until then), and reads of it wait.
func (k *Kernel) Freeing(lsn uint64) bool {
	b := k.bundles[lsn]
	return b != nil && b.home(k.shard) && b.freeing
}

// short reports whether a home's bundle holds members on one shard besides the home.
func (b *bundle) short() bool {
	for _, r := range b.remote {
		if r.shard != b.remote[0].shard {
			return false
		}
	}
	return true
}

// LeaseEnding reports whether a lease's view (a read's) is of a bundle lease whose end's
// rounds are not over here, at its home: the read waits for them, so that it never says
// ended while a member still reads held.
func (k *Kernel) LeaseEnding(l *LeaseView) bool { return l.Shard == k.shard && k.Freeing(l.LSN) }

// waitFor notes in out that a member the record b holds is to be waited for — an
// undecided bundle's intent (its transaction and priority: wait-die), or an ending part
// (wait-die's youngest: an ending waits for nobody, so whoever wants it waits whatever its
// age, and no cycle forms) — and reports whether it is.
func (b *bundle) waitFor(out *Output) bool {
	switch {
	case b == nil || (!b.pending && !b.ending):
		return false
	case b.pending:
		out.Undecided, out.Txn, out.TxnPriority = true, b.txn, b.priority
	default:
		out.Undecided, out.Txn, out.TxnPriority = true, b.txn, math.MaxUint64
	}
	return true
}
