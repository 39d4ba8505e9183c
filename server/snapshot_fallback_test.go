package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/internal/natstest"
)

// In a cluster, a shard whose newest snapshot object cannot be read (here: a chunk whose
// bytes no longer match the object's digest) is recovered by the next node from the
// snapshot before it and the journal kept since, with every acknowledged write.
func TestClusterRecoversPastAnUnreadableSnapshot(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	ctx := context.Background()
	nats_ := natstest.Start(t, 1)
	first := clusterNode(t, nats_.URL(), "n1", 1, 1) // snapshots every 5 entries
	c := connectClient(t, first.URL())
	const n = 40
	for i := range n {
		if r, err := c.CreateResource(ctx, fmt.Sprintf("gpu-%d", i)); err != nil || !r.OK() {
			t.Fatalf("create gpu-%d: %v %+v", i, err, r)
		}
	}
	_, js := natstest.Connect(t, nats_.URL())
	obs, err := js.ObjectStore(ctx, "HOLDFAST_SNAP")
	if err != nil {
		t.Fatal(err)
	}
	// Snapshots are stored off the request path: wait until two are kept, then crash. A third
	// shows when the crash came between storing the newest and removing the oldest.
	var objs []*jetstream.ObjectInfo
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		// Each listing bounded: nats.go's List waits for the listing's last message with
		// the context's deadline alone, and one taken while a snapshot is stored or
		// removed hung a CI run for ten minutes.
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		objs, err = obs.List(lctx)
		cancel()
		if err == nil && len(objs) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("snapshots: %d (%v), want 2 or more", len(objs), err)
		}
	}
	first.crash()
	newest := objs[0]
	for _, o := range objs {
		if o.Name > newest.Name {
			newest = o
		}
	}
	corruptObject(t, js, "HOLDFAST_SNAP", newest.NUID)
	if _, err := obs.GetBytes(ctx, newest.Name); err == nil {
		t.Fatal("the corrupted snapshot still reads")
	}

	second := clusterNode(t, nats_.URL(), "n2", 1, 1)
	defer second.Shutdown(ctx)
	c2 := connectClient(t, second.URL())
	for i := range n {
		if r, err := c2.GetResource(ctx, fmt.Sprintf("gpu-%d", i)); err != nil || !r.OK() {
			t.Fatalf("after recovery, gpu-%d: %v %+v", i, err, r)
		}
	}
}

// corruptObject flips a byte in each chunk of an object: the chunks are read, purged and
// stored again, so the object's digest no longer matches what is read.
func corruptObject(t *testing.T, js jetstream.JetStream, bucket, nuid string) {
	t.Helper()
	ctx := context.Background()
	stream, err := js.Stream(ctx, "OBJ_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	subject := fmt.Sprintf("$O.%s.C.%s", bucket, nuid)
	info, err := stream.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	var chunks [][]byte
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := stream.GetMsg(ctx, seq)
		if err != nil || m.Subject != subject {
			continue
		}
		data := append([]byte(nil), m.Data...)
		data[len(data)/2] ^= 0xff
		chunks = append(chunks, data)
	}
	if len(chunks) == 0 {
		t.Fatalf("no chunks of object %s", nuid)
	}
	if err := stream.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		t.Fatal(err)
	}
	for _, data := range chunks {
		if _, err := js.Publish(ctx, subject, data); err != nil && !strings.Contains(err.Error(), "duplicate") {
			t.Fatal(err)
		}
	}
}
