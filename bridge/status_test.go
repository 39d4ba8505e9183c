package bridge

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/contract"
)

// A single process answers cluster.status as one node serving every shard, with the
// position each has applied, and maps a placement key to its shard in the caller's tenant.
func TestClusterStatusOfOneProcess(t *testing.T) {
	s := startStack(t, startNATS(t), stackOptions{shards: 3, cfg: func(c *Config) { c.Node = "solo" }})
	created := s.req("t1", "resource.create", `{"operation_id":"o1","resource_id":"gpu/0"}`)
	if created.code != "ok" {
		t.Fatalf("create: %s", created.raw)
	}
	r := s.req("t1", "cluster.status", `{"placement_key":"gpu/0"}`)
	if r.code != "ok" || r.typ.GetOutcome() != "committed" {
		t.Fatalf("status: %s", r.raw)
	}
	if len(r.typ.Nodes) != 1 || r.typ.Nodes[0].GetNode() != "solo" || len(r.typ.Nodes[0].GetShards()) != 3 {
		t.Fatalf("nodes: %s", r.raw)
	}
	want := contract.ShardOf("t1", "gpu", 3)
	if r.typ.Shard == nil || r.typ.GetShard() != want {
		t.Fatalf("shard of the key: %s, want %d", r.raw, want)
	}
	if len(r.typ.Shards) != 3 {
		t.Fatalf("shards: %s", r.raw)
	}
	for k, sh := range r.typ.Shards {
		if sh.GetShard() != uint32(k) || sh.GetOwner() != "solo" {
			t.Fatalf("shard %d: %s", k, r.raw)
		}
		if uint32(k) == want && sh.GetAppliedLsn() == 0 {
			t.Fatalf("the written shard shows no applied position: %s", r.raw)
		}
	}
	if r := s.req("t1", "cluster.status", `{}`); r.code != "ok" || r.typ.Shard != nil {
		t.Fatalf("status without a key: %s", r.raw)
	}
	if r := s.req("t1", "cluster.status", `{"placement_key":"bad key"}`); r.code != "invalid_request" {
		t.Fatalf("bad key: %s", r.raw)
	}
}

// cluster.status is answered once: its call's timer, stopped by the answer, never adds a
// second reply (a timeout) nor gives its in-flight slot back twice.
func TestClusterStatusIsAnsweredOnce(t *testing.T) {
	s := startStack(t, startNATS(t), stackOptions{shards: 2, cfg: func(c *Config) { c.Timing = requestBound(200 * time.Millisecond) }})
	inbox := nats.NewInbox()
	sub, err := s.client.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.client.PublishRequest("holdfast.v1.t.cluster.status", inbox, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := sub.NextMsg(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if m, err := sub.NextMsg(600 * time.Millisecond); err == nil {
		t.Fatalf("a second reply after the bridge's timeout: %s", m.Data)
	}
	if p, f := s.br.pending.Load(), s.br.inflight.Load(); p != 0 || f != 0 {
		t.Fatalf("pending %d, in flight %d after the answer; want 0 and 0", p, f)
	}
	for _, sp := range s.br.specs {
		if sp.verb == contract.VerbClusterStatus {
			if st := sp.stats.snapshot(); st.NumRequests != 1 || st.NumErrors != 0 {
				t.Fatalf("$SRV.STATS cluster_status: %+v", st)
			}
		}
	}
}
