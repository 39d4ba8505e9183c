package cluster

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/internal/natstest"
)

// Snapshots go to the object store, the newest is loaded, only the newest two are kept,
// a stale owner's older snapshot never becomes the newest; the published position
// round-trips through the cluster bucket.
func TestStorageSnapshotsAndPublished(t *testing.T) {
	js := connectJS(t, natstest.Start(t, 1).URL())
	ctx := context.Background()
	kv, err := OpenBucket(ctx, js, NamesFor("holdfast"), 1)
	if err != nil {
		t.Fatal(err)
	}
	obs, err := openSnapshots(ctx, js, NamesFor("holdfast"), 1)
	if err != nil {
		t.Fatal(err)
	}
	st := &Storage{JS: js, Names: NamesFor("holdfast"), Shard: 2, Node: "a", Epoch: 5, Objects: obs, Bucket: kv}
	if _, ok, err := st.LoadSnapshot(); err != nil || ok {
		t.Fatalf("empty store: %v %v", ok, err)
	}
	for _, lsn := range []uint64{10, 30, 20} { // 20: a stale owner's, written last
		if err := st.WriteSnapshot(lsn, lsn*2, bytes.Repeat([]byte{byte(lsn)}, 300_000)); err != nil {
			t.Fatal(err)
		}
	}
	s, ok, err := st.LoadSnapshot()
	if err != nil || !ok || s.LSN != 30 || s.Slot != 60 || len(s.Payload) != 300_000 || s.Payload[0] != 30 {
		t.Fatalf("loaded lsn %d slot %d (%d bytes), ok %v, err %v", s.LSN, s.Slot, len(s.Payload), ok, err)
	}
	objs, err := st.snapshots(ctx, false)
	if err != nil || len(objs) != 2 {
		t.Fatalf("kept %d snapshots: %v", len(objs), err)
	}
	other := &Storage{JS: js, Names: NamesFor("holdfast"), Shard: 3, Objects: obs, Bucket: kv}
	if _, ok, _ := other.LoadSnapshot(); ok {
		t.Fatal("shard 3 loaded shard 2's snapshot")
	}
	if p, err := st.ReadPublished(); err != nil || p != 0 {
		t.Fatalf("published %d %v", p, err)
	}
	if err := st.WritePublished(42); err != nil {
		t.Fatal(err)
	}
	if p, err := st.ReadPublished(); err != nil || p != 42 {
		t.Fatalf("published %d %v", p, err)
	}
}

// The snapshot store stays bounded however many snapshots a shard writes: an object
// store's delete leaves a marker per name for good, and snapshots are named by lsn, so
// the markers of removed snapshots are purged too (and the ones an older build left).
func TestStorageSnapshotsStayBounded(t *testing.T) {
	js := connectJS(t, natstest.Start(t, 1).URL())
	ctx := context.Background()
	names := NamesFor("holdfast")
	obs, err := openSnapshots(ctx, js, names, 1)
	if err != nil {
		t.Fatal(err)
	}
	st := &Storage{JS: js, Names: names, Shard: 1, Node: "a", Epoch: 1, Objects: obs}
	// An older build's leftovers: deleted snapshots whose markers stayed.
	for lsn := uint64(1); lsn <= 5; lsn++ {
		if _, err := obs.PutBytes(ctx, st.snapshotName(lsn), []byte("old")); err != nil {
			t.Fatal(err)
		}
		if err := obs.Delete(ctx, st.snapshotName(lsn)); err != nil {
			t.Fatal(err)
		}
	}
	for lsn := uint64(10); lsn < 60; lsn++ {
		if err := st.WriteSnapshot(lsn, lsn, bytes.Repeat([]byte{byte(lsn)}, 1000)); err != nil {
			t.Fatal(err)
		}
	}
	stream, err := js.Stream(ctx, "OBJ_"+names.Snapshots())
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Two snapshots kept: a meta message and a chunk each.
	if info.State.Msgs != 2*snapshotsKept || info.State.NumSubjects != 2*snapshotsKept {
		t.Fatalf("after 50 snapshots the store holds %d message(s) on %d subject(s); want %d",
			info.State.Msgs, info.State.NumSubjects, 2*snapshotsKept)
	}
	s, ok, err := st.LoadSnapshot()
	if err != nil || !ok || s.LSN != 59 || s.Payload[0] != 59 {
		t.Fatalf("loaded lsn %d, ok %v, err %v", s.LSN, ok, err)
	}
}

// JetStream's "temporarily unavailable" is retried in either of nats.go's error types:
// the object store's listing comes through the older API (a shard's load failed on it
// while the snapshots' stream elected a leader).
func TestTemporarilyUnavailableIsRetried(t *testing.T) {
	for _, err := range []error{
		&jetstream.APIError{ErrorCode: 10008},
		fmt.Errorf("listing snapshots of shard 0: %w", &nats.APIError{ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}),
	} {
		if !retryable(err) {
			t.Errorf("%v: not retried", err)
		}
	}
	if retryable(&nats.APIError{ErrorCode: 10071}) {
		t.Error("a wrong last sequence retried")
	}
}
