//go:build unix

package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/messages"
)

// A bundle across shards whose shards two different nodes of a three-node cluster own,
// with the node of the step's shard killed (the process ends at once, nothing flushed)
// exactly at each step of the protocol: at the home after its begin is sequenced, at
// the participant after its prepare is durable and before it votes, at the home with
// every vote in, at the home once it answered (committing in parallel, its commit not
// durable: the next owner prepares the bundle again and commits it), after the commit is
// durable, at the participant after it applied the
// commit's mirror, at the home after the lease's release is durable and before the
// participant is told, and at the home once the participant marked its part ending,
// before any free is journaled or sent. After the failover, the client's retries with the same
// operation_id get one lease holding both members (never half, never two), a read of
// each member through any node names it, and its release frees both.
func TestClusterBundleKilledAtEveryStep(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster fault test")
	}
	sc := startStepCluster(t)
	cl, ctx := sc.cl, context.Background()
	for i, step := range actors.BundleSteps {
		// A home shard and a participant shard with different owners, and a resource on each.
		owners, home, part := sc.homeAndPart()
		a, b := keyOnShard(t, home, sc.shards)+fmt.Sprintf("/a%d", i), keyOnShard(t, part, sc.shards)+fmt.Sprintf("/b%d", i)
		sc.create(a, b)
		victimShard := home
		if step == actors.StepPrepared || step == actors.StepMirrored {
			victimShard = part
		}
		victim := sc.nodes[owners[victimShard]]
		req := client.ReserveRequest{Holder: "vm", TTL: 10 * time.Minute, Members: []*messages.Member{client.Resource(a), client.Resource(b)}}
		op := client.WithOperationID(fmt.Sprintf("start-%d", i))
		ends := step == actors.StepEnding || step == actors.StepFreeing // the kill comes with the release
		if !ends {
			sc.arm(victim, step, victimShard)
		}
		lease := reserveUntilAnswered(t, cl, req, op)
		if ends {
			sc.arm(victim, step, victimShard)
			if r, err := cl.Release(ctx, "vm", lease.Fence(), client.WithOperationID(fmt.Sprintf("stop-%d", i))); err != nil || !r.OK() {
				t.Fatalf("%s: release: %v %+v", step, err, r)
			}
		}
		sc.killed(victim, step)
		if again := reserveUntilAnswered(t, cl, req, op); again.Fence() != lease.Fence() {
			t.Fatalf("%s: the retry answered lease %+v, the first answer %+v", step, again.Fence(), lease.Fence())
		}
		if !ends {
			for _, id := range []string{a, b} {
				if g, err := cl.GetResource(ctx, id); err != nil || g.Resource.GetCurrentLeaseId() != lease.Lease.GetLeaseId() {
					t.Fatalf("%s: member %s names lease %q, the bundle is %s (%v)", step, id, g.Resource.GetCurrentLeaseId(), lease.Lease.GetLeaseId(), err)
				}
			}
			if r, err := cl.Release(ctx, "vm", lease.Fence(), client.WithOperationID(fmt.Sprintf("stop-%d", i))); err != nil || !r.OK() {
				t.Fatalf("%s: release: %v %+v", step, err, r)
			}
		}
		sc.freed(step, a, b)
		t.Logf("%s: node %s killed at shard %d; the bundle %s was whole, its retry the same lease, its release freed both",
			step, victim.name, victimShard, lease.Lease.GetLeaseId())
		sc.restart(victim)
	}
}

// reserveUntilAnswered sends req until it is granted, through retries and failovers, for
// up to a minute; a definite refusal fails the test (nothing else holds its members).
func reserveUntilAnswered(t *testing.T, cl *client.Client, req client.ReserveRequest, op client.WriteOption) *client.LeaseResult {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; {
		r, err := cl.Reserve(context.Background(), req, op)
		if err == nil && r.OK() {
			return r
		}
		if err == nil {
			t.Fatalf("reserve refused: %+v", r)
		}
		if time.Now().After(deadline) {
			t.Fatalf("reserve not answered within a minute: %v", err)
		}
	}
}

// balancedOwners waits until every shard has one of nodes as its owner and every node owns
// one at least, and returns each shard's owner.
func balancedOwners(t *testing.T, cl *client.Client, nodes map[string]*clusterNode) []string {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st, err := cl.ClusterStatus(context.Background(), "")
		if err == nil && st.OK() {
			owners := make([]string, len(st.Shards))
			serving := map[string]bool{}
			known := true
			for k, sh := range st.Shards {
				owners[k] = sh.GetOwner()
				serving[owners[k]] = true
				known = known && nodes[owners[k]] != nil // not "" (none) or "?" (unknown)
			}
			if known && len(serving) == len(nodes) {
				return owners
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cluster did not spread its shards over %d nodes: %v", len(nodes), err)
		}
	}
}

// keyOnShard is a placement key of the default tenant on shard k.
func keyOnShard(t *testing.T, k, shards uint32) string {
	for i := 0; i < 10000; i++ {
		if key := fmt.Sprintf("key%d", i); contract.ShardOf(client.DefaultTenant, key, shards) == k {
			return key
		}
	}
	t.Fatalf("no key on shard %d", k)
	return ""
}
