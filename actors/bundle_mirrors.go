package actors

import (
	"slices"
	"time"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// noteMirrors collects the mirrors an applied entry owes its participants (Output.Mirror).
func (s *shard) noteMirrors(o *kernel.Output) {
	if !o.Mirror {
		return
	}
	add := func(l *kernel.LeaseView) {
		if txn := s.k.BundleTxn(l.LSN); txn.LSN != 0 {
			s.owe(mirrorMsg{txn: txn, priority: s.k.BeginPriority(txn.LSN), state: l.State, deadline: l.DeadlineSlot, lease: l.LSN,
				phase: s.k.EndPhase(l.LSN)})
		}
	}
	if o.ShowsLease() {
		add(&o.Lease)
	}
	for i := range o.Changes {
		add(&o.Changes[i].Lease)
	}
}

// owed is a mirror the home sends until every participant acknowledges it (ackMsg): a
// mirror lost with a participant's crash, or never sent before the home's, would leave
// members held for a lease that moved on.
type owed struct {
	msg     mirrorMsg
	shards  []uint32 // the participants that have not acknowledged it
	sent    time.Time
	waiting []*ackWait // answers held until it is acknowledged
}

// ackWait is a client's answer to a lease verb that changed bundles' leases (release,
// revoke, ...): held until every participant has applied the change, so that a read of
// any member after the answer sees it (the change is one step, as for one shard). Past
// ackBound it is given anyway: the change is durable at the home and the participants
// follow.
type ackWait struct {
	to     replyFunc
	reply  *Reply
	leases int // owed mirrors not acknowledged yet
	since  time.Time
}

// awaitAcks holds a write's answer while a mirror its entry owes is not acknowledged.
func (s *shard) awaitAcks(a Answer[replyFunc]) bool {
	if len(s.b.owed) == 0 || a.Reply.Code != contract.CodeOK {
		return false
	}
	w := &ackWait{to: a.To, reply: a.Reply, since: time.Now()}
	wait := func(l *kernel.LeaseView) {
		// An end in two rounds is answered once every part is ending (the first round): a
		// read of any member after the answer waits for its free, and sees it free.
		if o := s.b.owed[l.LSN]; o != nil && l.Shard == s.h.shard && o.msg.state == l.State && len(o.shards) > 0 {
			o.waiting = append(o.waiting, w)
			w.leases++
		}
	}
	if a.Reply.Lease.LSN != 0 { // a lease verb's, or a work verb's that ended its claim
		wait(&a.Reply.Lease)
	}
	for i := range a.Reply.Changes {
		wait(&a.Reply.Changes[i].Lease)
	}
	return w.leases > 0
}

// answerAtOnce gives an answer the sequencer gave without appending anything (a
// rejection, or a retry's remembered result) as the first answer was given: a retry
// whose view of its object shows an undecided bundle's intent waits for the decision
// (held), and a remembered ok of a verb that changed a bundle's lease waits until every
// participant has applied the change (awaitAcks). A client whose first answer was lost
// retries, and what the retry shows must hold as the first answer's did.
func (s *shard) answerAtOnce(c *kernel.Command, reply replyFunc, r *Reply) {
	switch {
	case !c.Verb.IsInternal() && s.showsIntents(r):
		s.holdForDecision(reply, r)
	case !s.awaitAcks(Answer[replyFunc]{To: reply, Reply: r, Cmd: c}):
		reply(r)
	}
}

// release answers the held answers of an acknowledged (or given up) mirror whose last
// owed lease it was.
func (o *owed) release() {
	for _, w := range o.waiting {
		if w.leases--; w.leases == 0 {
			w.to(w.reply)
		}
	}
	o.waiting = nil
}

// ackMsg is a participant's acknowledgement that a mirror of the lease is applied.
type ackMsg struct {
	lease uint64
	state kernel.LeaseState
	phase kernel.Phase
	shard uint32
}

// owe records the latest state of a bundle's lease as owed to its participants (an older
// state still owed is superseded), to be sent after the batch.
func (s *shard) owe(m mirrorMsg) {
	s.b.init()
	o := &owed{msg: m, shards: s.k.BundleShards(m.lease, nil)}
	if len(o.shards) == 0 {
		return
	}
	if old := s.b.owed[m.lease]; old != nil {
		o.waiting = old.waiting // answered once the newer state is applied, which implies theirs
	}
	s.b.owed[m.lease] = o
	s.b.mirrors = append(s.b.mirrors, m)
}

// sendMirrors sends the mirrors the last batch owes, each to its lease's participants.
func (s *shard) sendMirrors() {
	for _, m := range s.b.mirrors {
		if m.state.Terminal() && !m.second {
			s.step(StepEnding)
		}
		if o := s.b.owed[m.lease]; o != nil && o.msg == m {
			s.resend(o, time.Now())
		}
	}
	s.b.mirrors = s.b.mirrors[:0]
}

func (s *shard) resend(o *owed, now time.Time) {
	o.sent = now
	for _, sh := range o.shards {
		m := o.msg
		s.sendShard(sh, &m)
	}
}

// acked takes a participant's acknowledgement: that lease's latest state is applied there.
func (s *shard) acked(m *ackMsg) {
	o := s.b.owed[m.lease]
	if o == nil || o.msg.state != m.state || o.msg.phase != m.phase {
		return
	}
	o.shards = slices.DeleteFunc(o.shards, func(sh uint32) bool { return sh == m.shard })
	if len(o.shards) == 0 {
		delete(s.b.owed, m.lease)
		o.release()
		switch {
		case o.msg.phase == kernel.PhaseEnding:
			s.freeRound(o.msg, true)
		case o.msg.phase == kernel.PhaseFree && s.k.Freeing(m.lease):
			s.freeRound(o.msg, false) // a short end: the one other shard freed its part
		}
	}
}

// freeRound starts an end's second round once every participant's part is ending: the
// home journals its own free and tells the participants to free theirs (tell; resent
// until each acknowledges). Nobody reads a member of the lease held any more, so the
// frees may land in any order; the home's record keeps the round owed until its own is
// journaled (a restart resends whichever round its journal says: recoverBundles). A
// short end's one other shard has freed its part already: the home frees its own.
func (s *shard) freeRound(m mirrorMsg, tell bool) {
	s.step(StepFreeing)
	c := &kernel.Command{Verb: contract.VerbMirror, Txn: m.txn, Priority: m.priority, State: m.state, LeaseLSN: m.lease,
		Phase: kernel.PhaseFree}
	s.q.Internal(c, s.stampSlot(), func(*Reply) {})
	if tell {
		m.phase, m.second = kernel.PhaseFree, true
		s.owe(m)
		s.sendMirrors()
	}
	s.flushLater()
}

// ackBound is how long a lease verb's answer waits for its mirrors' acknowledgements: the
// prepare bound, but given a tick (this runs once a slot) before the request's bound ends,
// so that the client gets the answer rather than a timeout.
func (s *shard) ackBound() time.Duration {
	return max(min(s.prepareBound(), s.undecidedBound()-s.h.sys.opts.Slot), 0)
}

// resendOwed sends again what participants have not acknowledged within the prepare bound.
func (s *shard) resendOwed(now time.Time) {
	for _, o := range s.b.owed {
		if len(o.waiting) > 0 && now.Sub(o.waiting[0].since) > s.ackBound() {
			o.release() // the participants follow; the client has waited long enough
		}
		if now.Sub(o.sent) > s.prepareBound() {
			s.resend(o, now)
		}
	}
}
