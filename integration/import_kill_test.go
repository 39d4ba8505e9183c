//go:build unix

package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/client"
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
	sc := startStepCluster(t)
	cl, ctx := sc.cl, context.Background()
	for i, step := range actors.BundleSteps {
		owners, home, part := sc.homeAndPart()
		a := keyOnShard(t, home, sc.shards) + fmt.Sprintf("/ia%d", i)
		b, c := keyOnShard(t, part, sc.shards)+fmt.Sprintf("/ib%d", i), keyOnShard(t, part, sc.shards)+fmt.Sprintf("/ic%d", i)
		sc.create(a, b, c)
		victimShard := home
		if step == actors.StepPrepared || step == actors.StepMirrored {
			victimShard = part
		}
		victim := sc.nodes[owners[victimShard]]
		leases := []client.ImportLease{
			{Holder: "vm0", TTL: 10 * time.Minute, Members: []*messages.Member{client.Resource(a), client.Resource(b)}},
			{Holder: "vm1", TTL: 10 * time.Minute, Members: []*messages.Member{client.Resource(c)}},
		}
		op := client.WithOperationID(fmt.Sprintf("import-%d", i))
		ends := step == actors.StepEnding || step == actors.StepFreeing // the kill comes with lease 0's release
		if !ends {
			sc.arm(victim, step, victimShard)
		}
		got := importUntilAnswered(t, cl, leases, op)
		if ends {
			sc.arm(victim, step, victimShard)
			if r, err := cl.Release(ctx, "vm0", got.Leases[0].Fence(), client.WithOperationID(fmt.Sprintf("stop-%d", i))); err != nil || !r.OK() {
				t.Fatalf("%s: release: %v %+v", step, err, r)
			}
		}
		sc.killed(victim, step)
		again := importUntilAnswered(t, cl, leases, op)
		for j := range got.Leases {
			if again.Leases[j].Fence() != got.Leases[j].Fence() {
				t.Fatalf("%s: the retry answered lease %d as %+v, the first answer %+v", step, j, again.Leases[j].Fence(), got.Leases[j].Fence())
			}
		}
		if !ends {
			for id, j := range map[string]int{a: 0, b: 0, c: 1} {
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
		sc.freed(step, a, b, c)
		t.Logf("%s: node %s killed at shard %d; the import's leases %s and %s were whole, its retry the same leases",
			step, victim.name, victimShard, got.Leases[0].GetLeaseId(), got.Leases[1].GetLeaseId())
		sc.restart(victim)
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
