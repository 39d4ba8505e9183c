package bridge

import (
	"encoding/base64"
	"testing"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// A worker's round trip over the wire, in JSON: a run with two work shards (keys base64),
// claim next with its capacity hint, none_available with until when, a checkpoint, a
// split_residual, a complete that ends the claim, another tenant seeing nothing, and the
// run completed once its work is done or split.
func TestWorkCoordinationOverTheWire(t *testing.T) {
	s := startStack(t, startNATS(t), stackOptions{shards: 3})
	r := s.req("t", "run.create", map[string]any{"operation_id": "c1", "run_id": "crawl",
		"shards": []any{map[string]any{"name": "a", "start": b64("a"), "end": b64("m")},
			map[string]any{"name": "b", "start": b64("m")}}}).want(t, "ok")
	if r.str(t, "run", "status") != "active" || r.str(t, "run", "work") != "2" {
		t.Fatalf("run: %s", r.raw)
	}
	claim := s.req("t", "lease.reserve", map[string]any{"operation_id": "r1", "holder_id": "w1", "ttl_ms": 30000,
		"members": []any{map[string]any{"work": map[string]any{"run_id": "crawl"}}}}).want(t, "ok")
	lease := claim.str(t, "lease", "lease_id")
	if claim.str(t, "work", "name") != "a" || claim.str(t, "work", "start") != b64("a") ||
		claim.str(t, "capacity", "claimable") != "1" || claim.str(t, "lease", "members", 0, "work", "name") != "a" {
		t.Fatalf("claim: %s", claim.raw)
	}
	if claim.str(t, "work", "lease_id") != lease {
		t.Fatalf("the work shard names its claim: %s", claim.raw)
	}
	s.req("t", "lease.reserve", map[string]any{"operation_id": "r2", "holder_id": "w2", "ttl_ms": 60000,
		"members": []any{map[string]any{"work": map[string]any{"run_id": "crawl"}}}}).want(t, "ok")
	busy := s.req("t", "lease.reserve", map[string]any{"operation_id": "r3", "holder_id": "w3", "ttl_ms": 1000,
		"members": []any{map[string]any{"work": map[string]any{"run_id": "crawl"}}}}).want(t, "none_available")
	if busy.str(t, "earliest_deadline_slot") == "" || contains(string(busy.raw), "w1") {
		t.Fatalf("none_available: %s", busy.raw)
	}
	fence := map[string]any{"lease_id": lease, "holder_id": "w1", "lease_epoch": 1}
	with := func(m map[string]any) map[string]any {
		for k, v := range fence {
			m[k] = v
		}
		return m
	}
	s.req("t", "work.checkpoint", with(map[string]any{"operation_id": "k1"})).want(t, "cursor_missing_key")
	s.req("t", "work.checkpoint", with(map[string]any{"operation_id": "k2",
		"cursor": map[string]any{"last_key": b64("z")}})).want(t, "cursor_out_of_bounds")
	cp := s.req("t", "work.checkpoint", with(map[string]any{"operation_id": "k3",
		"cursor": map[string]any{"last_key": b64("c"), "token": b64("page=3")}})).want(t, "ok")
	if cp.str(t, "work", "cursor", "token") != b64("page=3") {
		t.Fatalf("checkpoint: %s", cp.raw)
	}
	res := s.req("t", "work.split_residual", with(map[string]any{"operation_id": "s1", "split_key": b64("h")})).want(t, "ok")
	if res.str(t, "children", 0, "name") != "a:r0" || res.str(t, "work", "end") != b64("h") {
		t.Fatalf("split_residual: %s", res.raw)
	}
	// Another tenant sees none of it.
	s.req("u", "work.get", map[string]any{"run_id": "crawl", "name": "a"}).want(t, "run_not_found")
	s.req("u", "work.checkpoint", with(map[string]any{"operation_id": "k4",
		"cursor": map[string]any{"last_key": b64("d")}})).want(t, "lease_not_found")
	done := s.req("t", "work.complete", with(map[string]any{"operation_id": "d1"})).want(t, "ok")
	if done.str(t, "work", "status") != "done" || done.str(t, "lease", "state") != "released" {
		t.Fatalf("complete: %s", done.raw)
	}
	s.req("t", "work.complete", with(map[string]any{"operation_id": "d1"})).want(t, "ok") // the retry
	s.req("t", "run.complete", map[string]any{"operation_id": "e1", "run_id": "crawl"}).want(t, "invalid_state")
	g := s.req("t", "work.get", map[string]any{"run_id": "crawl", "name": "a"}).want(t, "ok")
	if g.str(t, "work", "status") != "done" || g.str(t, "work", "children", 0) != "a:r0" {
		t.Fatalf("work.get: %s", g.raw)
	}
	s.req("t", "run.cancel", map[string]any{"operation_id": "e2", "run_id": "crawl", "reason": "enough"}).want(t, "ok")
	rg := s.req("t", "run.get", map[string]any{"run_id": "crawl"}).want(t, "ok")
	if rg.str(t, "run", "status") != "cancelled" || rg.str(t, "run", "reason") != "enough" {
		t.Fatalf("run.get: %s", rg.raw)
	}
	s.req("t", "run.create", map[string]any{"operation_id": "c2", "run_id": "a/b",
		"shards": []any{map[string]any{"name": "x"}}}).want(t, "invalid_request")
}

// A named claim of a work shard another lease holds is resource_busy, and its message
// names the work shard and run the request named, never the other holder.
func TestClaimOfAHeldWorkShardSaysSo(t *testing.T) {
	s := startStack(t, startNATS(t), stackOptions{shards: 1})
	s.req("t", "run.create", map[string]any{"operation_id": "c1", "run_id": "crawl",
		"shards": []any{map[string]any{"name": "a"}}}).want(t, "ok")
	named := []any{map[string]any{"work": map[string]any{"run_id": "crawl", "name": "a"}}}
	s.req("t", "lease.reserve", map[string]any{"operation_id": "r1", "holder_id": "w1", "ttl_ms": 30000, "members": named}).want(t, "ok")
	busy := s.req("t", "lease.reserve", map[string]any{"operation_id": "r2", "holder_id": "w2", "ttl_ms": 30000, "members": named}).want(t, "resource_busy")
	if msg := busy.str(t, "message"); msg != `members[0]: work shard "a" of run "crawl" is claimed by another lease` {
		t.Fatalf("message %q", msg)
	}
}
