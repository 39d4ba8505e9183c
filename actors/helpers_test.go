package actors

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// fakeClock is a settable wall clock: tests move slots by hand, also backwards.
type fakeClock struct{ ns atomic.Int64 }

func newFakeClock(slot uint64, slotLen time.Duration) *fakeClock {
	c := &fakeClock{}
	c.ns.Store(int64(slot) * int64(slotLen))
	return c
}

func (c *fakeClock) Now() time.Time { return time.Unix(0, c.ns.Load()) }

func (c *fakeClock) setSlot(slot uint64, slotLen time.Duration) {
	c.ns.Store(int64(slot) * int64(slotLen))
}

func testOptions(dir string) Options {
	cfg := kernel.DefaultConfig()
	cfg.MaxResources = 1 << 16
	cfg.MaxLeases = 1 << 16
	cfg.MaxMembers = 1 << 18
	cfg.MaxOperations = 1 << 17
	cfg.MaxExpirations = 1 << 16
	return Options{Dir: dir, Shards: 1, Slot: 10 * time.Millisecond, Kernel: cfg, SnapshotEvery: -1}
}

func startSystem(t testing.TB, o Options) *System {
	t.Helper()
	sys, err := Start(o)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	return sys
}

// do sends one write and waits for its reply.
func do(t testing.TB, sys *System, shard uint32, c *kernel.Command) *Reply {
	t.Helper()
	ch := make(chan *Reply, 1)
	sys.Write(shard, c, func(r *Reply) { ch <- r })
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("no reply to %s %s", c.Verb, c.OperationID)
		return nil
	}
}

func read(t testing.TB, sys *System, shard uint32, q ReadRequest) *Reply {
	t.Helper()
	ch := make(chan *Reply, 1)
	sys.Read(shard, q, func(r *Reply) { ch <- r })
	select {
	case r := <-ch:
		return r
	case <-time.After(30 * time.Second):
		t.Fatalf("no reply to read %s", q.Verb)
		return nil
	}
}

func createResource(op, id string) *kernel.Command {
	return &kernel.Command{Verb: contract.VerbCreateResource, Tenant: "t", OperationID: op, ObjectID: id}
}

func reserve(op, holder, id string, ttlMillis uint64) *kernel.Command {
	return &kernel.Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: op, HolderID: holder,
		TTLMillis: ttlMillis, Members: []kernel.Member{{Kind: kernel.MemberResource, ID: id}}}
}

func release(op, holder string, lease, epoch uint64) *kernel.Command {
	return &kernel.Command{Verb: contract.VerbRelease, Tenant: "t", OperationID: op, HolderID: holder,
		LeaseLSN: lease, Epoch: epoch}
}

func wantCode(t testing.TB, r *Reply, code kernel.Code) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("got %s (%s), want %s", r.Code, r.Message, code)
	}
}
