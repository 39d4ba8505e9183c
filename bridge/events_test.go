package bridge

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/internal/eventstest"
)

// waitPublished waits until every shard's events through its applied lsn are acked.
func (s *stack) waitPublished() {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for i := uint32(0); i < s.shards; i++ {
		for s.pub.Acked(i) < s.sys.Stats(i).AppliedLSN {
			if time.Now().After(deadline) {
				s.t.Fatalf("shard %d: events acked through %d, applied %d", i, s.pub.Acked(i), s.sys.Stats(i).AppliedLSN)
			}
			time.Sleep(5 * time.Millisecond)
		}
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
	// Deletes of idle objects carry the object as it was.
	s.req(tenant, "pool.delete", `{"operation_id":"d1","pool_id":"n1/mem"}`).want(t, "ok")
	s.req(tenant, "range.delete", `{"operation_id":"d2","range_id":"n1/vx"}`).want(t, "ok")
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
	}{ // each shard's lsn 1 is its settings (no event)
		{tenant, "resource.created", 2}, {tenant, "pool.created", 3}, {tenant, "range.created", 4},
		{tenant, "lease.reserved", 5}, {tenant, "lease.renewed", 6}, {tenant, "lease.activated", 7},
		{tenant, "lease.revoking", 8}, {tenant, "lease.revoked", 9}, {tenant, "lease.activated", 10},
		{tenant, "lease.released", 11}, {tenant, "pool.deleted", 12}, {tenant, "range.deleted", 13},
		{tenant, "lease.reserved", 14}, {tenant, "lease.expired", 16},
		{"zeta", "resource.created", 2},
	}
	got := map[string][]eventstest.Stored{}
	for n := 0; n < len(want); n++ {
		m, err := live.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("event %d: %v", n, err)
		}
		e := eventstest.Decode(t, m.Subject, m.Header.Get(jetstream.MsgIDHeader), m.Data)
		got[e.Ev.Tenant] = append(got[e.Ev.Tenant], e)
	}
	if m, err := live.NextMsg(200 * time.Millisecond); err == nil {
		t.Fatalf("unexpected event %s %s", m.Subject, m.Data)
	}
	idx := map[string]int{}
	for _, w := range want {
		e := got[w.tenant][idx[w.tenant]]
		idx[w.tenant]++
		if e.Subject != "holdfast.v1."+w.tenant+".events."+w.event || e.Ev.Event != w.event || e.Ev.Lsn != w.lsn {
			t.Fatalf("got %s %s, want %s lsn %d", e.Subject, e.Raw, w.event, w.lsn)
		}
		wantShard := sh
		if w.tenant == "zeta" {
			wantShard = 1 - sh
		}
		if e.MsgID != contract.EventMsgID(wantShard, w.lsn, 0) {
			t.Fatalf("msg id %q for %s", e.MsgID, e.Raw)
		}
		// shard is a number, lsn and slot are strings, the view is the object's.
		if _, ok := e.Obj["shard"].(float64); !ok && wantShard != 0 {
			t.Fatalf("shard is not a number: %s", e.Raw)
		}
		if _, ok := e.Obj["lsn"].(string); !ok {
			t.Fatalf("lsn is not a string: %s", e.Raw)
		}
		if _, ok := e.Obj["slot"].(string); !ok || e.Ev.Slot == 0 {
			t.Fatalf("slot: %s", e.Raw)
		}
		view := strings.SplitN(w.event, ".", 2)[0]
		if _, ok := e.Obj[view].(map[string]any); !ok {
			t.Fatalf("no %s view: %s", view, e.Raw)
		}
	}
	ev := got[tenant][3].Ev // lease.reserved
	if ev.Lease.GetLeaseId() != id || ev.Lease.GetState() != "reserved" || len(ev.Lease.Members) != 2 || ev.Lease.Members[1].GetValue() != 1 {
		t.Fatalf("lease.reserved view: %s", got[tenant][3].Raw)
	}
	if got[tenant][13].Ev.Lease.GetState() != "expired" || got[tenant][13].Ev.Lease.GetLeaseEpoch() != 2 {
		t.Fatalf("lease.expired view: %s", got[tenant][13].Raw)
	}
	if ev := got[tenant][10].Ev; ev.Pool.GetPoolId() != "n1/mem" || ev.Pool.GetCapacity() != 8 {
		t.Fatalf("pool.deleted view: %s", got[tenant][10].Raw)
	}

	s.waitPublished()
	stored := eventstest.Stream(t, s.js)
	if len(stored) != len(want) {
		t.Fatalf("stream holds %d events, want %d", len(stored), len(want))
	}
	eventstest.CheckOrder(t, stored)
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
	if n := len(eventstest.Stream(t, s.js)); n != 20 {
		t.Fatalf("stream holds %d events, want 20", n)
	}

	// No snapshot was written, so the restarted shards republish all 20 events (each
	// shard's lsn 1 is its settings, which have none).
	s = startStack(t, ns, stackOptions{shards: shards, dir: dir})
	s.waitPublished()
	republished := 0
	for i := uint32(0); i < shards; i++ {
		republished += int(s.pub.Acked(i))
	}
	if republished != 20+shards {
		t.Fatalf("republished through lsns summing to %d, want %d", republished, 20+shards)
	}
	s.req("t", "resource.create", `{"operation_id":"c20","resource_id":"r20"}`).want(t, "ok")
	s.waitPublished()
	evs := eventstest.Stream(t, s.js)
	if len(evs) != 21 {
		t.Fatalf("stream holds %d events after restart, want 21", len(evs))
	}
	eventstest.CheckOrder(t, evs)
}

func TestRecoveryPublishesWhatWasNeverPublished(t *testing.T) {
	ns := startNATS(t)
	dir := t.TempDir()
	const shards = 2
	// A first process publishes nothing (events disabled, as if NATS had lost every
	// publish); its journal still holds the entries.
	s := startStack(t, ns, stackOptions{shards: shards, dir: dir, noEvents: true})
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
	evs := eventstest.Stream(t, s.js)
	if len(evs) != 30 {
		t.Fatalf("stream holds %d events, want 30", len(evs))
	}
	eventstest.CheckOrder(t, evs)
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
