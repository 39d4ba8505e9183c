package actors

import (
	"time"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// refuseBundleWaits answers, as the shard halts, whoever waits on its next entries or its
// participants for a bundle — the clients of the transactions it coordinates, the writes
// parked to run again, the answers and reads held for an undecided bundle, the answers
// held until the participants apply a change — since it applies and sends nothing more
// until it is recovered from its journal. engine_halted is indefinite: a retry with the
// same operation_id learns the outcome from the recovered shard, which decides the
// bundles it left undecided and tells the participants what they were owed.
func (s *shard) refuseBundleWaits() {
	halted := rejection(contract.CodeEngineHalted, haltedText+": retry the same operation_id then", s.applied())
	for _, co := range s.b.coords {
		co.tell(halted)
	}
	for _, p := range s.b.parked {
		p.reply(halted)
	}
	for _, a := range s.b.answers {
		a.to(halted)
	}
	for _, r := range s.b.reads {
		r.reply(halted)
	}
	s.b.parked, s.b.answers, s.b.reads = nil, nil, nil
	for _, o := range s.b.owed {
		for _, w := range o.waiting {
			if w.leases > 0 { // one answer, however many leases it waited on
				w.leases = 0
				w.to(halted)
			}
		}
		o.waiting = nil
	}
}

// parkedWrite is a client write that found a member an undecided bundle holds, or a
// bundle to run again: sequenced again on a tick from notBefore on.
type parkedWrite struct {
	cmd       *kernel.Command
	reply     replyFunc
	since     time.Time
	notBefore time.Time
}

// heldAnswer is a write's answer whose view of an object (already_exists, object_in_use,
// a resize's view, ...) would count an undecided bundle's members: given, with the
// object's view as decided, once the bundle is decided (undecidedBound at most, then
// timeout: the write is committed and its retry gets the remembered outcome).
type heldAnswer struct {
	to    replyFunc
	reply *Reply
	since time.Time
}

// holdForDecision keeps an answer whose view shows an undecided bundle's intent until no
// undecided bundle holds its object (retryAnswers gives it, with the view then).
func (s *shard) holdForDecision(to replyFunc, r *Reply) {
	s.b.init()
	s.b.answers = append(s.b.answers, heldAnswer{to: to, reply: r, since: time.Now()})
}

// showsIntents reports whether a reply's view of a resource, pool, range, run or work
// shard counts an undecided bundle's members.
func (s *shard) showsIntents(r *Reply) bool {
	if s.k.UndecidedBundles() == 0 {
		return false
	}
	switch r.Object {
	case kernel.ObjectResource, kernel.ObjectPool, kernel.ObjectRange, kernel.ObjectRun, kernel.ObjectWork:
		o := kernel.Output{Object: r.Object, Resource: r.Resource, Pool: r.Pool, Range: r.Range, Run: r.Run, Work: r.Work}
		return s.k.ShowsIntents(&o)
	}
	return false
}

// retryAnswers gives the held answers whose objects no undecided bundle holds now, with
// the objects' views as they are.
func (s *shard) retryAnswers(now time.Time) {
	held := s.b.answers
	s.b.answers = nil
	for _, h := range held {
		r := h.reply
		switch r.Object {
		case kernel.ObjectResource:
			s.k.GetResource(r.Resource.Tenant, r.Resource.ID, &s.out)
			r.Resource = s.out.Resource
		case kernel.ObjectPool:
			s.k.GetPool(r.Pool.Tenant, r.Pool.ID, &s.out)
			r.Pool = s.out.Pool
		case kernel.ObjectRange:
			s.k.GetRange(r.Range.Tenant, r.Range.ID, &s.out)
			r.Range = s.out.Range
		case kernel.ObjectRun:
			s.k.GetRun(r.Run.Tenant, r.Run.ID, &s.out)
			r.Run = s.out.Run
		case kernel.ObjectWork:
			s.k.GetWork(r.Work.Tenant, r.Work.RunID, r.Work.Name, &s.out)
			r.Work = copyWork(s.out.Work)
		}
		switch {
		case !s.showsIntents(r):
			r.AppliedLSN = s.applied()
			h.to(r)
		case !now.IsZero() && now.Sub(h.since) > s.undecidedBound():
			h.to(rejection(contract.CodeTimeout, "the answer names what an undecided bundle holds; retry the same operation_id", s.applied()))
		default:
			s.b.answers = append(s.b.answers, h)
		}
	}
}

// park holds a write until the bundle in its way is decided (or for a tick).
func (s *shard) park(p parkedWrite) {
	if len(s.b.parked) >= maxParked {
		p.reply(rejection(contract.CodeOverloaded, "too many writes waiting for undecided bundles", s.applied()))
		return
	}
	s.b.parked = append(s.b.parked, p)
}

// bundleTick runs once a slot: the home aborts what its participants did not all answer
// within the prepare bound; parked writes and waiting prepares try again; participants
// ask about intents held past the bound; reads waiting for a decision try again.
func (s *shard) bundleTick(now time.Time) {
	if s.b.coords == nil && len(s.b.reads) == 0 && len(s.b.parked) == 0 && len(s.b.waiting) == 0 && len(s.b.answers) == 0 &&
		s.k.UndecidedBundles() == 0 {
		return // this shard takes no part in a bundle
	}
	s.b.init()
	s.resendOwed(now)
	if !s.holding() { // a copy is being taken: no bundle step is sequenced (backup.go)
		for _, co := range s.b.coords {
			switch {
			case co.deciding:
			case co.recovering && now.Sub(co.started) > s.prepareBound():
				// Never aborted on a timeout (its client may have been answered): asked again.
				// Past the wait bound a retry waiting on it is told timeout (indefinite), as the
				// participant it waits for may be down for long.
				co.started = now
				s.sendPrepares(co, true)
				if now.Sub(co.first) > s.undecidedBound() {
					co.tell(rejection(contract.CodeTimeout, "the bundle is being decided again after a restart; retry the same operation_id", s.applied()))
				}
			case !co.recovering && (now.Sub(co.started) > s.prepareBound() || now.Sub(co.first) > s.undecidedBound()):
				s.abort(co, refusal{}, false)
			}
		}
		s.retryParked(now)
		s.retryWaiting(now)
	}
	s.askHomes(now)
	s.retryReads(now)
	s.retryAnswers(now)
}

// retryParked sequences again the parked writes that are due: on a tick, when a batch
// decided a bundle here, and when a died bundle's backoff ends (parkedDue).
func (s *shard) retryParked(now time.Time) {
	parked := s.b.parked
	s.b.parked = nil
	for _, p := range parked {
		if now.Before(p.notBefore) {
			s.b.parked = append(s.b.parked, p)
			continue
		}
		if now.Sub(p.since) > s.undecidedBound() {
			p.reply(rejection(contract.CodeTimeout, "a member is held by a bundle across shards not decided in time; retry the same operation_id", s.applied()))
			continue
		}
		if _, _, held := s.k.HeldByUndecided(p.cmd.Tenant, p.cmd.Members, s.here(p.cmd), kernel.TxnRef{}); held {
			s.b.parked = append(s.b.parked, p) // it would only be told so again: no journal entry
			continue
		}
		if len(p.cmd.Shards) > 0 {
			s.beginBundle(p.cmd, p.reply, p.since)
		} else {
			s.writeAgain(p)
		}
	}
	s.flushLater()
}

// writeAgain sequences a parked write again; when it waits again its first wait counts.
func (s *shard) writeAgain(p parkedWrite) {
	if d, r := s.writeSince(p.cmd, p.reply, p.since); d == Answered {
		s.answerAtOnce(p.cmd, p.reply, r)
	}
}

// writeSince sequences c as q.Write does, noting that it has waited since then: held
// reads that when c is answered, so a write parked again waits within its first bound.
func (s *shard) writeSince(c *kernel.Command, reply replyFunc, since time.Time) (Decision, *Reply) {
	s.b.waitedSince[c] = since
	d, r := s.q.Write(c, s.stampSlot(), reply)
	if d != Sequenced {
		delete(s.b.waitedSince, c) // held will not see its answer
	}
	return d, r
}

// here says which of a write's members are this shard's: nil (every one) unless the write
// is a bundle's begin.
func (s *shard) here(c *kernel.Command) func(int) bool {
	if len(c.Shards) == 0 {
		return nil
	}
	return func(i int) bool { return c.Shards[i] == s.h.shard }
}

// parkedDue is a shard's note to itself: a died bundle's backoff ended.
type parkedDue struct{}

// noteDecided notes an applied entry that may have freed intents here.
func (s *shard) noteDecided(v contract.Verb) {
	if v == contract.VerbDecide || v == contract.VerbMirror {
		s.b.decided = true
	}
}

// afterDecided lets the prepares and writes waiting here try again once a batch decided
// a bundle.
func (s *shard) afterDecided() {
	if s.b.decided {
		s.b.decided = false
		if len(s.b.waiting) > 0 {
			s.retryWaiting(time.Now())
		}
		if len(s.b.parked) > 0 {
			s.retryParked(time.Now())
		}
		if len(s.b.answers) > 0 {
			s.retryAnswers(time.Time{})
		}
	}
}

// replyRead answers a read now, or — a resource, pool or range, or a listing's page of
// them, whose view would count an undecided bundle's members — once the bundle is decided
// (undecidedBound at most). The reply says which: its object, or its page.
func (s *shard) replyRead(m *readMsg) {
	r := s.answer(&m.req)
	if s.readWaits(r) || s.recoveringBundles() {
		if len(s.b.reads) >= maxParked {
			m.reply(rejection(contract.CodeOverloaded, "too many reads waiting for undecided bundles", s.applied()))
			return
		}
		if m.undecidedUntil.IsZero() {
			m.undecidedUntil = time.Now().Add(s.undecidedBound())
		}
		s.b.reads = append(s.b.reads, m)
		return
	}
	m.reply(r)
}

// recoveringBundles reports whether this home, restarted (or a new owner), is preparing
// again a bundle it began in parallel and never decided: its client may have been
// answered before, so no read here may miss its lease — every read waits for the
// decisions (a prepare round; undecidedBound at most), as readApplied's barrier makes
// reads wait for a commit answered before it was applied. A count, not a walk of the
// coordinators: every read asks.
func (s *shard) recoveringBundles() bool { return s.b.recovering > 0 }

// readWaits reports whether a read's answer would show what an undecided bundle or an
// ending part holds — its object, its page, a lease whose end's rounds are not over here,
// a value range.lookup found held by one (Undecided) — so that it waits for the decision
// or the free.
func (s *shard) readWaits(r *Reply) bool {
	return s.showsIntents(r) || (r.Page != nil && s.k.PageShowsIntents(r.Page)) ||
		(r.Object == kernel.ObjectLease && s.k.LeaseEnding(&r.Lease)) || r.Undecided
}

// retryReads answers the reads waiting for undecided bundles that are decided now, and
// those whose wait ran out (timeout: indefinite).
func (s *shard) retryReads(now time.Time) {
	reads := s.b.reads
	s.b.reads = nil
	for _, m := range reads {
		if !now.IsZero() && !now.Before(m.undecidedUntil) {
			m.reply(rejection(contract.CodeTimeout, "the read names what an undecided bundle holds; retry", s.applied()))
			continue
		}
		s.replyRead(m)
	}
}
