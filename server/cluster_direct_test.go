package server

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/internal/natstest"
)

// Direct routing: a client of a cluster sends what it can place straight to the shard's
// owner, so no node forwards it; a client without it is forwarded. A request sent to the
// wrong owner's subject (a shard that moved after the client placed it) is forwarded on
// and answered, not refused.
func TestClusterDirectRouting(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	ctx := context.Background()
	cl := natstest.Start(t, 3)
	const shards = 4
	var nodes []*Server
	for i, srv := range cl.Servers {
		s := clusterNode(t, srv.ClientURL(), fmt.Sprintf("n%d", i+1), shards, 1)
		defer s.Shutdown(ctx)
		nodes = append(nodes, s)
	}
	owners := waitBalanced(t, nodes[0], len(nodes))
	forwards := func() float64 {
		sum := 0.0
		for _, s := range nodes {
			sum += metricValue(t, s, "holdfast_forwarded_requests_total")
		}
		return sum
	}
	direct := connectClient(t, cl.Servers[0].ClientURL())
	ids := make([]string, 24)
	for i := range ids {
		ids[i] = fmt.Sprintf("seat-%d", i)
		if _, err := direct.CreateResource(ctx, ids[i]); err != nil {
			t.Fatal(err)
		}
	}
	// The client learns the routing in the background: within a few seconds a round
	// of reads goes without a single forward.
	getAll := func(c *client.Client) {
		t.Helper()
		for _, id := range ids {
			r, err := c.GetResource(ctx, id)
			if err != nil || r.Code != contract.NameOK {
				t.Fatalf("get %s: %v %+v", id, err, r)
			}
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		before := forwards()
		getAll(direct)
		if forwards() == before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a direct-routing client's reads are still forwarded")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// Without direct routing the same reads are forwarded (a node takes each on the
	// public subject; two in three are not its own).
	nc, err := nats.Connect(cl.Servers[0].ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	public, err := client.New(nc, client.WithoutDirectRouting(), client.WithTimeout(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	before := forwards()
	getAll(public)
	if forwards() == before {
		t.Fatal("no read of a client without direct routing was forwarded")
	}

	// A read of seat s sent to the subject of a shard another node owns.
	var id string
	var wrong uint32
	for _, candidate := range ids {
		k := contract.ShardOf(client.DefaultTenant, contract.PlacementKey(candidate), shards)
		for j := uint32(0); j < shards; j++ {
			if owners[j] != owners[k] {
				id, wrong = candidate, j
			}
		}
	}
	if id == "" {
		t.Fatalf("no two shards with different owners: %v", owners)
	}
	msg := nats.NewMsg(contract.ShardSubject(contract.DefaultPrefix, wrong))
	msg.Header.Set(contract.HeaderSubject, contract.Subject(contract.DefaultPrefix, client.DefaultTenant, "resource", "get"))
	msg.Data = []byte(fmt.Sprintf(`{"resource_id":%q}`, id))
	before = forwards()
	rep, err := nc.RequestMsg(msg, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Code     string `json:"code"`
		Resource struct {
			ResourceID string `json:"resource_id"`
		} `json:"resource"`
	}
	if err := json.Unmarshal(rep.Data, &got); err != nil || got.Code != "ok" || got.Resource.ResourceID != id {
		t.Fatalf("a read sent to the wrong owner answered %s (%v)", rep.Data, err)
	}
	if forwards() == before {
		t.Fatal("the misplaced read was not forwarded to its owner")
	}
}

// cluster.status names a node that has stopped renewing as lapsing until its key lapses,
// then as lost, holding no shard.
func TestClusterStatusShowsALapsingNode(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	ctx := context.Background()
	cl := natstest.Start(t, 1)
	nodes := map[string]*Server{}
	for _, name := range []string{"n1", "n2"} {
		s := clusterNode(t, cl.URL(), name, 2, 1, func(c *Config) { c.OwnershipTTL = 4 * time.Second })
		defer s.Shutdown(ctx)
		nodes[name] = s
	}
	waitBalanced(t, nodes["n1"], 2)
	c := connectClient(t, nodes["n1"].URL())
	status := func() map[string]string {
		t.Helper()
		r, err := c.ClusterStatus(ctx, "")
		if err != nil || !r.OK() {
			t.Fatalf("cluster.status: %v %+v", err, r)
		}
		out := map[string]string{}
		for _, n := range r.Nodes {
			switch {
			case n.GetLost() && len(n.GetShards()) == 0:
				out[n.GetNode()] = "lost"
			case n.GetLost():
				out[n.GetNode()] = "lost, serving"
			case n.GetLapsing():
				out[n.GetNode()] = "lapsing"
			default:
				out[n.GetNode()] = "live"
			}
		}
		return out
	}
	if st := status(); len(st) != 2 || st["n1"] != "live" || st["n2"] != "live" {
		t.Fatalf("two live nodes: %v", st)
	}
	nodes["n2"].crash()
	sawLapsing := false
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		st := status()
		if st["n1"] != "live" {
			t.Fatalf("the live node is shown %s: %v", st["n1"], st)
		}
		sawLapsing = sawLapsing || st["n2"] == "lapsing"
		if st["n2"] == "lost" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("n2 not shown lost 15 s after it stopped: %v", st)
		}
	}
	if !sawLapsing {
		t.Fatal("n2 went from live to lost without being shown lapsing")
	}
}
