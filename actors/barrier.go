package actors

import (
	"errors"
	"fmt"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/persistence"
)

// The read barrier. A cluster node that cannot renew its claim on a shard — the claims
// store is electing a leader, or out of reach — keeps serving it (Fenced): its writes
// are fenced by the journal as always, but an answer that appends nothing (a read, a
// refusal decided from state, a retry's remembered outcome) could come from a state
// another owner has moved past. Such answers wait for a barrier through the journal:
// an empty message appended after every batch submitted so far, expecting the stream's
// last sequence. Once it is stored, no other node had claimed the journal when it
// landed, so the shard's state was the newest at a moment between the request and its
// answer. One barrier serves every answer that waits for it; answers that come while
// one is in flight wait for the next. It is etcd's ReadIndex, with the journal in the
// place of the raft log.

// barrierDone is the writer's report of a barrier.
type barrierDone struct {
	gen uint64
	err error
}

// barrierMsg asks the shard for a barrier (System.Barrier): reply is ok once one is stored.
type barrierMsg struct{ reply replyFunc }

// barrier answers a barrierMsg: after a barrier, whatever the standing.
func (s *shard) barrier(m *barrierMsg) {
	if s.halted != nil {
		m.reply(rejection(contract.CodeEngineHalted, "shard halted", s.applied()))
		return
	}
	s.afterBarrier(m.reply, func() {
		m.reply(&Reply{Code: contract.CodeOK, AppliedLSN: s.applied(), MemberIndex: -1, ItemIndex: -1})
	})
}

// waitingAnswer is an answer held for a barrier: answer gives it, reply refuses it.
type waitingAnswer struct {
	reply  replyFunc
	answer func()
}

// errNoBarrier is a journal that cannot take a barrier serving a Fenced shard (a
// single process never is Fenced).
var errNoBarrier = errors.New("the journal takes no barrier")

// standing is how far this shard's claim is known current: always Leased in a single
// process; in a cluster, what its node says.
func (s *shard) standing() Standing {
	if o := s.h.sys.opts.Ownership; o != nil {
		return o.Standing(s.h.shard)
	}
	return Leased
}

// answerAsStanding gives an answer that appends nothing as the standing allows: now
// (Leased), once a barrier is stored (Fenced), or not (NotServing: engine_halted).
func (s *shard) answerAsStanding(reply replyFunc, answer func()) {
	switch s.standing() {
	case NotServing:
		reply(rejection(contract.CodeEngineHalted, notOwner, s.applied()))
	case Fenced:
		s.afterBarrier(reply, answer)
	default:
		answer()
	}
}

// afterBarrier gives answer once a barrier sent from now on is stored; with too many
// answers waiting already it refuses the request (overloaded).
func (s *shard) afterBarrier(reply replyFunc, answer func()) {
	if len(s.barrierHeld)+len(s.barrierNext) >= maxWaitingReads {
		reply(rejection(contract.CodeOverloaded, "too many answers waiting for a journal barrier", s.applied()))
		return
	}
	w := waitingAnswer{reply: reply, answer: answer}
	if s.barrierSent {
		s.barrierNext = append(s.barrierNext, w)
		return
	}
	s.barrierHeld = append(s.barrierHeld, w)
	s.sendBarrier()
}

func (s *shard) sendBarrier() {
	s.barrierSent = true
	s.w.jobs <- writeJob{barrier: true, gen: s.gen}
}

// barrierStored gives the answers held for the barrier just stored, and sends the next
// barrier for those that came meanwhile. A barrier that failed failed the journal: the
// shard halts, and halt refuses what waits.
func (s *shard) barrierStored(m *barrierDone) {
	if m.gen != s.gen || !s.barrierSent {
		return
	}
	s.barrierSent = false
	if m.err != nil {
		s.halt(fmt.Errorf("journal barrier: %w", m.err))
		s.h.log.Error("journal barrier failed; shard halted", "shard", s.h.shard, "err", m.err)
		return
	}
	held := s.barrierHeld
	s.barrierHeld, s.barrierNext = s.barrierNext, held[:0]
	for _, w := range held {
		w.answer()
	}
	clear(held)
	if len(s.barrierHeld) > 0 && s.halted == nil {
		s.sendBarrier()
	}
}

// refuseBarrierWaits answers everything waiting for a barrier with engine_halted (the
// shard halted or stops: no barrier will come).
func (s *shard) refuseBarrierWaits(why string) {
	for _, ws := range [][]waitingAnswer{s.barrierHeld, s.barrierNext} {
		for _, w := range ws {
			w.reply(rejection(contract.CodeEngineHalted, why, s.applied()))
		}
	}
	s.barrierHeld, s.barrierNext, s.barrierSent = nil, nil, false
}

// barrier runs a barrier job on the writer's goroutine.
func (w *writer) barrier(job writeJob, report func(error)) {
	bj, ok := w.journal.(persistence.Barriered)
	if !ok {
		report(errNoBarrier)
		return
	}
	bj.Barrier(report)
}
