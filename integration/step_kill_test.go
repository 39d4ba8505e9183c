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

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/internal/natstest"
	"github.com/holdfast/holdfast/messages"
)

// stepCluster is the three-node cluster of the tests that kill a node exactly at a step
// of the protocol across shards (bundles, imports): its nodes, a client that retries
// through failovers, and its shard count (clusterNode's --shards).
type stepCluster struct {
	t      *testing.T
	nodes  map[string]*clusterNode
	cl     *client.Client
	shards uint32
}

func startStepCluster(t *testing.T) *stepCluster {
	ns := natstest.Start(t, 3).URL()
	sc := &stepCluster{t: t, nodes: map[string]*clusterNode{}, shards: 4}
	for i := 1; i <= 3; i++ {
		name := fmt.Sprintf("n%d", i)
		n := &clusterNode{name: name, dir: filepath.Join(t.TempDir(), "data"), url: ns, t: t, hooks: t.TempDir(), layout: "feed"}
		n.start()
		sc.nodes[name] = n
	}
	t.Cleanup(func() {
		for _, n := range sc.nodes {
			n.signal(syscall.SIGKILL)
		}
	})
	nc, err := nats.Connect(ns, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	if sc.cl, err = client.New(nc, client.WithTimeout(2*time.Second), client.WithRetry(40, 100*time.Millisecond, time.Second)); err != nil {
		t.Fatal(err)
	}
	return sc
}

// homeAndPart waits for every node to own a shard and picks a home shard and a
// participant shard with different owners.
func (sc *stepCluster) homeAndPart() (owners []string, home, part uint32) {
	owners = balancedOwners(sc.t, sc.cl, sc.nodes)
	for home = 0; home < sc.shards; home++ {
		for part = 0; part < sc.shards && owners[part] == owners[home]; part++ {
		}
		if part < sc.shards {
			break
		}
	}
	return owners, home, part
}

// create makes the resources ids.
func (sc *stepCluster) create(ids ...string) {
	for _, id := range ids {
		if r, err := sc.cl.CreateResource(context.Background(), id, client.WithOperationID("create-"+id)); err != nil || !r.OK() {
			sc.t.Fatalf("create %s: %v %+v", id, err, r)
		}
	}
}

// arm makes victim kill itself at step on shard.
func (sc *stepCluster) arm(victim *clusterNode, step string, shard uint32) {
	if err := os.WriteFile(filepath.Join(victim.hooks, "bundle_step"), []byte(fmt.Sprintf("%s %d", step, shard)), 0o644); err != nil {
		sc.t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // the hooks are read every 20 ms
}

// killed waits for victim to have killed itself at step.
func (sc *stepCluster) killed(victim *clusterNode, step string) {
	select {
	case <-victim.exited:
	case <-time.After(30 * time.Second):
		sc.t.Fatalf("%s: node %s was not killed at the step:\n%s", step, victim.name, victim.logTail())
	}
}

// restart disarms victim and starts it again.
func (sc *stepCluster) restart(victim *clusterNode) {
	if err := os.Remove(filepath.Join(victim.hooks, "bundle_step")); err != nil {
		sc.t.Fatal(err)
	}
	victim.start()
}

// freed waits for every resource of ids to read available.
func (sc *stepCluster) freed(step string, ids ...string) {
	for _, id := range ids {
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			g, err := sc.cl.GetResource(context.Background(), id)
			if err == nil && g.Resource.GetState() == messages.StateAvailable {
				break
			}
			if time.Now().After(deadline) {
				sc.t.Fatalf("%s: member %s not freed: %v %+v", step, id, err, g)
			}
		}
	}
}
