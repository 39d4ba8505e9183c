package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/messages"
)

// storedEvent is one message of the event stream.
type storedEvent struct {
	seq     uint64
	subject string
	msgID   string
	raw     string
	obj     map[string]any
	ev      *messages.Event
}

func decodeEvent(t testing.TB, subject, msgID string, data []byte) storedEvent {
	t.Helper()
	e := storedEvent{subject: subject, msgID: msgID, raw: string(data), ev: &messages.Event{}}
	if err := json.Unmarshal(data, &e.obj); err != nil {
		t.Fatalf("event is not JSON: %v: %q", err, data)
	}
	if err := messages.UnmarshalJSON(data, e.ev); err != nil {
		t.Fatalf("event does not decode: %v: %s", err, data)
	}
	return e
}

// streamEvents reads the whole event stream.
func streamEvents(t testing.TB, js jetstream.JetStream) []storedEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, contract.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []storedEvent
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("get %d: %v", seq, err)
		}
		e := decodeEvent(t, m.Subject, m.Header.Get(jetstream.MsgIDHeader), m.Data)
		e.seq = seq
		out = append(out, e)
	}
	return out
}

// waitPublished waits until every shard's events through its applied lsn are acked.
func (s *stack) waitPublished() {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for i := uint32(0); i < s.shards; i++ {
		for s.br.pub.shards[i].acked.Load() < s.sys.Stats(i).AppliedLSN {
			if time.Now().After(deadline) {
				s.t.Fatalf("shard %d: events acked through %d, applied %d", i, s.br.pub.shards[i].acked.Load(), s.sys.Stats(i).AppliedLSN)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// checkOrder checks message ids against payloads and lsn order per shard.
func checkOrder(t testing.TB, evs []storedEvent) {
	t.Helper()
	last := map[uint32]uint64{}
	for _, e := range evs {
		if want := MsgID(e.ev.Shard, e.ev.Lsn, 0); e.msgID != want {
			t.Fatalf("message id %q, want %q: %s", e.msgID, want, e.raw)
		}
		if e.ev.Lsn <= last[e.ev.Shard] {
			t.Fatalf("shard %d: lsn %d after %d", e.ev.Shard, e.ev.Lsn, last[e.ev.Shard])
		}
		last[e.ev.Shard] = e.ev.Lsn
	}
}

func TestEventsArriveInOrderWithMessageIDs(t *testing.T) {
	ns := startNATS(t)
	s := startStack(t, ns, stackOptions{shards: 2})
	live, err := s.client.SubscribeSync("holdfast.v1.*.events.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.client.Flush(); err != nil {
		t.Fatal(err)
	}
	const tenant = "acme"
	sh := contract.ShardOf(tenant, "n1", 2)
	s.req(tenant, "resource.create", `{"operation_id":"c1","resource_id":"n1/gpu"}`).want(t, "ok")
	s.req(tenant, "pool.create", `{"operation_id":"c2","pool_id":"n1/mem","capacity":8}`).want(t, "ok")
	s.req(tenant, "range.create", `{"operation_id":"c3","range_id":"n1/vx","first":1,"last":9}`).want(t, "ok")
	r := s.req(tenant, "lease.reserve", `{"operation_id":"r1","holder_id":"h","ttl_ms":60000,"members":[{"resource_id":"n1/gpu"},{"range_id":"n1/vx"}]}`).want(t, "ok")
	id := r.str(t, "lease", "lease_id")
	s.req(tenant, "lease.renew", fmt.Sprintf(`{"operation_id":"r2","lease_id":%q,"holder_id":"h","lease_epoch":1,"ttl_ms":50000}`, id)).want(t, "ok")
	s.req(tenant, "lease.activate", fmt.Sprintf(`{"operation_id":"r3","lease_id":%q,"holder_id":"h","lease_epoch":1}`, id)).want(t, "ok")
	s.req(tenant, "lease.revoke", fmt.Sprintf(`{"operation_id":"r4","lease_id":%q}`, id)).want(t, "ok")
	s.req(tenant, "lease.reclaim", fmt.Sprintf(`{"operation_id":"r5","lease_id":%q}`, id)).want(t, "ok")
	r = s.req(tenant, "lease.reserve", `{"operation_id":"r6","holder_id":"h","activate":true,"members":[{"pool_id":"n1/mem","quantity":2}]}`).want(t, "ok")
	id2 := r.str(t, "lease", "lease_id")
	s.req(tenant, "lease.release", fmt.Sprintf(`{"operation_id":"r7","lease_id":%q,"holder_id":"h","lease_epoch":1}`, id2)).want(t, "ok")
	// A short hold expires on the shard's clock (10ms slots): an internal entry.
	s.req(tenant, "lease.reserve", `{"operation_id":"r8","holder_id":"h","ttl_ms":30,"members":[{"resource_id":"n1/gpu"}]}`).want(t, "ok")
	// No events: a domain failure, a rejection, a read.
	s.req(tenant, "lease.reserve", `{"operation_id":"r9","holder_id":"h","ttl_ms":30,"members":[{"resource_id":"n1/none"}]}`).want(t, "resource_not_found")
	s.req(tenant, "resource.create", `{"resource_id":"x"}`).want(t, "invalid_request")
	// Another tenant, likely another shard.
	other := keyOnShard("zeta", 1-sh, 2, "k")
	s.req("zeta", "resource.create", fmt.Sprintf(`{"operation_id":"c1","resource_id":"%s/a"}`, other)).want(t, "ok")

	want := []struct {
		tenant, event string
		lsn           uint64
	}{
		{tenant, "resource.created", 1}, {tenant, "pool.created", 2}, {tenant, "range.created", 3},
		{tenant, "lease.reserved", 4}, {tenant, "lease.renewed", 5}, {tenant, "lease.activated", 6},
		{tenant, "lease.revoking", 7}, {tenant, "lease.revoked", 8}, {tenant, "lease.activated", 9},
		{tenant, "lease.released", 10}, {tenant, "lease.reserved", 11}, {tenant, "lease.expired", 13},
		{"zeta", "resource.created", 1},
	}
	got := map[string][]storedEvent{}
	for n := 0; n < len(want); n++ {
		m, err := live.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("event %d: %v", n, err)
		}
		e := decodeEvent(t, m.Subject, m.Header.Get(jetstream.MsgIDHeader), m.Data)
		got[e.ev.Tenant] = append(got[e.ev.Tenant], e)
	}
	if m, err := live.NextMsg(200 * time.Millisecond); err == nil {
		t.Fatalf("unexpected event %s %s", m.Subject, m.Data)
	}
	idx := map[string]int{}
	for _, w := range want {
		e := got[w.tenant][idx[w.tenant]]
		idx[w.tenant]++
		if e.subject != "holdfast.v1."+w.tenant+".events."+w.event || e.ev.Event != w.event || e.ev.Lsn != w.lsn {
			t.Fatalf("got %s %s, want %s lsn %d", e.subject, e.raw, w.event, w.lsn)
		}
		wantShard := sh
		if w.tenant == "zeta" {
			wantShard = 1 - sh
		}
		if e.msgID != MsgID(wantShard, w.lsn, 0) {
			t.Fatalf("msg id %q for %s", e.msgID, e.raw)
		}
		// shard is a number, lsn and slot are strings, the view is the object's.
		if _, ok := e.obj["shard"].(float64); !ok && wantShard != 0 {
			t.Fatalf("shard is not a number: %s", e.raw)
		}
		if _, ok := e.obj["lsn"].(string); !ok {
			t.Fatalf("lsn is not a string: %s", e.raw)
		}
		if _, ok := e.obj["slot"].(string); !ok || e.ev.Slot == 0 {
			t.Fatalf("slot: %s", e.raw)
		}
		view := strings.SplitN(w.event, ".", 2)[0]
		if _, ok := e.obj[view].(map[string]any); !ok {
			t.Fatalf("no %s view: %s", view, e.raw)
		}
	}
	ev := got[tenant][3].ev // lease.reserved
	if ev.Lease.GetLeaseId() != id || ev.Lease.GetState() != "reserved" || len(ev.Lease.Members) != 2 || ev.Lease.Members[1].GetValue() != 1 {
		t.Fatalf("lease.reserved view: %s", got[tenant][3].raw)
	}
	if got[tenant][11].ev.Lease.GetState() != "expired" || got[tenant][11].ev.Lease.GetLeaseEpoch() != 2 {
		t.Fatalf("lease.expired view: %s", got[tenant][11].raw)
	}

	s.waitPublished()
	stored := streamEvents(t, s.js)
	if len(stored) != len(want) {
		t.Fatalf("stream holds %d events, want %d", len(stored), len(want))
	}
	checkOrder(t, stored)
}

func TestRepublishAfterRestartAddsNoDuplicates(t *testing.T) {
	ns := startNATS(t)
	dir := t.TempDir()
	const shards = 2
	s := startStack(t, ns, stackOptions{shards: shards, dir: dir})
	for i := 0; i < 20; i++ {
		s.req("t", "resource.create", fmt.Sprintf(`{"operation_id":"c%d","resource_id":"r%d"}`, i, i)).want(t, "ok")
	}
	s.waitPublished()
	s.stop()
	if n := len(streamEvents(t, s.js)); n != 20 {
		t.Fatalf("stream holds %d events, want 20", n)
	}

	// No snapshot was written, so the restarted shards republish all 20 events.
	s = startStack(t, ns, stackOptions{shards: shards, dir: dir})
	s.waitPublished()
	republished := 0
	for _, sp := range s.br.pub.shards {
		republished += int(sp.acked.Load())
	}
	if republished != 20 {
		t.Fatalf("republished through lsns summing to %d, want 20", republished)
	}
	s.req("t", "resource.create", `{"operation_id":"c20","resource_id":"r20"}`).want(t, "ok")
	s.waitPublished()
	evs := streamEvents(t, s.js)
	if len(evs) != 21 {
		t.Fatalf("stream holds %d events after restart, want 21", len(evs))
	}
	checkOrder(t, evs)
}

func TestRecoveryPublishesWhatWasNeverPublished(t *testing.T) {
	ns := startNATS(t)
	dir := t.TempDir()
	const shards = 2
	// A first process publishes nothing (events disabled, as if NATS had lost every
	// publish); its journal still holds the entries.
	s := startStack(t, ns, stackOptions{shards: shards, dir: dir, cfg: func(c *Config) { c.Events.Disabled = true }})
	for i := 0; i < 30; i++ {
		s.req("t", "resource.create", fmt.Sprintf(`{"operation_id":"c%d","resource_id":"r%d"}`, i, i)).want(t, "ok")
	}
	s.stop()

	live, err := s.client.SubscribeSync("holdfast.v1.t.events.resource.created")
	if err != nil {
		t.Fatal(err)
	}
	s = startStack(t, ns, stackOptions{shards: shards, dir: dir})
	s.waitPublished()
	evs := streamEvents(t, s.js)
	if len(evs) != 30 {
		t.Fatalf("stream holds %d events, want 30", len(evs))
	}
	checkOrder(t, evs)
	seen := map[string]bool{}
	for i := 0; i < 30; i++ {
		m, err := live.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		seen[m.Header.Get(jetstream.MsgIDHeader)] = true
	}
	if len(seen) != 30 {
		t.Fatalf("%d distinct live events, want 30", len(seen))
	}
}

func TestStreamIsCreatedAndUpdated(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// An operator's stream with a short duplicate window and another subject.
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: contract.StreamName, Subjects: []string{"ops.>"},
		Duplicates: 30 * time.Second, Storage: jetstream.MemoryStorage}); err != nil {
		t.Fatal(err)
	}
	if err := ensureStream(ctx, js, "hf.eu", EventsConfig{}.withDefaults()); err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, contract.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	cfg := st.CachedInfo().Config
	if cfg.Duplicates != DefaultDuplicateWindow || len(cfg.Subjects) != 2 || cfg.Subjects[1] != "hf.eu.v1.*.events.>" ||
		cfg.Storage != jetstream.MemoryStorage {
		t.Fatalf("updated stream: %+v", cfg)
	}
	// A fresh deployment gets a file stream.
	if err := js.DeleteStream(ctx, contract.StreamName); err != nil {
		t.Fatal(err)
	}
	if err := ensureStream(ctx, js, "holdfast", EventsConfig{}.withDefaults()); err != nil {
		t.Fatal(err)
	}
	st, _ = js.Stream(ctx, contract.StreamName)
	cfg = st.CachedInfo().Config
	if cfg.Storage != jetstream.FileStorage || cfg.Duplicates != DefaultDuplicateWindow || cfg.Subjects[0] != "holdfast.v1.*.events.>" {
		t.Fatalf("created stream: %+v", cfg)
	}
}

func TestPublisherOverflowStopsThePosition(t *testing.T) {
	ns := startNATS(t)
	nc := connect(t, ns)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := EventsConfig{MaxQueuedEvents: 4}.withDefaults()
	if err := ensureStream(context.Background(), js, "holdfast", cfg); err != nil {
		t.Fatal(err)
	}
	m := newMetrics(1, nc)
	p := newPublisher(js, "holdfast", 1, cfg, testLogger(t), m)
	p.sink(0, 3, testEvents(1, 3)) // queued: 3
	p.sink(0, 5, testEvents(4, 2)) // 3+2 > 4: overflow, dropped
	p.sink(0, 6, testEvents(6, 1)) // dropped: the shard stays overflowed
	p.sink(0, 7, nil)              // dropped too: the position must not pass the gap
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	got := <-p.positions
	if got != (actors.Position{Shard: 0, LSN: 3}) {
		t.Fatalf("published %v, want shard 0 through 3", got)
	}
	if err := p.close(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-p.positions:
		t.Fatalf("position moved past the gap: %v", g)
	default:
	}
	evs := streamEvents(t, js)
	if len(evs) != 3 {
		t.Fatalf("stream holds %d events, want 3", len(evs))
	}
	checkOrder(t, evs)
	if !strings.Contains(gather(t, m), `holdfast_events_dropped_total{shard="0"} 3`) {
		t.Fatalf("dropped events not counted:\n%s", gather(t, m))
	}
}

// testEvents makes n resource.created events from lsn first on.
func testEvents(first uint64, n int) []actors.Event {
	out := make([]actors.Event, n)
	for i := range out {
		lsn := first + uint64(i)
		out[i] = actors.Event{Shard: 0, LSN: lsn, Slot: 1, Kind: kernel.EventResourceCreated, Tenant: "t",
			Object: kernel.ObjectResource, Resource: kernel.ResourceView{Tenant: "t", ID: "r" + strconv.FormatUint(lsn, 10)}}
	}
	return out
}
