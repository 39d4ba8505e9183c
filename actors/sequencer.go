package actors

import (
	"errors"
	"math"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/persistence"
)

// Sequencer is a shard's write path as plain data: it admits writes (kernel.Admit),
// joins a duplicate to the same command in flight, gives entries consecutive lsns and
// never-decreasing slots, hands out one batch at a time for the journal, and, when the
// journal says the batch is durable (or failed), applies it and says whom to answer
// with what. It does no I/O and starts no goroutine, so the rules of sequencing are
// tested by scripts (testdata/sequencer) without a mailbox, a disk or a clock, as
// etcd-raft's storage thread is; the shard actor only carries its decisions out.
//
// W is whatever identifies a waiting client: the actor's reply callback, a name in a
// script.
type Sequencer[W any] struct {
	k        *kernel.Kernel
	lim      kernel.Limits // what a write is admitted under now; never what replay sees
	maxBatch int

	ops      map[string]*seqEntry[W] // sequenced client writes by in-flight key
	expiring map[uint64]bool         // leases with an expire entry sequenced
	pending  []*seqEntry[W]          // the next batch, filling
	flights  [][]*seqEntry[W]        // the batches the journal is making durable, oldest first
	window   int                     // batches that may be in flight at once (a pipelined journal: more than one)
	halted   bool

	nextLSN uint64
	slot    uint64 // slot of the last stamped entry or read: never goes back
	out     kernel.Output

	// The events not yet published (SetEventBudget): what the sink holds, and at most
	// unpublished more from the entries sequenced and not yet applied (kernel.EventBound
	// each). A client write that could take the two past maxUnpublished is refused
	// (overloaded) and expiries wait; 0: no bound.
	unpublished    int
	maxUnpublished int
	backlog        func() int
}

type seqEntry[W any] struct {
	e       kernel.Entry
	events  int    // kernel.EventBound(e.Cmd), counted in Sequencer.unpublished until applied
	opKey   string // tenant\x00operation_id; "" for expire
	payload []byte
	waiters []W
}

// Answer is a reply owed to a waiting client, and the command it answers.
type Answer[W any] struct {
	To    W
	Reply *Reply
	Cmd   *kernel.Command
}

// NewSequencer sequences after the journal's last record (lastLSN, lastSlot) over k,
// admitting writes under lim.
func NewSequencer[W any](k *kernel.Kernel, lastLSN, lastSlot uint64, lim kernel.Limits, maxBatch int) *Sequencer[W] {
	return &Sequencer[W]{k: k, lim: lim, maxBatch: maxBatch, window: 1,
		ops: make(map[string]*seqEntry[W]), expiring: make(map[uint64]bool),
		nextLSN: max(lastLSN, k.LastLSN()) + 1, slot: max(lastSlot, k.LastSlot())}
}

// Stamp is the slot of something happening at the clock's slot: never before the last.
func (q *Sequencer[W]) Stamp(clockSlot uint64) uint64 {
	q.slot = max(q.slot, clockSlot)
	return q.slot
}

// haltedText is what a halted shard answers a request with (engine_halted, indefinite).
// A halted shard is recovered from its journal by a restart of the process or, in a
// cluster, by the node that claims it next (its node gives it up within a round).
const haltedText = "shard halted; it answers again once it is recovered from its journal"

// Decision is what became of a write.
type Decision uint8

const (
	// Answered: the write was answered at once (a rejection, or a retry's remembered result).
	Answered Decision = iota
	// Joined: the same command is in flight; the waiter gets its result.
	Joined
	// Sequenced: the write has the next lsn and waits for its batch.
	Sequenced
)

// Write admits a client write at slot; with Answered the reply is for w now.
func (q *Sequencer[W]) Write(c *kernel.Command, slot uint64, w W) (Decision, *Reply) {
	if q.halted {
		return Answered, rejection(contract.CodeEngineHalted, haltedText, q.k.LastLSN())
	}
	a := q.k.Admit(c, slot, &q.lim, q.nextLSN, seqInFlight[W](q.ops), &q.out)
	switch {
	case a.Rejection != nil:
		return Answered, rejection(a.Rejection.Code, a.Rejection.Message, q.k.LastLSN())
	case a.Stage == kernel.StageRetry:
		return Answered, replyFromOutput(&q.out, q.k.LastLSN())
	case a.Join():
		dup := q.ops[a.Key]
		dup.waiters = append(dup.waiters, w)
		return Joined, nil
	}
	events := kernel.EventBound(c)
	if !q.roomFor(events) {
		return Answered, rejection(contract.CodeOverloaded, "too many events not yet published; retry later", q.k.LastLSN())
	}
	q.skips(c, slot)
	en := &seqEntry[W]{e: kernel.Entry{LSN: q.nextLSN, Slot: slot, Cmd: c}, events: events, opKey: a.Key, payload: a.Payload, waiters: []W{w}}
	q.nextLSN++
	q.ops[a.Key] = en
	q.push(en)
	return Sequenced, nil
}

// SetEventBudget bounds the events not yet published: backlog says how many the sink
// holds (handed over, not yet acknowledged by the stream); past max, client writes are
// refused overloaded and expiries wait (late, never early). The entries the shard writes
// itself (bundle steps, configure) are not refused: max must leave the sink room for them.
func (q *Sequencer[W]) SetEventBudget(max int, backlog func() int) {
	q.maxUnpublished, q.backlog = max, backlog
}

// eventRoom is how many more events the entries sequenced now may yield.
func (q *Sequencer[W]) eventRoom() int {
	if q.maxUnpublished == 0 {
		return math.MaxInt
	}
	return q.maxUnpublished - q.unpublished - q.backlog()
}

// roomFor reports whether an entry that may yield events fits the budget. One that could
// never fit (a bound configured below a bulk verb's) goes when nothing else is
// unpublished, so it is delayed, never refused for good.
func (q *Sequencer[W]) roomFor(events int) bool {
	room := q.eventRoom()
	return events <= room || (events > q.maxUnpublished && room == q.maxUnpublished)
}

// push appends an entry to the filling batch, counting its events.
func (q *Sequencer[W]) push(en *seqEntry[W]) {
	q.unpublished += en.events
	q.pending = append(q.pending, en)
}

// Internal sequences an entry the shard itself writes with a waiter: a step of a bundle
// across shards (bundle.prepare, bundle.decide, bundle.mirror), whose result w gets once
// it is durable and applied. False when halted or out of log positions.
func (q *Sequencer[W]) Internal(c *kernel.Command, slot uint64, w W) bool {
	if q.halted || uint64(kernel.SkipsBefore(c)) >= math.MaxUint64-q.nextLSN {
		return false
	}
	q.skips(c, slot)
	q.push(&seqEntry[W]{e: kernel.Entry{LSN: q.nextLSN, Slot: slot, Cmd: c}, events: kernel.EventBound(c),
		payload: c.AppendBinary(nil), waiters: []W{w}})
	q.nextLSN++
	return true
}

// skips sequences the skip entries c takes the positions of (kernel.SkipsBefore): a
// lease.import's leases' ids, a parallel bundle's lease id, an import's parts at a
// participant.
func (q *Sequencer[W]) skips(c *kernel.Command, slot uint64) {
	for range kernel.SkipsBefore(c) {
		skip := &kernel.Command{Verb: contract.VerbSkip}
		q.pending = append(q.pending, &seqEntry[W]{e: kernel.Entry{LSN: q.nextLSN, Slot: slot, Cmd: skip}, payload: skip.AppendBinary(nil)})
		q.nextLSN++
	}
}

// InFlight is the client write of operation (tenant, id) sequenced and not yet applied,
// or nil.
func (q *Sequencer[W]) InFlight(tenant, id string) *kernel.Command {
	if en := q.ops[kernel.InFlightKey(tenant, id)]; en != nil {
		return en.e.Cmd
	}
	return nil
}

// Sequenced is the lsn of the last entry sequenced.
func (q *Sequencer[W]) Sequenced() uint64 { return q.nextLSN - 1 }

// seqInFlight shows the sequenced, unapplied writes to admission.
type seqInFlight[W any] map[string]*seqEntry[W]

func (f seqInFlight[W]) Payload(key string) ([]byte, bool) {
	en, ok := f[key]
	if !ok {
		return nil, false
	}
	return en.payload, true
}

func (f seqInFlight[W]) Len() int { return len(f) }

// Expire sequences expire entries for due leases at slot, at most room of them in
// flight at once, skipping leases whose expiry is already sequenced; while the events
// not yet published are at their bound (SetEventBudget) the rest wait for a later tick.
func (q *Sequencer[W]) Expire(slot uint64, due []kernel.Due, room int) {
	if q.halted {
		return
	}
	for _, d := range due {
		if len(q.expiring) >= room {
			return
		}
		if q.expiring[d.LeaseLSN] || q.nextLSN == math.MaxUint64 {
			continue
		}
		c := &kernel.Command{Verb: contract.VerbExpire, Tenant: d.Tenant, LeaseLSN: d.LeaseLSN, Deadline: d.Deadline}
		events := kernel.EventBound(c)
		if !q.roomFor(events) {
			return
		}
		q.push(&seqEntry[W]{e: kernel.Entry{LSN: q.nextLSN, Slot: slot, Cmd: c}, events: events, payload: c.AppendBinary(nil)})
		q.nextLSN++
		q.expiring[d.LeaseLSN] = true
	}
}

// SetLimits changes the admission limits of the writes to come (the ones sequenced keep
// their admission).
func (q *Sequencer[W]) SetLimits(lim kernel.Limits) { q.lim = lim }

// Configure sequences a configure entry at slot: the shape s is in force from its lsn
// on, for the entries behind it and at every replay. Nobody waits for its answer; a
// shape the kernel would refuse (kernel.CheckConfigure) is not sequenced.
func (q *Sequencer[W]) Configure(slot uint64, s kernel.Shape) error {
	if q.halted {
		return errors.New("shard halted")
	}
	if err := q.k.CheckConfigure(s); err != nil {
		return err
	}
	if q.nextLSN == math.MaxUint64 {
		return errors.New("the shard has used every log position")
	}
	c := &kernel.Command{Verb: contract.VerbConfigure, Settings: s}
	q.push(&seqEntry[W]{e: kernel.Entry{LSN: q.nextLSN, Slot: slot, Cmd: c}, events: kernel.EventBound(c), payload: c.AppendBinary(nil)})
	q.nextLSN++
	return nil
}

// Expiring is the number of expire entries sequenced and not yet applied.
func (q *Sequencer[W]) Expiring() int { return len(q.expiring) }

// SetWindow sets how many batches may be with the journal at once: 1 for a journal that
// makes one batch durable at a time (a file's fsync), more for one that pipelines
// (persistence.Pipelined). Batches are still made durable, applied and answered in order.
func (q *Sequencer[W]) SetWindow(n int) { q.window = max(n, 1) }

// Batch takes the next batch for the journal: nil while the window is full, when nothing
// waits, or once halted. While batches are written the next one fills (group commit).
func (q *Sequencer[W]) Batch() []persistence.Record {
	if len(q.flights) >= q.window || len(q.pending) == 0 || q.halted {
		return nil
	}
	n := min(len(q.pending), q.maxBatch)
	batch := append([]*seqEntry[W](nil), q.pending[:n]...)
	q.pending = append(q.pending[:0], q.pending[n:]...)
	records := make([]persistence.Record, n)
	for i, en := range batch {
		records[i] = persistence.Record{LSN: en.e.LSN, Slot: en.e.Slot, Payload: en.payload}
	}
	q.flights = append(q.flights, batch)
	return records
}

// Writing reports whether a batch is with the journal.
func (q *Sequencer[W]) Writing() bool { return len(q.flights) > 0 }

// Full reports whether the window of batches with the journal is full.
func (q *Sequencer[W]) Full() bool { return len(q.flights) >= q.window }

// Pending reports whether entries wait for a batch.
func (q *Sequencer[W]) Pending() bool { return len(q.pending) > 0 }

// Halted reports whether a journal failure stopped the sequencer.
func (q *Sequencer[W]) Halted() bool { return q.halted }

// Durable applies the oldest batch with the journal, which the journal made durable, in
// lsn order, and returns whom to answer with what. applied, when not nil, sees every
// entry's output as it is applied (the shard derives its events there).
func (q *Sequencer[W]) Durable(applied func(e kernel.Entry, out *kernel.Output)) (answers []Answer[W], entries int) {
	batch := q.flights[0]
	q.flights[0] = nil
	q.flights = q.flights[1:]
	for _, en := range batch {
		q.k.Apply(en.e, &q.out)
		q.unpublished -= en.events // the sink's backlog has them from here on
		if en.opKey != "" {
			delete(q.ops, en.opKey)
		} else if en.e.Cmd.Verb == contract.VerbExpire {
			delete(q.expiring, en.e.Cmd.LeaseLSN)
		}
		if applied != nil {
			applied(en.e, &q.out)
		}
		if len(en.waiters) > 0 {
			r := replyFromOutput(&q.out, en.e.LSN)
			r.shownWaiting = !en.e.Cmd.Verb.IsInternal() && q.k.UndecidedBundles() > 0 && q.k.ShowsIntents(&q.out)
			for _, w := range en.waiters {
				answers = append(answers, Answer[W]{To: w, Reply: r, Cmd: en.e.Cmd})
			}
		}
	}
	return answers, len(batch)
}

// Failed records that the journal failed the oldest batch: the outcome of every batch
// with the journal is unknown to its clients (storage_failure, indefinite), the writes
// behind them were never journaled (engine_halted), and the sequencer is halted until
// the shard restarts and replays.
func (q *Sequencer[W]) Failed() []Answer[W] {
	q.halted = true
	applied := q.k.LastLSN()
	var answers []Answer[W]
	unknown := rejection(contract.CodeStorageFailure, "the journal failed; retry the same operation_id after the shard restarts", applied)
	for _, batch := range q.flights {
		for _, en := range batch {
			for _, w := range en.waiters {
				answers = append(answers, Answer[W]{To: w, Reply: unknown})
			}
		}
	}
	never := rejection(contract.CodeEngineHalted, "shard halted", applied)
	for _, en := range q.pending {
		for _, w := range en.waiters {
			answers = append(answers, Answer[W]{To: w, Reply: never})
		}
	}
	q.flights, q.pending = nil, q.pending[:0]
	q.unpublished = 0
	q.ops = make(map[string]*seqEntry[W])
	clear(q.expiring)
	return answers
}
