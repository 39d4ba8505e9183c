package bridge

import (
	"testing"

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
