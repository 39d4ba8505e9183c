// Command watcher follows Holdfast's events: live, from a core NATS
// subscription, and replayed from the JetStream stream HOLDFAST_EVENTS.
//
//	go run ./examples/watcher --server nats://127.0.0.1:4222
//	go run ./examples/watcher --follow      # then keep printing live events
//
// It makes a few changes of its own (create a resource, reserve, activate,
// release), prints the events they cause as they happen, then reads the same
// lease's history back from the stream.
package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/examples/internal/example"
	"github.com/holdfast/holdfast/messages"
)

func main() { example.Main("watcher", run) }

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := example.NewFlags("watcher", "default")
	lamp := fs.String("resource", "lab-"+client.NewOperationID()[:8]+"/lamp", "the resource to play with")
	follow := fs.Bool("follow", false, "after the demo, print every live event of the tenant until interrupted")
	hf, demo, done, err := fs.Start(ctx, args, time.Minute)
	if err != nil {
		return err
	}
	defer done()

	// Subscribe first, so that no event of the changes below is missed.
	live, err := hf.Watch(demo, client.WatchOptions{})
	if err != nil {
		return err
	}
	defer live.Stop()

	leaseID, err := makeChanges(demo, hf, *lamp)
	if err != nil {
		return err
	}

	// Live: our resource's creation, then our lease's life.
	fmt.Fprintln(out, "live:")
	want := []string{messages.EventResourceCreated, messages.EventLeaseReserved, messages.EventLeaseActivated, messages.EventLeaseReleased}
	var got []string
	for len(got) < len(want) {
		ev, err := next(demo, live)
		if err != nil {
			return err
		}
		if !ours(ev, *lamp, leaseID) {
			continue
		}
		fmt.Fprintln(out, "  "+describe(ev))
		got = append(got, ev.GetEvent())
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		return fmt.Errorf("live events %v, want %v", got, want)
	}

	// Replay: the lease's history, read back from the stream.
	fmt.Fprintln(out, "replay from the stream:")
	replay, err := hf.Watch(demo, client.WatchOptions{FromStart: true, Filter: "lease.>"})
	if err != nil {
		return err
	}
	defer replay.Stop()
	var seqs []uint64
	for len(seqs) < 3 {
		ev, err := next(demo, replay)
		if err != nil {
			return err
		}
		if ev.GetLease().GetLeaseId() != leaseID {
			continue
		}
		fmt.Fprintf(out, "  seq=%d %s\n", ev.Sequence, describe(ev))
		seqs = append(seqs, ev.Sequence)
	}
	if !(seqs[0] < seqs[1] && seqs[1] < seqs[2]) {
		return fmt.Errorf("stream sequences %v not increasing", seqs)
	}
	replay.Stop()

	if *follow {
		fmt.Fprintln(out, "following live events (Ctrl-C to stop):")
		for {
			ev, err := next(ctx, live)
			if err != nil {
				return nil // interrupted
			}
			fmt.Fprintln(out, "  "+describe(ev))
		}
	}
	return nil
}

// makeChanges creates the resource, reserves it, activates the lease and
// releases it; it returns the lease id.
func makeChanges(ctx context.Context, hf *client.Client, resource string) (string, error) {
	cr, err := hf.CreateResource(ctx, resource)
	if err != nil {
		return "", err
	}
	if err := cr.Err(); err != nil {
		return "", fmt.Errorf("create %s: %w", resource, err)
	}
	res, err := hf.Reserve(ctx, client.ReserveRequest{Holder: "watcher-demo", Members: []*messages.Member{client.Resource(resource)}, TTL: 30 * time.Second})
	if err != nil {
		return "", err
	}
	if err := res.Err(); err != nil {
		return "", fmt.Errorf("reserve: %w", err)
	}
	act, err := hf.Activate(ctx, "watcher-demo", res.Fence())
	if err != nil {
		return "", err
	}
	if err := act.Err(); err != nil {
		return "", fmt.Errorf("activate: %w", err)
	}
	rel, err := hf.Release(ctx, "watcher-demo", act.Fence())
	if err != nil {
		return "", err
	}
	if err := rel.Err(); err != nil {
		return "", fmt.Errorf("release: %w", err)
	}
	return res.Lease.LeaseId, nil
}

func next(ctx context.Context, w *client.Watcher) (client.Event, error) {
	select {
	case ev, ok := <-w.Events():
		if !ok {
			if err := w.Err(); err != nil {
				return client.Event{}, err
			}
			return client.Event{}, context.Canceled
		}
		return ev, nil
	case <-ctx.Done():
		return client.Event{}, fmt.Errorf("waiting for events: %w", ctx.Err())
	}
}

func ours(ev client.Event, resource, leaseID string) bool {
	return ev.GetResource().GetResourceId() == resource || ev.GetLease().GetLeaseId() == leaseID
}

func describe(ev client.Event) string {
	s := fmt.Sprintf("%-16s shard=%d lsn=%d slot=%d", ev.GetEvent(), ev.GetShard(), ev.GetLsn(), ev.GetSlot())
	if l := ev.GetLease(); l != nil {
		return s + fmt.Sprintf(" lease=%s state=%s fence=%s", l.LeaseId, l.State, client.FenceOf(l))
	}
	if r := ev.GetResource(); r != nil {
		return s + fmt.Sprintf(" resource=%s state=%s", r.ResourceId, r.State)
	}
	return s
}
