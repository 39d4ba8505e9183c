package actors

import (
	"cmp"
	"slices"
	"time"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// yields reports whether a bundle (priority, txn) gives way here: an older bundle's
// prepare waits on this shard for one of the members it names here (shards, when set,
// says which members are this shard's). Without it a stream of younger bundles could take
// each member the moment it is freed, before the older one's turn: wait-die would starve.
func (s *shard) yields(priority uint64, txn kernel.TxnRef, tenant string, members []kernel.Member, shards []uint32) bool {
	for _, w := range s.b.waiting {
		if w.tenant != tenant || !older(w.priority, w.txn, priority, txn) || rerun(priority, txn, w.priority, w.txn) {
			continue
		}
		for i := range members {
			if shards != nil && shards[i] != s.h.shard {
				continue
			}
			if slices.ContainsFunc(w.members, func(m kernel.Member) bool { return m.Kind == members[i].Kind && m.ID == members[i].ID }) {
				return true
			}
		}
	}
	return false
}

// prepareIntents journals a participant's prepare and votes once it is applied.
func (s *shard) prepareIntents(m *prepareMsg) {
	s.b.init()
	home := m.txn.Shard
	if s.halted != nil || s.standing() == NotServing {
		s.sendShard(home, &voteMsg{txn: m.txn, shard: s.h.shard, code: contract.CodeEngineHalted})
		return
	}
	txns := []kernel.TxnRef{m.txn} // the parts' transactions
	c := &kernel.Command{Verb: contract.VerbPrepare, Tenant: m.tenant, HolderID: m.holder, Activate: m.activate,
		Members: m.members, Txn: m.txn, Priority: m.priority}
	if m.imports != nil {
		txns, c = partTxns(m), groupCommand(m)
	}
	// Its parts held here already (prepared before: a restarted home asks again), the
	// prepare answers again and gives way to nobody — a home that answered its client
	// before its commit was durable must be able to commit it.
	if held := len(txns) > 0 && s.k.TxnPriority(txns[0]) == m.priority; !held {
		if s.yields(m.priority, m.txn, m.tenant, m.members, nil) {
			s.sendShard(home, &voteMsg{txn: m.txn, shard: s.h.shard, die: true})
			return
		}
		// Known before journaling it: the prepare would only be told so.
		if txn, prio, held := s.k.HeldByUndecided(m.tenant, m.members, nil, m.txn); held {
			s.undecidedPrepare(m, txn, prio)
			return
		}
	}
	for _, txn := range txns {
		s.b.preparing[txn] = true // a mirror behind it is journaled behind it
	}
	ok := s.q.Internal(c, s.stampSlot(), func(r *Reply) {
		for _, txn := range txns {
			delete(s.b.preparing, txn)
		}
		v := &voteMsg{txn: m.txn, shard: s.h.shard, member: r.MemberIndex, code: r.Code}
		if m.imports != nil {
			groupVote(m, r, v)
		}
		switch {
		case r.Undecided:
			s.undecidedPrepare(m, r.Txn, r.TxnPriority)
			return
		case r.Code == contract.CodeOK:
			v.prepared = true
			if m.imports == nil {
				v.members = r.Lease.Members
			}
			for _, txn := range txns {
				s.b.asked[txn] = time.Now()
			}
			s.step(StepPrepared)
		}
		delete(s.b.waitedAt, m)
		s.sendShard(home, v)
	})
	if !ok {
		s.sendShard(home, &voteMsg{txn: m.txn, shard: s.h.shard, code: contract.CodeEngineHalted})
	}
	s.flushLater()
}

// undecidedPrepare is wait-die for a prepare an undecided bundle (txn, priority) stands
// in the way of: an older prepare waits for that younger one's decision; a younger one
// dies, as does one in the way of intents not told apart (txn zero: a pool's units, a
// range's "any" value).
func (s *shard) undecidedPrepare(m *prepareMsg, txn kernel.TxnRef, priority uint64) {
	if txn != (kernel.TxnRef{}) && (older(m.priority, m.txn, priority, txn) || rerun(m.priority, m.txn, priority, txn)) {
		if _, seen := s.b.waitedAt[m]; !seen {
			s.b.waitedAt[m] = time.Now()
		}
		s.b.waiting = append(s.b.waiting, m)
		return
	}
	delete(s.b.waitedAt, m)
	s.sendShard(m.txn.Shard, &voteMsg{txn: m.txn, shard: s.h.shard, die: true})
}

// rerun reports whether (p, t) is a later run of the bundle (q, u): a home runs a bundle
// again, with its priority (unique per bundle: bundleAge), only once its earlier run is
// aborted, so the earlier run's intents here are about to be freed by its mirror. The
// later run waits for that rather than give way to itself (by lsn, its earlier run is
// older): without this a bundle that gave way once met its own stale intents on every
// run and gave way again, and was never granted.
func rerun(p uint64, t kernel.TxnRef, q uint64, u kernel.TxnRef) bool {
	return p == q && t.Shard == u.Shard && t.LSN > u.LSN
}

// older reports whether transaction (p, t) is older than (q, u): wait-die's order.
func older(p uint64, t kernel.TxnRef, q uint64, u kernel.TxnRef) bool {
	return cmp.Or(cmp.Compare(p, q), t.Compare(u)) < 0
}

// mirror journals the home's state of a transaction at this participant.
func (s *shard) mirror(m *mirrorMsg) {
	if s.halted != nil || s.q == nil {
		return
	}
	if !m.state.Live() { // aborted or ended: a prepare still waiting for it is moot
		s.b.waiting = slices.DeleteFunc(s.b.waiting, func(w *prepareMsg) bool { return w.txn == m.txn })
	}
	ack := func() {
		if m.lease != 0 {
			s.sendShard(m.txn.Shard, &ackMsg{lease: m.lease, state: m.state, phase: m.phase, shard: s.h.shard})
		}
	}
	if !s.b.preparing[m.txn] && !s.k.MirrorChanges(m.txn, m.priority, m.state, m.deadline, m.lease, m.phase) {
		ack() // already so, durably (a resend, or a restarted home's resync): nothing to journal
		return
	}
	c := &kernel.Command{Verb: contract.VerbMirror, Txn: m.txn, Priority: m.priority, State: m.state, Deadline: m.deadline,
		LeaseLSN: m.lease, Phase: m.phase}
	s.q.Internal(c, s.stampSlot(), func(*Reply) {
		s.step(StepMirrored)
		ack()
	})
	s.flushLater()
}

// retryWaiting sequences again the prepares waiting for a younger bundle's decision: on
// a tick, and as soon as a batch decided a bundle here (the older one goes first).
func (s *shard) retryWaiting(now time.Time) {
	waiting := s.b.waiting
	s.b.waiting = nil
	slices.SortFunc(waiting, func(a, b *prepareMsg) int { // the oldest first: the others yield to it
		if older(a.priority, a.txn, b.priority, b.txn) {
			return -1
		}
		return 1
	})
	for _, m := range waiting {
		if now.Sub(s.b.waitedAt[m]) > s.prepareBound() {
			delete(s.b.waitedAt, m)
			s.sendShard(m.txn.Shard, &voteMsg{txn: m.txn, shard: s.h.shard, die: true})
			continue
		}
		s.prepareIntents(m)
	}
}

// askHomes asks the home of every transaction this participant holds undecided intents
// for, once per prepare bound; what the home has forgotten is aborted.
func (s *shard) askHomes(now time.Time) {
	s.b.txnBuf = s.k.Undecided(s.b.txnBuf[:0])
	for _, txn := range s.b.txnBuf {
		if txn.Shard == s.h.shard {
			continue
		}
		at, ok := s.b.asked[txn]
		if !ok {
			s.b.asked[txn] = now
			continue
		}
		if now.Sub(at) > s.prepareBound() {
			s.b.asked[txn] = now
			s.sendShard(txn.Shard, &queryMsg{txn: txn, priority: s.k.TxnPriority(txn), shard: s.h.shard})
		}
	}
	if len(s.b.asked) > len(s.b.txnBuf) {
		for txn := range s.b.asked {
			if !slices.Contains(s.b.txnBuf, txn) {
				delete(s.b.asked, txn)
			}
		}
	}
}

// forwardByValue sends a verb by value that found a participant's part of a bundle to
// the lease's home as the lease verb (a bundle always has other members: a release of
// the value alone is refused here, never partial).
func (s *shard) forwardByValue(c *kernel.Command, txn kernel.TxnRef, reply replyFunc) {
	v := kernel.LeaseVerbByValue(c.Verb)
	if v == contract.VerbRelease && !c.WholeLease {
		reply(rejection(contract.CodeLeaseHasOtherMembers, "the value's lease has other members; release it whole (whole_lease) or by lease id", s.applied()))
		return
	}
	if s.h.sys.opts.Peers != nil && !s.h.sys.IsOpen(txn.Shard) {
		// Another node serves the home: the bridge sends the lease verb there.
		reply(&Reply{Elsewhere: true, Txn: txn, LSN: s.applied(), MemberIndex: -1, ItemIndex: -1})
		return
	}
	fwd := &kernel.Command{Verb: v, Tenant: c.Tenant, OperationID: c.OperationID, HolderID: c.HolderID, LeaseLSN: txn.LSN}
	if v == contract.VerbRelease {
		fwd.Epoch = 1 // a releasable lease has not been revoked
	}
	s.h.sys.Write(txn.Shard, fwd, reply)
}
