package actors

import (
	"time"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// maxWaitingReads bounds the reads parked for a min_lsn; past it: overloaded.
const maxWaitingReads = 4096

// read answers from applied state — always durable state, since nothing is applied
// before its batch is in the journal. With MinLSN beyond the applied position the read
// waits, bounded by its deadline, then answers fence_not_applied.
func (s *shard) read(m *readMsg) {
	if s.halted != nil {
		m.reply(rejection(contract.CodeEngineHalted, haltedText, s.applied()))
		return
	}
	s.answerAsStanding(m.reply, func() { s.readApplied(m) })
}

// readApplied answers a read whose standing allows it: now, or once MinLSN is applied —
// and once the commit of every bundle this home answered before applying it is applied
// (the barrier: a read after such an answer must see its lease), which is a batch away.
func (s *shard) readApplied(m *readMsg) {
	if s.b.barrier > s.k.LastLSN() && m.req.MinLSN <= s.k.LastLSN() {
		m.req.MinLSN, m.req.Wait, m.barrier = s.b.barrier, max(m.req.Wait, s.undecidedBound()), true
	}
	if m.req.MinLSN > s.k.LastLSN() {
		if m.req.Wait <= 0 {
			m.reply(rejection(contract.CodeFenceNotApplied, "min_lsn not applied yet", s.k.LastLSN()))
			return
		}
		if len(s.readers) >= maxWaitingReads {
			m.reply(rejection(contract.CodeOverloaded, "too many reads waiting for min_lsn", s.k.LastLSN()))
			return
		}
		m.deadline = s.now().Add(m.req.Wait)
		s.readers = append(s.readers, m)
		return
	}
	s.replyRead(m)
}

// answerReaders answers parked reads whose lsn has been applied, and, given a time,
// those whose wait has run out.
func (s *shard) answerReaders(now time.Time) {
	kept := s.readers[:0]
	for _, r := range s.readers {
		switch {
		case r.req.MinLSN <= s.k.LastLSN():
			s.answerAsStanding(r.reply, func() { s.replyRead(r) })
		case !now.IsZero() && !now.Before(r.deadline) && r.barrier:
			r.reply(rejection(contract.CodeTimeout, "a bundle's commit was not applied in time; retry", s.k.LastLSN()))
		case !now.IsZero() && !now.Before(r.deadline):
			r.reply(rejection(contract.CodeFenceNotApplied, "min_lsn not applied within wait_ms", s.k.LastLSN()))
		default:
			kept = append(kept, r)
		}
	}
	clear(s.readers[len(kept):])
	s.readers = kept
}

// Answers reports whether a shard answers reads of verb v (the reads the bridge sends
// to one shard, or to each shard and gathers).
func Answers(v contract.Verb) bool {
	switch v {
	case contract.VerbGetResource, contract.VerbGetPool, contract.VerbGetRange, contract.VerbGetLease,
		contract.VerbGetRun, contract.VerbGetWork, contract.VerbListLeases, contract.VerbLookupValue,
		contract.VerbListResources, contract.VerbListPools, contract.VerbListRanges, contract.VerbListRuns,
		contract.VerbListAllocations, contract.VerbListHoldings, contract.VerbListWork:
		return true
	}
	return false
}

func (s *shard) answer(q *ReadRequest) *Reply {
	switch q.Verb {
	case contract.VerbGetResource:
		s.k.GetResource(q.Tenant, q.ID, &s.out)
	case contract.VerbGetPool:
		s.k.GetPool(q.Tenant, q.ID, &s.out)
	case contract.VerbGetRange:
		s.k.GetRange(q.Tenant, q.ID, &s.out)
	case contract.VerbGetLease:
		s.k.GetLease(q.Tenant, q.Lease, s.readSlot(), &s.out)
	case contract.VerbGetRun:
		s.k.GetRun(q.Tenant, q.ID, &s.out)
	case contract.VerbGetWork:
		s.k.GetWork(q.Tenant, q.ID, q.Name, &s.out)
	case contract.VerbLookupValue:
		state := s.k.LookupValue(q.Tenant, q.ID, q.Value, &s.out)
		r := replyFromOutput(&s.out, s.k.LastLSN())
		r.LSN, r.ValueState = 0, state
		return r
	case contract.VerbListLeases, contract.VerbListResources, contract.VerbListPools, contract.VerbListRanges,
		contract.VerbListRuns, contract.VerbListAllocations, contract.VerbListHoldings, contract.VerbListWork:
		if q.List == nil {
			views, truncated := s.k.ListLeases(q.Tenant, q.ID, q.Limit, nil)
			return &Reply{Code: contract.CodeOK, AppliedLSN: s.k.LastLSN(), Leases: views, Truncated: truncated, MemberIndex: -1}
		}
		page := new(kernel.ListPage)
		lq := *q.List
		lq.Verb, lq.Tenant = q.Verb, q.Tenant
		s.k.List(&lq, page)
		return &Reply{Code: page.Code, AppliedLSN: s.k.LastLSN(), Page: page, MemberIndex: -1, ItemIndex: -1}
	default:
		return rejection(contract.CodeInvalidRequest, "not a read", s.k.LastLSN())
	}
	r := replyFromOutput(&s.out, s.k.LastLSN())
	r.LSN = 0
	return r
}

// readSlot is the slot a read judges retention by: the shard's monotonic slot (the
// clock's, never before any slot the shard has stamped or read at), so a lease that
// has read lease_retired never reads as present again when the clock steps back.
func (s *shard) readSlot() uint64 { return s.stampSlot() }
