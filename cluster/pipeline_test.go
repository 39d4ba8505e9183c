package cluster

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast/internal/natstest"
	"github.com/holdfast/holdfast/persistence"
)

// outcomes collects the done calls of pipelined appends, in the order they come.
type outcomes struct {
	mu   sync.Mutex
	got  []int // batch numbers, in the order reported
	errs []error
	all  chan struct{}
	want int
	// stored is how many batches were reported stored (the first ones), after wait.
	stored int
}

func newOutcomes(want int) *outcomes { return &outcomes{all: make(chan struct{}), want: want} }

func (o *outcomes) done(i int) func(error) {
	return func(err error) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.got = append(o.got, i)
		o.errs = append(o.errs, err)
		if len(o.got) == o.want {
			close(o.all)
		}
	}
}

// expect sets how many outcomes to wait for, once they are all submitted.
func (o *outcomes) expect(n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.want = n
	if len(o.got) == n {
		close(o.all)
	}
}

// wait waits for every outcome and checks that the batches stored are a prefix of
// those submitted, reported in order, each once (a batch refused at submission may be
// reported before earlier ones).
func (o *outcomes) wait(t *testing.T) {
	t.Helper()
	select {
	case <-o.all:
	case <-time.After(30 * time.Second):
		o.mu.Lock()
		defer o.mu.Unlock()
		t.Fatalf("%d of %d appends reported", len(o.got), o.want)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	seen := map[int]bool{}
	next := 0
	for i, b := range o.got {
		if seen[b] {
			t.Fatalf("batch %d reported twice", b)
		}
		seen[b] = true
		if o.errs[i] == nil {
			if b != next {
				t.Fatalf("batch %d reported stored where batch %d was due: %v", b, next, o.got)
			}
			next++
		}
	}
	o.stored = next
}

// Batches submitted one after another without waiting are all stored, reported once
// each and in order, and replayed whole by the next owner; on a replicated stream too.
func TestJournalPipelinesInOrder(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("R%d", n), func(t *testing.T) {
			js := connectJS(t, natstest.Start(t, n).URL())
			j := openJournal(t, js, n, "a", 1)
			const batches, per = 60, 5
			o := newOutcomes(batches)
			for b := 0; b < batches; b++ {
				j.AppendAsync(records(uint64(b*per+1), per, 50), o.done(b))
			}
			o.wait(t)
			for b, err := range o.errs {
				if err != nil {
					t.Fatalf("batch %d: %v", b, err)
				}
			}
			if lsn, _ := j.Last(); lsn != batches*per {
				t.Fatalf("journal at lsn %d after %d records", lsn, batches*per)
			}
			next := openJournal(t, js, n, "b", 2)
			wantRecords(t, replayAll(t, next, 1), 1, batches*per)
		})
	}
}

// A new owner claims the journal while the former one has appends in flight: the former
// owner's outcomes are some stored batches, then only failures (never a success after a
// failure), and every batch reported stored is in the journal the new owner replays.
func TestJournalPipelineFencedMidway(t *testing.T) {
	js := connectJS(t, natstest.Start(t, 3).URL())
	old := openJournal(t, js, 3, "a", 1)
	o := newOutcomes(-1)
	claimed := make(chan *Journal, 1)
	var next *Journal
	batches, after := 0, 0
	// Appends go on, in bursts of 10 with a pause between (a claim needs the tail still
	// for a moment: against an owner that never pauses it fails, by design) — of 2 while
	// the claim is being made, whose reads and append a loaded machine (the race detector
	// over eight packages at once) stretched past a burst of 10 for its whole 5 s — until
	// 50 more after the claim has been made.
	for ; after < 50 && batches < 20000; batches++ {
		if batches%10 == 0 || (batches > 20 && next == nil && batches%2 == 0) {
			time.Sleep(20 * time.Millisecond)
		}
		if batches == 20 {
			go func() { claimed <- openJournal(t, js, 3, "b", 2) }()
		}
		if next == nil {
			select {
			case next = <-claimed:
			default:
			}
		} else {
			after++
		}
		old.AppendAsync(records(uint64(batches+1), 1, 20), o.done(batches))
	}
	o.expect(batches)
	o.wait(t)
	if next == nil {
		select {
		case next = <-claimed:
		case <-time.After(30 * time.Second):
			t.Fatal("the new owner never claimed the journal")
		}
	}
	stored := o.stored
	for i, b := range o.got {
		if err := o.errs[i]; err != nil && !errors.Is(err, persistence.ErrFailed) {
			t.Fatalf("batch %d failed without failing the journal: %v", b, err)
		}
	}
	if stored == batches {
		t.Fatalf("all %d appends of the former owner were stored, 50 of them after the claim", batches)
	}
	got := replayAll(t, next, 1)
	if len(got) < stored {
		t.Fatalf("%d batches reported stored, %d in the journal", stored, len(got))
	}
	wantRecords(t, got, 1, uint64(len(got)))
}

// Closing the journal while batches are being submitted reports every one of them,
// stored or not: none is left waiting (a shard stopping waits for each).
func TestJournalCloseReportsEveryQueuedAppend(t *testing.T) {
	js := connectJS(t, natstest.Start(t, 1).URL())
	j := openJournal(t, js, 1, "a", 1)
	const batches = 1000
	o := newOutcomes(batches)
	go func() {
		for b := 0; b < batches; b++ {
			j.AppendAsync(records(uint64(b+1), 1, 20), o.done(b))
		}
	}()
	time.Sleep(5 * time.Millisecond)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	o.wait(t)
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, b := range o.got {
		if err := o.errs[i]; err != nil && !errors.Is(err, persistence.ErrClosed) {
			t.Fatalf("batch %d: %v", b, err)
		}
	}
}
