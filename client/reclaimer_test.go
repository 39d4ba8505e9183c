package client_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/internal/testserver"
	"github.com/holdfast/holdfast/messages"
)

// The reclaimer returns what a dead holder held: an active lease whose keep-alive lapsed
// (revoking, reason keepalive_lapsed) is reclaimed once the grace has passed — not
// before — and its resource can be taken again; a lease an operator revoked is left to
// the operator. Started again, it finds the lapse already handled.
func TestReclaimerReclaimsLapsedKeepAlives(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, srv.URL)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, r := range []string{"gpu0", "gpu1"} {
		if res, err := c.CreateResource(ctx, r); err != nil || !res.OK() {
			t.Fatalf("create %s: %v %+v", r, err, res)
		}
	}
	dead, err := c.Reserve(ctx, client.ReserveRequest{Holder: "trainer-1", Activate: true, KeepAlive: 200 * time.Millisecond,
		Members: []*messages.Member{client.Resource("gpu0")}})
	if err != nil || !dead.OK() {
		t.Fatalf("reserve: %v %+v", err, dead)
	}
	revoked, err := c.Reserve(ctx, client.ReserveRequest{Holder: "trainer-2", Activate: true, KeepAlive: time.Hour,
		Members: []*messages.Member{client.Resource("gpu1")}})
	if err != nil || !revoked.OK() {
		t.Fatalf("reserve: %v %+v", err, revoked)
	}
	if res, err := c.Revoke(ctx, revoked.Fence().LeaseID); err != nil || !res.OK() {
		t.Fatalf("revoke: %v %+v", err, res)
	}

	const grace = 700 * time.Millisecond
	var mu sync.Mutex
	var decisions []client.ReclaimDecision
	rc, err := c.NewReclaimer(client.ReclaimerConfig{Grace: grace, OnDecision: func(d client.ReclaimDecision) {
		mu.Lock()
		decisions = append(decisions, d)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- rc.Run(ctx) }()

	// No renewal comes: the keep-alive lapses, the lease goes revoking, and after the
	// grace the reclaimer reclaims it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(decisions)
		mu.Unlock()
		if n > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no decision; stats %+v", rc.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	d := decisions[0]
	mu.Unlock()
	if d.Outcome != "reclaimed" || d.LeaseID != dead.Fence().LeaseID || d.LSN == 0 {
		t.Fatalf("decision %+v", d)
	}
	if since := time.Since(d.Lapsed); since < grace {
		t.Fatalf("reclaimed %v after the lapse, before the grace of %v", since, grace)
	}
	got, err := c.GetLease(ctx, dead.Fence().LeaseID)
	if err != nil || got.Lease.GetState() != messages.StateRevoked {
		t.Fatalf("the lapsed lease after the reclaimer: %v %+v", err, got.Lease)
	}
	if res, err := c.Reserve(ctx, client.ReserveRequest{Holder: "trainer-3", TTL: time.Minute,
		Members: []*messages.Member{client.Resource("gpu0")}}); err != nil || !res.OK() {
		t.Fatalf("gpu0 after the reclaim: %v %+v", err, res)
	}
	got, err = c.GetLease(ctx, revoked.Fence().LeaseID)
	if err != nil || got.Lease.GetState() != messages.StateRevoking {
		t.Fatalf("the operator's revoke after the reclaimer: %v %+v", err, got.Lease)
	}
	if st := rc.Stats(); st.Seen != 1 || st.Reclaimed != 1 || st.Skipped != 1 || st.Pending != 0 {
		t.Fatalf("stats %+v", st)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}

	// A second reclaimer replays the lapse and finds it handled.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	again := make(chan client.ReclaimDecision, 1)
	rc2, _ := c.NewReclaimer(client.ReclaimerConfig{Grace: grace, OnDecision: func(d client.ReclaimDecision) { again <- d }})
	go func() { _ = rc2.Run(ctx2) }()
	select {
	case d := <-again:
		if d.Outcome != "gone" && d.Outcome != "reclaimed" {
			t.Fatalf("replayed decision %+v", d)
		}
		// The operation id is the lease's: the reclaim is not executed twice.
		if got, err := c.GetLease(ctx2, dead.Fence().LeaseID); err != nil || got.Lease.GetState() != messages.StateRevoked {
			t.Fatalf("after the replay: %+v", got.Lease)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the restarted reclaimer decided nothing; stats %+v", rc2.Stats())
	}
}
