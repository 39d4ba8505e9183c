package bridge

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// newTestPublisher is a one-shard publisher on a fresh embedded server.
func newTestPublisher(t *testing.T, cfg EventsConfig, withStream bool) (*publisher, jetstream.JetStream, *Metrics) {
	t.Helper()
	ns := startNATS(t)
	nc := connect(t, ns)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.withDefaults()
	if withStream {
		if err := ensureStream(context.Background(), js, "holdfast", cfg); err != nil {
			t.Fatal(err)
		}
	}
	m := newMetrics(1, nc)
	p := newPublisher(js, "holdfast", 1, cfg, testLogger(t), m)
	return p, js, m
}

// waitPosition waits for the publisher to report shard 0 reach lsn.
func waitPosition(t *testing.T, p *publisher, lsn uint64, within time.Duration) {
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
	p, js, m := newTestPublisher(t, EventsConfig{}, false)
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	p.sink(0, 50, testEvents(1, 50))
	time.Sleep(300 * time.Millisecond)
	select {
	case g := <-p.positions:
		t.Fatalf("position %v reported with no stream to hold the events", g)
	default:
	}
	if !strings.Contains(gather(t, m), `holdfast_events_publish_errors_total{shard="0"}`) {
		t.Fatalf("failed sends not counted:\n%s", gather(t, m))
	}
	if err := ensureStream(context.Background(), js, "holdfast", p.cfg); err != nil {
		t.Fatal(err)
	}
	waitPosition(t, p, 50, 3*time.Second)
	closeAndCheckStream(t, p, js, 50)
}

// An acknowledgement that never comes (here: nobody listens for it) makes the event go
// out again after AckWait with the same message id; the stream keeps one copy.
func TestPublisherResendsWhenTheAcknowledgementIsLost(t *testing.T) {
	p, js, _ := newTestPublisher(t, EventsConfig{AckWait: 200 * time.Millisecond}, true)
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	if err := p.sub.Unsubscribe(); err != nil {
		t.Fatal(err)
	}
	if err := p.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	p.sink(0, 2, testEvents(1, 2))
	time.Sleep(500 * time.Millisecond) // stored, but the acknowledgements went nowhere
	select {
	case g := <-p.positions:
		t.Fatalf("position %v reported without an acknowledgement", g)
	default:
	}
	sub, err := p.nc.Subscribe(p.inbox+".*.*", p.onAck)
	if err != nil {
		t.Fatal(err)
	}
	p.sub = sub
	waitPosition(t, p, 2, 15*time.Second)
	closeAndCheckStream(t, p, js, 2)
}

// closeAndCheckStream closes the publisher and checks that the stream holds want events,
// one per message id, in order.
func closeAndCheckStream(t *testing.T, p *publisher, js jetstream.JetStream, want int) {
	t.Helper()
	if err := p.close(context.Background()); err != nil {
		t.Fatal(err)
	}
	evs := streamEvents(t, js)
	if len(evs) != want {
		t.Fatalf("stream holds %d events, want %d (one per message id)", len(evs), want)
	}
	checkOrder(t, evs)
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
