package events

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/internal/eventstest"
	"github.com/holdfast/holdfast/internal/natstest"
)

// countingMetrics is Metrics that counts, per name and shard.
type countingMetrics struct {
	mu sync.Mutex
	n  map[string]float64
}

func newCountingMetrics() *countingMetrics { return &countingMetrics{n: map[string]float64{}} }

func (c *countingMetrics) add(name, shard string, v float64) {
	c.mu.Lock()
	c.n[name+"/"+shard] += v
	c.mu.Unlock()
}

func (c *countingMetrics) get(name, shard string) float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name+"/"+shard]
}

func (c *countingMetrics) EventsQueued(shard string, n int)  { c.add("queued", shard, float64(n)) }
func (c *countingMetrics) EventsDropped(shard string, n int) { c.add("dropped", shard, float64(n)) }
func (c *countingMetrics) EventsOverflowed(shard string)     { c.add("overflowed", shard, 1) }
func (c *countingMetrics) EventPublished(shard string, real bool) {
	if real {
		c.add("published", shard, 1)
	}
}
func (c *countingMetrics) PublishError(shard string)             { c.add("errors", shard, 1) }
func (c *countingMetrics) PublishedLSN(shard string, lsn uint64) { c.add("lsn", shard, 0) }

func connectNATS(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	return natstest.Connect(t, natstest.Start(t, 1).URL())
}

// newTestPublisher is a one-shard publisher on a fresh embedded server.
func newTestPublisher(t *testing.T, cfg Config, withStream bool) (*Publisher, jetstream.JetStream, *countingMetrics) {
	t.Helper()
	_, js := connectNATS(t)
	cfg = cfg.WithDefaults()
	if withStream {
		if _, err := EnsureStream(context.Background(), js, "holdfast", cfg); err != nil {
			t.Fatal(err)
		}
	}
	m := newCountingMetrics()
	p := NewPublisher(js, "holdfast", 1, cfg, slog.New(slog.DiscardHandler), m)
	return p, js, m
}

// waitPosition waits for the publisher to report shard 0 reach lsn.
func waitPosition(t *testing.T, p *Publisher, lsn uint64, within time.Duration) {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case got := <-p.positions:
			if got.LSN > lsn {
				t.Fatalf("position %d passed %d", got.LSN, lsn)
			}
			if got.LSN == lsn {
				return
			}
		case <-deadline:
			t.Fatalf("position did not reach %d within %v", lsn, within)
		}
	}
}

// With no stream for the subjects the server answers "no responders": the events are
// sent again until a stream takes them, and the position waits for that. Failed sends
// go out again together, in order, so a whole window recovers within a backoff or two.
func TestPublisherRetriesUntilAStreamTakesTheEvents(t *testing.T) {
	for _, plain := range []bool{false, true} {
		t.Run(map[bool]string{false: "batched", true: "plain"}[plain], func(t *testing.T) {
			retriesUntilAStreamTakesTheEvents(t, plain)
		})
	}
}

func retriesUntilAStreamTakesTheEvents(t *testing.T, plain bool) {
	p, js, m := newTestPublisher(t, Config{Plain: plain}, false)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	p.Events(0, 50, eventstest.Events(1, 50))
	time.Sleep(300 * time.Millisecond)
	select {
	case g := <-p.positions:
		t.Fatalf("position %v reported with no stream to hold the events", g)
	default:
	}
	if m.get("errors", "0") == 0 {
		t.Fatal("failed sends not counted")
	}
	if _, err := EnsureStream(context.Background(), js, "holdfast", p.cfg); err != nil {
		t.Fatal(err)
	}
	waitPosition(t, p, 50, 3*time.Second)
	closeAndCheckStream(t, p, js, 50)
}

// An acknowledgement that never comes (here: nobody listens for it) makes the event go
// out again after AckWait with the same message id; the stream keeps one copy.
func TestPublisherResendsWhenTheAcknowledgementIsLost(t *testing.T) {
	for _, plain := range []bool{false, true} {
		t.Run(map[bool]string{false: "batched", true: "plain"}[plain], func(t *testing.T) {
			resendsWhenTheAcknowledgementIsLost(t, plain)
		})
	}
}

func resendsWhenTheAcknowledgementIsLost(t *testing.T, plain bool) {
	p, js, _ := newTestPublisher(t, Config{AckWait: 200 * time.Millisecond, Plain: plain}, true)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	if err := p.sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := p.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	p.Events(0, 2, eventstest.Events(1, 2))
	time.Sleep(500 * time.Millisecond) // stored, but the acknowledgements went nowhere
	select {
	case g := <-p.positions:
		t.Fatalf("position %v reported without an acknowledgement", g)
	default:
	}
	sub, err := p.nc.Subscribe(p.inbox+".>", p.onAck)
	if err != nil {
		t.Fatal(err)
	}
	p.sub = sub
	waitPosition(t, p, 2, 15*time.Second)
	closeAndCheckStream(t, p, js, 2)
}

// closeAndCheckStream closes the publisher and checks that the stream holds want events,
// one per message id, in order.
func closeAndCheckStream(t *testing.T, p *Publisher, js jetstream.JetStream, want int) {
	t.Helper()
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	evs := eventstest.Stream(t, js)
	if len(evs) != want {
		t.Fatalf("stream holds %d events, want %d (one per message id)", len(evs), want)
	}
	eventstest.CheckOrder(t, evs)
}

func TestAckError(t *testing.T) {
	for _, c := range []struct {
		data, status string
		bad          bool
	}{
		{data: `{"stream":"HOLDFAST_EVENTS","seq":7}`},
		{data: `{"stream":"HOLDFAST_EVENTS","seq":7,"duplicate":true}`},
		{data: `{"stream":"HOLDFAST_EVENTS","domain":"error","seq":7}`},
		{data: `{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"},"stream":"HOLDFAST_EVENTS","seq":0}`, bad: true},
		{data: `{"error"`, bad: true},
		{status: "503", bad: true},
		{status: "408", bad: true},
		{bad: true},
	} {
		m := &nats.Msg{Data: []byte(c.data), Header: nats.Header{}}
		if c.status != "" {
			m.Header.Set("Status", c.status)
		}
		if err := ackError(m); (err != nil) != c.bad {
			t.Errorf("ackError(%q, status %q) = %v, want error %v", c.data, c.status, err, c.bad)
		}
	}
}

func TestStreamIsCreatedAndUpdated(t *testing.T) {
	_, js := connectNATS(t)
	ctx := context.Background()
	// An operator's stream with a short duplicate window and another subject.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: contract.StreamName, Subjects: []string{"ops.>"},
		Duplicates: 30 * time.Second, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	batched, err := EnsureStream(ctx, js, "hf.eu", Config{}.WithDefaults())
	if err != nil || !batched {
		t.Fatalf("ensure: batched %v, %v", batched, err)
	}
	st, err := js.Stream(ctx, contract.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	if cfg.Duplicates != DefaultDuplicateWindow || len(cfg.Subjects) != 2 || cfg.Subjects[1] != "hf.eu.v1.*.events.>" ||
		cfg.Storage != jetstream.MemoryStorage || !cfg.AllowBatchPublish {
		t.Fatalf("updated stream: %+v", cfg)
	}
	// A fresh deployment gets a file stream.
	if err := js.DeleteStream(ctx, contract.StreamName); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureStream(ctx, js, "holdfast", Config{}.WithDefaults()); err != nil {
		t.Fatal(err)
	}
	st, _ = js.Stream(ctx, contract.StreamName)
	cfg = st.CachedInfo().Config
	if cfg.Storage != jetstream.FileStorage || cfg.Duplicates != DefaultDuplicateWindow || cfg.Subjects[0] != "holdfast.v1.*.events.>" ||
		!cfg.AllowBatchPublish {
		t.Fatalf("created stream: %+v", cfg)
	}
}

func TestPublisherOverflowStopsThePosition(t *testing.T) {
	_, js := connectNATS(t)
	cfg := Config{MaxQueuedEvents: 4}.WithDefaults()
	if _, err := EnsureStream(context.Background(), js, "holdfast", cfg); err != nil {
		t.Fatal(err)
	}
	m := newCountingMetrics()
	p := NewPublisher(js, "holdfast", 1, cfg, slog.New(slog.DiscardHandler), m)
	p.Events(0, 3, eventstest.Events(1, 3)) // queued: 3
	p.Events(0, 5, eventstest.Events(4, 2)) // 3+2 > 4: overflow, dropped
	p.Events(0, 6, eventstest.Events(6, 1)) // dropped: the shard stays overflowed
	p.Events(0, 7, nil)                     // dropped too: the position must not pass the gap
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	got := <-p.positions
	if got != (actors.Position{Shard: 0, LSN: 3}) {
		t.Fatalf("published %v, want shard 0 through 3", got)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-p.positions:
		t.Fatalf("position moved past the gap: %v", g)
	default:
	}
	evs := eventstest.Stream(t, js)
	if len(evs) != 3 {
		t.Fatalf("stream holds %d events, want 3", len(evs))
	}
	eventstest.CheckOrder(t, evs)
	if m.get("dropped", "0") != 3 {
		t.Fatalf("dropped events counted %v, want 3", m.get("dropped", "0"))
	}
}

// While this node's claim on a shard is not certainly current, nothing of the shard is
// published (it could land behind another owner's events) and nothing is skipped: when
// the claim is current again publishing goes on in order. Drop (the shard lost) forgets
// what was waiting; whoever serves the shard next republishes it.
func TestPublisherHoldsAShardWhileItsClaimIsUncertain(t *testing.T) {
	_, js := connectNATS(t)
	cfg := Config{}.WithDefaults()
	if _, err := EnsureStream(context.Background(), js, "holdfast", cfg); err != nil {
		t.Fatal(err)
	}
	var serving atomic.Bool
	serving.Store(true)
	cfg.Serving = func(uint32) bool { return serving.Load() }
	p := NewPublisher(js, "holdfast", 1, cfg, slog.New(slog.DiscardHandler), newCountingMetrics())
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		p.Close(ctx)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	flushWithin := func(d time.Duration) uint64 {
		c, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		return p.Flush(c, 0)
	}
	p.Events(0, 3, eventstest.Events(1, 3))
	if got := p.Flush(ctx, 0); got != 3 {
		t.Fatalf("flushed through %d, want 3", got)
	}
	serving.Store(false)
	p.Events(0, 5, eventstest.Events(4, 2))
	if got := flushWithin(500 * time.Millisecond); got != 3 {
		t.Fatalf("published through %d while the claim was uncertain, want 3", got)
	}
	if n := len(eventstest.Stream(t, js)); n != 3 {
		t.Fatalf("stream holds %d events while the claim was uncertain, want 3", n)
	}
	serving.Store(true) // renewed in time: on, in order
	if got := p.Flush(ctx, 0); got != 5 {
		t.Fatalf("flushed through %d once the claim was current again, want 5", got)
	}
	serving.Store(false)
	p.Events(0, 7, eventstest.Events(6, 2))
	time.Sleep(100 * time.Millisecond)
	p.Drop(0) // lost: nothing of it is published from here
	serving.Store(true)
	if got := flushWithin(500 * time.Millisecond); got != 0 {
		t.Fatalf("a dropped shard flushed through %d", got)
	}
	if n := len(eventstest.Stream(t, js)); n != 5 {
		t.Fatalf("stream holds %d events after the drop, want 5", n)
	}
	p.Events(0, 7, eventstest.Events(6, 2)) // the next owner (here this node again) republishes
	if got := p.Flush(ctx, 0); got != 7 {
		t.Fatalf("flushed through %d after the shard came back, want 7", got)
	}
	evs := eventstest.Stream(t, js)
	if len(evs) != 7 {
		t.Fatalf("stream holds %d events, want 7", len(evs))
	}
	eventstest.CheckOrder(t, evs)
}

// A message lost on the way (as when the NATS server it went through goes down) while
// later ones arrive: the stream's gap check ends the batch at the loss and stores nothing
// behind it, and the publisher sends the rest again in a new batch, so the stream holds
// every event once and in lsn order. Published one by one, the lost event would be
// stored after the later ones.
func TestPublisherKeepsOrderWhenAMessageIsLost(t *testing.T) {
	p, js, m := newTestPublisher(t, Config{}, true)
	var lost atomic.Int32
	p.lose = func(msg *nats.Msg) bool {
		return msg.Header.Get(jetstream.MsgIDHeader) == "0-3-0" && lost.Add(1) == 1
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	p.Events(0, 10, eventstest.Events(1, 10))
	waitPosition(t, p, 10, 5*time.Second)
	if lost.Load() < 2 {
		t.Fatal("the lost event was never sent again")
	}
	if m.get("errors", "0") == 0 {
		t.Fatal("the gap was not counted as a publish error")
	}
	closeAndCheckStream(t, p, js, 10)
}

// A live subscriber gets each event once, also the first after the shard was quiet for
// longer than the stream keeps an idle batch (here 1 s; nats-server's default is 10 s):
// that event starts a new batch rather than reaching subscribers in the forgotten one
// and again, refused there, in a new one. (It was delivered twice at any quiet between
// the server's batch timeout and the ack wait; the stream stored it once either way.)
func TestLiveSubscribersGetAnEventAfterQuietOnce(t *testing.T) {
	url := natstest.Start(t, 1, func(o *natsserver.Options) { o.JetStreamLimits.MaxBatchTimeout = time.Second }).URL()
	nc, js := natstest.Connect(t, url)
	cfg := Config{BatchIdle: 400 * time.Millisecond}.WithDefaults()
	if _, err := EnsureStream(context.Background(), js, "holdfast", cfg); err != nil {
		t.Fatal(err)
	}
	live, err := nc.SubscribeSync("holdfast.v1.*.events.>")
	if err != nil {
		t.Fatal(err)
	}
	p := NewPublisher(js, "holdfast", 1, cfg, slog.New(slog.DiscardHandler), newCountingMetrics())
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	p.Events(0, 1, eventstest.Events(1, 1))
	waitPosition(t, p, 1, 3*time.Second)
	time.Sleep(1500 * time.Millisecond) // past the stream's batch timeout
	p.Events(0, 2, eventstest.Events(2, 1))
	waitPosition(t, p, 2, 5*time.Second)
	seen := map[string]int{}
	for {
		m, err := live.NextMsg(300 * time.Millisecond)
		if err != nil {
			break
		}
		seen[m.Header.Get(jetstream.MsgIDHeader)]++
	}
	if len(seen) != 2 || seen[contract.EventMsgID(0, 1, 0)] != 1 || seen[contract.EventMsgID(0, 2, 0)] != 1 {
		t.Fatalf("live subscriber got %v, want each of the two events once", seen)
	}
	closeAndCheckStream(t, p, js, 2)
}
