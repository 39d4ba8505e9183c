// Package events is Holdfast's event publishing: what it decides, as plain data (Window: a
// shard's events sent and not yet acknowledged, and what to send again when), and the
// Publisher that carries the plan out on NATS with goroutines and timers.
package events

import (
	"time"

	"github.com/nats-io/nats.go"
)

// Window is one shard's events sent and not yet acknowledged, as plain data. The
// publishing goroutine and the acknowledgement handler tell it what happened — an entry
// added, sent, acknowledged, refused — and ask it what to do next (Plan); its decisions
// (how far the published position advances, when to probe after a refusal, that the
// entries behind a successful probe go out again in order, that an overdue entry goes out
// again) are tested on their own (window_test.go), without NATS, goroutines or
// timers, and scripted in testdata/window. Time comes in as an argument. It is not safe for concurrent use: the shard
// publisher holds its mutex around every call.
type Window struct {
	entries []Entry // from head on: sent and not yet acknowledged, in order
	head    int
	nextSeq uint64   // the seq the next Add gets
	failed  int      // entries marked failed and not yet planned again
	redo    []uint64 // plan's result, reused
	probe   uint64   // the failed entry sent alone until the stream takes it; 0: none
}

// Entry is an event published and not yet acknowledged, or (Msg nil) a batch end
// with no event left to wait for. seq numbers a shard's entries consecutively; the
// event's acknowledgement comes to <inbox>.<shard>.<seq>, for every send of it.
type Entry struct {
	Seq     uint64
	Msg     *nats.Msg
	Through uint64 // the batch ends with this entry: its lsn once acknowledged
	acked   bool
	failed  bool // the stream refused it, or nothing listened: send again
	sentAt  time.Time
	tries   int
}

func NewWindow() Window { return Window{nextSeq: 1} }

// NextSeq is the seq the next Add gets (the publisher names its reply subject by it).
func (w *Window) NextSeq() uint64 { return w.nextSeq }

// pending is how many entries wait for their acknowledgement.
func (w *Window) Pending() int { return len(w.entries) - w.head }

// add appends an entry: msg sent at now, or (msg nil) one that needs no acknowledgement
// (a batch without events, an event that cannot be encoded). It returns its seq.
func (w *Window) Add(msg *nats.Msg, through uint64, now time.Time) uint64 {
	seq := w.nextSeq
	w.nextSeq++
	w.entries = append(w.entries, Entry{Seq: seq, Msg: msg, Through: through, sentAt: now, acked: msg == nil})
	return seq
}

// entry finds the entry of seq, nil when it has left the window.
func (w *Window) entry(seq uint64) *Entry {
	if w.head >= len(w.entries) {
		return nil
	}
	first := w.entries[w.head].Seq
	if seq < first || seq-first >= uint64(len(w.entries)-w.head) {
		return nil
	}
	return &w.entries[w.head+int(seq-first)]
}

// ack records the stream's acknowledgement of seq (a first send made it, even if a
// resend was planned). It reports whether the head may now advance.
func (w *Window) Ack(seq uint64) bool {
	e := w.entry(seq)
	if e == nil || e.acked {
		return false
	}
	e.acked = true
	if e.failed {
		e.failed = false
		w.failed--
	}
	return w.entries[w.head].Seq == seq
}

// fail records that a send of seq was refused or went nowhere. It returns the entry's
// message and attempts so far when that is news (nil when the entry is gone, acknowledged
// or already marked).
func (w *Window) Fail(seq uint64) (*nats.Msg, int) {
	e := w.entry(seq)
	if e == nil || e.acked || e.failed {
		return nil, 0
	}
	e.failed = true
	w.failed++
	return e.Msg, e.tries
}

// Advance drops acknowledged entries from the head, calling done for each (published:
// it carried an event), and returns the lsn the published position reaches (0: none).
func (w *Window) Advance(done func(published bool)) (through uint64) {
	w.entries, w.head, through = advance(w.entries, w.head, done)
	return through
}

func (e *Entry) acknowledged() bool { return e.acked }
func (e *Entry) event() bool        { return e.Msg != nil }
func (e *Entry) batchEnd() uint64   { return e.Through }

// plan picks what to send again at now: the entries' seqs and the attempt count to back
// off for first (0: none), or else how long to wait for news. overdue is set when the
// plan resends an entry whose acknowledgement did not come within ackWait.
//
// After a refusal the shard probes: the first refused entry goes out alone, after a
// backoff, until the stream takes it; then every unacknowledged entry behind it goes out
// again in window order. So a stream that was missing or refusing everything stores the
// events in lsn order once it is back, instead of in whatever order the retries happened
// to meet it.
func (w *Window) Plan(now time.Time, ackWait time.Duration) (redo []uint64, tries int, wait time.Duration, overdue *Entry) {
	redo = w.redo[:0]
	defer func() { w.redo = redo }()
	if w.probe != 0 {
		e := w.entry(w.probe)
		switch {
		case e == nil || e.acked:
			// The stream is taking events again: everything behind the probe, in order.
			for i := w.head; i < len(w.entries); i++ {
				if e := &w.entries[i]; !e.acked && e.Seq > w.probe {
					if e.failed {
						e.failed = false
						w.failed--
					}
					redo = append(redo, e.Seq)
				}
			}
			w.probe = 0
			return redo, 0, 0, nil
		case e.failed:
			e.failed = false
			w.failed--
			e.tries++
			return append(redo, e.Seq), e.tries, 0, nil
		}
		if late := now.Sub(e.sentAt); late < ackWait {
			return redo, 0, ackWait - late, nil
		}
		e.tries++
		return append(redo, e.Seq), e.tries, 0, nil
	}
	if w.failed > 0 {
		for i := w.head; i < len(w.entries); i++ {
			if e := &w.entries[i]; e.failed {
				e.failed = false
				w.failed--
				e.tries++
				w.probe = e.Seq
				return append(redo, e.Seq), e.tries, 0, nil
			}
		}
	}
	if w.head >= len(w.entries) {
		return redo, 0, ackWait, nil // nothing unacknowledged
	}
	e := &w.entries[w.head]
	if e.acked {
		return redo, 0, ackWait, nil
	}
	if late := now.Sub(e.sentAt); late < ackWait {
		return redo, 0, ackWait - late, nil
	}
	e.tries++
	return append(redo, e.Seq), e.tries, 0, e
}

// resending returns the message of seq to send again at now, nil when an earlier send
// made it after all.
func (w *Window) Resending(seq uint64, now time.Time) *nats.Msg {
	e := w.entry(seq)
	if e == nil || e.acked {
		return nil
	}
	e.sentAt = now
	return e.Msg
}

// Reset forgets every entry (another node publishes the shard's events now) and keeps
// numbering after the last seq, so a late acknowledgement of a forgotten entry finds
// nothing.
func (w *Window) Reset() {
	clear(w.entries)
	*w = Window{nextSeq: w.nextSeq, entries: w.entries[:0], redo: w.redo[:0]}
}

// FailAll marks every unacknowledged entry failed: the connection they were sent on was
// lost, so they may never reach the stream. The next Plan probes the first and then sends
// the rest again in order (a copy that did arrive is dropped by its message id).
func (w *Window) FailAll() {
	for i := w.head; i < len(w.entries); i++ {
		if e := &w.entries[i]; !e.acked && !e.failed && e.Msg != nil {
			e.failed = true
			w.failed++
		}
	}
}

// Troubled reports whether entries wait to be sent again (refused, lost, or a probe in
// progress): new events must wait behind them, or they would be stored out of order.
func (w *Window) Troubled() bool { return w.failed > 0 || w.probe != 0 }

// queued is an entry of a shard's publishing queue (Window's, Batches'), acknowledged in
// any order but leaving the queue only from its head.
type queued[E any] interface {
	*E
	acknowledged() bool
	event() bool      // it carried an event (a batch end without one does not count)
	batchEnd() uint64 // the lsn of the journal batch it ends; 0: none
}

// advance drops the acknowledged entries at the head of a queue read from index head,
// calling done for each, and returns the queue, its new head and the lsn the published
// position reaches: the last batch end dropped (0: none). Only the head's prefix counts, so
// the position never passes an event still unacknowledged.
//
// It keeps the queue bounded under steady load: an emptied queue rewinds to the start of
// its array; once head passes half of it (and at least 64), the live entries move to the
// front and the vacated slots are zeroed for the collector.
func advance[E any, P queued[E]](entries []E, head int, done func(published bool)) (_ []E, _ int, through uint64) {
	for ; head < len(entries) && P(&entries[head]).acknowledged(); head++ {
		e := P(&entries[head])
		done(e.event())
		if end := e.batchEnd(); end > 0 {
			through = end
		}
		var zero E
		entries[head] = zero
	}
	switch {
	case head == len(entries):
		return entries[:0], 0, through
	case head >= 64 && head*2 >= len(entries):
		n := copy(entries, entries[head:])
		clear(entries[n:])
		return entries[:n], 0, through
	}
	return entries, head, through
}
