// Command operator shows revoke and reclaim: an operator takes a resource
// away from a holder that no longer answers, and fencing keeps the old
// holder from doing harm.
//
//	go run ./examples/operator --server nats://127.0.0.1:4222
//
// A worker holds "<cluster>/primary" (active) and writes to a store that
// checks fences (client.FenceGuard). The operator revokes the lease: it moves
// to revoking, its epoch moves on, and the store learns the new fence. The
// old worker's writes and its release are now stale. The resource stays
// unavailable until the operator reclaims it — reuse is late, never early —
// and then a new worker takes over with a newer fence.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/examples/internal/example"
	"github.com/holdfast/holdfast/messages"
)

func main() { example.Main("operator", run) }

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := example.NewFlags("operator", "default")
	cluster := fs.String("cluster", "db-"+client.NewOperationID()[:8], "cluster id (the placement key)")
	hf, ctx, done, err := fs.Start(ctx, args, time.Minute)
	if err != nil {
		return err
	}
	defer done()

	primary := *cluster + "/primary"
	res, err := hf.CreateResource(ctx, primary)
	if err != nil {
		return err
	}
	if res.Code != messages.CodeOK && res.Code != messages.CodeAlreadyExists {
		return res.Err()
	}

	// The downstream store: it admits a write only with a fence at least as
	// new as any it has seen for the key.
	var store client.FenceGuard

	w1, err := hf.Reserve(ctx, client.ReserveRequest{Holder: "worker-1", Members: []*messages.Member{client.Resource(primary)}, Activate: true})
	if err != nil {
		return err
	}
	if err := w1.Err(); err != nil {
		return fmt.Errorf("worker-1 takes the primary: %w", err)
	}
	oldFence := w1.Fence()
	if err := store.Admit(primary, oldFence); err != nil {
		return fmt.Errorf("worker-1's write: %w", err)
	}
	fmt.Fprintf(out, "worker-1 is primary: lease %s, writes with fence %s\n", w1.Lease.LeaseId, oldFence)

	// worker-1 stops answering. The operator revokes its lease.
	rv, err := hf.Revoke(ctx, w1.Lease.LeaseId)
	if err != nil {
		return err
	}
	if err := rv.Err(); err != nil {
		return fmt.Errorf("revoke: %w", err)
	}
	store.Observe(primary, rv.Fence()) // e.g. learned from the lease.revoking event
	fmt.Fprintf(out, "operator revokes %s: %s, fence now %s\n", rv.Lease.LeaseId, rv.Lease.State, rv.Fence())

	// worker-1 wakes up: its writes and its release carry a stale fence.
	if err := store.Admit(primary, oldFence); !errors.Is(err, client.ErrStaleFence) {
		return fmt.Errorf("stale write admitted: %v", err)
	}
	fmt.Fprintf(out, "worker-1 writes with %s: refused by the store (stale: %v)\n", oldFence, oldFence.IsStale(rv.Fence()))
	rel, err := hf.Release(ctx, "worker-1", oldFence)
	if err != nil {
		return err
	}
	if rel.Code != messages.CodeStaleEpoch {
		return fmt.Errorf("worker-1's release with the old epoch: got %s, want stale_epoch", rel.Code)
	}
	fmt.Fprintf(out, "worker-1 releases with %s: %s\n", oldFence, rel.Code)

	// Until the operator reclaims, nobody gets the primary.
	w2, err := hf.Reserve(ctx, client.ReserveRequest{Holder: "worker-2", Members: []*messages.Member{client.Resource(primary)}, Activate: true})
	if err != nil {
		return err
	}
	if w2.Code != messages.CodeResourceBusy {
		return fmt.Errorf("worker-2 before the reclaim: got %s, want resource_busy", w2.Code)
	}
	fmt.Fprintf(out, "worker-2 before the reclaim: %s\n", w2.Code)

	rc, err := hf.Reclaim(ctx, w1.Lease.LeaseId)
	if err != nil {
		return err
	}
	if err := rc.Err(); err != nil {
		return fmt.Errorf("reclaim: %w", err)
	}
	fmt.Fprintf(out, "operator reclaims %s: %s\n", rc.Lease.LeaseId, rc.Lease.State)
	again, err := hf.Reclaim(ctx, w1.Lease.LeaseId)
	if err != nil {
		return err
	}
	if again.Code != messages.CodeInvalidState {
		return fmt.Errorf("second reclaim (new operation): got %s, want invalid_state", again.Code)
	}

	w2, err = hf.Reserve(ctx, client.ReserveRequest{Holder: "worker-2", Members: []*messages.Member{client.Resource(primary)}, Activate: true})
	if err != nil {
		return err
	}
	if err := w2.Err(); err != nil {
		return fmt.Errorf("worker-2 after the reclaim: %w", err)
	}
	newFence := w2.Fence()
	if err := store.Admit(primary, newFence); err != nil {
		return fmt.Errorf("worker-2's write: %w", err)
	}
	if c, err := newFence.Compare(rv.Fence()); err != nil || c <= 0 {
		return fmt.Errorf("new fence %s not newer than %s", newFence, rv.Fence())
	}
	fmt.Fprintf(out, "worker-2 is primary: lease %s, writes with fence %s (newer than %s)\n", w2.Lease.LeaseId, newFence, oldFence)
	if err := store.Admit(primary, oldFence); !errors.Is(err, client.ErrStaleFence) {
		return fmt.Errorf("stale write admitted after the takeover: %v", err)
	}
	return nil
}
