package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nats.go/micro"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/cluster"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/internal/natstest"
	"github.com/holdfast/holdfast/messages"
)

func connectClient(t *testing.T, url string, opts ...client.Option) *client.Client {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	opts = append([]client.Option{client.WithTimeout(2 * time.Second), client.WithRetry(20, 50*time.Millisecond, 500*time.Millisecond)}, opts...)
	cl, err := client.New(nc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// The reported double grant: a second process pointed at the NATS of a file-journal
// server refuses to serve its prefix, naming the node that serves it, also once that
// node has stopped.
func TestSecondProcessOnAFileJournalPrefixIsRefused(t *testing.T) {
	ctx := context.Background()
	first := testConfig(t.TempDir())
	first.Node = "alpha"
	a, err := Start(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Shutdown(ctx)
	for _, journal := range []string{JournalFile, JournalJetStream} {
		second := testConfig(t.TempDir())
		second.NATSURL, second.Node, second.Journal = a.URL(), "beta", journal
		second.MetricsListen = ""
		b, err := Start(ctx, second)
		if err == nil {
			b.Shutdown(ctx)
			t.Fatalf("journal %s: a second process served the prefix", journal)
		}
		if !strings.Contains(err.Error(), `"alpha"`) && journal == JournalFile {
			t.Fatalf("refusal does not name the serving node: %v", err)
		}
	}
	// The same data directory starts again (a restart of the same node).
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// clusterNode starts one node of a jetstream-journal cluster; tune changes its
// configuration before it starts.
func clusterNode(t *testing.T, url, name string, shards uint32, replicas int, tune ...func(*Config)) *Server {
	t.Helper()
	cfg := testConfig(t.TempDir())
	cfg.Shards, cfg.NATSURL, cfg.Node, cfg.Journal, cfg.Replicas = shards, url, name, JournalJetStream, replicas
	cfg.OwnershipTTL = time.Second
	cfg.MetricsListen = ""
	cfg.SnapshotEvery = 5 // failover loads a snapshot from the object store, then the journal's tail
	cfg.Logger = failureLog(t, name)
	for _, f := range tune {
		f(&cfg)
	}
	s, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("node %s: %v", name, err)
	}
	return s
}

// failureLog is a node's logger whose lines the test prints if it fails: the cluster's
// own account of claims, losses and loads is what explains a slow failover.
func failureLog(t *testing.T, node string) *slog.Logger {
	var logs strings.Builder
	w := &syncWriter{w: &logs}
	t.Cleanup(func() {
		if t.Failed() {
			w.mu.Lock()
			defer w.mu.Unlock()
			t.Logf("node %s logged:\n%s", node, logs.String())
		}
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// snapshotAt waits up to wait for shard k's snapshot at lsn, with its journal compacted
// at least once (below the snapshot before, kept to fall back on). A snapshot falls every
// SnapshotEvery entries unless one is still being written, so the lsn it lands on is not
// known in advance.
func snapshotAt(js jetstream.JetStream, k uint32, lsn uint64, wait time.Duration) bool {
	ctx := context.Background()
	deadline := time.Now().Add(wait)
	for {
		var snap, compacted bool
		if obs, err := js.ObjectStore(ctx, "HOLDFAST_SNAP"); err == nil {
			_, err := obs.GetInfo(ctx, fmt.Sprintf("shard-%d/%020d", k, lsn))
			snap = err == nil
		}
		compacted = journalCompacted(ctx, js, k)
		if snap && compacted {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// journalCompacted says whether shard k's journal was compacted: its stream's first
// message is gone, or (the journal on its subject of the events stream) its first
// message left is not its first owner's claim at lsn 0.
func journalCompacted(ctx context.Context, js jetstream.JetStream, k uint32) bool {
	if stream, err := js.Stream(ctx, cluster.NamesFor(contract.DefaultPrefix).JournalStream(k)); err == nil {
		info, err := stream.Info(ctx)
		return err == nil && info.State.FirstSeq > 1
	}
	stream, err := js.Stream(ctx, contract.StreamName)
	if err != nil {
		return false
	}
	subject := cluster.NamesFor(contract.DefaultPrefix).JournalSubject(k)
	m, err := stream.GetMsg(ctx, 1, jetstream.WithGetMsgSubject(subject))
	return err == nil && !strings.HasPrefix(m.Header.Get("Holdfast-Last"), "0.")
}

// waitBalanced waits until every shard has an owner and counts per node differ by at
// most one, among the nodes given.
func waitBalanced(t *testing.T, s *Server, nodes int) []string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		live, owners, err := s.Owners(context.Background())
		if err == nil && len(live) == nodes {
			count := map[string]int{}
			ok := true
			for _, o := range owners {
				if o == "" || o == "?" {
					ok = false
				}
				count[o]++
			}
			lo, hi := len(owners), 0
			for _, n := range live {
				lo, hi = min(lo, count[n]), max(hi, count[n])
			}
			if ok && hi-lo <= 1 && len(count) == nodes {
				return owners
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("not balanced over %d nodes: live %v owners %v err %v", nodes, live, owners, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Three Holdfast nodes on a JetStream cluster of three NATS servers: one owner per shard,
// any node answers for any shard, a seat is granted once whichever nodes are asked,
// and when the owner of the seat's shard dies another node serves it with every
// acknowledged write, and idempotent retries keep their first outcome.
func TestClusterServesOneOwnerPerShardAndFailsOver(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	for _, replicas := range []int{1, 3} {
		t.Run(fmt.Sprintf("R%d", replicas), func(t *testing.T) {
			ctx := context.Background()
			nats_ := natstest.Start(t, 3)
			const shards = 4
			nodes := map[string]*Server{}
			// R3 keeps its journals in the events stream, R1 a stream per journal.
			layout := map[int]string{1: LayoutStreams, 3: LayoutFeed}[replicas]
			for _, name := range []string{"n1", "n2", "n3"} {
				nodes[name] = clusterNode(t, nats_.URL(), name, shards, replicas, func(c *Config) { c.JournalLayout = layout })
				defer nodes[name].Shutdown(ctx)
			}
			owners := waitBalanced(t, nodes["n1"], 3)
			c1 := connectClient(t, nodes["n1"].URL())
			st, err := c1.ClusterStatus(ctx, "seat-7")
			if err != nil || !st.OK() || len(st.Nodes) != 3 || len(st.Shards) != shards || st.Shard == nil ||
				*st.Shard != contract.ShardOf("default", "seat-7", shards) {
				t.Fatalf("cluster.status: %v %+v", err, st)
			}
			for k, sh := range st.Shards {
				if sh.GetOwner() != owners[k] {
					t.Fatalf("cluster.status says shard %d is on %q, the bucket says %q", k, sh.GetOwner(), owners[k])
				}
			}
			c2 := connectClient(t, nodes["n2"].URL(), client.WithoutDirectRouting()) // its requests are forwarded

			const seat = "seat-7"
			if r, err := c1.CreateResource(ctx, seat); err != nil || !r.OK() {
				t.Fatalf("create: %v %+v", err, r)
			}
			res, err := c1.Reserve(ctx, client.ReserveRequest{Holder: "h1", Members: []*messages.Member{client.Resource(seat)}, TTL: time.Hour},
				client.WithOperationID("reserve-h1"))
			if err != nil || !res.OK() {
				t.Fatalf("reserve h1: %v %+v", err, res)
			}
			if r, err := c2.Reserve(ctx, client.ReserveRequest{Holder: "h2", Members: []*messages.Member{client.Resource(seat)}, TTL: time.Hour}); err != nil || r.Code != messages.CodeResourceBusy {
				t.Fatalf("second reserve through another node: %v %+v", err, r)
			}

			// lease.list gathers every shard's part, wherever it is served.
			for _, other := range []string{"seat-a", "seat-b", "seat-c", "seat-d", "seat-e"} {
				if r, err := c2.CreateResource(ctx, other); err != nil || !r.OK() {
					t.Fatalf("create %s: %v %+v", other, err, r)
				}
				if r, err := c2.Reserve(ctx, client.ReserveRequest{Holder: "h1", Members: []*messages.Member{client.Resource(other)}, TTL: time.Hour}); err != nil || !r.OK() {
					t.Fatalf("reserve %s: %v %+v", other, err, r)
				}
			}
			if l, err := c2.ListLeases(ctx, "h1", 0); err != nil || !l.OK() || len(l.Leases) != 6 {
				t.Fatalf("lease.list across nodes: %v %+v", err, l)
			}
			// Enough entries on the seat's shard for snapshots and purges of its journal,
			// the last of them in a snapshot: the shard goes quiet with its whole journal
			// covered by its newest snapshot — the case where a compaction that purged the
			// stream empty once left the next owner unable to find where the journal ended.
			shard := contract.ShardOf("default", seat, shards)
			_, js := natstest.Connect(t, nats_.URL())
			for i := 0; ; i++ {
				id := fmt.Sprintf("seat-7/%d", i)
				r, err := c1.CreateResource(ctx, id)
				if err != nil || !r.OK() {
					t.Fatalf("create %s: %v %+v", id, err, r)
				}
				if i >= 12 && snapshotAt(js, shard, r.LSN, time.Second) {
					break
				}
				if i > 60 {
					t.Fatalf("shard %d: no snapshot ever covered its last entry", shard)
				}
			}

			// Each node's metrics: the shards it serves add up, and requests were forwarded.
			owned, forwarded := 0.0, 0.0
			for _, n := range nodes {
				owned += metricValue(t, n, "holdfast_cluster_shards_owned")
				forwarded += metricValue(t, n, "holdfast_forwarded_requests_total")
			}
			if owned != shards || forwarded == 0 {
				t.Fatalf("metrics: %v shards owned over the nodes, %v requests forwarded", owned, forwarded)
			}
			// $SRV.STATS over the nodes counts each client request once, where it came in,
			// forwarded or not: eight reserves, one of them rejected (resource_busy is an
			// answer, not a rejection).
			if m, err := c2.Conn().Request("holdfast.v1.default.lease.reserve", []byte("{"), 5*time.Second); err != nil ||
				m.Header.Get(micro.ErrorHeader) != "invalid_request" {
				t.Fatalf("a malformed reserve: %v %+v", err, m)
			}
			if reqs, errs := endpointStats(t, nodes["n1"].URL(), "lease_reserve", 3); reqs != 8 || errs != 1 {
				t.Fatalf("$SRV.STATS lease_reserve over the nodes: %d requests, %d errors; want 8 and 1", reqs, errs)
			}

			// Kill the owner of the seat's shard.
			victim := owners[shard]
			survivor := crashNode(nodes, victim)
			cs := connectClient(t, survivor.URL())
			start := time.Now()
			var got *client.LeaseResult
			for {
				got, err = cs.GetLease(ctx, res.Fence().LeaseID)
				if err == nil && got.OK() {
					break
				}
				if time.Since(start) > 30*time.Second {
					t.Fatalf("lease not readable after failover: %v %+v", err, got)
				}
				time.Sleep(50 * time.Millisecond)
			}
			t.Logf("R%d: shard %d readable again %v after its owner %s died", replicas, shard, time.Since(start).Round(time.Millisecond), victim)
			if got.Lease.GetHolderId() != "h1" || got.Fence() != res.Fence() {
				t.Fatalf("after failover: %+v", got.Lease)
			}
			again, err := cs.Reserve(ctx, client.ReserveRequest{Holder: "h1", Members: []*messages.Member{client.Resource(seat)}, TTL: time.Hour},
				client.WithOperationID("reserve-h1"))
			if err != nil || !again.OK() || again.Fence() != res.Fence() {
				t.Fatalf("retry after failover executed again or failed: %v %+v", err, again)
			}
			if r, err := cs.Reserve(ctx, client.ReserveRequest{Holder: "h3", Members: []*messages.Member{client.Resource(seat)}, TTL: time.Hour}); err != nil || r.Code != messages.CodeResourceBusy {
				t.Fatalf("seat granted twice after failover: %v %+v", err, r)
			}
			if r, err := cs.Release(ctx, "h1", res.Fence()); err != nil || !r.OK() {
				t.Fatalf("release after failover: %v %+v", err, r)
			}
			// The new owner recovered from a snapshot in the object store, and the journal
			// below the snapshot was purged.
			obs, err := js.ObjectStore(ctx, "HOLDFAST_SNAP")
			if err != nil {
				t.Fatal(err)
			}
			lctx, cancel := context.WithTimeout(ctx, 5*time.Second) // List waits on its context alone
			objs, _ := obs.List(lctx)
			cancel()
			snaps := 0
			for _, o := range objs {
				if strings.HasPrefix(o.Name, fmt.Sprintf("shard-%d/", shard)) {
					snaps++
				}
			}
			if snaps == 0 || !journalCompacted(ctx, js, shard) {
				t.Fatalf("shard %d: %d snapshots, its journal compacted: %v", shard, snaps, journalCompacted(ctx, js, shard))
			}
			waitBalanced(t, survivor, 2)
			// The survivors name the lost node and what it held.
			var held []uint32
			for k, o := range owners {
				if o == victim {
					held = append(held, uint32(k))
				}
			}
			st, err = cs.ClusterStatus(ctx, "")
			if err != nil || !st.OK() || len(st.Nodes) != 3 {
				t.Fatalf("cluster.status after the loss: %v %+v", err, st)
			}
			lost := st.Nodes[2]
			if !lost.GetLost() || lost.GetNode() != victim || !slices.Equal(lost.GetHeld(), held) || len(lost.GetShards()) != 0 {
				t.Fatalf("cluster.status names %+v, want %s lost holding %v", lost, victim, held)
			}
		})
	}
}

// crashNode kills node victim (crash: no hand-over) and returns another node of nodes.
func crashNode(nodes map[string]*Server, victim string) *Server {
	nodes[victim].crash()
	for name, s := range nodes {
		if name != victim {
			return s
		}
	}
	return nil
}

// metricValue sums a metric's samples in a node's registry.
// endpointStats sums one endpoint's requests and errors over the $SRV.STATS answers of
// the nodes (want of them) reachable at url.
func endpointStats(t *testing.T, url, endpoint string, want int) (requests, errors int) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	inbox := nats.NewInbox()
	sub, err := nc.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.PublishRequest("$SRV.STATS.holdfast", inbox, nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < want; i++ {
		m, err := sub.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatalf("$SRV.STATS: %d of %d answers: %v", i, want, err)
		}
		var st micro.Stats
		if err := json.Unmarshal(m.Data, &st); err != nil {
			t.Fatal(err)
		}
		for _, e := range st.Endpoints {
			if e.Name == endpoint {
				requests += e.NumRequests
				errors += e.NumErrors
			}
		}
	}
	return requests, errors
}

func metricValue(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	mfs, err := s.metrics.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	return sum
}

// On a NATS deployment, a prefix served from one node's data directory stays that
// node's after it has stopped: a second process for the prefix, of either journal kind,
// refuses and names it; the node itself starts again on its directory.
func TestFileJournalPrefixStaysItsNodesAfterItStops(t *testing.T) {
	ctx := context.Background()
	url := natstest.Start(t, 1).URL()
	dir := t.TempDir()
	first := testConfig(dir)
	first.NATSURL, first.Node, first.MetricsListen = url, "alpha", ""
	a, err := Start(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for _, journal := range []string{JournalFile, JournalJetStream} {
		second := testConfig(t.TempDir())
		second.NATSURL, second.Node, second.Journal, second.MetricsListen = url, "beta", journal, ""
		if b, err := Start(ctx, second); err == nil {
			b.Shutdown(ctx)
			t.Fatalf("journal %s: a second process served alpha's prefix after alpha stopped", journal)
		} else if !strings.Contains(err.Error(), `"alpha"`) && journal == JournalFile {
			t.Fatalf("refusal does not name the node: %v", err)
		}
	}
	a, err = Start(ctx, first)
	if err != nil {
		t.Fatalf("alpha on its own data directory: %v", err)
	}
	a.Shutdown(ctx)
}
