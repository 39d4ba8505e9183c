// Command seats is a seat booking flow on Holdfast: a buyer holds seats for a
// few seconds while paying, then activates the hold (booked) or lets it
// expire, and the seats go back on sale.
//
//	go run ./examples/seats --server nats://127.0.0.1:4222
//
// Every seat of a show is a resource "<show>/<seat>": the show is the
// placement key, so seats of one show can be held together, all or nothing.
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

func main() { example.Main("seats", run) }

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := example.NewFlags("seats", "default")
	show := fs.String("show", "show-"+client.NewOperationID()[:8], "show id (the placement key of its seats)")
	holdTTL := fs.Duration("hold", 300*time.Millisecond, "how long the unpaid hold lasts")
	hf, ctx, done, err := fs.Start(ctx, args, time.Minute)
	if err != nil {
		return err
	}
	defer done()

	seat := func(s string) string { return *show + "/" + s }
	for _, s := range []string{"A1", "A2", "A3", "A4"} {
		res, err := hf.CreateResource(ctx, seat(s))
		if err != nil {
			return err
		}
		if res.Code != messages.CodeOK && res.Code != messages.CodeAlreadyExists {
			return res.Err()
		}
	}
	fmt.Fprintf(out, "show %s: seats A1-A4 on sale\n", *show)

	// Alice holds A1 and A2 together while she pays.
	alice, err := hf.Reserve(ctx, client.ReserveRequest{
		Holder:  "alice",
		Members: []*messages.Member{client.Resource(seat("A1")), client.Resource(seat("A2"))},
		TTL:     30 * time.Second,
	})
	if err != nil {
		return err
	}
	if err := alice.Err(); err != nil {
		return fmt.Errorf("alice's hold: %w", err)
	}
	fmt.Fprintf(out, "alice holds A1+A2: lease %s, fence %s\n", alice.Lease.LeaseId, alice.Fence())

	// Bob wants A2 and A3: A2 is held, so he gets neither (all or nothing).
	bob, err := hf.Reserve(ctx, client.ReserveRequest{
		Holder:  "bob",
		Members: []*messages.Member{client.Resource(seat("A3")), client.Resource(seat("A2"))},
		TTL:     30 * time.Second,
	})
	if err != nil {
		return err
	}
	if bob.Code != messages.CodeResourceBusy {
		return fmt.Errorf("bob's hold of A3+A2: got %s, want resource_busy", bob.Code)
	}
	a3, err := hf.GetResource(ctx, seat("A3"), client.MinLSN(bob.LSN))
	if err != nil {
		return err
	}
	if a3.Resource.GetState() != messages.StateAvailable {
		return fmt.Errorf("A3 is %s after bob's failed hold, want available", a3.Resource.GetState())
	}
	fmt.Fprintf(out, "bob wants A3+A2: %s, and A3 stays %s\n", bob.Code, a3.Resource.State)

	// Alice pays: activating the hold books the seats. The operation id makes
	// the call safe to repeat: a second send replays the first result.
	payOp := client.NewOperationID()
	booked, err := hf.Activate(ctx, "alice", alice.Fence(), client.WithOperationID(payOp))
	if err != nil {
		return err
	}
	if err := booked.Err(); err != nil {
		return fmt.Errorf("alice's payment: %w", err)
	}
	again, err := hf.Activate(ctx, "alice", alice.Fence(), client.WithOperationID(payOp))
	if err != nil {
		return err
	}
	if !again.OK() || !again.FromRetryCache || again.LSN != booked.LSN {
		return fmt.Errorf("repeated payment: code %s, from cache %v, lsn %d (first %d)", again.Code, again.FromRetryCache, again.LSN, booked.LSN)
	}
	fmt.Fprintf(out, "alice paid: lease %s is %s (a repeated payment replays lsn %d)\n", booked.Lease.LeaseId, booked.Lease.State, again.LSN)

	// Carol holds A3 but never pays: the hold expires, late but never early.
	carol, err := hf.Reserve(ctx, client.ReserveRequest{Holder: "carol", Members: []*messages.Member{client.Resource(seat("A3"))}, TTL: *holdTTL})
	if err != nil {
		return err
	}
	if err := carol.Err(); err != nil {
		return fmt.Errorf("carol's hold: %w", err)
	}
	fmt.Fprintf(out, "carol holds A3 for %v: lease %s\n", *holdTTL, carol.Lease.LeaseId)
	expired, err := waitForState(ctx, hf, carol.Lease.LeaseId, messages.StateExpired)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "carol's hold %s: epoch %d\n", expired.State, expired.LeaseEpoch)

	// Too late to pay: the old fence is stale now.
	late, err := hf.Activate(ctx, "carol", carol.Fence())
	if err != nil {
		return err
	}
	if late.Code != messages.CodeStaleEpoch && late.Code != messages.CodeLeaseExpired {
		return fmt.Errorf("carol's late payment: got %s, want stale_epoch", late.Code)
	}
	fmt.Fprintf(out, "carol pays late: %s\n", late.Code)

	// A3 is on sale again.
	dave, err := hf.Reserve(ctx, client.ReserveRequest{Holder: "dave", Members: []*messages.Member{client.Resource(seat("A3"))}, Activate: true})
	if err != nil {
		return err
	}
	if err := dave.Err(); err != nil {
		return fmt.Errorf("dave's booking: %w", err)
	}
	fmt.Fprintf(out, "dave books A3: lease %s is %s\n", dave.Lease.LeaseId, dave.Lease.State)
	return nil
}

// waitForState polls a lease until it reaches state.
func waitForState(ctx context.Context, hf *client.Client, leaseID, state string) (*messages.Lease, error) {
	for {
		res, err := hf.GetLease(ctx, leaseID)
		if err != nil {
			return nil, err
		}
		if err := res.Err(); err != nil {
			return nil, err
		}
		if res.Lease.GetState() == state {
			return res.Lease.Lease, nil
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(fmt.Errorf("lease %s still %s", leaseID, res.Lease.GetState()), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
