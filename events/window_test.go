package events

import (
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

const testAckWait = 10 * time.Second

// The published position advances only over a prefix of acknowledged entries, to the
// last batch end within it; an acknowledgement out of order waits for the ones before.
func TestEventWindowAdvancesOverAcknowledgedPrefix(t *testing.T) {
	w := NewWindow()
	t0 := time.Unix(0, 0)
	a := w.Add(nats.NewMsg("a"), 0, t0)
	b := w.Add(nats.NewMsg("b"), 7, t0) // ends the batch through lsn 7
	c := w.Add(nats.NewMsg("c"), 9, t0)
	published := 0
	count := func(p bool) {
		if p {
			published++
		}
	}
	if w.Ack(b) || w.Advance(count) != 0 {
		t.Fatal("an acknowledgement behind an open entry advanced the window")
	}
	if !w.Ack(a) {
		t.Fatal("the head's acknowledgement does not let the window advance")
	}
	if through := w.Advance(count); through != 7 || published != 2 || w.Pending() != 1 {
		t.Fatalf("advanced through %d, %d published, %d pending", through, published, w.Pending())
	}
	w.Add(nil, 11, t0) // a batch without events needs no acknowledgement
	w.Ack(c)
	if through := w.Advance(count); through != 11 || published != 3 || w.Pending() != 0 {
		t.Fatalf("advanced through %d, %d published, %d pending", through, published, w.Pending())
	}
	if w.Ack(c) || w.entry(c) != nil {
		t.Fatal("an entry that left the window answers")
	}
}

// After a refusal the first refused entry is probed alone, with growing attempts, until
// the stream takes it; then everything unacknowledged behind it goes out in order — also
// entries that were refused meanwhile — and the probe ends.
func TestEventWindowProbesThenResendsInOrder(t *testing.T) {
	w := NewWindow()
	t0 := time.Unix(0, 0)
	var seqs []uint64
	for i := 0; i < 5; i++ {
		seqs = append(seqs, w.Add(nats.NewMsg("e"), uint64(i+1), t0))
	}
	w.Ack(seqs[0])
	w.Advance(func(bool) {})
	for _, s := range seqs[1:] {
		if msg, _ := w.Fail(s); msg == nil {
			t.Fatalf("refusal of %d not news", s)
		}
	}
	if msg, _ := w.Fail(seqs[2]); msg != nil {
		t.Fatal("a second refusal of the same entry is news")
	}
	redo, tries, _, overdue := w.Plan(t0, testAckWait)
	if !slices.Equal(redo, []uint64{seqs[1]}) || tries != 1 || overdue != nil {
		t.Fatalf("first plan: %v tries %d", redo, tries)
	}
	w.Resending(seqs[1], t0)
	// Still waiting for the probe's answer: nothing to send, wait the ack time.
	if redo, _, wait, _ := w.Plan(t0.Add(time.Second), testAckWait); len(redo) != 0 || wait != testAckWait-time.Second {
		t.Fatalf("waiting: %v %v", redo, wait)
	}
	w.Fail(seqs[1]) // refused again: probe again, one more attempt
	if redo, tries, _, _ := w.Plan(t0.Add(time.Second), testAckWait); !slices.Equal(redo, []uint64{seqs[1]}) || tries != 2 {
		t.Fatalf("second probe: %v tries %d", redo, tries)
	}
	w.Ack(seqs[1])
	if redo, tries, _, _ := w.Plan(t0.Add(2*time.Second), testAckWait); !slices.Equal(redo, seqs[2:]) || tries != 0 {
		t.Fatalf("after the probe made it: %v tries %d, want %v", redo, tries, seqs[2:])
	}
	if w.probe != 0 || w.failed != 0 {
		t.Fatalf("probe %d, %d failed after the resend plan", w.probe, w.failed)
	}
}

// An entry whose acknowledgement is overdue goes out again on its own, counted, and not
// before.
func TestEventWindowResendsOverdue(t *testing.T) {
	w := NewWindow()
	t0 := time.Unix(100, 0)
	s := w.Add(nats.NewMsg("e"), 1, t0)
	if redo, _, wait, _ := w.Plan(t0.Add(3*time.Second), testAckWait); len(redo) != 0 || wait != 7*time.Second {
		t.Fatalf("early: %v %v", redo, wait)
	}
	redo, tries, _, overdue := w.Plan(t0.Add(testAckWait), testAckWait)
	if !slices.Equal(redo, []uint64{s}) || tries != 1 || overdue == nil || overdue.Seq != s {
		t.Fatalf("overdue: %v tries %d %v", redo, tries, overdue)
	}
	if msg := w.Resending(s, t0.Add(testAckWait)); msg == nil {
		t.Fatal("no message to resend")
	}
	w.Ack(s)
	if w.Resending(s, t0) != nil {
		t.Fatal("an acknowledged entry is resent")
	}
}
