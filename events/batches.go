package events

import (
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
)

// Batches is one shard's events sent as JetStream fast batches (nats-server's "batched"
// publishing, gap mode fail) and not yet acknowledged, as plain data like Window.
//
// Why batches: NATS delivers a connection's messages in order but may drop some, e.g.
// those reaching a server while the stream has no leader, and then deliver later ones.
// With one plain publish per event, a dropped event sent again is stored after events
// sent behind it, and the shard's events are out of lsn order. In a fast batch each
// message carries its batch sequence, and the stream stores a message only when it is the
// next one of its batch: after a gap the stream ends the batch, stores nothing more of
// it, and says how many it stored (a PubAck with the batch's count). The publisher starts
// a new batch only once the previous one has ended and everything after its count goes
// out again, in order, in the new batch (a copy that did make it is dropped by its
// message id). So nothing can be stored ahead of an earlier event of the shard.
//
// The stream acknowledges as it stores: a flow acknowledgement names the batch sequence
// through which everything is stored (the publisher asks for one per message). A batch
// whose fate is unknown (an error, a reply that did not come, a lost connection) is ended
// by the publisher: an end-of-batch commit, answered by the PubAck with the count, or by
// "unknown batch" when the stream has already forgotten it.
//
// A batch left idle is forgotten by the stream (nats-server's batch timeout, 10 s by
// default), and a message sent in a forgotten batch is refused — after NATS has delivered
// it to every live subscriber of its subject, who then get the copy sent again in the new
// batch as well. So an event that comes after idle (DefaultBatchIdle) of quiet, with
// everything of the open batch stored, starts a new batch instead; the stream forgets the
// old one with nothing in it lost.
type Batches struct {
	entries []batchEntry // from head on: not yet acknowledged, in order
	head    int

	idPrefix string // unique to this publisher and shard; a batch's id adds a counter
	made     uint64 // batches started
	id       string // the current batch, "" when none
	sent     uint64 // batch sequences used in the current batch
	closing  bool   // the current batch's end was asked for; nothing more is sent in it
	closedAt time.Time
	tries    int // end-of-batch commits sent for the current batch

	idle     time.Duration // quiet after which the next event starts a new batch
	lastSent time.Time     // the current batch's last send
}

type batchEntry struct {
	msg     *nats.Msg // nil: a batch end with no event (acknowledged from the start)
	through uint64    // the journal batch ends with this entry: its lsn once stored
	bseq    uint64    // sequence in the current batch; 0: not sent in it
	acked   bool
	sentAt  time.Time
}

// Send is a message to send: msg with the reply subject that carries its batch and
// sequence (the publisher completes the subject with its inbox).
type Send struct {
	Msg   *nats.Msg
	Batch string
	Seq   uint64
	Op    int // FastBatchOp*
}

// Operations of a fast-batch publish, as nats-server numbers them in the reply subject.
const (
	opStart     = 0
	opAppend    = 1
	opCommitEOB = 3
)

// NewBatches keeps one shard's batches; an event after idle of quiet starts a new one.
func NewBatches(idPrefix string, idle time.Duration) Batches {
	return Batches{idPrefix: idPrefix, idle: idle}
}

// Pending is how many entries wait for their acknowledgement.
func (b *Batches) Pending() int { return len(b.entries) - b.head }

// Add queues an entry: msg, or (nil) a journal batch with no event to wait for.
func (b *Batches) Add(msg *nats.Msg, through uint64) {
	b.entries = append(b.entries, batchEntry{msg: msg, through: through, acked: msg == nil})
}

// Sendable assigns batch sequences to every entry not yet sent in the current batch,
// starting a batch when none is open, and returns the sends in order. Nothing is sent
// while a batch is ending.
func (b *Batches) Sendable(now time.Time, out []Send) []Send {
	if b.closing {
		return out
	}
	if b.id != "" && b.idle > 0 && now.Sub(b.lastSent) >= b.idle && !b.inFlight() {
		b.id = "" // idle, everything stored: left for the stream to forget
	}
	for i := b.head; i < len(b.entries); i++ {
		e := &b.entries[i]
		if e.acked || e.bseq != 0 {
			continue
		}
		op := opAppend
		if b.id == "" {
			b.made++
			b.id = b.idPrefix + strconv.FormatUint(b.made, 36)
			b.sent = 0
			op = opStart
		}
		b.sent++
		e.bseq, e.sentAt = b.sent, now
		b.lastSent = now
		out = append(out, Send{Msg: e.msg, Batch: b.id, Seq: b.sent, Op: op})
	}
	return out
}

// inFlight reports whether an entry sent in the current batch awaits its acknowledgement.
func (b *Batches) inFlight() bool {
	for i := b.head; i < len(b.entries); i++ {
		if e := &b.entries[i]; !e.acked && e.bseq != 0 {
			return true
		}
	}
	return false
}

// Stored records the stream's flow acknowledgement: everything of batch id through
// batch sequence seq is stored. It reports whether the head may advance.
func (b *Batches) Stored(id string, seq uint64) bool {
	if id != b.id || id == "" {
		return false
	}
	moved := false
	for i := b.head; i < len(b.entries); i++ {
		e := &b.entries[i]
		if e.acked {
			continue
		}
		if e.bseq == 0 || e.bseq > seq {
			break
		}
		e.acked, moved = true, true
	}
	return moved
}

// Ended records that batch id is over: the stream stored its first count messages
// (known), or an unknown number of them (it had forgotten the batch). Every entry not
// acknowledged then goes out again in the next batch.
func (b *Batches) Ended(id string, count uint64, known bool) {
	if id != b.id || id == "" {
		return
	}
	if known {
		b.Stored(id, count)
	}
	for i := b.head; i < len(b.entries); i++ {
		b.entries[i].bseq = 0
	}
	b.id, b.sent, b.closing, b.tries = "", 0, false, 0
}

// Troubled records that batch id may have lost a message (an error reply, a lost
// connection): it must end before anything more is sent. True when the end must now be
// asked for.
func (b *Batches) Troubled(id string) bool {
	if id != b.id || id == "" || b.closing {
		return false
	}
	b.closing = true
	return true
}

// Closing reports whether the current batch is being ended.
func (b *Batches) Closing() bool { return b.closing }

// Close is the end-of-batch commit to send for the current batch at now: its sequence is
// one past the last sent, so a message missing before it ends the batch right there.
func (b *Batches) Close(now time.Time) (Send, int) {
	b.closing, b.closedAt = true, now
	b.tries++
	return Send{Batch: b.id, Seq: b.sent + 1, Op: opCommitEOB}, b.tries
}

// Due reports what needs doing at now: end the current batch because its oldest
// unacknowledged message is overdue, or ask again for an end not answered within
// ackWait; else how long until something may be due.
func (b *Batches) Due(now time.Time, ackWait time.Duration) (close bool, wait time.Duration) {
	if b.id == "" {
		return false, ackWait
	}
	if b.closing {
		if late := now.Sub(b.closedAt); late < ackWait {
			return false, ackWait - late
		}
		return true, 0
	}
	for i := b.head; i < len(b.entries); i++ {
		e := &b.entries[i]
		if e.acked {
			continue
		}
		if e.bseq == 0 {
			break
		}
		if late := now.Sub(e.sentAt); late < ackWait {
			return false, ackWait - late
		}
		return true, 0
	}
	return false, ackWait
}

// Advance drops acknowledged entries from the head, calling done for each (published: it
// carried an event), and returns the lsn the published position reaches (0: none).
func (b *Batches) Advance(done func(published bool)) (through uint64) {
	b.entries, b.head, through = advance(b.entries, b.head, done)
	return through
}

func (e *batchEntry) acknowledged() bool { return e.acked }
func (e *batchEntry) event() bool        { return e.msg != nil }
func (e *batchEntry) batchEnd() uint64   { return e.through }

// Unsent reports whether entries wait to be sent (in a new batch or the open one).
func (b *Batches) Unsent() bool {
	for i := b.head; i < len(b.entries); i++ {
		if e := &b.entries[i]; !e.acked && e.bseq == 0 {
			return true
		}
	}
	return false
}

// Reset forgets every entry and the current batch (another node publishes the shard's
// events now); batch ids go on counting, so a late reply about a forgotten batch finds
// nothing.
func (b *Batches) Reset() {
	clear(b.entries)
	*b = Batches{idPrefix: b.idPrefix, made: b.made, entries: b.entries[:0], idle: b.idle}
}

// Refused records that the end of batch id was not taken (nothing listened, or an error
// that leaves the batch's fate open): it is asked for again, after a backoff.
func (b *Batches) Refused(id string) {
	if id == b.id && b.closing {
		b.closedAt = time.Time{}
	}
}
