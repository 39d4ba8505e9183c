//go:build unix

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/internal/natstest"
	"github.com/holdfast/holdfast/messages"
)

// An import across shards whose shards two different nodes of a three-node cluster own —
// lease 0 over a member of each, lease 1 over a member of the participant only — with the
// node of the step's shard killed exactly at each step of the protocol, as
// TestClusterBundleKilledAtEveryStep does to a bundle. After the failover the client's
// retries with the same operation_id get the same two leases (both granted, never one),
// a read of each member through any node names its lease, and the releases free them.
func TestClusterImportKilledAtEveryStep(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster fault test")
	}
	ns := natstest.Start(t, 3)
	nodes := map[string]*clusterNode{}
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("n%d", i)
		n := &clusterNode{name: name, dir: filepath.Join(t.TempDir(), "data"), url: ns.URL(), t: t, hooks: t.TempDir(), layout: "feed"}
		n.start()
		nodes[name] = n
	}
	defer func() {
		for _, n := range nodes {
			n.signal(syscall.SIGKILL)
		}
	}()
	nc, err := nats.Connect(ns.URL(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cl, err := client.New(nc, client.WithTimeout(2*time.Second), client.WithRetry(40, 100*time.Millisecond, time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const shards = 4 // clusterNode's --shards

	for i, step := range []string{actors.StepBegun, actors.StepPrepared, actors.StepVoted, actors.StepAnswered, actors.StepCommitted,
		actors.StepMirrored, actors.StepEnding, actors.StepFreeing} {
		owners := balancedOwners(t, cl, nodes)
		var home, part uint32
		for home = 0; home < shards; home++ {
			for part = 0; part < shards && owners[part] == owners[home]; part++ {
			}
			if part < shards {
				break
			}
		}
		a := keyOnShard(t, home, shards) + fmt.Sprintf("/ia%d", i)
		b, c := keyOnShard(t, part, shards)+fmt.Sprintf("/ib%d", i), keyOnShard(t, part, shards)+fmt.Sprintf("/ic%d", i)
		for _, id := range []string{a, b, c} {
			if r, err := cl.CreateResource(ctx, id, client.WithOperationID("create-"+id)); err != nil || !r.OK() {
				t.Fatalf("create %s: %v %+v", id, err, r)
			}
		}
		victimShard := home
		if step == actors.StepPrepared || step == actors.StepMirrored {
			victimShard = part
		}
		victim := nodes[owners[victimShard]]
		arm := func() {
			if err := os.WriteFile(filepath.Join(victim.hooks, "bundle_step"), []byte(fmt.Sprintf("%s %d", step, victimShard)), 0o644); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // the hooks are read every 20 ms
		}
		leases := []client.ImportLease{
			{Holder: "vm0", TTL: 10 * time.Minute, Members: []*messages.Member{client.Resource(a), client.Resource(b)}},
			{Holder: "vm1", TTL: 10 * time.Minute, Members: []*messages.Member{client.Resource(c)}},
		}
		op := client.WithOperationID(fmt.Sprintf("import-%d", i))
		ends := step == actors.StepEnding || step == actors.StepFreeing // the kill comes with lease 0's release
		if !ends {
			arm()
		}
		got := importUntilAnswered(t, cl, leases, op)
		if ends {
			arm()
			if r, err := cl.Release(ctx, "vm0", got.Leases[0].Fence(), client.WithOperationID(fmt.Sprintf("stop-%d", i))); err != nil || !r.OK() {
				t.Fatalf("%s: release: %v %+v", step, err, r)
			}
		}
		select {
		case <-victim.exited:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: node %s was not killed at the step:\n%s", step, victim.name, victim.logTail())
		}
		again := importUntilAnswered(t, cl, leases, op)
		for j := range got.Leases {
			if again.Leases[j].Fence() != got.Leases[j].Fence() {
				t.Fatalf("%s: the retry answered lease %d as %+v, the first answer %+v", step, j, again.Leases[j].Fence(), got.Leases[j].Fence())
			}
		}
		holds := map[string]int{a: 0, b: 0, c: 1}
		if !ends {
			for id, j := range holds {
				if g, err := cl.GetResource(ctx, id); err != nil || g.Resource.GetCurrentLeaseId() != got.Leases[j].GetLeaseId() {
					t.Fatalf("%s: member %s names lease %q, the import's lease %d is %s (%v)", step, id, g.Resource.GetCurrentLeaseId(), j, got.Leases[j].GetLeaseId(), err)
				}
			}
			if r, err := cl.Release(ctx, "vm0", got.Leases[0].Fence(), client.WithOperationID(fmt.Sprintf("stop-%d", i))); err != nil || !r.OK() {
				t.Fatalf("%s: release: %v %+v", step, err, r)
			}
		}
		if r, err := cl.Release(ctx, "vm1", got.Leases[1].Fence(), client.WithOperationID(fmt.Sprintf("stop1-%d", i))); err != nil || !r.OK() {
			t.Fatalf("%s: release of lease 1: %v %+v", step, err, r)
		}
		for id := range holds {
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				g, err := cl.GetResource(ctx, id)
				if err == nil && g.Resource.GetState() == messages.StateAvailable {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: member %s not freed by the releases: %v %+v", step, id, err, g)
				}
			}
		}
		t.Logf("%s: node %s killed at shard %d; the import's leases %s and %s were whole, its retry the same leases",
			step, victim.name, victimShard, got.Leases[0].GetLeaseId(), got.Leases[1].GetLeaseId())
		if err := os.Remove(filepath.Join(victim.hooks, "bundle_step")); err != nil {
			t.Fatal(err)
		}
		victim.start()
	}
}

// importUntilAnswered sends the import until it is granted, through retries and
// failovers, for up to a minute; a definite refusal fails the test.
func importUntilAnswered(t *testing.T, cl *client.Client, leases []client.ImportLease, op client.WriteOption) *client.ImportResult {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		r, err := cl.Import(context.Background(), leases, op)
		if err == nil && r.OK() && len(r.Leases) == len(leases) {
			return r
		}
		if err == nil {
			t.Fatalf("import refused: %+v", r)
		}
		if time.Now().After(deadline) {
			t.Fatalf("import not answered within a minute: %v", err)
		}
	}
}
