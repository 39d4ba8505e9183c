package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/holdfast/holdfast/internal/natstest"
)

// nullHost opens and closes shards instantly.
type nullHost struct{}

func (nullHost) Open(uint32) error         { return nil }
func (nullHost) Close(uint32)              {}
func (nullHost) Accept(uint32) error       { return nil }
func (nullHost) Release(uint32)            {}
func (nullHost) FlushEvents(uint32) uint64 { return 0 }
func (nullHost) DropEvents(uint32)         {}

// A node that joins gets its shards as the bucket shows it come, not rounds later: the
// serving node hands the shard over at once and the joiner claims it as the claim is
// given up. With a 40 s TTL a round comes every 10 s; the move takes well under that.
func TestShardMovesOnTheBucketsNews(t *testing.T) {
	js := connectJS(t, natstest.Start(t, 1).URL())
	ctx := context.Background()
	cfg := func(node string) Config {
		return Config{JS: js, Names: NamesFor("holdfast"), Node: node, Shards: 2, OwnershipTTL: 40 * time.Second}
	}
	a, err := Join(ctx, cfg("a"))
	if err != nil {
		t.Fatal(err)
	}
	a.Run(nullHost{})
	defer a.Stop()
	waitOwned(t, a, 2, 5*time.Second)
	// The first rounds have run; b's join is news that a's round must not wait for.
	time.Sleep(time.Second)
	b, err := Join(ctx, cfg("b"))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	b.Run(nullHost{})
	defer b.Stop()
	waitOwned(t, b, 1, 5*time.Second)
	t.Logf("shard moved to the new node in %v", time.Since(start).Round(time.Millisecond))
	if got := a.owned(); len(got) != 1 || got[0] != 0 {
		t.Fatalf("a owns %v, want [0]", got)
	}
}

func waitOwned(t *testing.T, n *Node, want int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for len(n.owned()) != want {
		if time.Now().After(deadline) {
			t.Fatalf("node %s owns %v after %v, want %d shard(s)", n.cfg.Node, n.owned(), within, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
