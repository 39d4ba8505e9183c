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
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/internal/natstest"
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
		// A home shard and a participant shard with different owners, and a resource on each.
		var home, part uint32
		for home = 0; home < shards; home++ {
			for part = 0; part < shards && owners[part] == owners[home]; part++ {
			}
			if part < shards {
				break
			}
		}
		a, b := keyOnShard(t, home, shards)+fmt.Sprintf("/a%d", i), keyOnShard(t, part, shards)+fmt.Sprintf("/b%d", i)
		for _, id := range []string{a, b} {
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
		req := client.ReserveRequest{Holder: "vm", TTL: 10 * time.Minute, Members: []*messages.Member{client.Resource(a), client.Resource(b)}}
		op := client.WithOperationID(fmt.Sprintf("start-%d", i))
		ends := step == actors.StepEnding || step == actors.StepFreeing // the kill comes with the release
		if !ends {
			arm()
		}
		lease := reserveUntilAnswered(t, cl, req, op)
		if ends {
			arm()
			if r, err := cl.Release(ctx, "vm", lease.Fence(), client.WithOperationID(fmt.Sprintf("stop-%d", i))); err != nil || !r.OK() {
				t.Fatalf("%s: release: %v %+v", step, err, r)
			}
		}
		select {
		case <-victim.exited:
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: node %s was not killed at the step:\n%s", step, victim.name, victim.logTail())
		}
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
		for _, id := range []string{a, b} {
			for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				g, err := cl.GetResource(ctx, id)
				if err == nil && g.Resource.GetState() == messages.StateAvailable {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: member %s not freed by the release: %v %+v", step, id, err, g)
				}
			}
		}
		t.Logf("%s: node %s killed at shard %d; the bundle %s was whole, its retry the same lease, its release freed both",
			step, victim.name, victimShard, lease.Lease.GetLeaseId())
		if err := os.Remove(filepath.Join(victim.hooks, "bundle_step")); err != nil {
			t.Fatal(err)
		}
		victim.start()
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
