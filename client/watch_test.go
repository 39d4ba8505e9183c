package client

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/messages"
)

func eventJSON(name, tenant string, lsn int, leaseID string) []byte {
	return fmt.Appendf(nil, `{"event":%q,"tenant":%q,"shard":2,"lsn":"%d","slot":"77","lease":{"lease_id":%q,"holder_id":"h","state":"reserved","lease_epoch":"1"}}`,
		name, tenant, lsn, leaseID)
}

func next(t *testing.T, w *Watcher) Event {
	t.Helper()
	select {
	case ev, ok := <-w.Events():
		if !ok {
			t.Fatalf("watcher ended: %v", w.Err())
		}
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
	}
	return Event{}
}

func TestWatchLive(t *testing.T) {
	_, nc := startNATS(t, false)
	c := newClient(t, nc)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := c.Watch(ctx, WatchOptions{Filter: "lease.>"})
	if err != nil {
		t.Fatal(err)
	}
	pub, err := nats.Connect(nc.ConnectedUrl())
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	_ = pub.Publish("holdfast.v1.default.events.resource.created", []byte(`{"event":"resource.created"}`))     // filtered out
	_ = pub.Publish("holdfast.v1.other.events.lease.reserved", eventJSON("lease.reserved", "other", 4, "2-4")) // other tenant
	_ = pub.Publish("holdfast.v1.default.events.lease.reserved", eventJSON("lease.reserved", "default", 5, "2-5"))
	_ = pub.Flush()

	ev := next(t, w)
	if ev.GetEvent() != messages.EventLeaseReserved || ev.Lsn != 5 || ev.Slot != 77 || ev.Shard != 2 ||
		ev.Lease.LeaseId != "2-5" || ev.Subject != "holdfast.v1.default.events.lease.reserved" || ev.Sequence != 0 {
		t.Fatalf("event = %+v", ev)
	}
	w.Stop()
	if _, ok := <-w.Events(); ok {
		t.Fatal("events after Stop")
	}
	if w.Err() != nil {
		t.Fatalf("Err after Stop = %v", w.Err())
	}

	// All tenants.
	w2, err := c.Watch(ctx, WatchOptions{AllTenants: true})
	if err != nil {
		t.Fatal(err)
	}
	_ = pub.Publish("holdfast.v1.other.events.lease.released", eventJSON("lease.released", "other", 6, "2-4"))
	_ = pub.Flush()
	if ev := next(t, w2); ev.Tenant != "other" || ev.GetEvent() != "lease.released" {
		t.Fatalf("event = %+v", ev)
	}
	// A bad payload ends the watcher with an error.
	_ = pub.Publish("holdfast.v1.other.events.lease.released", []byte("garbage"))
	_ = pub.Flush()
	select {
	case _, ok := <-w2.Events():
		if ok {
			t.Fatal("event from garbage")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("watcher did not end")
	}
	if w2.Err() == nil {
		t.Fatal("no error after a bad payload")
	}
}

func TestWatchReplayFromStream(t *testing.T) {
	_, nc := startNATS(t, true)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: EventsStream, Subjects: []string{"holdfast.v1.*.events.>"}}); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		if _, err := js.Publish(ctx, "holdfast.v1.default.events.lease.reserved", eventJSON("lease.reserved", "default", i, fmt.Sprintf("0-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := js.Publish(ctx, "holdfast.v1.zz.events.lease.reserved", eventJSON("lease.reserved", "zz", 9, "0-9")); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, nc)

	w, err := c.Watch(ctx, WatchOptions{FromStart: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		ev := next(t, w)
		if ev.Lsn != uint64(i) || ev.Sequence != uint64(i) || ev.Stored.IsZero() || ev.CaughtUp != (i == 3) {
			t.Fatalf("event %d = %+v (the third, the last replayed, is CaughtUp)", i, ev)
		}
	}
	select {
	case <-w.Empty():
		t.Fatal("a replay with events is not empty")
	default:
	}
	// It goes on live after the replay.
	if _, err := js.Publish(ctx, "holdfast.v1.default.events.lease.activated", eventJSON("lease.activated", "default", 4, "0-1")); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w); ev.GetEvent() != "lease.activated" || ev.Sequence != 5 {
		t.Fatalf("live event after replay = %+v", ev)
	}
	w.Stop()

	w, err = c.Watch(ctx, WatchOptions{StartSeq: 2})
	if err != nil {
		t.Fatal(err)
	}
	if ev := next(t, w); ev.Sequence != 2 || ev.Lsn != 2 {
		t.Fatalf("from seq 2: %+v", ev)
	}
	w.Stop()

	w, err = c.Watch(ctx, WatchOptions{StartTime: time.Now().Add(-time.Hour), AllTenants: true, Filter: "lease.reserved"})
	if err != nil {
		t.Fatal(err)
	}
	var tenants []string
	for range 4 {
		tenants = append(tenants, next(t, w).Tenant)
	}
	if fmt.Sprint(tenants) != "[default default default zz]" {
		t.Fatalf("tenants = %v", tenants)
	}
	w.Stop()

	// A replay that matches nothing says so at once, and goes on live.
	w, err = c.Watch(ctx, WatchOptions{FromStart: true, Filter: "pool.created"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.Empty():
	case <-time.After(5 * time.Second):
		t.Fatal("an empty replay is not reported")
	}
	w.Stop()

	if _, err := c.Watch(ctx, WatchOptions{FromStart: true, Stream: "NO_SUCH_STREAM"}); err == nil {
		t.Fatal("watch of a missing stream succeeded")
	}
}
