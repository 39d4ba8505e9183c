package actors

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// coord is the home's view of one transaction it began.
type coord struct {
	txn      kernel.TxnRef
	cmd      *kernel.Command
	waiters  []replyFunc
	parts    []*coordPart
	begun    bool      // the begin is applied: the home's members are held, or refusal says why not
	refusal  refusal   // the home's own refusal (a member, or a table: member -1)
	deciding bool      // a decide is sequenced
	aborting bool      // ... and it is an abort
	started  time.Time // this run's begin: its votes are due within the prepare bound
	first    time.Time // the first run's: a bundle that keeps giving way ends after the undecided bound
	// Parallel commits (docs/design.md): early is the answer given once every vote was in,
	// before the commit is durable (a retry joining later gets it too); recovering says a
	// restarted home prepares again a bundle it began and never decided, which it may
	// abort only on a participant's refusal, never on a timeout: its client may have been
	// answered before the restart.
	early      *Reply
	recovering bool
}

type coordPart struct {
	shard   uint32
	index   []int // the reserve's members this shard holds
	voted   bool
	members []kernel.MemberView
	refusal refusal // a refused prepare's code and member (an index of the reserve; -1: a table)
}

// refusal is a shard's definite refusal of its part of a bundle (ok: none).
type refusal struct {
	code   contract.Code
	member int
}

// first is the refusal the bundle answers: the earliest member's in request order, as one
// shard checks members one by one, and a table's only when no member is refused.
func first(a, b refusal) refusal {
	switch {
	case a.code == contract.CodeOK:
		return b
	case b.code == contract.CodeOK:
		return a
	case a.member < 0:
		if b.member >= 0 {
			return b
		}
		return a
	case b.member >= 0 && b.member < a.member:
		return b
	}
	return a
}

// beginBundle takes a reserve whose members fall on several shards (Shards set by the
// router): it is sequenced as the begin here, and the prepares go to the participants at
// once, in parallel with the begin's journal write. first is when the bundle first ran
// (now, unless it runs again after giving way).
func (s *shard) beginBundle(c *kernel.Command, reply replyFunc, first time.Time) {
	if s.holding() { // a copy is being taken: the begin waits for its end (backup.go)
		s.b.parked = append(s.b.parked, parkedWrite{cmd: c, reply: reply, since: first, notBefore: time.Now()})
		return
	}
	s.b.init()
	kernel.MarkGroup(c) // before admission: its skips are the group's
	parts := s.coordParts(c)
	if c.Priority == 0 && len(parts) > 0 {
		c.Priority = s.bundleAge() // kept when the bundle runs again: wait-die's age
		if run := s.q.InFlight(c.Tenant, c.OperationID); run != nil && run.Priority != 0 {
			// A retry of a begin still in flight: the same command, byte for byte, so it
			// joins that run (with an age of its own it was an operation_conflict).
			c.Priority = run.Priority
		}
	}
	self := kernel.TxnRef{Shard: s.h.shard, LSN: s.q.Sequenced() + 1 + uint64(kernel.SkipsBefore(c))}
	if len(parts) > 0 && s.yields(c.Priority, self, c.Tenant, bundleMembers(c), c.Shards) {
		s.dieLater(c, []replyFunc{reply}, first)
		return
	}
	d, r := s.writeSince(c, reply, first)
	switch {
	case d == Answered:
		s.answerAsStanding(reply, func() { s.answerAtOnce(c, reply, r) })
		return
	case d == Joined || len(parts) == 0: // several keys, one shard: a reserve like any other
		return
	}
	co := &coord{txn: kernel.TxnRef{Shard: s.h.shard, LSN: s.q.Sequenced()}, cmd: c, parts: parts, started: time.Now(), first: first}
	s.b.coords[co.txn.LSN] = co
	s.step(StepBegun)
	s.sendPrepares(co, false)
}

// coordParts groups a bundle's members by the shards besides this one that hold them.
func (s *shard) coordParts(c *kernel.Command) []*coordPart {
	var parts []*coordPart
	for i, sh := range c.Shards {
		if sh == s.h.shard {
			continue
		}
		j := slices.IndexFunc(parts, func(p *coordPart) bool { return p.shard == sh })
		if j < 0 {
			parts = append(parts, &coordPart{shard: sh})
			j = len(parts) - 1
		}
		parts[j].index = append(parts[j].index, i)
	}
	return parts
}

// sendPrepares sends co's prepares: to every participant, or with unvoted to those that
// have not answered yet (a recovering home's resend).
func (s *shard) sendPrepares(co *coord, unvoted bool) {
	c := co.cmd
	for _, p := range co.parts {
		if unvoted && p.voted {
			continue
		}
		if c.Verb == contract.VerbImport {
			s.sendShard(p.shard, groupPrepare(co, p))
			continue
		}
		m := &prepareMsg{txn: co.txn, priority: c.Priority, tenant: c.Tenant, holder: c.HolderID, activate: c.Activate}
		for _, i := range p.index {
			m.members = append(m.members, c.Members[i])
		}
		s.sendShard(p.shard, m)
	}
}

// bundleAge is a new bundle's wait-die priority: the home's clock in microseconds, made
// strictly increasing per home, so that no two bundles of a home share one and bundles of
// different homes tie only within a microsecond (then the home shard decides). Wait-die
// lets only the oldest bundle never give way, so ages must be distinct and kept across
// runs: with the slot (100 ms) as the age, bundles of one slot were ordered by the lsn
// of their current run, a bundle that gave way became younger by running again, and under
// a hotspot each gave way to another in turn while none was granted.
func (s *shard) bundleAge() uint64 {
	age := uint64(max(s.now().UnixMicro(), 0))
	if age <= s.b.lastAge {
		age = s.b.lastAge + 1
	}
	s.b.lastAge = age
	return age
}

// held takes an answer the kernel did not give the client: a begun bundle (Pending), a
// member an undecided bundle holds (Undecided), or a verb by value for a lease whose home
// is another shard (Elsewhere). It reports false for any other answer.
func (s *shard) held(a Answer[replyFunc]) bool {
	r := a.Reply
	since, waited := s.b.waitedSince[a.Cmd] // a parked write sequenced again: when it first waited
	if waited {
		delete(s.b.waitedSince, a.Cmd)
	} else {
		since = time.Now()
	}
	if !a.Cmd.Verb.IsInternal() && !r.Undecided && (r.shownWaiting || s.showsIntents(r)) {
		s.holdForDecision(a.To, r)
		return true
	}
	if a.Cmd.Verb.IsInternal() || !(r.Pending || r.Undecided || r.Elsewhere) {
		if len(a.Cmd.Shards) > 0 {
			s.beginAnswered(r.LSN) // refused or answered at once: its prepares are void
		}
		return !a.Cmd.Verb.IsInternal() && s.awaitAcks(a)
	}
	s.b.init()
	switch {
	case r.Pending:
		co := s.b.coords[r.Lease.LSN]
		if r.Lease.LSN != r.LSN {
			s.beginAnswered(r.LSN) // a retry of a bundle still undecided: joins it
		}
		if co == nil {
			a.To(rejection(contract.CodeTimeout, "the bundle is being decided; retry the same operation_id", s.applied()))
			return true
		}
		if co.early != nil { // committing in parallel, answered already: the same answer
			a.To(co.early)
			return true
		}
		co.waiters = append(co.waiters, a.To) // answered with the decision
		if r.Lease.LSN == r.LSN {
			co.begun = true
			co.refusal = refusal{code: r.Code, member: r.MemberIndex} // ok: the home's members are held
		}
		s.maybeDecide(co)
	case r.Undecided:
		if len(a.Cmd.Shards) > 0 {
			s.beginAnswered(r.LSN)
		}
		s.park(parkedWrite{cmd: a.Cmd, reply: a.To, since: since})
	case r.Elsewhere:
		s.forwardByValue(a.Cmd, r.Txn, a.To)
	}
	return true
}

// beginAnswered drops the transaction begun at lsn when its begin did not hold the home's
// members (refused, or another begin's retry): its participants free what they prepared.
func (s *shard) beginAnswered(lsn uint64) {
	co := s.b.coords[lsn]
	if co == nil || co.begun {
		return
	}
	delete(s.b.coords, lsn)
	for _, p := range co.parts {
		s.freeParts(co, p.shard)
	}
}

// vote takes a participant's answer at the home.
func (s *shard) vote(m *voteMsg) {
	s.b.init()
	co := s.b.coords[m.txn.LSN]
	if co == nil {
		if m.prepared { // a transaction decided or dropped here: the participant frees its intents
			if mm, pending := s.homeMirror(m.txn, s.k.BeginPriority(m.txn.LSN)); !pending && m.txn.LSN <= s.k.LastLSN() {
				s.sendShard(m.shard, &mm)
			}
		}
		return
	}
	if co.deciding {
		if co.aborting && m.prepared { // prepared after the abort went out: free it again
			s.freeParts(co, m.shard)
		}
		return
	}
	p := co.part(m.shard)
	if p == nil || p.voted {
		return
	}
	switch {
	case m.prepared:
		p.voted, p.members = true, m.members
	case m.die:
		s.abort(co, refusal{}, !co.recovering) // a recovered bundle has no client to run it again for
		return
	case m.code.IsRejection() && co.recovering:
		// Halted or overloaded, the participant says nothing of its part, which it may hold
		// from before the restart (the client may have been answered): asked again on the
		// tick, as for a participant that does not answer.
		return
	case m.code.IsRejection(): // overloaded, halted: not the bundle's answer; nothing to wait for
		s.abort(co, refusal{code: m.code, member: -1}, false)
		return
	default:
		member := -1
		if m.member >= 0 && m.member < len(p.index) {
			member = p.index[m.member]
		}
		p.voted, p.refusal = true, refusal{code: m.code, member: member}
	}
	s.maybeDecide(co)
}

// settles reports whether a member's refusal is already the bundle's answer: every
// member before it in the request is on a shard that has answered (the home's first
// member is member 0, so the home has answered unless member is 0).
func (co *coord) settles(member int) bool {
	if member < 0 {
		return false // a table's refusal yields to any member's: wait for every answer
	}
	if !co.begun && member > 0 {
		return false
	}
	for _, p := range co.parts {
		if !p.voted && len(p.index) > 0 && p.index[0] < member {
			return false
		}
	}
	return true
}

func (co *coord) part(shard uint32) *coordPart {
	for _, p := range co.parts {
		if p.shard == shard {
			return p
		}
	}
	return nil
}

// maybeDecide journals the commit once the begin is applied and every participant has
// prepared; the client is answered when the commit is durable.
func (s *shard) maybeDecide(co *coord) {
	if co.deciding {
		return
	}
	ref, all := co.refusal, co.begun
	for _, p := range co.parts {
		all = all && p.voted
		ref = first(ref, p.refusal)
	}
	if ref.code != contract.CodeOK && (all || co.settles(ref.member)) {
		s.abort(co, ref, false)
		return
	}
	if !all {
		return
	}
	if !co.recovering && time.Since(co.first) > s.undecidedBound() {
		// Its client has been answered timeout: granted now, the lease would hold its
		// members unknown to anyone until its TTL ends. Undecided, it may still abort.
		s.abort(co, refusal{}, false)
		return
	}
	members := slices.Clone(bundleMembers(co.cmd))
	for _, p := range co.parts {
		for j, i := range p.index {
			if j < len(p.members) {
				members[i].Quantity, members[i].Value, members[i].HasValue = p.members[j].Quantity, p.members[j].Value, members[i].Kind == kernel.MemberRange
			}
		}
	}
	s.step(StepVoted)
	co.deciding = true
	c := &kernel.Command{Verb: contract.VerbDecide, Txn: co.txn, Commit: true, Members: members}
	if co.cmd.Verb == contract.VerbImport {
		c = groupDecide(co, members, refusal{}, true)
	}
	if !s.q.Internal(c, s.stampSlot(), func(r *Reply) { s.decided(co, r, nil, true) }) {
		s.answerCoord(co, rejection(contract.CodeEngineHalted, "shard halted", s.applied()))
		return
	}
	s.answerEarly(co, members)
	s.flushLater()
}

// answerEarly answers a bundle that commits in parallel as soon as its commit is
// sequenced: its begin is applied (durable) and every participant's prepare is durable
// (each voted once its prepare was), so it is committed whatever happens next — a
// restarted home prepares it again and commits it. The answer is the view the commit
// will give (kernel.CommitView); reads here wait until the commit is applied (the
// barrier: readApplied), so none answered after this one misses the lease.
func (s *shard) answerEarly(co *coord, members []kernel.Member) {
	if co.recovering {
		return
	}
	if co.cmd.Verb == contract.VerbImport {
		if co.early = s.groupEarly(co, members); co.early == nil {
			return
		}
	} else {
		var out kernel.Output
		if !s.k.CommitView(co.txn, members, &out) {
			return
		}
		co.early = replyFromOutput(&out, s.applied())
	}
	s.b.barrier = max(s.b.barrier, s.q.Sequenced())
	co.tell(co.early)
	s.step(StepAnswered)
}

// abort journals the transaction's abort and frees the participants' intents at once (no
// commit can follow: the decision is made). refusal, when set, is the participant's
// definite answer, remembered for retries; die runs the bundle again once decided.
func (s *shard) abort(co *coord, ref refusal, die bool) {
	refusal, member := ref.code, ref.member
	co.deciding, co.aborting = true, true
	for _, p := range co.parts {
		s.freeParts(co, p.shard)
	}
	var answer *Reply
	switch {
	case die:
	case refusal == contract.CodeOK:
		answer = rejection(contract.CodeTimeout, "the bundle's shards did not all answer within the prepare bound; nothing was held, retry the same operation_id", 0)
	case refusal.IsRejection():
		answer = rejection(refusal, "a shard of the bundle could not take it; nothing was held", 0)
		refusal = contract.CodeOK // not the bundle's outcome: not remembered
	case co.cmd.Verb == contract.VerbImport:
		answer = groupRefusal(co.cmd, refusal, member)
	default:
		answer = &Reply{Code: refusal, MemberIndex: member, ItemIndex: -1}
	}
	c := &kernel.Command{Verb: contract.VerbDecide, Txn: co.txn, Refusal: refusal, RefusalMember: uint32(member + 1)}
	if co.cmd.Verb == contract.VerbImport {
		c = groupDecide(co, nil, ref, false)
		c.Refusal = refusal // cleared for a rejection: not remembered
	}
	if !s.q.Internal(c, s.stampSlot(), func(r *Reply) { s.decided(co, r, answer, false) }) {
		s.answerCoord(co, rejection(contract.CodeEngineHalted, "shard halted", s.applied()))
	}
	s.flushLater()
}

// decided answers a transaction's clients once its decision is durable: the lease
// (commit), the refusal or timeout (abort), or — a bundle that died — runs it again.
func (s *shard) decided(co *coord, r *Reply, answer *Reply, commit bool) {
	switch {
	case r.Code != contract.CodeOK:
		s.answerCoord(co, rejection(contract.CodeTimeout, "the bundle's decision was not recorded; retry the same operation_id", s.applied()))
	case commit: // r.LSN is the lease's id (kernel: a parallel commit's is before its begin)
		s.step(StepCommitted)
		r.AppliedLSN = s.applied()
		s.answerCoord(co, r)
	case answer != nil:
		if answer.Code.IsRejection() {
			answer.AppliedLSN = s.applied()
		} else {
			answer.LSN, answer.AppliedLSN = r.LSN, s.applied() // a refusal, committed by the abort
		}
		s.answerCoord(co, answer)
	default: // died: run it again, keeping its priority, after the older bundle's turn
		delete(s.b.coords, co.txn.LSN)
		s.dieLater(co.cmd, co.waiters, co.first)
	}
}

// dieLater parks a bundle that gave way to an older one (wait-die's die) and runs it
// again, with its priority, after a random backoff that grows with how long it has been
// giving way (2–10 ms at first, up to 100 ms): each run costs its begin and abort, and
// the older bundle it gave way to needs the journals more than a run that would give
// way again.
func (s *shard) dieLater(c *kernel.Command, waiters []replyFunc, since time.Time) {
	most := min(max(time.Since(since)/4, 10*time.Millisecond), 100*time.Millisecond)
	backoff := 2*time.Millisecond + rand.N(most-2*time.Millisecond)
	for _, w := range waiters {
		s.park(parkedWrite{cmd: c, reply: w, since: since, notBefore: time.Now().Add(backoff)})
	}
	self, root := s.self, s.h.sys.root
	time.AfterFunc(backoff, func() { root.Send(self, &parkedDue{}) })
}

func (s *shard) answerCoord(co *coord, r *Reply) {
	delete(s.b.coords, co.txn.LSN)
	if co.recovering {
		s.b.recovering--
	}
	co.tell(r)
}

// tell answers the clients waiting on the transaction with r; later ones wait anew.
func (co *coord) tell(r *Reply) {
	for _, w := range co.waiters {
		w(r)
	}
	co.waiters = nil
}

// query answers a participant's question from the home's journal; an undecided
// transaction is answered when it is decided. A transaction this home knows neither in its
// journal nor in memory — its begin was never journaled, and is not on its way to the
// journal now: the home restarted since — can never commit: aborted. So is one whose
// position now holds another entry (the lost begin's position reused). The answer names
// the transaction by its priority, so that it frees nothing of another at that position.
func (s *shard) query(m *queryMsg) {
	if s.halted != nil || s.k == nil {
		return
	}
	abort := &mirrorMsg{txn: m.txn, priority: m.priority}
	co := s.b.coords[m.txn.LSN]
	if co == nil {
		co = s.groupCoord(m.txn) // a lease of an import undecided here
	}
	if co != nil {
		if m.priority != 0 && co.cmd.Priority != m.priority {
			s.sendShard(m.shard, abort)
		}
		return // answered at the decision
	}
	if m.txn.LSN > s.k.LastLSN() || (m.priority != 0 && s.k.BeginPriority(m.txn.LSN) != m.priority) {
		s.sendShard(m.shard, abort)
		return
	}
	if mm, pending := s.homeMirror(m.txn, m.priority); !pending {
		s.sendShard(m.shard, &mm)
	}
}

// homeMirror is what this home knows of transaction txn (kernel.BundleState) as a mirror
// named by priority — the lease's state, deadline and id, and its end's round — and
// whether it is still undecided (then there is nothing to tell yet).
func (s *shard) homeMirror(txn kernel.TxnRef, priority uint64) (mirrorMsg, bool) {
	state, deadline, lease, pending := s.k.BundleState(txn.LSN)
	return mirrorMsg{txn: txn, priority: priority, state: state, deadline: deadline, lease: lease, phase: s.k.EndPhase(lease)}, pending
}

// recoverBundles aborts, after a restart, every transaction this home began and never
// decided: it never answered them, and its memory of their votes is gone — except one
// that commits in parallel, whose client may have been answered: it prepares that one
// again, and decides as it would have (docs/design.md "Parallel commits"). And it owes
// every participant the state of each bundle lease it keeps: which mirrors reached them
// before the restart is not known here.
func (s *shard) recoverBundles() {
	for _, txn := range s.k.Undecided(nil) {
		if txn.Shard != s.h.shard || s.recoverGroup(txn.LSN) {
			continue
		}
		if c := s.k.BeginCommand(txn.LSN); c != nil {
			s.recoverCoord(txn, c)
			continue
		}
		s.q.Internal(&kernel.Command{Verb: contract.VerbDecide, Txn: txn}, s.stampSlot(), func(*Reply) {})
	}
	for _, lsn := range s.k.BundleLeases(nil) {
		txn := s.k.BundleTxn(lsn)
		mm, _ := s.homeMirror(txn, s.k.BeginPriority(txn.LSN))
		s.owe(mm)
	}
	s.sendMirrors()
	s.flush()
}

// recoverCoord makes a restarted home's coordinator of txn, begun here in parallel and
// never decided, from its rebuilt begin c, and prepares it again.
func (s *shard) recoverCoord(txn kernel.TxnRef, c *kernel.Command) {
	s.b.init()
	co := &coord{txn: txn, cmd: c, parts: s.coordParts(c), begun: true, recovering: true, started: time.Now(), first: time.Now()}
	s.b.coords[txn.LSN] = co
	s.b.recovering++
	s.sendPrepares(co, false)
}
