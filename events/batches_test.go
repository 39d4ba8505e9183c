package events

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func msgs(b *Batches, n int, firstLSN uint64) {
	for i := 0; i < n; i++ {
		b.Add(nats.NewMsg("e"), firstLSN+uint64(i))
	}
}

func seqsOf(sends []Send) (ids []string, seqs []uint64, ops []int) {
	for _, s := range sends {
		ids, seqs, ops = append(ids, s.Batch), append(seqs, s.Seq), append(ops, s.Op)
	}
	return
}

// A batch's messages go out with consecutive sequences, the first starting it; a flow
// acknowledgement stores everything through its sequence.
func TestBatchesSendAndStore(t *testing.T) {
	now := time.Unix(0, 0)
	b := NewBatches("p", 0)
	msgs(&b, 3, 1)
	sends := b.Sendable(now, nil)
	ids, seqs, ops := seqsOf(sends)
	if len(sends) != 3 || ids[0] != ids[2] || seqs[0] != 1 || seqs[2] != 3 || ops[0] != opStart || ops[1] != opAppend {
		t.Fatalf("sends %v %v %v", ids, seqs, ops)
	}
	if len(b.Sendable(now, nil)) != 0 {
		t.Fatal("sent twice")
	}
	if !b.Stored(ids[0], 2) {
		t.Fatal("flow acknowledgement ignored")
	}
	if got := b.Advance(func(bool) {}); got != 2 {
		t.Fatalf("position %d, want 2", got)
	}
	msgs(&b, 1, 4)
	sends = b.Sendable(now, nil)
	if len(sends) != 1 || sends[0].Batch != ids[0] || sends[0].Seq != 4 || sends[0].Op != opAppend {
		t.Fatalf("next send %+v: the open batch goes on", sends)
	}
	if b.Stored("other", 4) {
		t.Fatal("an acknowledgement of another batch counted")
	}
}

// A batch in doubt sends nothing more; its end commit is one past the last sent, and
// what its PubAck's count leaves out goes out again, in order, in a new batch.
func TestBatchesEndAndResend(t *testing.T) {
	now := time.Unix(0, 0)
	b := NewBatches("p", 0)
	msgs(&b, 5, 1)
	first := b.Sendable(now, nil)
	id := first[0].Batch
	if !b.Troubled(id) || b.Troubled(id) {
		t.Fatal("trouble must ask for the end once")
	}
	msgs(&b, 1, 6)
	if s := b.Sendable(now, nil); len(s) != 0 {
		t.Fatalf("sent %v while the batch ends", s)
	}
	eob, tries := b.Close(now)
	if eob.Batch != id || eob.Seq != 6 || eob.Op != opCommitEOB || tries != 1 {
		t.Fatalf("end %+v tries %d", eob, tries)
	}
	b.Ended(id, 2, true)
	if got := b.Advance(func(bool) {}); got != 2 {
		t.Fatalf("position %d, want 2", got)
	}
	ids, seqs, ops := seqsOf(b.Sendable(now, nil))
	if len(seqs) != 4 || ids[0] == id || seqs[0] != 1 || seqs[3] != 4 || ops[0] != opStart {
		t.Fatalf("resent %v %v %v: events 3..6 in a new batch from 1", ids, seqs, ops)
	}
	// A late reply about the old batch changes nothing.
	b.Ended(id, 5, true)
	if b.Stored(id, 5) || b.Advance(func(bool) {}) != 0 {
		t.Fatal("the old batch's reply counted")
	}
	// A forgotten batch: everything not acknowledged goes out again.
	b.Ended(ids[0], 0, false)
	if _, seqs, _ := seqsOf(b.Sendable(now, nil)); len(seqs) != 4 || seqs[0] != 1 {
		t.Fatalf("after an unknown batch: %v", seqs)
	}
}

// The oldest unacknowledged message overdue ends the batch; an end not answered is asked
// for again; an end refused is asked for again at once.
func TestBatchesDue(t *testing.T) {
	now := time.Unix(0, 0)
	wait := 10 * time.Second
	b := NewBatches("p", 0)
	if end, _ := b.Due(now, wait); end {
		t.Fatal("nothing to end")
	}
	msgs(&b, 2, 1)
	id := b.Sendable(now, nil)[0].Batch
	if end, w := b.Due(now.Add(4*time.Second), wait); end || w != 6*time.Second {
		t.Fatalf("due %v wait %v", end, w)
	}
	if end, _ := b.Due(now.Add(wait), wait); !end {
		t.Fatal("overdue message did not end the batch")
	}
	b.Close(now.Add(wait))
	if end, _ := b.Due(now.Add(wait+time.Second), wait); end {
		t.Fatal("end asked again too soon")
	}
	if end, _ := b.Due(now.Add(2*wait), wait); !end {
		t.Fatal("unanswered end not asked again")
	}
	if _, tries := b.Close(now.Add(2 * wait)); tries != 2 {
		t.Fatalf("tries %d", tries)
	}
	b.Refused(id)
	if end, _ := b.Due(now.Add(2*wait+time.Millisecond), wait); !end {
		t.Fatal("refused end not asked again at once")
	}
}

// An event after the batch idled, everything it carried stored, starts a new batch: the
// stream may have forgotten the old one (its batch timeout), and a message sent in a
// forgotten batch reaches live subscribers before the stream refuses it, so they would
// get it twice. An event while something is unacknowledged stays in the batch.
func TestBatchesIdleStartsANewBatch(t *testing.T) {
	now := time.Unix(0, 0)
	b := NewBatches("p", 4*time.Second)
	msgs(&b, 1, 1)
	first := b.Sendable(now, nil)
	if len(first) != 1 || first[0].Op != opStart {
		t.Fatalf("first send: %+v", first)
	}
	msgs(&b, 1, 2)
	if s := b.Sendable(now.Add(5*time.Second), nil); len(s) != 1 || s[0].Batch != first[0].Batch || s[0].Op != opAppend {
		t.Fatalf("with the first unacknowledged, the next event joins its batch: %+v", s)
	}
	b.Stored(first[0].Batch, 2)
	b.Advance(func(bool) {})
	msgs(&b, 1, 3)
	if s := b.Sendable(now.Add(6*time.Second), nil); len(s) != 1 || s[0].Batch != first[0].Batch {
		t.Fatalf("one second after the last send: the same batch: %+v", s)
	}
	b.Stored(first[0].Batch, 3)
	b.Advance(func(bool) {})
	msgs(&b, 1, 4)
	s := b.Sendable(now.Add(10*time.Second), nil)
	if len(s) != 1 || s[0].Batch == first[0].Batch || s[0].Op != opStart || s[0].Seq != 1 {
		t.Fatalf("four seconds quiet, everything stored: a new batch, got %+v", s)
	}
}
