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
	for i, b := range o.got {
		if b != i {
			t.Fatalf("batch %d reported in place %d: %v", b, i, o.got)
		}
	}
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
	const batches = 200
	o := newOutcomes(batches)
	claimed := make(chan *Journal)
	for b := 0; b < batches; b++ {
		if b == 20 {
			go func() { claimed <- openJournal(t, js, 3, "b", 2) }()
		}
		old.AppendAsync(records(uint64(b+1), 1, 20), o.done(b))
		time.Sleep(time.Millisecond)
	}
	o.wait(t)
	next := <-claimed
	stored := 0
	for b, err := range o.errs {
		switch {
		case err == nil && stored < b:
			t.Fatalf("batch %d reported stored after batch %d failed", b, stored)
		case err == nil:
			stored++
		case !errors.Is(err, persistence.ErrFailed):
			t.Fatalf("batch %d failed without failing the journal: %v", b, err)
		}
	}
	if stored == batches {
		t.Fatal("every append of the former owner was stored after the claim")
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
	for b, err := range o.errs {
		if err != nil && !errors.Is(err, persistence.ErrClosed) {
			t.Fatalf("batch %d: %v", b, err)
		}
		if b > 0 && err == nil && o.errs[b-1] != nil {
			t.Fatalf("batch %d stored after batch %d was not", b, b-1)
		}
	}
}
