package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/persistence"
)

// flight is one batch with the writer, as the shard tracks it.
type flight struct {
	done    chan error
	start   time.Time
	entries int // records in the batch: what its events slice is sized for
}

// shard is the actor owning one kernel. A restarted actor is a fresh instance: it
// recovers from the journal in Started and serves nothing before that.
type shard struct {
	h    *host
	self *actor.PID
	cfg  kernel.Config
	k    *kernel.Kernel
	out  kernel.Output

	// halted is set when the journal failed or recovery refused: every request then
	// answers engine_halted until the shard is recovered from its journal — by a restart
	// of the process, or in a cluster by the node that claims it next (this one gives it
	// up within a balancing round).
	halted error

	gen uint64 // writer generation, so a stale report from before a restart is ignored
	w   *writer
	// q decides the write path (sequencer.go); the actor carries its decisions out.
	q *Sequencer[replyFunc]
	// flushQueued is set while a flushNow is in the mailbox.
	flushQueued bool
	// flights are the batches with the writer, oldest first: the channel carrying each
	// one's result, for a synchronous wait at stop (the same results also arrive as
	// batchDone messages), and when it was handed over.
	flights []flight

	readers []*readMsg // reads waiting for min_lsn
	// Answers waiting for a barrier through the journal (barrier.go): those the barrier
	// in flight (barrierSent) answers, and those that came after it was sent.
	barrierHeld, barrierNext []waitingAnswer
	barrierSent              bool

	sinceSnapshot int
	published     uint64 // events durably published through this lsn
	feed          Feed   // the journal, when it stores the events itself (nil: Options.Events)
	snapshotting  bool
	snapLSN       uint64
	snapSlot      uint64
	snapCapture   *kernel.SnapshotCapture // a snapshot taken, waiting for publishing to catch up
	// fallbackLSN is the lsn of the snapshot kept to fall back on (0: none, the journal's
	// start): the journal is compacted only below it, so a newest snapshot that turns out
	// unreadable costs a longer replay, not the shard.
	fallbackLSN  uint64
	pubWriting   bool
	pubFailing   bool // the last write of the published position failed (logged once)
	pubWritten   uint64
	pubWrittenAt time.Time

	anchored      bool  // the slot clock runs from the journal's claim (Anchored)
	anchorClaimed int64 // claim time, Unix ns
	anchorLocal   int64 // monoNow at the claim

	// b is the shard's part in bundles across shards (bundles.go).
	b bundleState
	// hold, while a copy is taken, holds bundle steps back (backup.go).
	hold *backupHold

	dueBuf []kernel.Due
	events []Event
	// occupiedAt is when the fullest ranges and pools were last published.
	occupiedAt time.Time
}

func newShard(h *host) actor.Actor { return &shard{h: h} }

func (s *shard) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.self = ctx.Self()
		s.start()
	case *actor.Stopping:
		s.stop()
	case *ping:
		ctx.Respond(true)
	case *writeMsg:
		s.h.queued.Add(-1)
		s.write(m)
		s.flushSoon(ctx)
	case *readMsg:
		s.h.queued.Add(-1)
		s.read(m)
	case *barrierMsg:
		s.barrier(m)
	case *barrierDone:
		s.barrierStored(m)
	case *batchDone:
		if m.gen == s.gen && s.q != nil && s.q.Writing() {
			s.applyInflight(m.err)
			s.ackHold()
			s.flushSoon(ctx)
		}
	case *flushNow:
		s.flushQueued = false
		if m.gen == s.gen {
			s.flush()
		}
	case *tick:
		s.tick()
	case *prepareMsg, *voteMsg, *mirrorMsg, *queryMsg, *parkedDue, *ackMsg:
		if s.q != nil && s.halted == nil {
			if !s.holdBack(m) {
				s.bundleMessage(m)
			}
		} else if p, ok := m.(*prepareMsg); ok {
			s.sendShard(p.txn.Shard, &voteMsg{txn: p.txn, shard: s.h.shard, code: contract.CodeEngineHalted})
		}
	case *holdMsg, *captureMsg, *releaseMsg:
		s.backupMessage(m)
	case *reconfigureMsg:
		if s.halted == nil && s.q != nil {
			s.reconfigure(s.h.sys.Config())
		}
	case *published:
		if m.lsn > s.published {
			s.published = m.lsn
			s.maybeWriteSnapshot()
			s.maybePersistPublished()
		}
	case *publishedWritten:
		s.publishedStored(m)
	case *snapshotDone:
		s.snapshotStored(m)
	}
}

// start recovers snapshot + journal; until it succeeds the shard answers engine_halted.
// Then it journals the settings it is asked to serve under, if the journal does not
// carry them yet (reconfigure).
func (s *shard) start() {
	s.cfg = s.h.sys.Config()
	s.cfg.Shard = s.h.shard
	s.gen = s.h.nextGeneration()
	s.h.queued.Store(0)
	s.h.refused.Store(nil)
	rec, err := recoverShard(s.h, s.cfg)
	if err != nil {
		s.h.refused.Store(&err)
		s.halt(fmt.Errorf("recovery: %w", err))
		if errors.Is(err, context.Canceled) { // its owner stopped its load (a node stopping)
			s.h.log.Info("shard load stopped", "shard", s.h.shard)
		} else {
			s.h.log.Error("shard refuses to start", "shard", s.h.shard, "err", err)
		}
		return
	}
	if have := rec.kernel.Shape(); rec.kernel.Configured() && have.SlotMillis != s.cfg.SlotMillis {
		rec.journal.Close()
		err := fmt.Errorf("its journal was written with a slot length of %dms; this process runs with --slot %dms, and a journal's slot length cannot change", have.SlotMillis, s.cfg.SlotMillis)
		s.h.refused.Store(&err)
		s.halt(fmt.Errorf("recovery: %w", err))
		s.h.log.Error("shard refuses to start", "shard", s.h.shard, "err", err)
		return
	}
	s.k, s.published, s.pubWritten = rec.kernel, rec.published, rec.published
	s.fallbackLSN = rec.snapshotLSN
	s.h.pubDurable.Store(rec.published)
	if a, ok := rec.journal.(Anchored); ok {
		s.anchored = true
		s.anchorClaimed, s.anchorLocal = a.Anchor()
	}
	last, lastSlot := rec.journal.Last()
	s.q = NewSequencer[replyFunc](s.k, last, lastSlot, s.cfg.Limits, s.h.sys.opts.MaxBatch)
	if feed, ok := rec.journal.(Feed); ok {
		s.feed = feed
		root, pid := s.h.sys.root, s.self
		feed.Watch(func(lsn uint64) { root.Send(pid, &published{lsn: lsn}) })
	}
	if s.eventsOn() && s.h.sys.opts.MaxUnpublished > 0 {
		s.q.SetEventBudget(s.h.sys.opts.MaxUnpublished, s.unpublished)
	}
	if _, ok := rec.journal.(persistence.Pipelined); ok {
		s.q.SetWindow(s.h.sys.opts.JournalWindow)
	}
	s.w = startWriter(rec.journal, s.h.sys.root, s.self)
	s.h.setWriter(s.w)
	s.h.halted.Store(false)
	s.publishGauges()
	if len(rec.events) > 0 || s.feed != nil {
		s.handOn(rec.events) // publish again what may not have been
	}
	s.reconfigure(s.cfg)
	s.recoverBundles()
}

// reconfigure takes the limits of want for the writes to come, and brings the shape the
// shard's journal carries to want's: a configure entry, when the journal carries none
// yet (a new journal, or one written before configure entries) or another shape — but
// never one older than the journal's (Version: a cluster node whose view of the
// cluster's settings lags serves the journal's). The entry is sequenced like any write:
// a write admitted just before it is applied after it, under the new shape.
func (s *shard) reconfigure(want kernel.Config) {
	s.q.SetLimits(want.Limits)
	have, shape := s.k.Shape(), want.Shape
	if s.k.Configured() && (have == shape || shape.Version < have.Version) {
		if have != shape {
			s.h.log.Debug("serving the shard's journaled settings, newer than this node's", "shard", s.h.shard,
				"journaled", have.Version, "asked", shape.Version)
		}
		return
	}
	if err := s.q.Configure(s.stampSlot(), shape); err != nil {
		s.h.log.Error("cannot journal the shard's settings", "shard", s.h.shard, "err", err)
		return
	}
	switch {
	case s.k.Configured():
		s.h.log.Info("journaling new settings for the shard", "shard", s.h.shard, "changed", shapeDiff(have, shape))
	case s.k.LastLSN() > 0:
		s.h.log.Info("journaling the shard's settings: its journal was written before settings were journaled", "shard", s.h.shard)
	}
	s.flush()
}

// stop flushes everything sequenced, waits for it to be durable, answers it, and
// closes the journal: a graceful stop loses nothing.
func (s *shard) stop() {
	if s.w == nil {
		return
	}
	for s.q.Writing() || (s.q.Pending() && !s.q.Halted()) {
		if s.q.Writing() {
			err := <-s.flights[0].done
			s.applyInflight(err)
		}
		s.flush()
	}
	if err := s.w.stop(); err != nil {
		s.h.log.Error("closing journal", "shard", s.h.shard, "err", err)
	}
	s.w = nil
	for _, r := range s.readers {
		r.reply(rejection(contract.CodeEngineHalted, "shard stopping", s.k.LastLSN()))
	}
	s.readers = nil
	s.refuseBarrierWaits("shard stopping")
}

func (s *shard) halt(err error) {
	first := s.halted == nil
	if first {
		s.halted = err
	}
	s.h.halted.Store(true)
	if o := s.h.sys.opts.Ownership; first && o != nil {
		o.Halted(s.h.shard)
	}
	// Reads parked for a min_lsn fail closed too: a halted shard applies nothing more.
	for _, r := range s.readers {
		r.reply(rejection(contract.CodeEngineHalted, "shard halted; reads fail closed until it restarts", s.applied()))
	}
	clear(s.readers)
	s.readers = s.readers[:0]
	s.refuseBarrierWaits("shard halted; reads fail closed until it restarts")
	s.refuseBundleWaits()
}

func (s *shard) applied() uint64 {
	if s.k == nil {
		return 0
	}
	return s.k.LastLSN()
}

// notOwner answers a request reaching a shard whose owner's claim may have lapsed: the
// shard no longer knows that its state is the newest (indefinite; a retry reaches the
// shard's current owner).
const notOwner = "this node's claim on the shard is not current; retry the same operation_id"

// stampSlot is the slot a new entry gets: the clock's, but never before the last one.
func (s *shard) stampSlot() uint64 { return s.q.Stamp(s.h.sys.opts.slotAt(s.now())) }

// now is the shard's wall clock: the configured clock, or, on a journal that is
// Anchored, the claim's time advanced by the monotonic time since.
func (s *shard) now() time.Time {
	if s.anchored {
		return time.Unix(0, s.anchorClaimed).Add(time.Duration(monoNow() - s.anchorLocal))
	}
	return s.h.sys.opts.Clock.Now()
}

// write takes one client command; the sequencer decides (answer now, join the same
// command in flight, or sequence it).
func (s *shard) write(m *writeMsg) {
	if s.halted != nil {
		m.reply(rejection(contract.CodeEngineHalted, haltedText, s.applied()))
		return
	}
	if s.standing() == NotServing {
		m.reply(rejection(contract.CodeEngineHalted, notOwner, s.applied()))
		return
	}
	if len(m.cmd.Shards) > 0 {
		s.beginBundle(m.cmd, m.reply, time.Now())
		return
	}
	d, r := s.q.Write(m.cmd, s.stampSlot(), m.reply)
	switch {
	case d == Answered && r.Elsewhere: // a retry of a verb by value the lease's home answered
		s.forwardByValue(m.cmd, r.Txn, m.reply)
	case d == Answered:
		s.answerAsStanding(m.reply, func() { s.answerAtOnce(m.cmd, m.reply, r) }) // nothing appended: a barrier when Fenced
	}
}

// flushSoon arranges a flush after the messages already in the mailbox: under load
// they are mostly writes, and one fsync then covers them all instead of the first
// write going alone. An idle shard pays one extra mailbox hop.
func (s *shard) flushSoon(ctx actor.Context) {
	if s.halted != nil || s.flushQueued || s.q.Full() || !s.q.Pending() {
		return
	}
	s.flushQueued = true
	ctx.Send(s.self, &flushNow{gen: s.gen})
}

// flush hands the filling batches to the writer while the window has room.
func (s *shard) flush() {
	if s.halted != nil {
		return
	}
	for {
		records := s.q.Batch()
		if records == nil {
			return
		}
		done := make(chan error, 1)
		s.flights = append(s.flights, flight{done: done, start: time.Now(), entries: len(records)})
		s.w.jobs <- writeJob{records: records, gen: s.gen, done: done}
	}
}

// applyInflight applies the durable batch in lsn order and answers its requests; a
// failed append halts the shard, and the batch's outcome is unknown to its clients.
func (s *shard) applyInflight(err error) {
	start, entries := s.flights[0].start, s.flights[0].entries
	s.flights = s.flights[1:]
	if err != nil {
		s.flights = nil // every batch behind it is settled by Failed
		s.halt(fmt.Errorf("journal: %w", err))
		s.h.log.Error("journal failed; shard halted", "shard", s.h.shard, "err", err)
		for _, a := range s.q.Failed() {
			a.To(a.Reply)
		}
		return
	}
	events := s.eventsOn()
	obs := s.h.sys.opts.Observer
	answers, n := s.q.Durable(func(e kernel.Entry, out *kernel.Output) {
		if events {
			// The sink keeps each batch's slice, so each batch gets its own, made at its
			// first event and sized for one per entry (an Event is some 800 bytes: a fixed
			// 64 per batch were more than half of the server's allocated bytes under load,
			// and a batch of refusals, which change nothing, needs none).
			s.events = appendEvents(s.events, entries, s.h.shard, e, out)
		}
		s.noteMirrors(out)
		s.noteDecided(e.Cmd.Verb)
		if obs != nil && e.Cmd.Verb == contract.VerbExpire && out.Code == contract.CodeOK && e.Slot >= e.Cmd.Deadline {
			obs.Expired(s.h.shard, time.Duration(e.Slot-e.Cmd.Deadline)*s.h.sys.opts.Slot)
		}
	})
	if obs != nil {
		obs.Batch(s.h.shard, n, time.Since(start))
	}
	// The gauges first: whoever has a reply and then reads the shard's position
	// (cluster.status, metrics) sees at least its entry.
	s.publishGauges()
	for _, a := range answers {
		if !s.held(a) {
			a.To(a.Reply)
		}
	}
	s.sendMirrors()
	s.afterDecided()
	s.sinceSnapshot += n
	if events && n > 0 {
		s.handOn(s.events)
		s.events = nil // the sink keeps the slice
	}
	s.answerReaders(time.Time{})
	if len(s.b.reads) > 0 {
		s.retryReads(time.Time{})
	}
	s.maybeSnapshot()
}

// appendEvents appends the events of an applied entry: the one of its Event, then one
// per lease it changed (a lease.import's, a lease.release_all's), numbered in order (N).
// A nil dst is made with room for size events at the entry's first event (and grows
// past it for entries that change several leases); an entry without events leaves it.
func appendEvents(dst []Event, size int, shard uint32, e kernel.Entry, o *kernel.Output) []Event {
	if o.Event == kernel.EventNone && len(o.Changes) == 0 {
		return dst
	}
	if dst == nil {
		dst = make([]Event, 0, size)
	}
	first, n := len(dst), 0
	if o.Event != kernel.EventNone {
		ev := Event{Shard: shard, LSN: e.LSN, Slot: e.Slot, Kind: o.Event, Object: o.Object,
			Resource: o.Resource, Pool: o.Pool, Range: o.Range}
		switch o.Object {
		case kernel.ObjectResource:
			ev.Tenant = o.Resource.Tenant
		case kernel.ObjectPool:
			ev.Tenant = o.Pool.Tenant
		case kernel.ObjectRange:
			ev.Tenant = o.Range.Tenant
		case kernel.ObjectLease:
			ev.Tenant = o.Lease.Tenant
			ev.Lease = copyLease(o.Lease)
		case kernel.ObjectRun:
			ev.Tenant, ev.Run = o.Run.Tenant, o.Run
		case kernel.ObjectWork:
			ev.Tenant, ev.Work = o.Work.Tenant, copyWork(o.Work)
		}
		dst = append(dst, ev)
		n++
	}
	for i := range o.Changes {
		ch := &o.Changes[i]
		dst = append(dst, Event{Shard: shard, LSN: e.LSN, Slot: e.Slot, N: n, Kind: ch.Event, Object: kernel.ObjectLease,
			Tenant: ch.Lease.Tenant, Lease: copyLease(ch.Lease)})
		n++
	}
	for i := first; i < len(dst); i++ {
		if dst[i].Kind == kernel.EventLeaseRevoking {
			dst[i].Reason = revokingReason(e.Cmd.Verb)
		}
	}
	return dst
}

// revokingReason is why the entry of verb v moved a lease to revoking: only the expiry
// of an active lease's keep-alive does so on its own; every other way is an operator's.
func revokingReason(v contract.Verb) string {
	if v == contract.VerbExpire {
		return contract.RevokeReasonKeepAlive
	}
	return contract.RevokeReasonOperator
}

// tick runs once a slot: commit expire entries for due leases (bounded, earliest first)
// and time out reads waiting for an lsn.
func (s *shard) tick() {
	if s.halted != nil || s.k == nil {
		return
	}
	s.answerReaders(s.now())
	s.checkHold()
	s.keepJournal()
	s.bundleTick(time.Now()) // bundle bounds are durations: the monotonic clock
	slot := s.stampSlot()
	perTick := s.h.sys.opts.ExpirePerTick
	if s.q.Expiring() >= perTick {
		return
	}
	s.publishOccupancy()
	s.dueBuf = s.k.DueExpirations(slot, perTick, s.dueBuf[:0])
	s.h.gauges.backlog.Store(int64(len(s.dueBuf)))
	s.q.Expire(slot, s.dueBuf, perTick)
	s.flush()
}

// shapeDiff names the settings that differ between two shapes, for a log line.
func shapeDiff(a, b kernel.Shape) string {
	type field struct {
		name string
		a, b uint64
	}
	var out []string
	for _, f := range []field{
		{"dedupe_window_slots", a.DedupeWindowSlots, b.DedupeWindowSlots}, {"history_window_slots", a.HistoryWindowSlots, b.HistoryWindowSlots},
		{"max_resources", uint64(a.MaxResources), uint64(b.MaxResources)}, {"max_pools", uint64(a.MaxPools), uint64(b.MaxPools)},
		{"max_ranges", uint64(a.MaxRanges), uint64(b.MaxRanges)}, {"max_leases", uint64(a.MaxLeases), uint64(b.MaxLeases)},
		{"max_members", uint64(a.MaxMembers), uint64(b.MaxMembers)}, {"max_operations", uint64(a.MaxOperations), uint64(b.MaxOperations)},
		{"max_expirations", uint64(a.MaxExpirations), uint64(b.MaxExpirations)}, {"max_range_values", uint64(a.MaxRangeValues), uint64(b.MaxRangeValues)},
		{"max_runs", uint64(a.MaxRuns), uint64(b.MaxRuns)}, {"max_work", uint64(a.MaxWork), uint64(b.MaxWork)},
	} {
		if f.a != f.b {
			out = append(out, fmt.Sprintf("%s %d→%d", f.name, f.a, f.b))
		}
	}
	if len(out) == 0 {
		return "none (version only)"
	}
	return strings.Join(out, ", ")
}
