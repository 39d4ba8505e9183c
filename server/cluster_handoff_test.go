package server

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/holdfast/holdfast/cluster"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/internal/natstest"
)

// A node handing its shards over records how far their events are published, so the next
// owner republishes nothing it already published. The last writes come within the second
// between the shard's own writes of the position (and there are no snapshots), so only
// the hand-off records them.
func TestHandOffRecordsThePublishedPosition(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	ctx := context.Background()
	ns := natstest.Start(t, 1)
	const shards = 2
	n1 := clusterNode(t, ns.URL(), "n1", shards, 1, func(c *Config) { c.SnapshotEvery = 1 << 20 })
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

	_, js := natstest.Connect(t, ns.URL())
	kv, err := js.KeyValue(ctx, cluster.NamesFor(contract.DefaultPrefix).Bucket())
	if err != nil {
		t.Fatal(err)
	}
	recorded := uint64(0)
	for k := range shards {
		e, err := kv.Get(ctx, fmt.Sprintf("published.%d", k))
		if err != nil {
			continue
		}
		if v, err := strconv.ParseUint(string(e.Value()), 10, 64); err == nil {
			recorded = max(recorded, v)
		}
	}
	if recorded < last.LSN {
		t.Fatalf("published position recorded at %d after the hand-off, the last event's lsn is %d", recorded, last.LSN)
	}
}
