package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/cluster"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/internal/natstest"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/messages"
)

// Three nodes started with three sets of flags serve the first node's settings: the
// first records its own in the cluster bucket, the others adopt them and say so, so every
// shard's journal carries one shape whichever node journals it, before and after a
// failover. `holdfast cluster configure` (cluster.UpdateSettings) changes them for every
// node while they serve: new requests meet the new limits at once, the new bound is
// journaled, and what was acknowledged stays.
func TestClusterNodesServeTheFirstNodesSettings(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	ctx := context.Background()
	nats_ := natstest.Start(t, 1)
	const shards = 3
	flags := map[string]func(*kernel.Config){
		"a": func(k *kernel.Config) { k.MaxTTLMillis, k.MaxBundle, k.MaxResources = 3_600_000, 8, 50 },
		"b": func(k *kernel.Config) {
			k.MaxTTLMillis, k.MaxBundle, k.MaxResources, k.HistoryWindowSlots = 60_000, 2, 2, 1
		},
		"c": func(k *kernel.Config) { k.MaxTTLMillis, k.MaxBundle, k.MaxResources = 120_000, 3, 3 },
	}
	nodes, logs := map[string]*Server{}, map[string]*syncWriter{}
	for _, name := range []string{"a", "b", "c"} {
		cfg := testConfig(t.TempDir())
		cfg.Shards, cfg.NATSURL, cfg.Node, cfg.Journal = shards, nats_.URL(), name, JournalJetStream
		cfg.OwnershipTTL, cfg.MetricsListen = time.Second, ""
		flags[name](&cfg.Kernel)
		logs[name] = &syncWriter{w: &strings.Builder{}}
		cfg.Logger = slog.New(slog.NewTextHandler(logs[name], nil))
		s, err := Start(ctx, cfg)
		if err != nil {
			t.Fatalf("node %s: %v", name, err)
		}
		nodes[name] = s
		defer s.Shutdown(ctx)
	}
	for name, want := range map[string]bool{"a": false, "b": true, "c": true} {
		if got := strings.Contains(logs[name].String(), "serving the cluster's settings, not this node's flags"); got != want {
			t.Fatalf("node %s logged the difference: %v, want %v:\n%s", name, got, want, logs[name].String())
		}
	}
	if !strings.Contains(logs["b"].String(), "max_ttl_ms 3600000 (not 60000)") {
		t.Fatalf("node b's line does not name the setting:\n%s", logs["b"].String())
	}
	waitBalanced(t, nodes["a"], 3)
	cl := connectClient(t, nodes["b"].URL())
	keys := keysPerShard(shards)

	// Every shard, whichever node serves it: node a's limits and bound.
	fences := map[uint32]client.Fence{}
	for k, key := range keys {
		var members []*messages.Member
		for i := 0; i < 5; i++ {
			id := fmt.Sprintf("%s/r%d", key, i)
			if r, err := cl.CreateResource(ctx, id); err != nil || !r.OK() {
				t.Fatalf("shard %d: create %s: %v %+v", k, id, err, r)
			}
			members = append(members, client.Resource(id))
		}
		r, err := cl.Reserve(ctx, client.ReserveRequest{Holder: "h", Members: members, TTL: 50 * time.Minute})
		if err != nil || !r.OK() {
			t.Fatalf("shard %d: a 50-minute bundle of 5: %v %+v", k, err, r)
		}
		fences[k] = r.Fence()
	}

	// Node a dies: its shards are served by b and c, with the journal's settings.
	nodes["a"].crash()
	waitBalanced(t, nodes["b"], 2)
	for k, key := range keys {
		id := fmt.Sprintf("%s/r5", key)
		if r, err := cl.CreateResource(ctx, id); err != nil || !r.OK() {
			t.Fatalf("shard %d after the failover: create a sixth resource: %v %+v", k, err, r)
		}
		if r, err := cl.Reserve(ctx, client.ReserveRequest{Holder: "h", Members: []*messages.Member{client.Resource(id)}, TTL: 50 * time.Minute}); err != nil || !r.OK() {
			t.Fatalf("shard %d after the failover: a 50-minute reserve: %v %+v", k, err, r)
		}
	}

	// The history window is the cluster's (node a's ten minutes), not b's one slot: a
	// lease released on any shard stays readable.
	for k, key := range keys {
		r, err := cl.Reserve(ctx, client.ReserveRequest{Holder: "w", Members: []*messages.Member{client.Resource(key + "/r4")}, TTL: time.Minute})
		if err != nil || r.Code != messages.CodeResourceBusy {
			t.Fatalf("shard %d: %v %+v", k, err, r)
		}
		id := fmt.Sprintf("%s/h", key)
		if r, err := cl.CreateResource(ctx, id); err != nil || !r.OK() {
			t.Fatalf("shard %d: %v %+v", k, err, r)
		}
		held, err := cl.Reserve(ctx, client.ReserveRequest{Holder: "w", Members: []*messages.Member{client.Resource(id)}, TTL: time.Minute})
		if err != nil || !held.OK() {
			t.Fatalf("shard %d: %v %+v", k, err, held)
		}
		if r, err := cl.Release(ctx, "w", held.Fence()); err != nil || !r.OK() {
			t.Fatalf("shard %d: release: %v %+v", k, err, r)
		}
		time.Sleep(300 * time.Millisecond)
		if l, err := cl.GetLease(ctx, held.Fence().LeaseID); err != nil || !l.OK() || l.Lease.GetState() != "released" {
			t.Fatalf("shard %d: a released lease 300 ms later: %v %+v", k, err, l)
		}
	}

	// The shard count is fixed when the cluster is created: a node with another refuses
	// to start, naming it.
	other := testConfig(t.TempDir())
	other.Shards, other.NATSURL, other.Node, other.Journal = shards+1, nats_.URL(), "d", JournalJetStream
	other.OwnershipTTL, other.MetricsListen = time.Second, ""
	if s, err := Start(ctx, other); err == nil {
		s.Shutdown(ctx)
		t.Fatal("a node with --shards 4 joined a cluster of 3 shards")
	} else if !strings.Contains(err.Error(), "--shards 3") {
		t.Fatalf("the refusal does not name the setting: %v", err)
	}

	// The operator lowers the cluster's max ttl and resource bound.
	_, js := natstest.Connect(t, nats_.URL())
	kv, err := js.KeyValue(ctx, cluster.NamesFor(contract.DefaultPrefix).Bucket())
	if err != nil {
		t.Fatal(err)
	}
	cur, err := cluster.LoadSettings(ctx, kv)
	if err != nil {
		t.Fatal(err)
	}
	next := cur
	next.Limits.MaxTTLMillis, next.Shape.MaxResources = 30_000, 4
	if _, err := cluster.UpdateSettings(ctx, kv, next, cur.Shape.Version); err != nil {
		t.Fatal(err)
	}
	if _, err := cluster.UpdateSettings(ctx, kv, next, cur.Shape.Version); err == nil {
		t.Fatal("an update expecting a revision already replaced went through")
	}
	deadline := time.Now().Add(20 * time.Second)
	for k, key := range keys {
		for {
			r, err := cl.Reserve(ctx, client.ReserveRequest{Holder: "g", Members: []*messages.Member{client.Resource(key + "/r9")}, TTL: time.Minute})
			var def *client.DefiniteError
			if errors.As(err, &def) && def.Code == messages.CodeTTLOutOfRange {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("shard %d: a one-minute reserve after the max ttl went to 30s: %v %+v", k, err, r)
			}
			time.Sleep(50 * time.Millisecond)
		}
		for {
			r, err := cl.CreateResource(ctx, fmt.Sprintf("%s/x%d", key, time.Now().UnixNano()))
			if err == nil && r.Code == messages.CodeResourceTableFull {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("shard %d: a create after the bound went to 4 (it holds 6): %v %+v", k, err, r)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if l, err := cl.GetLease(ctx, fences[k].LeaseID); err != nil || !l.OK() || len(l.Lease.GetMembers()) != 5 || l.Lease.GetState() != "reserved" {
			t.Fatalf("shard %d: the 50-minute bundle after the change: %v %+v", k, err, l)
		}
	}
}

// keysPerShard returns a placement key of tenant default on each shard.
func keysPerShard(shards uint32) map[uint32]string {
	keys := map[uint32]string{}
	for i := 0; len(keys) < int(shards); i++ {
		key := fmt.Sprintf("k%d", i)
		if _, ok := keys[contract.ShardOf("default", key, shards)]; !ok {
			keys[contract.ShardOf("default", key, shards)] = key
		}
	}
	return keys
}
