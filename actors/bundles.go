package actors

import (
	"cmp"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// Bundles across shards (docs/design.md "Bundles across shards"): a reserve whose members
// fall on several shards is begun at its home shard, prepared at the others, and decided
// in the home's journal alone. This file is the shard actor's part — the home's
// coordinator and the participant's replies — over actor messages between the shards of
// this process; the kernel (kernel/bundle.go) holds the state. Every message is
// idempotent by transaction and may be lost with a shard: participants that hold
// intents past the prepare bound ask the home, which answers from its journal.

// maxParked bounds the writes and reads waiting for undecided bundles; past it: overloaded.
const maxParked = 4096

// The steps of a bundle a test can stop a process at (Options.BundleStep).
const (
	StepBegun     = "begun"     // home: the begin sequenced, prepares not sent yet
	StepPrepared  = "prepared"  // participant: its prepare applied, its vote not sent yet
	StepVoted     = "voted"     // home: every vote in, the commit not sequenced yet
	StepCommitted = "committed" // home: the commit applied, client and participants not told yet
	StepMirrored  = "mirrored"  // participant: a mirror applied
	StepEnding    = "ending"    // home: a bundle's lease ended, its participants not told yet
)

// step tells the test hook a bundle reached step.
func (s *shard) step(name string) {
	if f := s.h.sys.opts.BundleStep; f != nil {
		f(name, s.h.shard)
	}
}

// prepareBound is how long a home waits for its participants' votes before it aborts,
// and how long a participant holds intents before it asks the home.
func (s *shard) prepareBound() time.Duration { return s.h.sys.opts.PrepareBound }

// undecidedBound is how long a write or read waits for an undecided bundle holding what
// it names before it is answered timeout (indefinite).
func (s *shard) undecidedBound() time.Duration { return 2 * s.h.sys.opts.PrepareBound }

// prepareMsg asks a participant to hold its members of a transaction.
type prepareMsg struct {
	txn      kernel.TxnRef
	priority uint64
	tenant   string
	holder   string
	activate bool
	members  []kernel.Member
}

// voteMsg is a participant's answer: prepared (its members as held), or refused — a code
// and the member (an index into the prepare's members), or die (an older bundle holds one).
type voteMsg struct {
	txn      kernel.TxnRef
	shard    uint32
	prepared bool
	die      bool
	code     contract.Code
	member   int
	members  []kernel.MemberView
}

// mirrorMsg tells a participant the state of a transaction's lease (0: aborted, free),
// and the lease's lsn at the home (its commit's).
type mirrorMsg struct {
	txn      kernel.TxnRef
	state    kernel.LeaseState
	deadline uint64
	lease    uint64
}

// queryMsg is a participant asking the home about a transaction it holds intents for.
type queryMsg struct {
	txn   kernel.TxnRef
	shard uint32
}

// coord is the home's view of one transaction it began.
type coord struct {
	txn      kernel.TxnRef
	cmd      *kernel.Command
	waiters  []replyFunc
	parts    []*coordPart
	begun    bool    // the begin is applied: the home's members are held, or refusal says why not
	refusal  refusal // the home's own refusal (a member, or a table: member -1)
	deciding bool    // a decide is sequenced
	aborting bool    // ... and it is an abort
	started  time.Time
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

// parkedWrite is a client write that found a member an undecided bundle holds, or a
// bundle to run again: sequenced again on a tick from notBefore on.
type parkedWrite struct {
	cmd       *kernel.Command
	reply     replyFunc
	since     time.Time
	notBefore time.Time
	txn       kernel.TxnRef
}

// bundleState is a shard's coordinator and participant state.
type bundleState struct {
	coords    map[uint64]*coord // the home's transactions by begin lsn
	parked    []parkedWrite
	waiting   []*prepareMsg               // prepares waiting for a younger bundle's decision
	asked     map[kernel.TxnRef]time.Time // undecided intents held here: when first seen or last asked
	reads     []*readMsg                  // reads waiting for an undecided bundle
	answers   []heldAnswer                // write answers waiting for an undecided bundle
	waitedAt  map[*prepareMsg]time.Time   // when each waiting prepare began to wait
	mirrors   []mirrorMsg                 // mirrors of the batch being applied, to send after it
	owed      map[uint64]*owed            // the home's mirrors not acknowledged yet, by lease
	preparing map[kernel.TxnRef]bool      // prepares sequenced and not applied yet
	decided   bool                        // the batch being applied decided a bundle here
	txnBuf    []kernel.TxnRef
}

func (b *bundleState) init() {
	if b.coords == nil {
		b.coords = make(map[uint64]*coord)
		b.owed = make(map[uint64]*owed)
		b.preparing = make(map[kernel.TxnRef]bool)
		b.asked = make(map[kernel.TxnRef]time.Time)
		b.waitedAt = make(map[*prepareMsg]time.Time)
	}
}

// sendShard sends msg to shard k's actor in this process; false when k is not open here.
func (s *shard) sendShard(k uint32, msg any) bool {
	if int(k) >= len(s.h.sys.hosts) {
		return false
	}
	pid := s.h.sys.hosts[k].pid.Load()
	if pid == nil {
		return false
	}
	s.h.sys.root.Send(pid, msg)
	return true
}

// beginBundle takes a reserve whose members fall on several shards (Shards set by the
// router): it is sequenced as the begin here, and the prepares go to the participants at
// once, in parallel with the begin's journal write.
func (s *shard) beginBundle(c *kernel.Command, reply replyFunc) {
	s.b.init()
	var parts []*coordPart
	for i, sh := range c.Shards {
		if sh == s.h.shard {
			continue
		}
		j := slices.IndexFunc(parts, func(p *coordPart) bool { return p.shard == sh })
		if j < 0 {
			// A cluster moves shards between nodes, and the protocol's messages do not
			// travel between nodes yet: a bundle begun with every shard here could lose
			// its participants to another node. Refused there until they do.
			if s.h.sys.opts.Ownership != nil || !s.h.sys.IsOpen(sh) {
				reply(rejection(contract.CodeCrossShard, "a bundle across shards is served by one process, not yet by a cluster; a bundle of one placement key's members is", s.applied()))
				return
			}
			parts = append(parts, &coordPart{shard: sh})
			j = len(parts) - 1
		}
		parts[j].index = append(parts[j].index, i)
	}
	if c.Priority == 0 && len(parts) > 0 {
		c.Priority = s.stampSlot() // kept when the bundle runs again: wait-die's age
	}
	if len(parts) > 0 && s.yields(c.Priority, kernel.TxnRef{Shard: s.h.shard, LSN: s.q.Sequenced() + 1}, c.Tenant, c.Members, c.Shards) {
		s.dieLater(c, []replyFunc{reply}, time.Now())
		return
	}
	d, r := s.q.Write(c, s.stampSlot(), reply)
	switch {
	case d == Answered:
		s.answerAsStanding(reply, func() { reply(r) })
		return
	case d == Joined || len(parts) == 0: // several keys, one shard: a reserve like any other
		return
	}
	co := &coord{txn: kernel.TxnRef{Shard: s.h.shard, LSN: s.q.Sequenced()}, cmd: c, parts: parts, started: time.Now()}
	s.b.coords[co.txn.LSN] = co
	s.step(StepBegun)
	for _, p := range parts {
		m := &prepareMsg{txn: co.txn, priority: c.Priority, tenant: c.Tenant, holder: c.HolderID, activate: c.Activate}
		for _, i := range p.index {
			m.members = append(m.members, c.Members[i])
		}
		s.sendShard(p.shard, m)
	}
}

// held takes an answer the kernel did not give the client: a begun bundle (Pending), a
// member an undecided bundle holds (Undecided), or a verb by value for a lease whose home
// is another shard (Elsewhere). It reports false for any other answer.
func (s *shard) held(a Answer[replyFunc]) bool {
	r := a.Reply
	if !a.Cmd.Verb.IsInternal() && s.showsIntents(r) {
		s.b.init()
		s.b.answers = append(s.b.answers, heldAnswer{to: a.To, reply: r, since: time.Now()})
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
		s.park(parkedWrite{cmd: a.Cmd, reply: a.To, since: time.Now(), txn: r.Txn})
	case r.Elsewhere:
		s.forwardByValue(a.Cmd, r.Txn, a.To)
	}
	return true
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

// showsIntents reports whether a reply's view of a resource, pool or range counts an
// undecided bundle's members.
func (s *shard) showsIntents(r *Reply) bool {
	if s.k.UndecidedBundles() == 0 {
		return false
	}
	switch r.Object {
	case kernel.ObjectResource, kernel.ObjectPool, kernel.ObjectRange:
		o := kernel.Output{Object: r.Object, Resource: r.Resource, Pool: r.Pool, Range: r.Range}
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

// beginAnswered drops the transaction begun at lsn when its begin did not hold the home's
// members (refused, or another begin's retry): its participants free what they prepared.
func (s *shard) beginAnswered(lsn uint64) {
	co := s.b.coords[lsn]
	if co == nil || co.begun {
		return
	}
	delete(s.b.coords, lsn)
	for _, p := range co.parts {
		s.sendShard(p.shard, &mirrorMsg{txn: co.txn})
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

// vote takes a participant's answer at the home.
func (s *shard) vote(m *voteMsg) {
	s.b.init()
	co := s.b.coords[m.txn.LSN]
	if co == nil {
		if m.prepared { // a transaction decided or dropped here: the participant frees its intents
			state, deadline, lease, pending := s.k.BundleState(m.txn.LSN)
			if !pending && m.txn.LSN <= s.k.LastLSN() {
				s.sendShard(m.shard, &mirrorMsg{txn: m.txn, state: state, deadline: deadline, lease: lease})
			}
		}
		return
	}
	if co.deciding {
		if co.aborting && m.prepared { // prepared after the abort went out: free it again
			s.sendShard(m.shard, &mirrorMsg{txn: m.txn})
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
		s.abort(co, refusal{}, true)
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
	members := slices.Clone(co.cmd.Members)
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
	if !s.q.Internal(c, s.stampSlot(), func(r *Reply) { s.decided(co, r, nil, true) }) {
		s.answerCoord(co, rejection(contract.CodeEngineHalted, "shard halted", s.applied()))
	}
	s.flushLater()
}

// abort journals the transaction's abort and frees the participants' intents at once (no
// commit can follow: the decision is made). refusal, when set, is the participant's
// definite answer, remembered for retries; die runs the bundle again once decided.
func (s *shard) abort(co *coord, ref refusal, die bool) {
	refusal, member := ref.code, ref.member
	co.deciding, co.aborting = true, true
	for _, p := range co.parts {
		s.sendShard(p.shard, &mirrorMsg{txn: co.txn})
	}
	var answer *Reply
	switch {
	case die:
	case refusal == contract.CodeOK:
		answer = rejection(contract.CodeTimeout, "the bundle's shards did not all answer within the prepare bound; nothing was held, retry the same operation_id", 0)
	case refusal.IsRejection():
		answer = rejection(refusal, "a shard of the bundle could not take it; nothing was held", 0)
		refusal = contract.CodeOK // not the bundle's outcome: not remembered
	default:
		answer = &Reply{Code: refusal, MemberIndex: member, ItemIndex: -1}
	}
	c := &kernel.Command{Verb: contract.VerbDecide, Txn: co.txn, Refusal: refusal, RefusalMember: uint32(member + 1)}
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
	case commit: // r.LSN is the commit's: the change's position, where its event is
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
		s.dieLater(co.cmd, co.waiters, co.started)
	}
}

// dieLater parks a bundle that gave way to an older one (wait-die's die) and runs it
// again, with its priority, after a short random backoff.
func (s *shard) dieLater(c *kernel.Command, waiters []replyFunc, since time.Time) {
	backoff := time.Millisecond * time.Duration(2+rand.IntN(8))
	for _, w := range waiters {
		s.park(parkedWrite{cmd: c, reply: w, since: since, notBefore: time.Now().Add(backoff)})
	}
	self, root := s.self, s.h.sys.root
	time.AfterFunc(backoff, func() { root.Send(self, &parkedDue{}) })
}

// yields reports whether a bundle (priority, txn) gives way here: an older bundle's
// prepare waits on this shard for one of the members it names here (shards, when set,
// says which members are this shard's). Without it a stream of younger bundles could take
// each member the moment it is freed, before the older one's turn: wait-die would starve.
func (s *shard) yields(priority uint64, txn kernel.TxnRef, tenant string, members []kernel.Member, shards []uint32) bool {
	for _, w := range s.b.waiting {
		if w.tenant != tenant || !older(w.priority, w.txn, priority, txn) {
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

func (s *shard) answerCoord(co *coord, r *Reply) {
	delete(s.b.coords, co.txn.LSN)
	for _, w := range co.waiters {
		w(r)
	}
	co.waiters = nil
}

// prepareIntents journals a participant's prepare and votes once it is applied.
func (s *shard) prepareIntents(m *prepareMsg) {
	s.b.init()
	home := m.txn.Shard
	if s.halted != nil || s.standing() == NotServing {
		s.sendShard(home, &voteMsg{txn: m.txn, shard: s.h.shard, code: contract.CodeEngineHalted})
		return
	}
	if s.yields(m.priority, m.txn, m.tenant, m.members, nil) {
		s.sendShard(home, &voteMsg{txn: m.txn, shard: s.h.shard, die: true})
		return
	}
	c := &kernel.Command{Verb: contract.VerbPrepare, Tenant: m.tenant, HolderID: m.holder, Activate: m.activate,
		Members: m.members, Txn: m.txn, Priority: m.priority}
	s.b.preparing[m.txn] = true // a mirror behind it is journaled behind it
	ok := s.q.Internal(c, s.stampSlot(), func(r *Reply) {
		delete(s.b.preparing, m.txn)
		v := &voteMsg{txn: m.txn, shard: s.h.shard, member: r.MemberIndex, code: r.Code}
		switch {
		case r.Undecided && older(m.priority, m.txn, r.TxnPriority, r.Txn) && r.Txn != (kernel.TxnRef{}):
			if _, seen := s.b.waitedAt[m]; !seen {
				s.b.waitedAt[m] = time.Now()
			}
			s.b.waiting = append(s.b.waiting, m) // wait for the younger one's decision
			return
		case r.Undecided:
			v.die = true
		case r.Code == contract.CodeOK:
			v.prepared, v.members = true, r.Lease.Members
			s.b.asked[m.txn] = time.Now()
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
			s.sendShard(m.txn.Shard, &ackMsg{lease: m.lease, state: m.state, shard: s.h.shard})
		}
	}
	if !s.b.preparing[m.txn] && !s.k.MirrorChanges(m.txn, m.state, m.deadline, m.lease) {
		ack() // already so, durably (a resend, or a restarted home's resync): nothing to journal
		return
	}
	c := &kernel.Command{Verb: contract.VerbMirror, Txn: m.txn, State: m.state, Deadline: m.deadline, LeaseLSN: m.lease}
	s.q.Internal(c, s.stampSlot(), func(*Reply) {
		s.step(StepMirrored)
		ack()
	})
	s.flushLater()
}

// query answers a participant's question from the home's journal; an undecided
// transaction is answered when it is decided.
func (s *shard) query(m *queryMsg) {
	if s.halted != nil || s.k == nil || m.txn.LSN > s.k.LastLSN() {
		return
	}
	if co := s.b.coords[m.txn.LSN]; co != nil {
		return
	}
	state, deadline, lease, pending := s.k.BundleState(m.txn.LSN)
	if !pending {
		s.sendShard(m.shard, &mirrorMsg{txn: m.txn, state: state, deadline: deadline, lease: lease})
	}
}

// noteMirrors collects the mirrors an applied entry owes its participants (Output.Mirror).
func (s *shard) noteMirrors(o *kernel.Output) {
	if !o.Mirror {
		return
	}
	add := func(l *kernel.LeaseView) {
		if txn := s.k.BundleTxn(l.LSN); txn.LSN != 0 {
			s.owe(mirrorMsg{txn: txn, state: l.State, deadline: l.DeadlineSlot, lease: l.LSN})
		}
	}
	if o.Object == kernel.ObjectLease {
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
// the prepare bound it is given anyway: the change is durable at the home and the
// participants follow.
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
		if o := s.b.owed[l.LSN]; o != nil && l.Shard == s.h.shard && o.msg.state == l.State && len(o.shards) > 0 {
			o.waiting = append(o.waiting, w)
			w.leases++
		}
	}
	if a.Reply.Object == kernel.ObjectLease {
		wait(&a.Reply.Lease)
	}
	for i := range a.Reply.Changes {
		wait(&a.Reply.Changes[i].Lease)
	}
	return w.leases > 0
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
		if m.state.Terminal() {
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
	if o == nil || o.msg.state != m.state {
		return
	}
	o.shards = slices.DeleteFunc(o.shards, func(sh uint32) bool { return sh == m.shard })
	if len(o.shards) == 0 {
		delete(s.b.owed, m.lease)
		o.release()
	}
}

// resendOwed sends again what participants have not acknowledged within the prepare bound.
func (s *shard) resendOwed(now time.Time) {
	for _, o := range s.b.owed {
		if len(o.waiting) > 0 && now.Sub(o.waiting[0].since) > s.prepareBound() {
			o.release() // the participants follow; the client has waited long enough
		}
		if now.Sub(o.sent) > s.prepareBound() {
			s.resend(o, now)
		}
	}
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
	for _, co := range s.b.coords {
		if !co.deciding && now.Sub(co.started) > s.prepareBound() {
			s.abort(co, refusal{}, false)
		}
	}
	s.retryParked(now)
	s.retryWaiting(now)
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
		if len(p.cmd.Shards) > 0 {
			s.beginBundle(p.cmd, p.reply)
		} else if d, r := s.q.Write(p.cmd, s.stampSlot(), p.reply); d == Answered {
			p.reply(r)
		}
	}
	s.flushLater()
}

// parkedDue is a shard's note to itself: a died bundle's backoff ended.
type parkedDue struct{}

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
			s.sendShard(txn.Shard, &queryMsg{txn: txn, shard: s.h.shard})
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

// recoverBundles aborts, after a restart, every transaction this home began and never
// decided: it never answered them, and its memory of their votes is gone. And it owes
// every participant the state of each bundle lease it keeps: which mirrors reached them
// before the restart is not known here.
func (s *shard) recoverBundles() {
	for _, txn := range s.k.Undecided(nil) {
		if txn.Shard != s.h.shard {
			continue
		}
		s.q.Internal(&kernel.Command{Verb: contract.VerbDecide, Txn: txn}, s.stampSlot(), func(*Reply) {})
	}
	for _, lsn := range s.k.BundleLeases(nil) {
		state, deadline, lease, _ := s.k.BundleState(s.k.BundleTxn(lsn).LSN)
		s.owe(mirrorMsg{txn: s.k.BundleTxn(lsn), state: state, deadline: deadline, lease: lease})
	}
	s.sendMirrors()
	s.flush()
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
	fwd := &kernel.Command{Verb: v, Tenant: c.Tenant, OperationID: c.OperationID, HolderID: c.HolderID, LeaseLSN: txn.LSN}
	if v == contract.VerbRelease {
		fwd.Epoch = 1 // a releasable lease has not been revoked
	}
	s.h.sys.Write(txn.Shard, fwd, reply)
}

// flushLater hands what the bundle steps sequenced to the journal after the mailbox's
// current messages.
func (s *shard) flushLater() {
	if s.self != nil && !s.flushQueued && s.q != nil && s.q.Pending() {
		s.flushQueued = true
		s.h.sys.root.Send(s.self, &flushNow{gen: s.gen})
	}
}

// receiveBundle handles the bundle messages between shards.
func (s *shard) receiveBundle(ctx actor.Context) bool {
	switch m := ctx.Message().(type) {
	case *prepareMsg:
		s.prepareIntents(m)
	case *voteMsg:
		s.vote(m)
	case *mirrorMsg:
		s.mirror(m)
	case *queryMsg:
		s.query(m)
	case *parkedDue:
		s.retryParked(time.Now())
	case *ackMsg:
		s.acked(m)
	default:
		return false
	}
	return true
}

// replyRead answers a read now, or — a resource, pool or range, or a listing's page of
// them, whose view would count an undecided bundle's members — once the bundle is decided
// (undecidedBound at most). The reply says which: its object, or its page.
func (s *shard) replyRead(m *readMsg) {
	r := s.answer(&m.req)
	if s.showsIntents(r) || (r.Page != nil && s.k.PageShowsIntents(r.Page)) {
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
