package bridge

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The allocator endpoints end to end on a service of several shards (docs/api.md Part
// IV): the JSON forms of the requests and replies, the listings over every shard paged
// with cursors, the bulk verbs' fan-out, and tenants kept apart.
func TestAllocatorEndpoints(t *testing.T) {
	s := startStack(t, startNATS(t), stackOptions{shards: 4})
	s.req("t", "range.create", `{"operation_id":"c1","range_id":"n1/ports","first":30000,"last":30009,
		"excluded":[{"first":30000,"last":30000}],"static_band":{"first":30001,"last":30002},"format":"port"}`).want(t, "ok")
	r := s.req("t", "range.get", `{"range_id":"n1/ports"}`).want(t, "ok")
	if r.str(t, "range", "excluded") != "1" || r.str(t, "range", "format") != "port" || r.str(t, "range", "static_band", "first") != "30001" {
		t.Fatalf("range view: %s", r.raw)
	}
	s.req("t", "pool.create", `{"operation_id":"c2","pool_id":"n1/mem","capacity":10}`).want(t, "ok")

	// A lease with labels; "any" avoids the excluded value and the static band.
	r = s.req("t", "lease.reserve", `{"operation_id":"r1","holder_id":"nova","activate":true,
		"members":[{"range_id":"n1/ports"},{"pool_id":"n1/mem","quantity":2}],"labels":{"owner_uuid":"i1","owner_type":"vm"}}`).want(t, "ok")
	lease := r.str(t, "lease", "lease_id")
	if r.str(t, "lease", "members", 0, "value") != "30003" || r.str(t, "lease", "labels", "owner_uuid") != "i1" {
		t.Fatalf("reserve: %s", r.raw)
	}
	// allocated_at: the reserve's slot as a UTC time.
	if at, err := time.Parse(time.RFC3339Nano, r.str(t, "lease", "allocated_at")); err != nil || time.Since(at).Abs() > time.Minute {
		t.Fatalf("allocated_at %q (%v): %s", r.str(t, "lease", "allocated_at"), err, r.raw)
	}
	s.req("t", "lease.reserve", `{"operation_id":"r2","holder_id":"nova","members":[{"range_id":"n1/ports","value":"30000"}],"ttl_ms":1000}`).
		want(t, "value_excluded")
	s.req("t", "lease.reserve", `{"operation_id":"r3","holder_id":"nova","labels":{"-bad":"x"},"members":[{"range_id":"n1/ports"}],"ttl_ms":1000}`).
		want(t, "invalid_request")
	// Label values are free text within a bound, and select as they are.
	s.req("t", "lease.reserve", `{"operation_id":"r3b","holder_id":"nova","labels":{"note":"bad\u0007bell"},"members":[{"pool_id":"n1/mem","quantity":1}],"ttl_ms":1000}`).
		want(t, "invalid_request")
	r = s.req("t", "lease.reserve", `{"operation_id":"r3c","holder_id":"nova","labels":{"note":"web tier (blue), Zürich"},"members":[{"pool_id":"n1/mem","quantity":1}],"ttl_ms":60000}`).want(t, "ok")
	note := r.str(t, "lease", "lease_id")
	if r := s.req("t", "lease.list", `{"label":"note=web tier (blue), Zürich"}`).want(t, "ok"); r.str(t, "leases", 0, "lease_id") != note {
		t.Fatalf("lease.list by a free-text label: %s", r.raw)
	}
	s.req("t", "lease.release", fmt.Sprintf(`{"operation_id":"r3d","lease_id":%q,"holder_id":"nova","lease_epoch":1}`, note)).want(t, "ok")

	// Who holds 30003; another tenant sees no such range.
	r = s.req("t", "range.lookup", `{"range_id":"n1/ports","value":30003}`).want(t, "ok")
	if r.str(t, "value_state") != "held" || r.str(t, "lease", "lease_id") != lease || r.str(t, "applied_lsn") == "" {
		t.Fatalf("lookup: %s", r.raw)
	}
	if r := s.req("t", "range.lookup", `{"range_id":"n1/ports","value":30000}`).want(t, "ok"); r.str(t, "value_state") != "excluded" {
		t.Fatalf("lookup excluded: %s", r.raw)
	}
	s.req("u", "range.lookup", `{"range_id":"n1/ports","value":30003}`).want(t, "range_not_found")

	// Release by value: the holder's; a lease of several members only whole.
	s.req("t", "range.release", `{"operation_id":"v1","range_id":"n1/ports","value":30003,"holder_id":"nobody"}`).want(t, "holder_mismatch")
	r = s.req("t", "range.release", `{"operation_id":"v2","range_id":"n1/ports","value":30003,"holder_id":"nova"}`).want(t, "lease_has_other_members")
	if !contains(r.str(t, "message"), "whole_lease") {
		t.Fatalf("message: %s", r.raw)
	}
	s.req("t", "range.release", `{"operation_id":"v3","range_id":"n1/ports","value":30003,"holder_id":"nova","whole_lease":true}`).want(t, "ok")
	s.req("t", "range.release", `{"operation_id":"v4","range_id":"n1/ports","value":30003,"holder_id":"nova"}`).want(t, "value_free")

	// A late release by value never frees the next lease: the holder takes 30003 again
	// (a new lease, epoch 1 as the first had); the first lease's release, late, names its
	// lease and is stale. An epoch without the lease cannot tell the two apart: refused.
	r = s.req("t", "lease.reserve", `{"operation_id":"r4","holder_id":"nova","activate":true,"members":[{"range_id":"n1/ports","value":"30003"}]}`).want(t, "ok")
	again := r.str(t, "lease", "lease_id")
	r = s.req("t", "range.release", fmt.Sprintf(`{"operation_id":"v5","range_id":"n1/ports","value":30003,"holder_id":"nova","lease_id":%q,"lease_epoch":1,"whole_lease":true}`, lease)).
		want(t, "stale_epoch")
	if r.obj["lease"] != nil {
		t.Fatalf("a stale release shows a lease: %s", r.raw)
	}
	r = s.req("t", "range.release", `{"operation_id":"v6","range_id":"n1/ports","value":30003,"holder_id":"nova","lease_epoch":1}`).want(t, "invalid_request")
	if !contains(r.str(t, "message"), "lease_id") {
		t.Fatalf("message names lease_id: %s", r.raw)
	}
	s.req("t", "range.revoke", fmt.Sprintf(`{"operation_id":"v7","range_id":"n1/ports","value":30003,"lease_id":%q}`, lease)).want(t, "stale_epoch")
	s.req("t", "range.revoke", `{"operation_id":"v8","range_id":"n1/ports","value":30003,"lease_id":"x"}`).want(t, "invalid_request")
	if r := s.req("t", "range.lookup", `{"range_id":"n1/ports","value":30003}`).want(t, "ok"); r.str(t, "lease", "lease_id") != again || r.str(t, "lease", "state") != "active" {
		t.Fatalf("the second lease must still hold 30003: %s", r.raw)
	}
	s.req("t", "range.release", fmt.Sprintf(`{"operation_id":"v9","range_id":"n1/ports","value":30003,"holder_id":"nova","lease_id":%q,"lease_epoch":1}`, again)).want(t, "ok")

	// Import: leases of their own, all or nothing; exclude refuses a held value naming it.
	r = s.req("t", "lease.import", `{"operation_id":"i1","leases":[
		{"holder_id":"nova","activate":true,"members":[{"range_id":"n1/ports","value":"30005"}],"labels":{"owner_uuid":"i2"}},
		{"holder_id":"neutron","activate":true,"members":[{"range_id":"n1/ports","value":"30006"}],"labels":{"owner_uuid":"i2"}},
		{"holder_id":"nova","ttl_ms":60000,"members":[{"pool_id":"n1/mem","quantity":3}],"labels":{"owner_uuid":"i2"}}]}`).want(t, "ok")
	if len(r.field(t, "leases").([]any)) != 3 {
		t.Fatalf("import: %s", r.raw)
	}
	r = s.req("t", "lease.import", `{"operation_id":"i2","leases":[
		{"holder_id":"x","activate":true,"members":[{"range_id":"n1/ports","value":"30007"}]},
		{"holder_id":"y","activate":true,"members":[{"range_id":"n1/ports","value":"30006"}]}]}`).want(t, "value_busy")
	if r.field(t, "item").(float64) != 1 || !contains(r.str(t, "message"), "leases[1].members[0]") {
		t.Fatalf("import failure: %s", r.raw)
	}
	if r := s.req("t", "range.lookup", `{"range_id":"n1/ports","value":30007}`).want(t, "ok"); r.str(t, "value_state") != "free" {
		t.Fatalf("all or nothing: %s", r.raw)
	}
	r = s.req("t", "range.exclude", `{"operation_id":"e1","range_id":"n1/ports","first":30004,"last":30006}`).want(t, "value_busy")
	if r.str(t, "value") != "30005" {
		t.Fatalf("exclude: %s", r.raw)
	}

	// Allocations in value order, a page at a time.
	r = s.req("t", "range.allocations", `{"range_id":"n1/ports","limit":1}`).want(t, "ok")
	if r.str(t, "allocations", 0, "value") != "30005" || r.str(t, "next_cursor") == "" {
		t.Fatalf("allocations: %s", r.raw)
	}
	allocCursor := r.str(t, "next_cursor")
	// A cursor belongs to its listing: another range's allocations, or another listing
	// altogether, refuse it rather than page on from a position that means something else.
	s.req("t", "range.create", `{"operation_id":"c3","range_id":"n1/zother","first":30000,"last":30009}`).want(t, "ok")
	s.req("t", "range.allocations", fmt.Sprintf(`{"range_id":"n1/zother","cursor":%q}`, allocCursor)).want(t, "invalid_request")
	s.req("t", "pool.holdings", fmt.Sprintf(`{"pool_id":"n1/mem","cursor":%q}`, allocCursor)).want(t, "invalid_request")
	r = s.req("t", "range.allocations", fmt.Sprintf(`{"range_id":"n1/ports","limit":1,"cursor":%q}`, allocCursor)).want(t, "ok")
	if r.str(t, "allocations", 0, "value") != "30006" {
		t.Fatalf("allocations page 2: %s", r.raw)
	}
	r.absent(t, "next_cursor") // the last page
	s.req("t", "range.allocations", `{"range_id":"n1/ports","cursor":"not-a-cursor"}`).want(t, "invalid_request")

	// Objects on several shards, listed by prefix in id order, a page at a time.
	for i := range 7 {
		s.req("t", "resource.create", fmt.Sprintf(`{"operation_id":"res%d","resource_id":"gpu%d/card"}`, i, i)).want(t, "ok")
	}
	s.req("u", "resource.create", `{"operation_id":"x","resource_id":"gpu9/card"}`).want(t, "ok")
	var ids []string
	cursor := ""
	for pages := 0; ; pages++ {
		r = s.req("t", "resource.list", fmt.Sprintf(`{"prefix":"gpu","limit":3,"cursor":%q}`, cursor)).want(t, "ok")
		for _, x := range r.field(t, "resources").([]any) {
			ids = append(ids, x.(map[string]any)["resource_id"].(string))
		}
		if len(r.field(t, "applied_lsns").([]any)) != 4 {
			t.Fatalf("applied_lsns: %s", r.raw)
		}
		next, ok := r.obj["next_cursor"].(string)
		if !ok {
			break
		}
		cursor = next
	}
	if fmt.Sprint(ids) != "[gpu0/card gpu1/card gpu2/card gpu3/card gpu4/card gpu5/card gpu6/card]" {
		t.Fatalf("resource.list: %v", ids)
	}
	// resource.list's cursor given to pool.list used to page on from it and skip pools.
	r = s.req("t", "resource.list", `{"prefix":"gpu","limit":3}`).want(t, "ok")
	r = s.req("t", "pool.list", fmt.Sprintf(`{"cursor":%q}`, r.str(t, "next_cursor"))).want(t, "invalid_request")
	if !contains(r.str(t, "message"), "cursor") {
		t.Fatalf("message names the cursor: %s", r.raw)
	}

	// Leases by label over every shard; the owner's hard delete in two calls.
	r = s.req("t", "lease.list", `{"label":"owner_uuid=i2"}`).want(t, "ok")
	if len(r.field(t, "leases").([]any)) != 3 {
		t.Fatalf("lease.list by label: %s", r.raw)
	}
	s.req("t", "lease.list", `{}`).want(t, "invalid_request")
	r = s.req("t", "lease.release_all", `{"operation_id":"b1","holder_id":"nova","label":"owner_uuid=i2"}`).want(t, "ok")
	if r.str(t, "count") != "2" || len(r.field(t, "applied_lsns").([]any)) != 4 {
		t.Fatalf("release_all: %s", r.raw)
	}
	r = s.req("t", "lease.revoke_all", `{"operation_id":"b2","label":"owner_uuid=i2","reclaim":true}`).want(t, "ok")
	if r.str(t, "count") != "1" {
		t.Fatalf("revoke_all: %s", r.raw)
	}
	// An active lease revoked and reclaimed in one call is one of the leases, as it is
	// after the call: count and the views agree.
	if ls := r.field(t, "leases").([]any); len(ls) != 1 || r.str(t, "leases", 0, "state") != "revoked" {
		t.Fatalf("revoke_all with reclaim: the lease once, revoked: %s", r.raw)
	}
	if r := s.req("t", "lease.revoke_all", `{"operation_id":"b2","label":"owner_uuid=i2","reclaim":true}`).want(t, "ok"); !r.field(t, "from_retry_cache").(bool) || r.str(t, "count") != "1" {
		t.Fatalf("revoke_all retry: %s", r.raw)
	}
	if r := s.req("t", "lease.list", `{"label":"owner_uuid=i2"}`).want(t, "ok"); r.obj["leases"] != nil {
		t.Fatalf("after the hard delete: %s", r.raw)
	}

	// Consumed capacity and resize.
	r = s.req("t", "lease.reserve", `{"operation_id":"r9","holder_id":"shop","members":[{"pool_id":"n1/mem","quantity":4}],"ttl_ms":60000}`).want(t, "ok")
	s.req("t", "lease.consume", fmt.Sprintf(`{"operation_id":"k1","lease_id":%q,"holder_id":"shop","lease_epoch":1}`, r.str(t, "lease", "lease_id"))).want(t, "ok")
	r = s.req("t", "pool.get", `{"pool_id":"n1/mem"}`).want(t, "ok")
	if r.str(t, "pool", "consumed") != "4" || r.str(t, "pool", "available") != "6" {
		t.Fatalf("consumed: %s", r.raw)
	}
	s.req("t", "pool.resize", `{"operation_id":"p1","pool_id":"n1/mem","capacity":3}`).want(t, "object_in_use")
	r = s.req("t", "pool.resize", `{"operation_id":"p2","pool_id":"n1/mem","capacity":20}`).want(t, "ok")
	if r.str(t, "pool", "available") != "16" {
		t.Fatalf("resize: %s", r.raw)
	}
	// An omitted bound keeps its value: only last moved the start to 0 before.
	r = s.req("t", "range.resize", `{"operation_id":"z1","range_id":"n1/ports","last":30100}`).want(t, "ok")
	if r.str(t, "range", "first") != "30000" || r.str(t, "range", "last") != "30100" {
		t.Fatalf("resize of the end alone: %s", r.raw)
	}
	s.req("t", "range.resize", `{"operation_id":"z2","range_id":"n1/ports"}`).want(t, "invalid_request")
	s.req("t", "range.resize", `{"operation_id":"z3","range_id":"n1/ports","last":29000}`).want(t, "invalid_request")
	r = s.req("t", "range.list", `{}`).want(t, "ok")
	if r.str(t, "ranges", 0, "last") != "30100" {
		t.Fatalf("range.list: %s", r.raw)
	}
}

// The fullest pools and ranges of each shard are metrics (bounded: ten of each per
// shard), refreshed about every second.
func TestOccupancyMetrics(t *testing.T) {
	s := startStack(t, startNATS(t), stackOptions{shards: 2})
	s.req("t", "pool.create", `{"operation_id":"c1","pool_id":"tickets","capacity":10}`).want(t, "ok")
	s.req("t", "range.create", `{"operation_id":"c2","range_id":"vxlan","first":1,"last":4}`).want(t, "ok")
	s.req("t", "lease.reserve", `{"operation_id":"r1","holder_id":"h","activate":true,"members":[{"pool_id":"tickets","quantity":9}]}`).want(t, "ok")
	s.req("t", "lease.reserve", `{"operation_id":"r2","holder_id":"h","activate":true,"members":[{"range_id":"vxlan"}]}`).want(t, "ok")
	srv := httptest.NewServer(s.metrics.Handler())
	defer srv.Close()
	want := []string{`holdfast_pool_fill_ratio{pool="tickets",shard="`, `",tenant="t"} 0.9`,
		`holdfast_range_fill_ratio{range="vxlan",shard="`, `",tenant="t"} 0.25`}
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body := string(b)
		if strings.Contains(body, want[0]) && strings.Contains(body, want[1]) && strings.Contains(body, want[2]) && strings.Contains(body, want[3]) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("/metrics lacks the fill of tickets and vxlan:\n%s", grepLines(body, "fill_ratio"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
