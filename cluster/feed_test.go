package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/events"
	"github.com/holdfast/holdfast/internal/natstest"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/persistence"
)

// feedStream makes the events stream hold the journals, as a cluster of FeedFormat does.
func feedStream(t testing.TB, js jetstream.JetStream, replicas int, cfg events.Config) {
	t.Helper()
	cfg.Replicas = replicas
	if err := events.EnsureFeedStream(context.Background(), js, "holdfast", NamesFor("holdfast").JournalSubjects(), cfg.WithDefaults()); err != nil {
		t.Fatal(err)
	}
}

func openFeed(t *testing.T, js jetstream.JetStream, node string, epoch uint64) *Feed {
	t.Helper()
	f, err := OpenFeed(context.Background(), FeedConfig{Stream: contract.StreamName,
		JournalConfig: JournalConfig{JS: js, Names: NamesFor("holdfast"), Shard: 3, Node: node, Epoch: epoch},
		Encode:        func(e *actors.Event) (*nats.Msg, error) { return events.Message("holdfast", e) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// eventsOf makes n events for each entry from..through, as a shard derives them.
func eventsOf(from, through uint64, n int) []actors.Event {
	var evs []actors.Event
	for lsn := from; lsn <= through; lsn++ {
		for i := range n {
			evs = append(evs, actors.Event{Shard: 3, LSN: lsn, Slot: 100 + lsn, N: i, Kind: kernel.EventResourceCreated,
				Tenant: "acme", Object: kernel.ObjectResource, Resource: kernel.ResourceView{Tenant: "acme", ID: fmt.Sprintf("r%d-%d", lsn, i)}})
		}
	}
	return evs
}

// storedEvents reads every event of the stream, as "<lsn>-<n>" from their message ids.
// A replicated stream's API may not answer for a moment (no responders while its
// consumer is made): the read is tried again, whole.
func storedEvents(t *testing.T, js jetstream.JetStream) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := readEvents(js)
		if err == nil {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func readEvents(js jetstream.JetStream) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, contract.StreamName)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(events.EventSubjects("holdfast")))
	if err != nil {
		return nil, err
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	got := []string{}
	if n == 0 {
		return got, nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{events.EventSubjects("holdfast")}})
	if err != nil {
		return nil, err
	}
	for uint64(len(got)) < n {
		m, err := cons.Next(jetstream.FetchMaxWait(5 * time.Second))
		if err != nil {
			return nil, err
		}
		got = append(got, m.Headers().Get(jetstream.MsgIDHeader)[2:]) // "3-" is the shard
	}
	return got, nil
}

func wantEvents(t *testing.T, got []string, from, through uint64, n int) {
	t.Helper()
	var want []string
	for lsn := from; lsn <= through; lsn++ {
		for i := range n {
			want = append(want, fmt.Sprintf("%d-%d", lsn, i))
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("stored events %v, want %v", got, want)
	}
}

// watched collects what a feed reports stored.
type watched struct {
	mu  sync.Mutex
	lsn uint64
}

func (w *watched) watch(lsn uint64) { w.mu.Lock(); w.lsn = max(w.lsn, lsn); w.mu.Unlock() }
func (w *watched) at(t *testing.T, want uint64) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		w.mu.Lock()
		got := w.lsn
		w.mu.Unlock()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("events stored through %d, want %d", got, want)
		}
	}
}

// ageLimit gives the events stream an age limit shorter than the service allows.
func ageLimit(t *testing.T, js jetstream.JetStream, age time.Duration) {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, contract.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxAge, cfg.Duplicates = age, age/2
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
}

// A batch's events ride with the next append, or on their own once the feed is idle;
// the next owner finds the journal and the events' position where the last append left
// them, and re-derived events it is handed again are not stored twice.
func TestFeedStoresEventsWithItsAppends(t *testing.T) {
	js := connectJS(t, natstest.Start(t, 1).URL())
	feedStream(t, js, 1, events.Config{})
	f := openFeed(t, js, "a", 1)
	var w watched
	f.Watch(w.watch)
	if err := f.Append(records(1, 4, 10)); err != nil {
		t.Fatal(err)
	}
	f.Carry(4, eventsOf(1, 4, 2))
	if err := f.Append(records(5, 2, 10)); err != nil {
		t.Fatal(err)
	}
	w.at(t, 4) // rode with the batch of 5..6
	f.Carry(6, eventsOf(5, 6, 1))
	w.at(t, 6) // on their own
	if f.Held() != 0 {
		t.Fatalf("%d events held after all were stored", f.Held())
	}
	got := storedEvents(t, js)
	if len(got) != 10 {
		t.Fatalf("stored events %v, want 10", got)
	}
	wantEvents(t, got[:8], 1, 4, 2)
	wantEvents(t, got[8:], 5, 6, 1)

	g := openFeed(t, js, "b", 2)
	if lsn, _ := g.Last(); lsn != 6 || g.Stored() != 6 {
		t.Fatalf("next owner: journal at %d, events stored through %d; want 6 and 6", lsn, g.Stored())
	}
	wantRecords(t, replayAll(t, g, 1), 1, 6)
	g.Carry(6, eventsOf(1, 6, 1)) // a recovery hands over what it re-derived
	if err := g.Append(records(7, 1, 10)); err != nil {
		t.Fatal(err)
	}
	if n := len(storedEvents(t, js)); n != 10 {
		t.Fatalf("%d events stored, want 10: stored ones were stored again", n)
	}
}

// An owner whose feed was claimed by another is refused; the events it carried are not
// stored, and the new owner, handed them again, stores them once.
func TestFeedFencesTheFormerOwner(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("R%d", n), func(t *testing.T) {
			js := connectJS(t, natstest.Start(t, n).URL())
			feedStream(t, js, n, events.Config{})
			old := openFeed(t, js, "a", 1)
			if err := old.Append(records(1, 5, 10)); err != nil {
				t.Fatal(err)
			}
			next := openFeed(t, js, "b", 2)
			if next.Stored() != 0 {
				t.Fatalf("events stored through %d before any was", next.Stored())
			}
			old.Carry(5, eventsOf(1, 5, 1))
			if err := old.Append(records(6, 1, 10)); !errors.Is(err, persistence.ErrFailed) {
				t.Fatalf("former owner appended after the claim: %v", err)
			}
			if got := storedEvents(t, js); len(got) != 0 {
				t.Fatalf("a fenced append stored events %v", got)
			}
			var w watched
			next.Watch(w.watch)
			next.Carry(5, eventsOf(1, 5, 1))
			if err := next.Append(records(6, 3, 10)); err != nil {
				t.Fatal(err)
			}
			w.at(t, 5)
			wantEvents(t, storedEvents(t, js), 1, 5, 1)
			third := openFeed(t, js, "c", 3)
			wantRecords(t, replayAll(t, third, 1), 1, 8)
			if third.Stored() != 5 {
				t.Fatalf("third owner: events through %d, want 5", third.Stored())
			}
		})
	}
}

// More events than one append takes go over several, the position naming how far into
// an entry they are; a batch larger than a message goes as several appends.
func TestFeedSplitsLargeAppends(t *testing.T) {
	js := connectJS(t, natstest.Start(t, 1).URL())
	feedStream(t, js, 1, events.Config{})
	f := openFeed(t, js, "a", 1)
	var w watched
	f.Watch(w.watch)
	if err := f.Append(records(1, 3, 10)); err != nil {
		t.Fatal(err)
	}
	f.Carry(3, eventsOf(1, 3, 400)) // 1,200 events: three appends at least
	w.at(t, 3)
	wantEvents(t, storedEvents(t, js), 1, 3, 400)
	if err := f.Append(records(4, 40, 60<<10)); err != nil { // 2.4 MB: four messages
		t.Fatal(err)
	}
	g := openFeed(t, js, "b", 2)
	wantRecords(t, replayAll(t, g, 1), 1, 43)
	if g.Stored() != 3 {
		t.Fatalf("events through %d, want 3 (nothing was handed over after)", g.Stored())
	}
}

// An owner that stops halfway through an entry's events leaves the position inside it:
// the next owner, handed the entry's events again, stores only the rest.
func TestFeedResumesInsideAnEntry(t *testing.T) {
	js := connectJS(t, natstest.Start(t, 1).URL())
	feedStream(t, js, 1, events.Config{})
	f := openFeed(t, js, "a", 1)
	if err := f.Append(records(1, 1, 10)); err != nil {
		t.Fatal(err)
	}
	// Send one append of the entry's first feedBatchEvents events by hand, as the feed
	// would, and stop there. The feed's goroutine is stopped first (failed, it ends storing
	// nothing more): a wake-up left over from the append above would otherwise send the
	// rest of the entry's events on its own, racing the append sent here.
	f.mu.Lock()
	f.failed = errors.New("stopped here by the test")
	f.signal()
	f.carried, f.carriedThrough = eventsOf(1, 1, feedBatchEvents+7), 1
	f.ops = append(f.ops, &feedOp{done: func(error) {}})
	a := f.buildLocked()
	f.ops, f.carried = nil, nil
	f.mu.Unlock()
	f.encode(a)
	if a.through != (EventPosition{LSN: 0, N: feedBatchEvents}) {
		t.Fatalf("position after %d of an entry's events: %v", feedBatchEvents, a.through)
	}
	if _, err := f.send(a); err != nil {
		t.Fatal(err)
	}
	g := openFeed(t, js, "b", 2)
	var w watched
	g.Watch(w.watch)
	g.Carry(1, eventsOf(1, 1, feedBatchEvents+7))
	w.at(t, 1)
	wantEvents(t, storedEvents(t, js), 1, 1, feedBatchEvents+7)
}

// Compaction purges the shard's journal messages a snapshot covers and keeps the
// newest; the events stay. A journal message outlives the stream's age limit, which
// the events do not.
func TestFeedCompactsAndOutlivesTheEventsAge(t *testing.T) {
	js := connectJS(t, natstest.Start(t, 1).URL())
	feedStream(t, js, 1, events.Config{})
	ageLimit(t, js, 2*time.Second)
	f := openFeed(t, js, "a", 1)
	for i := uint64(0); i < 4; i++ {
		if err := f.Append(records(1+i*5, 5, 10)); err != nil {
			t.Fatal(err)
		}
		f.Carry(5+i*5, eventsOf(1+i*5, 5+i*5, 1))
	}
	if err := f.Append(records(21, 1, 10)); err != nil {
		t.Fatal(err)
	}
	if err := f.Compact(12); err != nil {
		t.Fatal(err)
	}
	g := openFeed(t, js, "b", 2)
	wantRecords(t, replayAll(t, g, 13), 13, 9)
	if err := g.Replay(5, func(persistence.Record) error { return nil }); !errors.Is(err, persistence.ErrCompacted) {
		t.Fatalf("replay from a compacted lsn: %v", err)
	}
	wantEvents(t, storedEvents(t, js), 1, 20, 1)
	time.Sleep(3 * time.Second) // the events' age limit passes
	if got := storedEvents(t, js); len(got) != 0 {
		t.Fatalf("events older than the stream's age limit: %v", got)
	}
	h := openFeed(t, js, "c", 3)
	wantRecords(t, replayAll(t, h, 13), 13, 9)
	if h.Stored() != 20 {
		t.Fatalf("events through %d after the age limit, want 20", h.Stored())
	}
}

// A quiet shard's journal outlives a stream that fills past its message limit: its
// tail, covered by a snapshot, is appended again before the limit reaches it; records no
// snapshot covers make it ask for one (Stale) instead. Without the refresh the next
// owner would find no journal and start at lsn 0.
func TestFeedOutlivesTheStreamsLimits(t *testing.T) {
	defer func(d time.Duration) { feedRetentionEvery = d }(feedRetentionEvery)
	feedRetentionEvery = 50 * time.Millisecond
	js := connectJS(t, natstest.Start(t, 1).URL())
	feedStream(t, js, 1, events.Config{})
	ctx := context.Background()
	s, err := js.Stream(ctx, contract.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.MaxMsgs = 200
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	f := openFeed(t, js, "a", 1)
	if err := f.Append(records(1, 5, 10)); err != nil {
		t.Fatal(err)
	}
	other := func(n int) { // another shard's events
		for range n {
			if _, err := js.Publish(ctx, "holdfast.v1.acme.events.resource.created", []byte("{}")); err != nil {
				t.Fatal(err)
			}
		}
	}
	stale := false
	for i := 0; i < 30 && !stale; i++ {
		other(10)
		time.Sleep(20 * time.Millisecond)
		stale = f.Stale()
	}
	if !stale {
		t.Fatal("records no snapshot covers, at risk of the limit: no snapshot asked for")
	}
	if err := f.Compact(5); err != nil { // the snapshot the shard takes
		t.Fatal(err)
	}
	for range 60 {
		other(10)
		time.Sleep(20 * time.Millisecond)
	}
	g := openFeed(t, js, "b", 2)
	if lsn, slot := g.Last(); lsn != 5 || slot != 105 {
		t.Fatalf("next owner finds the journal at %d.%d, want 5.105", lsn, slot)
	}
}
