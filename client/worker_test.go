package client_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/internal/testserver"
	"github.com/holdfast/holdfast/messages"
)

func newClient(t testing.TB, url string) *client.Client {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Two workers share a run: each claims the next shard, the claims are kept alive past
// their TTL, a checkpoint is restored on the next claim after a hand-back, and the run
// completes once every shard is done.
func TestWorkerClaimsCheckpointsCompletes(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, srv.URL)
	ctx := context.Background()
	if r, err := c.CreateRun(ctx, "crawl", []*messages.WorkSpec{
		client.Shard("a", []byte("a"), []byte("m")), client.Shard("b", []byte("m"), nil)}); err != nil || !r.OK() {
		t.Fatalf("create run: %v %+v", err, r)
	}
	w1 := &client.Worker{Client: c, Holder: "w1", Run: "crawl", TTL: 600 * time.Millisecond}
	w2 := &client.Worker{Client: c, Holder: "w2", Run: "crawl", TTL: 600 * time.Millisecond}
	c1, _, err := w1.Next(ctx)
	if err != nil || c1 == nil || c1.Work.GetName() != "a" {
		t.Fatalf("w1 claim: %v %+v", err, c1)
	}
	c2, _, err := w2.Next(ctx)
	if err != nil || c2 == nil || c2.Work.GetName() != "b" {
		t.Fatalf("w2 claim: %v %+v", err, c2)
	}
	_, res, err := (&client.Worker{Client: c, Holder: "w3", Run: "crawl"}).Next(ctx)
	if err != nil || res.Code != messages.CodeNoneAvailable || res.EarliestDeadlineSlot == 0 {
		t.Fatalf("w3: %v %+v", err, res)
	}
	// A claim whose reply was lost is sent again with its operation id: the retry cache
	// answers none_available with the same hint, never "none will free up" (0).
	first, err := c.Claim(ctx, "w3", "crawl", "", time.Second, client.WithOperationID("w3-next"))
	if err != nil || first.Code != messages.CodeNoneAvailable {
		t.Fatalf("w3 claim: %v %+v", err, first)
	}
	retried, err := c.Claim(ctx, "w3", "crawl", "", time.Second, client.WithOperationID("w3-next"))
	if err != nil || !retried.FromRetryCache || retried.Code != messages.CodeNoneAvailable ||
		retried.EarliestDeadlineSlot != first.EarliestDeadlineSlot || retried.EarliestDeadlineSlot == 0 {
		t.Fatalf("w3 claim again: %v %+v, first %+v", err, retried, first)
	}
	// Kept alive well past the TTL.
	time.Sleep(1500 * time.Millisecond)
	if c1.Context().Err() != nil || c2.Context().Err() != nil {
		t.Fatalf("a claim was lost while kept alive: %v %v", c1.Err(), c2.Err())
	}
	if r, err := c1.Checkpoint(ctx, []byte("c"), []byte("page=3")); err != nil || !r.OK() {
		t.Fatalf("checkpoint: %v %+v", err, r)
	}
	if r, err := c1.Release(ctx); err != nil || !r.OK() {
		t.Fatalf("release: %v %+v", err, r)
	}
	again, _, err := w2.Take(ctx, "a")
	if err != nil || again == nil || string(again.Work.GetCursor().GetToken()) != "page=3" {
		t.Fatalf("the next claim does not resume from the checkpoint: %v %+v", err, again)
	}
	for _, cl := range []*client.Claim{again, c2} {
		if r, err := cl.Complete(ctx, nil); err != nil || !r.OK() {
			t.Fatalf("complete: %v %+v", err, r)
		}
		if cl.Context().Err() == nil || cl.Err() != nil {
			t.Fatalf("after complete: ctx %v err %v", cl.Context().Err(), cl.Err())
		}
	}
	if r, err := c.CompleteRun(ctx, "crawl"); err != nil || !r.OK() || r.Run.GetStatus() != "done" {
		t.Fatalf("complete run: %v %+v", err, r)
	}
}

// A claim whose lease expires (its keep-alive stopped here, as a paused worker's would)
// answers lease_expired to the next call, which cancels its context; another worker then
// gets the shard.
func TestWorkerClaimLost(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, srv.URL)
	ctx := context.Background()
	if r, err := c.CreateRun(ctx, "r", []*messages.WorkSpec{client.Shard("only", nil, nil)}); err != nil || !r.OK() {
		t.Fatalf("create run: %v %+v", err, r)
	}
	w := &client.Worker{Client: c, Holder: "w1", Run: "r", TTL: 100 * time.Millisecond}
	cl, _, err := w.Next(ctx)
	if err != nil || cl == nil {
		t.Fatalf("claim: %v", err)
	}
	cl.KeepAlive.Stop() // as if the worker were paused: nobody renews
	time.Sleep(300 * time.Millisecond)
	r, err := cl.Checkpoint(ctx, []byte("x"), nil)
	if err != nil || (r.Code != messages.CodeLeaseExpired && r.Code != messages.CodeStaleEpoch) {
		t.Fatalf("checkpoint after expiry: %v %+v", err, r)
	}
	if cl.Context().Err() == nil {
		t.Fatal("the lost claim's context is not cancelled")
	}
	got, _, err := (&client.Worker{Client: c, Holder: "w2", Run: "r"}).Next(ctx)
	if err != nil || got == nil {
		t.Fatalf("w2 did not get the shard back: %v", err)
	}
	got.KeepAlive.Stop()
}

// KeepAlive reports a lease it cannot keep: renewals refused once it was released.
func TestKeepAliveReportsALostLease(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, srv.URL)
	ctx := context.Background()
	if _, err := c.CreateResource(ctx, "gpu"); err != nil {
		t.Fatal(err)
	}
	// A TTL the renewals keep with room to spare on a loaded CI machine (renewed every
	// second, so a renewal may stall two seconds; 1.5 s still lapsed once under a full
	// .ci/run), outlived by the sleep, so the lease is there only because it was renewed.
	res, err := c.Reserve(ctx, client.ReserveRequest{Holder: "h", TTL: 3 * time.Second, Members: []*messages.Member{client.Resource("gpu")}})
	if err != nil || !res.OK() {
		t.Fatalf("reserve: %v %+v", err, res)
	}
	ka := c.KeepAlive(ctx, "h", res.Fence(), 3*time.Second)
	time.Sleep(3500 * time.Millisecond)
	if ka.Context().Err() != nil {
		t.Fatalf("lost while renewed: %v", ka.Err())
	}
	if r, err := c.Release(ctx, "h", res.Fence()); err != nil || !r.OK() {
		t.Fatalf("release: %v", err)
	}
	select {
	case <-ka.Done():
	case <-time.After(2 * time.Second):
		t.Fatal("keep-alive did not notice the lease is gone")
	}
	var ce *client.CommittedError
	if !errors.As(ka.Err(), &ce) || ce.Code != messages.CodeStaleEpoch {
		t.Fatalf("keep-alive error %v, want stale_epoch", ka.Err())
	}
}

// ReserveWait waits out a busy resource and gets it when the holder lets go.
func TestReserveWaitGetsTheResourceWhenFreed(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, srv.URL)
	ctx := context.Background()
	if _, err := c.CreateResource(ctx, "seat"); err != nil {
		t.Fatal(err)
	}
	first, err := c.Reserve(ctx, client.ReserveRequest{Holder: "a", TTL: 400 * time.Millisecond, Members: []*messages.Member{client.Resource("seat")}})
	if err != nil || !first.OK() {
		t.Fatalf("reserve: %v", err)
	}
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	got, err := c.ReserveWait(wctx, client.ReserveRequest{Holder: "b", TTL: time.Second, Members: []*messages.Member{client.Resource("seat")}}, 0)
	if err != nil || !got.OK() || got.Lease.GetHolderId() != "b" {
		t.Fatalf("reserve wait: %v %+v", err, got)
	}
	if waited := time.Since(start); waited < 300*time.Millisecond {
		t.Fatalf("granted after %v, before the first lease's deadline", waited)
	}
}

// An active lease with a keep-alive stays active while KeepAlive renews it, and moves
// to revoking (not released: its holder may still use the GPU) once renewals stop.
func TestActiveLeaseKeepAlive(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, srv.URL)
	ctx := context.Background()
	if _, err := c.CreateResource(ctx, "gpu"); err != nil {
		t.Fatal(err)
	}
	// The keep-alive is long enough that a renewal delayed by a busy machine's fsync (a few
	// hundred ms under the full test run) still lands inside it.
	const keepAlive = 1500 * time.Millisecond
	res, err := c.Reserve(ctx, client.ReserveRequest{Holder: "sched", Activate: true, KeepAlive: keepAlive,
		Members: []*messages.Member{client.Resource("gpu")}})
	if err != nil || !res.OK() || res.Lease.GetKeepaliveSlots() == 0 {
		t.Fatalf("reserve: %v %+v", err, res)
	}
	ka := c.KeepAlive(ctx, "sched", res.Fence(), keepAlive)
	time.Sleep(2 * keepAlive)
	if ka.Context().Err() != nil {
		t.Fatalf("lost while renewed: %v", ka.Err())
	}
	ka.Stop()
	time.Sleep(2 * keepAlive)
	got, err := c.GetLease(ctx, res.Fence().LeaseID)
	if err != nil || got.Lease.GetState() != messages.StateRevoking {
		t.Fatalf("after the keep-alive stopped: %v %+v", err, got.Lease)
	}
}

// BenchmarkClaimCycle is a worker fleet's cycle over NATS against a real Holdfast (8
// shards, every write fsynced, events published): claim the next work shard of one of
// eight runs of 256, checkpoint it, hand it back. One op is one cycle (three writes);
// parallel clients: -cpu sets GOMAXPROCS, and 32 goroutines per proc run.
func BenchmarkClaimCycle(b *testing.B) {
	srv := testserver.Start(b)
	c := newClient(b, srv.URL)
	ctx := context.Background()
	const runs = 8
	for r := 0; r < runs; r++ {
		var shards []*messages.WorkSpec
		for i := 0; i < 256; i++ {
			shards = append(shards, client.Shard(fmt.Sprintf("w%03d", i), nil, nil))
		}
		if res, err := c.CreateRun(ctx, fmt.Sprintf("run%d", r), shards); err != nil || !res.OK() {
			b.Fatalf("create run: %v %+v", err, res)
		}
	}
	var n atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := n.Add(1)
		holder := fmt.Sprintf("w%d", i)
		run := fmt.Sprintf("run%d", i%runs)
		for pb.Next() {
			res, err := c.Claim(ctx, holder, run, "", time.Minute)
			if err != nil || !res.OK() {
				b.Errorf("claim: %v %+v", err, res)
				return
			}
			if r, err := c.Checkpoint(ctx, holder, res.Fence(), []byte("k"), []byte("t")); err != nil || !r.OK() {
				b.Errorf("checkpoint: %v %+v", err, r)
				return
			}
			if r, err := c.Release(ctx, holder, res.Fence()); err != nil || !r.OK() {
				b.Errorf("release: %v %+v", err, r)
				return
			}
		}
	})
}

// A real service advertises its slot length both ways, alike.
func TestSlotLengthOfARealService(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, srv.URL)
	ctx := context.Background()
	d, err := c.SlotLength(ctx)
	st, serr := c.ClusterStatus(ctx, "")
	if err != nil || serr != nil || d != 10*time.Millisecond || st.Slot != d {
		t.Fatalf("SlotLength %v %v, cluster.status slot %v %v; want 10ms", d, err, st, serr)
	}
}
