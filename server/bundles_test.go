package server

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/internal/natstest"
	"github.com/holdfast/holdfast/messages"
)

// keysOnShards returns n placement keys that fall on n different shards of tenant.
func keysOnShards(t *testing.T, tenant string, shards uint32, n int) []string {
	seen := map[uint32]bool{}
	var keys []string
	for i := 0; len(keys) < n && i < 1000; i++ {
		k := fmt.Sprintf("node%d", i)
		if s := contract.ShardOf(tenant, k, shards); !seen[s] {
			seen[s] = true
			keys = append(keys, k)
		}
	}
	if len(keys) < n {
		t.Fatalf("no %d keys on different shards", n)
	}
	return keys
}

// bundleServer starts a process with cfg and a client of it, and names three placement
// keys on three different shards.
func bundleServer(t *testing.T, cfg Config) (*Server, *client.Client, []string) {
	srv, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return srv, bundleClient(t, srv.URL()), keysOnShards(t, client.DefaultTenant, cfg.Shards, 3)
}

func bundleClient(t *testing.T, url string) *client.Client {
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	cl, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// A reserve over members of three placement keys on three shards is one lease, every
// member or none; its members name that lease wherever they live; a conflicting bundle
// is refused naming its member and holds nothing; release frees every member; and all of
// it survives a restart from the journals.
func TestBundleAcrossShards(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t.TempDir())
	cfg.Shards = 8
	srv, cl, k := bundleServer(t, cfg)
	defer func() { _ = srv.Shutdown(ctx) }()
	gpu, port, vni, other, nic := k[0]+"/gpu0", k[1]+"/console", k[2]+"/vxlan", k[0]+"/gpu1", k[2]+"/nic"
	must := func(r interface{ OK() bool }, err error) {
		t.Helper()
		if err != nil || !r.OK() {
			t.Fatalf("%v %+v", err, r)
		}
	}
	must(cl.CreateResource(ctx, gpu))
	must(cl.CreateResource(ctx, other))
	must(cl.CreateResource(ctx, nic))
	must(cl.CreateRange(ctx, port, 30000, 30009, "lowest_free"))
	must(cl.CreatePool(ctx, vni, 10))

	req := client.ReserveRequest{Holder: "vm-1", TTL: time.Minute,
		Members: []*messages.Member{client.Resource(gpu), client.RangeAny(port), client.PoolUnits(vni, 4), client.Resource(nic)}}
	r, err := cl.Reserve(ctx, req, client.WithOperationID("start-vm-1"))
	if err != nil || !r.OK() {
		t.Fatalf("reserve across shards: %v %+v", err, r)
	}
	lease := r.Lease.GetLeaseId()
	if ms := r.Lease.GetMembers(); len(ms) != 4 || ms[0].GetResourceId() != gpu || ms[1].GetRangeId() != port || ms[1].GetValue() != 30000 {
		t.Fatalf("members: %v", ms)
	}
	for _, id := range []string{gpu, nic} {
		if got, err := cl.GetResource(ctx, id); err != nil || got.Resource.GetCurrentLeaseId() != lease {
			t.Fatalf("member %s names %q, want %q (%v)", id, got.Resource.GetCurrentLeaseId(), lease, err)
		}
	}
	if p, err := cl.GetPool(ctx, vni); err != nil || p.Pool.GetReserved() != 4 {
		t.Fatalf("participant's pool: %+v %v", p, err)
	}
	again, err := cl.Reserve(ctx, req, client.WithOperationID("start-vm-1"))
	if err != nil || !again.OK() || again.Lease.GetLeaseId() != lease || !again.FromRetryCache {
		t.Fatalf("retry: %v %+v", err, again)
	}

	refusedHoldsNothing(t, cl, other, vni)
	releaseByValue(t, cl, k[0]+"/gpu2", port, 30005)

	rel, err := cl.Release(ctx, "vm-1", r.Fence())
	if err != nil || !rel.OK() || len(rel.Lease.GetMembers()) != 4 {
		t.Fatalf("release: %v %+v", err, rel)
	}
	waitFor(t, func() bool {
		p, err := cl.GetPool(ctx, vni)
		return err == nil && p.Pool.GetReserved() == 0
	})
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	srv, err = Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cl = bundleClient(t, srv.URL())
	got, err := cl.GetLease(ctx, lease)
	if err != nil || got.Lease.GetState() != messages.StateReleased || len(got.Lease.GetMembers()) != 4 {
		t.Fatalf("after a restart: %v %+v", err, got)
	}
	if p, err := cl.GetPool(ctx, vni); err != nil || p.Pool.GetReserved() != 0 {
		t.Fatalf("participant after a restart: %+v %v", p, err)
	}
}

// refusedHoldsNothing checks that a bundle over a free resource and more of a pool than
// is left is refused by the pool, and the free resource stays free.
func refusedHoldsNothing(t *testing.T, cl *client.Client, free, pool string) {
	t.Helper()
	ctx := context.Background()
	busy, err := cl.Reserve(ctx, client.ReserveRequest{Holder: "vm-2", TTL: time.Minute,
		Members: []*messages.Member{client.Resource(free), client.PoolUnits(pool, 7)}})
	if err != nil || busy.Code != messages.CodeInsufficientCapacity {
		t.Fatalf("conflicting bundle: %v %+v", err, busy)
	}
	if got, _ := cl.GetResource(ctx, free); got.Resource.GetState() != messages.StateAvailable {
		t.Fatalf("a refused bundle's free member: %s", got.Resource.GetState())
	}
}

// releaseByValue checks a release by the value of a bundle's member on another shard than
// the lease's home: the whole lease, or a refusal; never the value alone. home is a free
// resource on the home's shard, port a range with value free.
func releaseByValue(t *testing.T, cl *client.Client, home, port string, value uint64) {
	t.Helper()
	ctx := context.Background()
	if r, err := cl.CreateResource(ctx, home); err != nil || !r.OK() {
		t.Fatalf("create %s: %v %+v", home, err, r)
	}
	l, err := cl.Reserve(ctx, client.ReserveRequest{Holder: "vm-2", TTL: time.Minute,
		Members: []*messages.Member{client.Resource(home), client.RangeValue(port, value)}})
	if err != nil || !l.OK() {
		t.Fatalf("bundle: %v %+v", err, l)
	}
	if rel, err := cl.ReleaseValue(ctx, "vm-2", port, value, 0, false); err != nil || rel.Code != messages.CodeLeaseHasOtherMembers {
		t.Fatalf("release of one value of a bundle: %v %+v", err, rel)
	}
	rel, err := cl.ReleaseValue(ctx, "vm-2", port, value, 0, true, client.WithOperationID("free-"+home))
	if err != nil || !rel.OK() || rel.Lease.GetLeaseId() != l.Lease.GetLeaseId() || rel.Lease.GetState() != messages.StateReleased ||
		len(rel.Lease.GetMembers()) != 2 {
		t.Fatalf("release of the whole lease by a value: %v %+v", err, rel)
	}
	// Its retry gets the same answer, from the home's memory of the operation, though the
	// value is free by now.
	if again, err := cl.ReleaseValue(ctx, "vm-2", port, value, 0, true, client.WithOperationID("free-"+home)); err != nil ||
		!again.OK() || !again.FromRetryCache || again.Lease.GetLeaseId() != l.Lease.GetLeaseId() {
		t.Fatalf("its retry: %v %+v", err, again)
	}
	waitFor(t, func() bool {
		g, err := cl.GetResource(ctx, home)
		return err == nil && g.Resource.GetState() == messages.StateAvailable
	})
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); {
		if time.Now().After(deadline) {
			t.Fatal("not within 5 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A watcher sees a bundle across shards as one lease: one lease.reserved with every
// member, from its home, and one event per later change; the other shards publish none.
func TestBundleEventsAreOneLease(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t.TempDir())
	cfg.Shards = 8
	srv, cl, k := bundleServer(t, cfg)
	defer func() { _ = srv.Shutdown(ctx) }()
	ids := []string{k[0] + "/a", k[1] + "/b", k[2] + "/c"}
	var members []*messages.Member
	for _, id := range ids {
		if r, err := cl.CreateResource(ctx, id); err != nil || !r.OK() {
			t.Fatalf("create %s: %v %+v", id, err, r)
		}
		members = append(members, client.Resource(id))
	}
	w, err := cl.Watch(ctx, client.WatchOptions{Filter: "lease.>"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	r, err := cl.Reserve(ctx, client.ReserveRequest{Holder: "h", TTL: time.Minute, Members: members})
	if err != nil || !r.OK() {
		t.Fatalf("reserve: %v %+v", err, r)
	}
	if rel, err := cl.Release(ctx, "h", r.Fence()); err != nil || !rel.OK() {
		t.Fatalf("release: %v %+v", err, rel)
	}
	home, _, _ := contract.ParseLeaseID(r.Lease.LeaseId)
	var got []string
	for deadline := time.After(2 * time.Second); len(got) < 3; {
		select {
		case ev := <-w.Events():
			if ev.Lease.GetLeaseId() != r.Lease.LeaseId || len(ev.Lease.GetMembers()) != 3 || ev.Shard != home {
				t.Fatalf("event %s of lease %s from shard %d with %d members; the bundle is %s, home %d",
					ev.Event.Event, ev.Lease.GetLeaseId(), ev.Shard, len(ev.Lease.GetMembers()), r.Lease.LeaseId, home)
			}
			got = append(got, ev.Event.Event)
		case <-deadline:
			if len(got) != 2 || got[0] != "lease.reserved" || got[1] != "lease.released" {
				t.Fatalf("events %v, want lease.reserved then lease.released", got)
			}
			return
		}
	}
	t.Fatalf("more than two events: %v", got)
}

// A bundle across shards served by three nodes: its members' shards have different
// owners, so the prepares, votes and mirrors travel between nodes. One lease, every
// member; a conflicting bundle holds nothing; when the home's node dies its retry on a
// survivor answers the same lease, and its release frees every member on every node.
func TestBundleAcrossNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	ctx := context.Background()
	nats_ := natstest.Start(t, 3)
	const shards = 6
	nodes := map[string]*Server{}
	for _, name := range []string{"n1", "n2", "n3"} {
		nodes[name] = clusterNode(t, nats_.URL(), name, shards, 3)
		defer nodes[name].Shutdown(ctx)
	}
	owners := waitBalanced(t, nodes["n1"], 3)
	// Three keys whose shards three different nodes own.
	var keys []string
	seen := map[string]bool{}
	for _, k := range keysOnShards(t, client.DefaultTenant, shards, shards) {
		if o := owners[contract.ShardOf(client.DefaultTenant, k, shards)]; !seen[o] {
			seen[o] = true
			keys = append(keys, k)
		}
	}
	if len(keys) < 3 {
		t.Fatalf("owners %v: no three keys on three nodes", owners)
	}
	cl := connectClient(t, nodes["n1"].URL())
	must := func(r interface{ OK() bool }, err error) {
		t.Helper()
		if err != nil || !r.OK() {
			t.Fatalf("%v %+v", err, r)
		}
	}
	gpu, port, vni, other := keys[0]+"/gpu0", keys[1]+"/console", keys[2]+"/vxlan", keys[1]+"/spare"
	must(cl.CreateResource(ctx, gpu))
	must(cl.CreateResource(ctx, other))
	must(cl.CreateRange(ctx, port, 30000, 30009, "lowest_free"))
	must(cl.CreatePool(ctx, vni, 10))
	req := client.ReserveRequest{Holder: "vm-1", TTL: time.Minute,
		Members: []*messages.Member{client.Resource(gpu), client.RangeAny(port), client.PoolUnits(vni, 4)}}
	r, err := cl.Reserve(ctx, req, client.WithOperationID("start-vm-1"))
	if err != nil || !r.OK() || len(r.Lease.GetMembers()) != 3 || r.Lease.Members[1].GetValue() != 30000 {
		t.Fatalf("reserve across nodes: %v %+v", err, r)
	}
	if p, err := cl.GetPool(ctx, vni); err != nil || p.Pool.GetReserved() != 4 {
		t.Fatalf("the pool on another node: %+v %v", p, err)
	}
	refusedHoldsNothing(t, cl, other, vni)

	// A release by the value of a member whose lease's home another node serves.
	releaseByValue(t, cl, keys[0]+"/gpu1", port, 30001)

	home := owners[contract.ShardOf(client.DefaultTenant, keys[0], shards)]
	cs := connectClient(t, crashNode(nodes, home).URL())
	var again *client.LeaseResult
	for deadline := time.Now().Add(30 * time.Second); ; {
		again, err = cs.Reserve(ctx, req, client.WithOperationID("start-vm-1"))
		if err == nil && again.OK() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("retry after the home's node died: %v %+v", err, again)
		}
	}
	if again.Fence() != r.Fence() || !again.FromRetryCache {
		t.Fatalf("retry after failover: %+v, want the lease %+v", again, r.Fence())
	}
	must(cs.Release(ctx, "vm-1", r.Fence()))
	waitFor(t, func() bool {
		p, err := cs.GetPool(ctx, vni)
		g, err2 := cs.GetResource(ctx, gpu)
		return err == nil && err2 == nil && p.Pool.GetReserved() == 0 && g.Resource.GetState() == messages.StateAvailable
	})
}

// A worker's claim that brings a GPU of another node's placement key along: one lease
// over the work shard and the GPU, the claim's answer carrying the work shard; the GPU is
// the claim's while it lasts and free once work.complete is answered; a claim naming the
// GPU first is refused (cross_shard), holding nothing.
func TestClaimAcrossShards(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t.TempDir())
	cfg.Shards = 8
	srv, cl, k := bundleServer(t, cfg)
	defer func() { _ = srv.Shutdown(ctx) }()
	run, gpu := k[0], k[1]+"/gpu0"
	if _, err := cl.CreateResource(ctx, gpu); err != nil {
		t.Fatal(err)
	}
	if r, err := cl.CreateRun(ctx, run, []*messages.WorkSpec{{Name: "a"}, {Name: "b"}}); err != nil || !r.OK() {
		t.Fatalf("run.create: %v %+v", err, r)
	}
	bad, err := cl.Reserve(ctx, client.ReserveRequest{Holder: "w", TTL: time.Minute,
		Members: []*messages.Member{client.Resource(gpu), client.WorkNext(run)}})
	var de *client.DefiniteError
	if !errors.As(err, &de) || de.Code != messages.CodeCrossShard {
		t.Fatalf("a claim across keys naming the GPU first: %v %+v", err, bad)
	}
	c, err := cl.ClaimWith(ctx, "w", run, "", time.Minute, []*messages.Member{client.Resource(gpu)})
	if err != nil || !c.OK() || c.Work.GetName() != "a" || c.Work.GetLeaseId() != c.Lease.GetLeaseId() || len(c.Lease.GetMembers()) != 2 {
		t.Fatalf("claim with a GPU of another shard: %v %+v", err, c)
	}
	if g, err := cl.GetResource(ctx, gpu); err != nil || g.Resource.GetCurrentLeaseId() != c.Lease.GetLeaseId() {
		t.Fatalf("the GPU names %q, want the claim %q (%v)", g.Resource.GetCurrentLeaseId(), c.Lease.GetLeaseId(), err)
	}
	done, err := cl.CompleteWork(ctx, "w", c.Fence(), nil)
	if err != nil || !done.OK() || done.Work.GetStatus() != "done" {
		t.Fatalf("work.complete: %v %+v", err, done)
	}
	if g, err := cl.GetResource(ctx, gpu); err != nil || g.Resource.GetState() != messages.StateAvailable {
		t.Fatalf("the GPU after work.complete was answered: %+v %v", g, err)
	}
	// A Worker whose claims bring the GPU along.
	w := &client.Worker{Client: cl, Holder: "w2", Run: run, TTL: time.Minute, Along: []*messages.Member{client.Resource(gpu)}}
	next, res, err := w.Next(ctx)
	if err != nil || next == nil || next.Work.GetName() != "b" {
		t.Fatalf("a worker's claim with the GPU along: %v %+v", err, res)
	}
	defer next.Stop()
	if g, err := cl.GetResource(ctx, gpu); err != nil || g.Resource.GetCurrentLeaseId() != next.Work.GetLeaseId() {
		t.Fatalf("the GPU names %q, want the worker's claim %q (%v)", g.Resource.GetCurrentLeaseId(), next.Work.GetLeaseId(), err)
	}
}
