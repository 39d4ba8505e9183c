package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/cluster"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/events"
	"github.com/holdfast/holdfast/internal/natstest"
)

// A node handing its shards over records how far their events are published, so the next
// owner republishes nothing it already published. The last writes come within the second
// between the shard's own writes of the position (and there are no snapshots), so only
// the hand-off records them. In a cluster whose journals keep their events (the feed)
// the journal's last message records it; in one whose events stream an earlier build
// created (no purges: a stream per journal), the cluster bucket.
func TestHandOffRecordsThePublishedPosition(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	for _, feed := range []bool{true, false} {
		t.Run(fmt.Sprintf("feed=%v", feed), func(t *testing.T) {
			ctx := context.Background()
			ns := natstest.Start(t, 1)
			_, js := natstest.Connect(t, ns.URL())
			if !feed { // the stream as an earlier build made it
				if _, err := events.EnsureStream(ctx, js, contract.DefaultPrefix, events.Config{}.WithDefaults()); err != nil {
					t.Fatal(err)
				}
			}
			const shards = 2
			// The feed is asked for either way: a stream an earlier build made cannot hold it.
			n1 := clusterNode(t, ns.URL(), "n1", shards, 1, func(c *Config) { c.SnapshotEvery, c.JournalLayout = 1<<20, LayoutFeed })
			waitBalanced(t, n1, 1)
			c := connectClient(t, ns.URL())
			if r, err := c.CreateResource(ctx, "seat-1"); err != nil || !r.OK() {
				t.Fatalf("create: %v %+v", err, r)
			}
			last, err := c.DeleteResource(ctx, "seat-1")
			if err != nil || !last.OK() {
				t.Fatalf("delete: %v %+v", err, last)
			}
			n1.Shutdown(ctx)
			if recorded := recordedPublished(t, js, shards, feed); recorded < last.LSN {
				t.Fatalf("published position recorded at %d after the hand-off, the last event's lsn is %d", recorded, last.LSN)
			}
		})
	}
}

// recordedPublished is the highest published position recorded for any shard.
func recordedPublished(t *testing.T, js jetstream.JetStream, shards uint32, feed bool) uint64 {
	t.Helper()
	ctx := context.Background()
	names := cluster.NamesFor(contract.DefaultPrefix)
	recorded := uint64(0)
	if feed {
		stream, err := js.Stream(ctx, contract.StreamName)
		if err != nil {
			t.Fatal(err)
		}
		for k := range shards {
			m, err := stream.GetLastMsgForSubject(ctx, names.JournalSubject(k))
			if err != nil {
				t.Fatal(err)
			}
			lsn, _, _ := strings.Cut(m.Header.Get("Holdfast-Events"), ".")
			if v, err := strconv.ParseUint(lsn, 10, 64); err == nil {
				recorded = max(recorded, v)
			}
		}
		return recorded
	}
	if _, err := js.Stream(ctx, names.JournalStream(0)); err != nil {
		t.Fatalf("a cluster on an events stream that denies purges keeps a stream per journal: %v", err)
	}
	kv, err := js.KeyValue(ctx, names.Bucket())
	if err != nil {
		t.Fatal(err)
	}
	for k := range shards {
		e, err := kv.Get(ctx, fmt.Sprintf("published.%d", k))
		if err != nil {
			continue
		}
		if v, err := strconv.ParseUint(string(e.Value()), 10, 64); err == nil {
			recorded = max(recorded, v)
		}
	}
	return recorded
}
