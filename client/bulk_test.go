package client_test

import (
	"context"
	"testing"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/internal/testserver"
	"github.com/holdfast/holdfast/messages"
)

// A hard delete of an instance through the service: 10,000 active leases under its owner
// label, revoked and reclaimed with limit 100, take at most 105 calls (⌈n / limit⌉ plus a
// small constant); a holder with nothing under the label is told so on its first call.
// (revoke_all without reclaim used to stick with count 0, more true past a few hundred.)
func TestHardDeleteOf10000LeasesEnds(t *testing.T) {
	srv := testserver.Start(t)
	c := newClient(t, srv.URL)
	ctx := context.Background()
	if r, err := c.CreateRange(ctx, "node1/ports", 1, 1<<20, ""); err != nil || !r.OK() {
		t.Fatalf("range: %v %+v", err, r)
	}
	const n, batch = 10000, 500
	owner := map[string]string{"owner_type": "instance", "owner_uuid": "5f1c2a9e-0b7d-4c1e-9a53-2d8f6e1b7c40"}
	for i := 0; i < n; i += batch {
		leases := make([]client.ImportLease, batch)
		for j := range leases {
			leases[j] = client.ImportLease{Holder: "nova", Activate: true, Labels: owner,
				Members: []*messages.Member{client.RangeValue("node1/ports", uint64(i+j+1))}}
		}
		if r, err := c.Import(ctx, leases); err != nil || !r.OK() {
			t.Fatalf("import %d: %v %+v", i, err, r)
		}
	}
	label := "owner_uuid=" + owner["owner_uuid"]
	if r, err := c.ReleaseAll(ctx, "stranger", label, 100); err != nil || !r.OK() || r.Count != 0 || r.More {
		t.Fatalf("release_all by a holder with nothing under the label: %v %+v", err, r)
	}
	// Revoke first, without reclaim: the revoking leases stay under the label, behind the
	// cursor-less scan the old code restarted from.
	calls, moved := 0, uint64(0)
	for more := true; more; calls++ {
		r, err := c.RevokeAll(ctx, label, 100, false)
		if err != nil || !r.OK() {
			t.Fatalf("revoke_all call %d: %v %+v", calls+1, err, r)
		}
		if r.Count == 0 && r.More {
			t.Fatalf("revoke_all call %d: count 0, more true", calls+1)
		}
		moved += r.Count
		more = r.More
		if calls > 105 {
			t.Fatalf("%d calls moved %d of %d", calls, moved, n)
		}
	}
	t.Logf("revoke_all: %d leases in %d calls of limit 100", moved, calls)
	if moved != n || calls > 105 {
		t.Fatalf("%d calls moved %d, want %d in at most 105", calls, moved, n)
	}
	calls, moved = 0, 0
	for more := true; more; calls++ {
		r, err := c.RevokeAll(ctx, label, 100, true)
		if err != nil || !r.OK() {
			t.Fatalf("reclaim call %d: %v %+v", calls+1, err, r)
		}
		moved += r.Count
		more = r.More
		if calls > 105 {
			t.Fatalf("%d reclaim calls freed %d of %d", calls, moved, n)
		}
	}
	if moved != n {
		t.Fatalf("reclaimed %d of %d", moved, n)
	}
	if r, err := c.GetRange(ctx, "node1/ports"); err != nil || r.Range.GetAllocated() != 0 {
		t.Fatalf("after the hard delete: %v %+v", err, r)
	}
}
