package actors

import (
	"fmt"
	"math"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/persistence"
)

// entry is a sequenced command waiting for its batch to become durable.
type entry struct {
	e       kernel.Entry
	opKey   string // tenant\x00operation_id, "" for expire
	payload []byte // the journaled encoding, also what a duplicate is compared by
	waiters []replyFunc
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
	// answers engine_halted until the process restarts and replays.
	halted error

	gen     uint64 // writer generation, so a stale report from before a restart is ignored
	w       *writer
	writing bool
	// flushQueued is set while a flushNow is in the mailbox.
	flushQueued bool
	// inflightJob carries the writer's result for the batch in flight, for a
	// synchronous wait at stop (the same result also arrives as a batchDone message).
	inflightJob chan error
	inflight    []*entry // the batch the writer is making durable
	pending     []*entry // the next batch, filling
	ops         map[string]*entry
	expiring    map[uint64]bool // leases with an expire entry sequenced but not applied

	nextLSN uint64 // lsn the next entry gets
	seqSlot uint64 // slot of the last sequenced entry: stamps never go back

	readers []*readMsg // reads waiting for min_lsn

	sinceSnapshot int
	published     uint64 // events durably published through this lsn
	snapshotting  bool
	snapLSN       uint64
	snapSlot      uint64
	snapCapture   *kernel.SnapshotCapture // a snapshot taken, waiting for publishing to catch up
	pubWriting    bool
	pubWritten    uint64
	pubWrittenAt  time.Time

	anchored      bool  // the slot clock runs from the journal's claim (Anchored)
	anchorClaimed int64 // claim time, Unix ns
	anchorLocal   int64 // monoNow at the claim

	batchStart time.Time
	dueBuf     []kernel.Due
	events     []Event
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
	case *batchDone:
		if m.gen == s.gen && s.writing {
			s.applyInflight(m.err)
			s.flushSoon(ctx)
		}
	case *flushNow:
		s.flushQueued = false
		if m.gen == s.gen {
			s.flush()
		}
	case *tick:
		s.tick()
	case *published:
		if m.lsn > s.published {
			s.published = m.lsn
			s.maybeWriteSnapshot()
			s.maybePersistPublished()
		}
	case *publishedWritten:
		s.pubWriting = false
		if m.err != nil {
			s.h.log.Error("recording the published position", "shard", s.h.shard, "err", m.err)
		} else {
			s.pubWritten = max(s.pubWritten, m.lsn)
		}
		s.pubWrittenAt = time.Now()
	case *snapshotDone:
		s.snapshotting = false
		if m.err != nil {
			s.h.log.Error("snapshot failed", "shard", s.h.shard, "lsn", m.lsn, "err", m.err)
		} else if m.gen == s.gen && s.w != nil {
			s.w.jobs <- writeJob{compact: m.lsn, gen: s.gen}
		}
	}
}

// start recovers snapshot + journal; until it succeeds the shard answers engine_halted.
func (s *shard) start() {
	s.ops = make(map[string]*entry)
	s.expiring = make(map[uint64]bool)
	s.cfg = s.h.sys.opts.Kernel
	s.cfg.Shard = s.h.shard
	s.gen = s.h.nextGeneration()
	s.h.queued.Store(0)
	rec, err := recoverShard(s.h, s.cfg)
	if err != nil {
		s.halt(fmt.Errorf("recovery: %w", err))
		s.h.log.Error("shard refuses to start", "shard", s.h.shard, "err", err)
		return
	}
	s.k, s.published, s.pubWritten = rec.kernel, rec.published, rec.published
	s.h.pubMu.Lock()
	s.h.pubDurable = rec.published
	s.h.pubMu.Unlock()
	if a, ok := rec.journal.(Anchored); ok {
		s.anchored = true
		s.anchorClaimed, s.anchorLocal = a.Anchor()
	}
	last, lastSlot := rec.journal.Last()
	s.nextLSN = max(last, s.k.LastLSN()) + 1
	s.seqSlot = max(lastSlot, s.k.LastSlot())
	s.w = startWriter(rec.journal, s.h.sys.root, s.self)
	s.h.setWriter(s.w)
	s.h.halted.Store(false)
	s.publishGauges()
	if sink := s.h.sys.opts.Events; sink != nil && len(rec.events) > 0 {
		sink(s.h.shard, s.k.LastLSN(), rec.events) // republish what may not have been published
	}
}

// stop flushes everything sequenced, waits for it to be durable, answers it, and
// closes the journal: a graceful stop loses nothing.
func (s *shard) stop() {
	if s.w == nil {
		return
	}
	for s.writing || len(s.pending) > 0 {
		if s.writing {
			job := s.inflightJob
			err := <-job
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
}

func (s *shard) halt(err error) {
	if s.halted == nil {
		s.halted = err
	}
	s.h.halted.Store(true)
	// Reads parked for a min_lsn fail closed too: a halted shard applies nothing more.
	for _, r := range s.readers {
		r.reply(rejection(contract.CodeEngineHalted, "shard halted; reads fail closed until it restarts", s.applied()))
	}
	clear(s.readers)
	s.readers = s.readers[:0]
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

// serving reports whether the shard may answer: always in a single process; in a
// cluster only while its node's claim is certainly current.
func (s *shard) serving() bool {
	f := s.h.sys.opts.Serving
	return f == nil || f(s.h.shard)
}

// stampSlot is the slot a new entry gets: the clock's, but never before the last one.
func (s *shard) stampSlot() uint64 {
	s.seqSlot = max(s.seqSlot, s.h.sys.opts.slotAt(s.now()))
	return s.seqSlot
}

// now is the shard's wall clock: the configured clock, or, on a journal that is
// Anchored, the claim's time advanced by the monotonic time since.
func (s *shard) now() time.Time {
	if s.anchored {
		return time.Unix(0, s.anchorClaimed).Add(time.Duration(monoNow() - s.anchorLocal))
	}
	return s.h.sys.opts.Clock.Now()
}

// write takes one client command: the kernel's admission decides (kernel.Admit), the
// shard answers, joins the command to its duplicate in flight, or sequences it.
func (s *shard) write(m *writeMsg) {
	if s.halted != nil {
		m.reply(rejection(contract.CodeEngineHalted, "shard halted; it answers again after a restart", s.applied()))
		return
	}
	if !s.serving() {
		m.reply(rejection(contract.CodeEngineHalted, notOwner, s.applied()))
		return
	}
	c := m.cmd
	slot := s.stampSlot()
	a := s.k.Admit(c, slot, s.h.sys.opts.MaxCommandBytes, s.nextLSN, inFlight(s.ops), &s.out)
	switch {
	case a.Rejection != nil:
		m.reply(rejection(a.Rejection.Code, a.Rejection.Message, s.applied()))
	case a.Stage == kernel.StageRetry:
		m.reply(replyFromOutput(&s.out, s.applied()))
	case a.Join():
		dup := s.ops[a.Key]
		dup.waiters = append(dup.waiters, m.reply) // the same command in flight: share its result
	case a.Sequence():
		en := &entry{e: kernel.Entry{LSN: s.nextLSN, Slot: slot, Cmd: c}, opKey: a.Key, payload: a.Payload, waiters: []replyFunc{m.reply}}
		s.nextLSN++
		s.ops[a.Key] = en
		s.pending = append(s.pending, en)
	}
}

// inFlight shows the shard's sequenced, unapplied writes to admission.
type inFlight map[string]*entry

func (f inFlight) Payload(key string) ([]byte, bool) {
	en, ok := f[key]
	if !ok {
		return nil, false
	}
	return en.payload, true
}

func (f inFlight) Len() int { return len(f) }

// flushSoon arranges a flush after the messages already in the mailbox: under load
// they are mostly writes, and one fsync then covers them all instead of the first
// write going alone. An idle shard pays one extra mailbox hop.
func (s *shard) flushSoon(ctx actor.Context) {
	if s.flushQueued || s.writing || len(s.pending) == 0 || s.halted != nil {
		return
	}
	s.flushQueued = true
	ctx.Send(s.self, &flushNow{gen: s.gen})
}

// flush hands the filling batch to the writer when it is idle.
func (s *shard) flush() {
	if s.writing || len(s.pending) == 0 || s.halted != nil {
		return
	}
	n := min(len(s.pending), s.h.sys.opts.MaxBatch)
	s.inflight = append(s.inflight[:0], s.pending[:n]...)
	s.pending = append(s.pending[:0], s.pending[n:]...)
	records := make([]persistence.Record, n)
	for i, en := range s.inflight {
		records[i] = persistence.Record{LSN: en.e.LSN, Slot: en.e.Slot, Payload: en.payload}
	}
	done := make(chan error, 1)
	s.inflightJob = done
	s.writing = true
	s.batchStart = time.Now()
	s.w.jobs <- writeJob{records: records, gen: s.gen, done: done}
}

// applyInflight applies the durable batch in lsn order and answers its requests; a
// failed append halts the shard, and the batch's outcome is unknown to its clients.
func (s *shard) applyInflight(err error) {
	s.writing = false
	batch := s.inflight
	s.inflight = s.inflight[:0]
	if o := s.h.sys.opts.Observer; o != nil {
		o.Batch(s.h.shard, len(batch), time.Since(s.batchStart))
	}
	if err != nil {
		s.halt(fmt.Errorf("journal: %w", err))
		s.h.log.Error("journal failed; shard halted", "shard", s.h.shard, "err", err)
		for _, en := range batch {
			for _, w := range en.waiters {
				w(rejection(contract.CodeStorageFailure, "the journal failed; retry the same operation_id after the shard restarts", s.applied()))
			}
		}
		for _, en := range s.pending {
			for _, w := range en.waiters {
				w(rejection(contract.CodeEngineHalted, "shard halted", s.applied()))
			}
		}
		s.pending = s.pending[:0]
		s.ops = make(map[string]*entry)
		return
	}
	if s.events == nil {
		s.events = make([]Event, 0, len(batch)) // the sink keeps each batch's slice
	} else {
		s.events = s.events[:0]
	}
	for _, en := range batch {
		s.k.Apply(en.e, &s.out)
		if en.opKey != "" {
			delete(s.ops, en.opKey)
		} else {
			delete(s.expiring, en.e.Cmd.LeaseLSN)
		}
		if s.out.Event != kernel.EventNone && s.h.sys.opts.Events != nil {
			s.events = append(s.events, eventOf(s.h.shard, en.e, &s.out))
		}
		if len(en.waiters) > 0 {
			r := replyFromOutput(&s.out, en.e.LSN)
			for _, w := range en.waiters {
				w(r)
			}
		}
	}
	s.sinceSnapshot += len(batch)
	if sink := s.h.sys.opts.Events; sink != nil && len(batch) > 0 {
		sink(s.h.shard, s.k.LastLSN(), s.events)
		s.events = nil // the sink keeps the slice
	}
	s.answerReaders(time.Time{})
	s.publishGauges()
	s.maybeSnapshot()
}

func eventOf(shard uint32, e kernel.Entry, o *kernel.Output) Event {
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
	}
	return ev
}

// tick runs once a slot: commit expire entries for due leases (bounded, earliest first)
// and time out reads waiting for an lsn.
func (s *shard) tick() {
	if s.halted != nil || s.k == nil {
		return
	}
	s.answerReaders(s.now())
	slot := s.stampSlot()
	room := s.h.sys.opts.ExpirePerTick - len(s.expiring)
	if room <= 0 {
		return
	}
	s.dueBuf = s.k.DueExpirations(slot, room+len(s.expiring), s.dueBuf[:0])
	s.h.gauges.backlog.Store(int64(len(s.dueBuf)))
	for _, d := range s.dueBuf {
		if s.expiring[d.LeaseLSN] || s.nextLSN == math.MaxUint64 {
			continue
		}
		c := &kernel.Command{Verb: contract.VerbExpire, Tenant: d.Tenant, LeaseLSN: d.LeaseLSN, Deadline: d.Deadline}
		en := &entry{e: kernel.Entry{LSN: s.nextLSN, Slot: slot, Cmd: c}, payload: c.AppendBinary(nil)}
		s.nextLSN++
		s.expiring[d.LeaseLSN] = true
		s.pending = append(s.pending, en)
	}
	s.flush()
}
