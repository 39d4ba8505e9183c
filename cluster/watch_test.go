package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast/internal/natstest"
)

// nullHost opens and closes shards instantly.
type nullHost struct{}

func (nullHost) Open(uint32) error    { return nil }
func (nullHost) Accept(uint32) error  { return nil }
func (nullHost) Close(uint32, bool)   {}
func (nullHost) Halted(uint32) bool   { return false }
func (nullHost) Confirm(uint32) error { return nil }

// A node that joins gets its shards as the bucket shows it come, not rounds later: the
// serving node hands the shard over at once and the joiner claims it as the claim is
// given up. With a 60 s TTL a round comes every 15 s; the move takes milliseconds, and
// the test allows it 10 s on a loaded machine.
func TestShardMovesOnTheBucketsNews(t *testing.T) {
	js := connectJS(t, natstest.Start(t, 1).URL())
	ctx := context.Background()
	cfg := func(node string) Config {
		return Config{JS: js, Names: NamesFor("holdfast"), Node: node, Shards: 2, OwnershipTTL: 60 * time.Second}
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
	waitOwned(t, b, 1, 10*time.Second)
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

// haltingHost's shards halt when told to; opening one again recovers it.
type haltingHost struct {
	nullHost
	mu     sync.Mutex
	halted map[uint32]bool
	opens  int
}

func (h *haltingHost) Open(k uint32) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.opens++
	delete(h.halted, k)
	return nil
}

func (h *haltingHost) Halted(k uint32) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.halted[k]
}

// A shard that halts on its node (a journal failure: in a cluster mostly a stream's
// leadership moving) is given up and claimed again, so it is recovered from the journal
// instead of answering engine_halted until the node restarts.
func TestHaltedShardIsGivenUpAndRecovered(t *testing.T) {
	js := connectJS(t, natstest.Start(t, 1).URL())
	n, err := Join(context.Background(), Config{JS: js, Names: NamesFor("holdfast"), Node: "a", Shards: 1, OwnershipTTL: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	host := &haltingHost{halted: map[uint32]bool{}}
	n.Run(host)
	defer n.Stop()
	waitOwned(t, n, 1, 5*time.Second)
	// Claimed is not yet open: halting it before its load would have the load clear it.
	for deadline := time.Now().Add(5 * time.Second); !n.Serving(0); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the claimed shard is not served after 5s")
		}
	}
	first := n.epoch[0].Load()

	host.mu.Lock()
	host.halted[0] = true
	host.mu.Unlock()
	n.Halted(0)
	deadline := time.Now().Add(10 * time.Second)
	for {
		epoch := n.epoch[0].Load()
		host.mu.Lock()
		opens := host.opens
		host.mu.Unlock()
		if epoch != 0 && epoch != first && opens == 2 && n.Serving(0) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("halted shard not recovered: claim at revision %d (first at %d), %d opens", epoch, first, opens)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// slowCloseHost takes its time closing shard 0 (a drain, appends settling).
type slowCloseHost struct {
	nullHost
	closing chan struct{} // closed when Close(0) starts
	release chan struct{} // Close(0) returns when this is closed
	once    sync.Once
}

func (h *slowCloseHost) Close(k uint32, _ bool) {
	if k != 0 {
		return
	}
	h.once.Do(func() { close(h.closing) })
	<-h.release
}

// A claim lost to another writer is closed off the ownership goroutine: while shard 0
// takes seconds to close, the node goes on renewing shard 1 and serves it throughout.
// (When the renewal loop closed the shard itself, shard 1 went unrenewed for as long as
// the close took, past its serve window.)
func TestASlowCloseDoesNotStopTheOtherRenewals(t *testing.T) {
	js := connectJS(t, natstest.Start(t, 1).URL())
	ctx := context.Background()
	a, err := Join(ctx, Config{JS: js, Names: NamesFor("holdfast"), Node: "a", Shards: 2, OwnershipTTL: 4 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	host := &slowCloseHost{closing: make(chan struct{}), release: make(chan struct{})}
	a.Run(host)
	defer a.Stop()
	defer close(host.release)
	waitOwned(t, a, 2, 10*time.Second)
	// Another writer takes shard 0's key: a's next renewal of it is refused.
	if _, err := a.kv.Put(ctx, shardKey(0), []byte(`{"node":"z"}`)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-host.closing:
	case <-time.After(10 * time.Second):
		t.Fatal("shard 0 was not given up after its claim was taken")
	}
	if a.Serving(0) {
		t.Fatal("shard 0 still served after its claim was lost")
	}
	// Twice the serve window (3 s) with shard 0's close stuck.
	until := time.Now().Add(2 * a.timing.Serve)
	for time.Now().Before(until) {
		if !a.Serving(1) {
			t.Fatal("shard 1 stopped being served while shard 0 was closing: its renewals waited on the close")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stuckHost's opens never end (until the test does).
type stuckHost struct {
	nullHost
	opening chan uint32
	release chan struct{}
}

func (h stuckHost) Open(k uint32) error {
	h.opening <- k
	<-h.release
	return nil
}

// A node whose shard's load never ends still stops, within its StopTimeout: it serves
// nothing more and leaves the claim to lapse (before, Stop waited for the load for good).
func TestStopIsBoundedWhenALoadHangs(t *testing.T) {
	js := connectJS(t, natstest.Start(t, 1).URL())
	n, err := Join(context.Background(), Config{JS: js, Names: NamesFor("holdfast"), Node: "a", Shards: 2,
		OwnershipTTL: 4 * time.Second, StopTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	host := stuckHost{opening: make(chan uint32, 2), release: make(chan struct{})}
	defer close(host.release)
	n.Run(host)
	select {
	case <-host.opening:
	case <-time.After(10 * time.Second):
		t.Fatal("no shard was opened")
	}
	start := time.Now()
	n.Stop()
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Stop took %v with a load hanging, want about its 300ms bound", took)
	}
	for k := range uint32(2) {
		if n.Serving(k) {
			t.Fatalf("shard %d still served after the stop", k)
		}
	}
}
