package bridge

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/messages"
)

func TestEveryVerbJSON(t *testing.T) {
	s := startStack(t, startNATS(t), stackOptions{shards: 2})
	const tenant = "acme"
	shard := contract.ShardOf(tenant, "node14", 2)

	r := s.req(tenant, "resource.create", `{"operation_id":"c1","resource_id":"node14/gpu0"}`).want(t, "ok")
	wantKeys(t, "resource.create", r.obj, "outcome", "code", "lsn", "resource")
	wantKeys(t, "resource view", r.field(t, "resource"), "resource_id", "state")
	// A new shard's journal starts with its settings (lsn 1): the first write is lsn 2.
	if r.str(t, "lsn") != "2" || r.str(t, "resource", "state") != "available" || r.str(t, "resource", "resource_id") != "node14/gpu0" {
		t.Fatalf("resource.create: %s", r.raw)
	}

	r = s.req(tenant, "pool.create", `{"operation_id":"p1","pool_id":"node14/mem","capacity":64}`).want(t, "ok")
	wantKeys(t, "pool.create", r.obj, "outcome", "code", "lsn", "pool")
	wantKeys(t, "pool view", r.field(t, "pool"), "pool_id", "capacity", "available")
	if r.str(t, "pool", "capacity") != "64" || r.str(t, "pool", "available") != "64" {
		t.Fatalf("pool.create: %s", r.raw)
	}

	// 64-bit numbers are accepted as numbers or strings.
	r = s.req(tenant, "range.create", `{"operation_id":"g1","range_id":"node14/vxlan","first":"100","last":199,"strategy":"least_recently_freed"}`).want(t, "ok")
	wantKeys(t, "range view", r.field(t, "range"), "range_id", "first", "last", "strategy", "free")
	if r.str(t, "range", "first") != "100" || r.str(t, "range", "last") != "199" || r.str(t, "range", "free") != "100" ||
		r.str(t, "range", "strategy") != "least_recently_freed" {
		t.Fatalf("range.create: %s", r.raw)
	}

	r = s.req(tenant, "resource.get", `{"resource_id":"node14/gpu0"}`).want(t, "ok")
	wantKeys(t, "resource.get", r.obj, "outcome", "code", "applied_lsn", "resource")
	if r.str(t, "applied_lsn") != "4" {
		t.Fatalf("resource.get applied_lsn: %s", r.raw)
	}
	r = s.req(tenant, "pool.get", `{"pool_id":"node14/mem"}`).want(t, "ok")
	wantKeys(t, "pool.get", r.obj, "outcome", "code", "applied_lsn", "pool")
	r = s.req(tenant, "range.get", `{"range_id":"node14/vxlan","min_lsn":"4","wait_ms":0}`).want(t, "ok")
	wantKeys(t, "range.get", r.obj, "outcome", "code", "applied_lsn", "range")

	reserve := `{"operation_id":"l1","holder_id":"alice","ttl_ms":60000,"members":[` +
		`{"resource_id":"node14/gpu0"},{"pool_id":"node14/mem","quantity":4},` +
		`{"range_id":"node14/vxlan"},{"range_id":"node14/vxlan","value":"150"}]}`
	r = s.req(tenant, "lease.reserve", reserve).want(t, "ok")
	wantKeys(t, "lease.reserve", r.obj, "outcome", "code", "lsn", "lease")
	wantKeys(t, "lease view", r.field(t, "lease"), "lease_id", "holder_id", "state", "lease_epoch", "created_lsn", "deadline_slot", "members", "allocated_at")
	leaseID := r.str(t, "lease", "lease_id")
	if leaseID != contract.FormatLeaseID(shard, 5) || r.str(t, "lsn") != "5" || r.str(t, "lease", "created_lsn") != "5" ||
		r.str(t, "lease", "state") != "reserved" || r.str(t, "lease", "lease_epoch") != "1" || r.str(t, "lease", "holder_id") != "alice" {
		t.Fatalf("lease.reserve: %s", r.raw)
	}
	deadline, _ := strconv.ParseUint(r.str(t, "lease", "deadline_slot"), 10, 64)
	if now := uint64(time.Now().UnixMilli() / 10); deadline < now+5000 || deadline > now+7000 {
		t.Fatalf("deadline_slot %d, now slot %d: %s", deadline, now, r.raw)
	}
	wantKeys(t, "resource member", r.field(t, "lease", "members", 0), "resource_id")
	wantKeys(t, "pool member", r.field(t, "lease", "members", 1), "pool_id", "quantity")
	wantKeys(t, "range member", r.field(t, "lease", "members", 2), "range_id", "value")
	if r.str(t, "lease", "members", 1, "quantity") != "4" || r.str(t, "lease", "members", 2, "value") != "100" ||
		r.str(t, "lease", "members", 3, "value") != "150" {
		t.Fatalf("members: %s", r.raw)
	}

	// The same operation again replays the original result.
	again := s.req(tenant, "lease.reserve", reserve).want(t, "ok")
	if again.field(t, "from_retry_cache") != true || again.str(t, "lsn") != "5" || again.str(t, "lease", "lease_id") != leaseID {
		t.Fatalf("retry: %s", again.raw)
	}

	r = s.req(tenant, "resource.get", `{"resource_id":"node14/gpu0"}`).want(t, "ok")
	if r.str(t, "resource", "current_lease_id") != leaseID || r.str(t, "resource", "state") != "reserved" || r.str(t, "resource", "version") != "1" {
		t.Fatalf("resource after reserve: %s", r.raw)
	}
	r = s.req(tenant, "pool.get", `{"pool_id":"node14/mem"}`).want(t, "ok")
	if r.str(t, "pool", "reserved") != "4" || r.str(t, "pool", "available") != "60" {
		t.Fatalf("pool after reserve: %s", r.raw)
	}

	r = s.req(tenant, "lease.activate", fmt.Sprintf(`{"operation_id":"a1","lease_id":%q,"holder_id":"alice","lease_epoch":"1"}`, leaseID)).want(t, "ok")
	if r.str(t, "lease", "state") != "active" {
		t.Fatalf("activate: %s", r.raw)
	}
	if _, ok := r.field(t, "lease").(map[string]any)["deadline_slot"]; ok {
		t.Fatalf("an active lease has no deadline: %s", r.raw)
	}

	r = s.req(tenant, "lease.reserve", `{"operation_id":"l2","holder_id":"bob","ttl_ms":1000,"members":[{"pool_id":"node14/mem","quantity":2}]}`).want(t, "ok")
	bobLease := r.str(t, "lease", "lease_id")
	d1, _ := strconv.ParseUint(r.str(t, "lease", "deadline_slot"), 10, 64)
	r = s.req(tenant, "lease.renew", fmt.Sprintf(`{"operation_id":"n1","lease_id":%q,"holder_id":"bob","lease_epoch":1,"ttl_ms":30000}`, bobLease)).want(t, "ok")
	d2, _ := strconv.ParseUint(r.str(t, "lease", "deadline_slot"), 10, 64)
	if d2 < d1+2000 || r.str(t, "lease", "lease_epoch") != "1" {
		t.Fatalf("renew: deadline %d -> %d: %s", d1, d2, r.raw)
	}
	r = s.req(tenant, "lease.release", fmt.Sprintf(`{"operation_id":"x1","lease_id":%q,"holder_id":"bob","lease_epoch":1}`, bobLease)).want(t, "ok")
	if r.str(t, "lease", "state") != "released" || r.str(t, "lease", "lease_epoch") != "2" ||
		r.str(t, "lease", "released_lsn") != r.str(t, "lsn") || r.str(t, "lease", "retire_after_slot") == "" {
		t.Fatalf("release: %s", r.raw)
	}

	r = s.req(tenant, "lease.revoke", fmt.Sprintf(`{"operation_id":"v1","lease_id":%q}`, leaseID)).want(t, "ok")
	if r.str(t, "lease", "state") != "revoking" || r.str(t, "lease", "lease_epoch") != "2" {
		t.Fatalf("revoke: %s", r.raw)
	}
	r = s.req(tenant, "lease.reclaim", fmt.Sprintf(`{"operation_id":"v2","lease_id":%q}`, leaseID)).want(t, "ok")
	if r.str(t, "lease", "state") != "revoked" {
		t.Fatalf("reclaim: %s", r.raw)
	}

	r = s.req(tenant, "lease.get", fmt.Sprintf(`{"lease_id":%q}`, leaseID)).want(t, "ok")
	wantKeys(t, "lease.get", r.obj, "outcome", "code", "applied_lsn", "lease")
	if r.str(t, "lease", "state") != "revoked" {
		t.Fatalf("lease.get: %s", r.raw)
	}

	r = s.req(tenant, "lease.reserve", `{"operation_id":"l3","holder_id":"alice","activate":true,"members":[{"resource_id":"node14/gpu0"}]}`).want(t, "ok")
	activeID := r.str(t, "lease", "lease_id")
	if r.str(t, "lease", "state") != "active" {
		t.Fatalf("reserve with activate: %s", r.raw)
	}
	r = s.req(tenant, "lease.list", `{"holder_id":"alice"}`).want(t, "ok")
	wantKeys(t, "lease.list", r.obj, "outcome", "code", "leases", "applied_lsns")
	if n := len(r.typ.Leases); n != 1 || r.typ.Leases[0].State != "active" {
		t.Fatalf("lease.list: %s", r.raw)
	}
	if len(r.typ.AppliedLsns) != 2 || r.typ.AppliedLsns[1].Shard != 1 {
		t.Fatalf("applied_lsns: %s", r.raw)
	}

	// A domain failure is committed, names the member, never the holder.
	r = s.req(tenant, "lease.reserve", `{"operation_id":"l4","holder_id":"carol","ttl_ms":1000,"members":[{"pool_id":"node14/mem","quantity":1},{"resource_id":"node14/gpu0"}]}`).want(t, "resource_busy")
	r.absent(t, "lease", "category")
	if r.str(t, "lsn") == "" || !contains(r.typ.Message, "members[1]") || contains(r.raw, "alice") {
		t.Fatalf("resource_busy: %s", r.raw)
	}
	if r.msg.Header.Get(micro.ErrorHeader) != "" {
		t.Fatalf("a committed outcome carries no error header: %v", r.msg.Header)
	}
	r = s.req(tenant, "lease.release", fmt.Sprintf(`{"operation_id":"x2","lease_id":%q,"holder_id":"mallory","lease_epoch":1}`, activeID))
	r.want(t, "holder_mismatch")
	r.absent(t, "lease")
	if contains(r.raw, "alice") {
		t.Fatalf("holder_mismatch names the holder: %s", r.raw)
	}
	r = s.req(tenant, "resource.get", `{"resource_id":"node14/none"}`).want(t, "resource_not_found")
	r.absent(t, "resource")
}

func TestEveryVerbProtobuf(t *testing.T) {
	s := startStack(t, startNATS(t), stackOptions{shards: 2})
	const tenant = "acme"
	shard := contract.ShardOf(tenant, "rack1", 2)

	out, msg := s.preq(tenant, "resource.create", &messages.CreateResourceRequest{OperationId: "c1", ResourceId: "rack1/a"})
	if out.Code != "ok" || out.Outcome != "committed" || out.Lsn != 2 || out.Resource.GetResourceId() != "rack1/a" {
		t.Fatalf("resource.create: %v", out)
	}
	if ct := msg.Header.Get(messages.HeaderContentType); ct != messages.ContentTypeProtobuf {
		t.Fatalf("reply content type %q", ct)
	}
	out, _ = s.preq(tenant, "pool.create", &messages.CreatePoolRequest{OperationId: "p1", PoolId: "rack1/mem", Capacity: 10})
	if out.Code != "ok" || out.Pool.GetAvailable() != 10 {
		t.Fatalf("pool.create: %v", out)
	}
	out, _ = s.preq(tenant, "range.create", &messages.CreateRangeRequest{OperationId: "g1", RangeId: "rack1/ports", First: 1 << 40, Last: 1<<40 + 9, Strategy: "random"})
	if out.Code != "ok" || out.Range.GetFirst() != 1<<40 || out.Range.GetStrategy() != "random" {
		t.Fatalf("range.create: %v", out)
	}
	v := uint64(1<<40 + 3)
	out, _ = s.preq(tenant, "lease.reserve", &messages.ReserveRequest{OperationId: "l1", HolderId: "h", TtlMs: 5000,
		Members: []*messages.Member{{ResourceId: "rack1/a"}, {PoolId: "rack1/mem", Quantity: 3}, {RangeId: "rack1/ports", Value: &v}}})
	if out.Code != "ok" || out.Lease.GetLeaseId() != contract.FormatLeaseID(shard, 5) || out.Lease.Members[2].GetValue() != v {
		t.Fatalf("lease.reserve: %v", out)
	}
	id := out.Lease.LeaseId
	out, _ = s.preq(tenant, "lease.renew", &messages.RenewRequest{OperationId: "n1", LeaseId: id, HolderId: "h", LeaseEpoch: 1, TtlMs: 9000})
	if out.Code != "ok" || out.Lease.GetState() != "reserved" {
		t.Fatalf("renew: %v", out)
	}
	out, _ = s.preq(tenant, "lease.activate", &messages.ActivateRequest{OperationId: "a1", LeaseId: id, HolderId: "h", LeaseEpoch: 1})
	if out.Code != "ok" || out.Lease.GetState() != "active" {
		t.Fatalf("activate: %v", out)
	}
	out, _ = s.preq(tenant, "lease.revoke", &messages.RevokeRequest{OperationId: "v1", LeaseId: id})
	if out.Code != "ok" || out.Lease.GetState() != "revoking" || out.Lease.GetLeaseEpoch() != 2 {
		t.Fatalf("revoke: %v", out)
	}
	out, _ = s.preq(tenant, "lease.reclaim", &messages.ReclaimRequest{OperationId: "v2", LeaseId: id})
	if out.Code != "ok" || out.Lease.GetState() != "revoked" {
		t.Fatalf("reclaim: %v", out)
	}
	out, _ = s.preq(tenant, "lease.reserve", &messages.ReserveRequest{OperationId: "l2", HolderId: "h", TtlMs: 5000,
		Members: []*messages.Member{{ResourceId: "rack1/a"}}})
	id2 := out.Lease.GetLeaseId()
	out, _ = s.preq(tenant, "lease.release", &messages.ReleaseRequest{OperationId: "x1", LeaseId: id2, HolderId: "h", LeaseEpoch: 1})
	if out.Code != "ok" || out.Lease.GetState() != "released" {
		t.Fatalf("release: %v", out)
	}
	out, _ = s.preq(tenant, "resource.get", &messages.GetResourceRequest{ResourceId: "rack1/a"})
	if out.Code != "ok" || out.Resource.GetState() != "available" || out.AppliedLsn != 11 {
		t.Fatalf("resource.get: %v", out)
	}
	out, _ = s.preq(tenant, "pool.get", &messages.GetPoolRequest{PoolId: "rack1/mem"})
	if out.Code != "ok" || out.Pool.GetAvailable() != 10 {
		t.Fatalf("pool.get: %v", out)
	}
	out, _ = s.preq(tenant, "range.get", &messages.GetRangeRequest{RangeId: "rack1/ports"})
	if out.Code != "ok" || out.Range.GetAllocated() != 0 {
		t.Fatalf("range.get: %v", out)
	}
	out, _ = s.preq(tenant, "lease.get", &messages.GetLeaseRequest{LeaseId: id})
	if out.Code != "ok" || out.Lease.GetState() != "revoked" {
		t.Fatalf("lease.get: %v", out)
	}
	out, _ = s.preq(tenant, "lease.list", &messages.ListLeasesRequest{HolderId: "h"})
	if out.Code != "ok" || len(out.Leases) != 0 || len(out.AppliedLsns) != 2 {
		t.Fatalf("lease.list: %v", out)
	}

	// A rejection in protobuf: same envelope, error headers.
	out, msg = s.preq(tenant, "resource.create", &messages.CreateResourceRequest{ResourceId: "rack1/b"})
	if out.Code != "invalid_request" || out.Outcome != "rejected" || out.Category != "definite" || !contains(out.Message, "operation_id") {
		t.Fatalf("rejection: %v", out)
	}
	if msg.Header.Get(micro.ErrorHeader) != "invalid_request" || msg.Header.Get(micro.ErrorCodeHeader) != "400" {
		t.Fatalf("headers: %v", msg.Header)
	}
}

func TestRejectionsCarryErrorHeaders(t *testing.T) {
	s := startStack(t, startNATS(t), stackOptions{shards: 2})
	check := func(r *reply, code, status, mentions string) {
		t.Helper()
		r.want(t, code)
		if r.msg.Header.Get(micro.ErrorHeader) != code || r.msg.Header.Get(micro.ErrorCodeHeader) != status {
			t.Fatalf("%s: headers %v", code, r.msg.Header)
		}
		if r.str(t, "category") != "definite" {
			t.Fatalf("%s: %s", code, r.raw)
		}
		if !contains(r.typ.Message, mentions) {
			t.Fatalf("%s: message %q does not mention %q", code, r.typ.Message, mentions)
		}
		r.absent(t, "lsn")
	}
	check(s.req("t", "resource.create", `{"resource_id":"a"}`), "invalid_request", "400", "operation_id")
	// Same placement key, so the same shard: the reuse is detected.
	s.req("t", "resource.create", `{"operation_id":"op","resource_id":"a"}`).want(t, "ok")
	check(s.req("t", "resource.create", `{"operation_id":"op","resource_id":"a/b"}`), "operation_conflict", "409", "operation_id")
	check(s.req("t", "resource.get", `{"resource_id":"a","min_lsn":"1000000","wait_ms":20}`), "fence_not_applied", "412", "min_lsn")
	check(s.req("t", "lease.reserve", `{"operation_id":"r1","holder_id":"h","ttl_ms":1000,"members":[{"resource_id":"a"},{"resource_id":"a"}]}`),
		"duplicate_member", "400", "members[1]")
	check(s.req("t", "lease.reserve", `{"operation_id":"r1","holder_id":"h","ttl_ms":3600001,"members":[{"resource_id":"a"}]}`),
		"ttl_out_of_range", "400", "ttl_ms")
	check(s.req("t", "lease.reserve", `{"operation_id":"r1","holder_id":"h","members":[{"resource_id":"a"}]}`),
		"ttl_out_of_range", "400", "ttl_ms")
	var many []string
	for i := 0; i < 65; i++ {
		many = append(many, fmt.Sprintf(`{"resource_id":"a/%d"}`, i))
	}
	check(s.req("t", "lease.reserve", `{"operation_id":"r1","holder_id":"h","ttl_ms":1000,"members":[`+strings.Join(many, ",")+`]}`),
		"bundle_too_large", "400", "members")
	// None of these was remembered: the operation id executes fresh.
	s.req("t", "lease.reserve", `{"operation_id":"r1","holder_id":"h","ttl_ms":1000,"members":[{"resource_id":"a"}]}`).want(t, "ok")
}

func TestUnknownFieldsAreNamed(t *testing.T) {
	s := startStack(t, startNATS(t), stackOptions{})
	for _, c := range []struct{ verb, body, name string }{
		{"resource.create", `{"operation_id":"a","resource_id":"x","colour":"red"}`, "colour"},
		{"lease.reserve", `{"operation_id":"a","holder_id":"h","ttl_ms":1,"members":[{"resource_id":"x","qty":1}]}`, "qty"},
		{"lease.get", `{"lease_id":"0-1","min_lsns":"3"}`, "min_lsns"},
		{"lease.list", `{"holder_id":"h","limit":5,"offset":3}`, "offset"},
	} {
		r := s.req("t", c.verb, c.body).want(t, "invalid_request")
		if !contains(r.typ.Message, `"`+c.name+`"`) {
			t.Errorf("%s: message %q does not name %q", c.verb, r.typ.Message, c.name)
		}
	}
}

func TestMalformedRequestsAreDefiniteAndHarmless(t *testing.T) {
	s := startStack(t, startNATS(t), stackOptions{shards: 2})
	cases := []struct {
		verb, body, code, mentions string
	}{
		{"resource.create", "\x00\xffnot json at all", "invalid_request", "JSON"},
		{"resource.create", `{"operation_id":"a","resource_id":`, "invalid_request", "JSON"},
		{"resource.create", `[1,2,3]`, "invalid_request", "JSON"},
		{"pool.create", `{"operation_id":"a","pool_id":"p","capacity":"lots"}`, "invalid_request", "capacity"},
		{"pool.create", `{"operation_id":"a","pool_id":"p","capacity":-1}`, "invalid_request", "capacity"},
		{"pool.create", `{"operation_id":"a","pool_id":"p"}`, "invalid_request", "capacity"},
		{"resource.create", `{"operation_id":5,"resource_id":"x"}`, "invalid_request", "operation_id"},
		{"resource.create", `{"operation_id":"a","resource_id":"-x"}`, "invalid_request", "resource_id"},
		{"lease.reserve", `{"operation_id":"a","holder_id":"h","ttl_ms":1,"members":"x"}`, "invalid_request", "JSON"},
		{"lease.reserve", `{"operation_id":"a","holder_id":"h","ttl_ms":1,"members":[]}`, "invalid_request", "members"},
		{"lease.reserve", `{"operation_id":"a","holder_id":"h","ttl_ms":1,"members":[{}]}`, "invalid_request", "members[0]"},
		{"lease.reserve", `{"operation_id":"a","holder_id":"h","ttl_ms":1,"members":[{"resource_id":"x","pool_id":"y"}]}`, "invalid_request", "exactly one"},
		{"lease.reserve", `{"operation_id":"a","holder_id":"h","ttl_ms":1,"members":[{"resource_id":"x","value":"3"}]}`, "invalid_request", "members[0].value"},
		{"lease.reserve", `{"operation_id":"a","holder_id":"h","ttl_ms":1,"members":[{"range_id":"x","quantity":"3"}]}`, "invalid_request", "members[0].quantity"},
		{"lease.reserve", `{"operation_id":"a","holder_id":"h","ttl_ms":1,"members":[{"pool_id":"x"}]}`, "invalid_request", "members[0].quantity"},
		{"lease.reserve", `{"operation_id":"a","ttl_ms":1,"members":[{"pool_id":"x","quantity":1}]}`, "invalid_request", "holder_id"},
		{"range.create", `{"operation_id":"a","range_id":"r","first":5,"last":4}`, "invalid_request", "first"},
		{"range.create", `{"operation_id":"a","range_id":"r","strategy":"best"}`, "invalid_request", "strategy"},
		{"range.create", `{"operation_id":"a","range_id":"r","last":"18446744073709551616"}`, "invalid_request", "last"},
		{"lease.activate", `{"operation_id":"a","lease_id":"garbage","holder_id":"h","lease_epoch":1}`, "invalid_request", "lease_id"},
		{"lease.activate", `{"operation_id":"a","lease_id":"0-01","holder_id":"h","lease_epoch":1}`, "invalid_request", "lease_id"},
		{"lease.activate", `{"operation_id":"a","lease_id":"7-1","holder_id":"h","lease_epoch":1}`, "invalid_request", "lease_id"},
		{"lease.activate", `{"operation_id":"a","lease_id":"0-1","holder_id":"h"}`, "invalid_request", "lease_epoch"},
		{"lease.release", `{"operation_id":"a","lease_id":"0-1","lease_epoch":1}`, "invalid_request", "holder_id"},
		{"lease.revoke", `{"operation_id":"a"}`, "invalid_request", "lease_id"},
		{"lease.get", `{"lease_id":"0-0"}`, "invalid_request", "lease_id"},
		{"resource.get", `{"resource_id":"x","wait_ms":10001}`, "invalid_request", "wait_ms"},
		{"resource.get", `{"resource_id":"x","wait_ms":-1}`, "invalid_request", "wait_ms"},
		{"resource.get", `{}`, "invalid_request", "resource_id"},
		{"pool.get", ``, "invalid_request", "pool_id"},
		{"lease.list", `{"holder_id":"h","limit":0}`, "invalid_request", "limit"},
		{"lease.list", `{"holder_id":"h","limit":10001}`, "invalid_request", "limit"},
		{"lease.list", `{"holder_id":"h","min_lsn":"1"}`, "invalid_request", "min_lsn"},
		{"lease.list", ``, "invalid_request", "holder_id"},
		{"resource.create", `{"operation_id":"a","resource_id":"x","pad":"` + strings.Repeat("z", 200<<10) + `"}`, "command_too_large", "bytes"},
	}
	for _, c := range cases {
		r := s.req("t", c.verb, c.body).want(t, c.code)
		if r.str(t, "category") != "definite" || !contains(r.typ.Message, c.mentions) {
			t.Errorf("%s %.60q: %s", c.verb, c.body, r.raw)
		}
		if r.msg.Header.Get(micro.ErrorCodeHeader) != "400" {
			t.Errorf("%s %.60q: headers %v", c.verb, c.body, r.msg.Header)
		}
	}
	// Protobuf garbage with the protobuf header is answered in protobuf.
	hdr := nats.Header{}
	hdr.Set(messages.HeaderContentType, messages.ContentTypeProtobuf)
	m := s.raw(subject("t", "resource.create"), []byte{0xff, 0xff, 0xff, 0x01, 0x02}, hdr)
	out := &messages.Reply{}
	if err := messages.UnmarshalProto(m.Data, out); err != nil || out.Code != "invalid_request" || out.Category != "definite" {
		t.Fatalf("protobuf garbage: %v %v", err, out)
	}
	// A tenant token the contract does not allow.
	r := decodeJSONReply(t, s.raw("holdfast.v1.bad!tenant.resource.get", []byte(`{"resource_id":"x"}`), nil)).want(t, "invalid_request")
	if !contains(r.typ.Message, "tenant") {
		t.Fatalf("bad tenant: %s", r.raw)
	}
	r = decodeJSONReply(t, s.raw("holdfast.v1."+strings.Repeat("t", 65)+".resource.get", []byte(`{"resource_id":"x"}`), nil)).want(t, "invalid_request")
	if !contains(r.typ.Message, "tenant") {
		t.Fatalf("long tenant: %s", r.raw)
	}
	// The service still serves.
	s.req("t", "resource.create", `{"operation_id":"a","resource_id":"x"}`).want(t, "ok")
	s.req("t", "resource.get", `{"resource_id":"x"}`).want(t, "ok")
}

func TestTenantsAreIsolatedBySubject(t *testing.T) {
	s := startStack(t, startNATS(t), stackOptions{shards: 2})
	s.req("a", "resource.create", `{"operation_id":"c","resource_id":"seat"}`).want(t, "ok")
	r := s.req("a", "lease.reserve", `{"operation_id":"r","holder_id":"alice","ttl_ms":60000,"members":[{"resource_id":"seat"}]}`).want(t, "ok")
	id := r.str(t, "lease", "lease_id")

	s.req("b", "resource.get", `{"resource_id":"seat"}`).want(t, "resource_not_found")
	s.req("b", "lease.get", fmt.Sprintf(`{"lease_id":%q}`, id)).want(t, "lease_not_found").absent(t, "lease")
	s.req("b", "lease.release", fmt.Sprintf(`{"operation_id":"x","lease_id":%q,"holder_id":"alice","lease_epoch":1}`, id)).want(t, "lease_not_found")
	s.req("b", "lease.list", `{"holder_id":"alice"}`).want(t, "ok").absent(t, "leases")
	// Tenant b's own "seat" is another object; its operation ids are its own too.
	s.req("b", "resource.create", `{"operation_id":"c","resource_id":"seat"}`).want(t, "ok").absent(t, "from_retry_cache")
	// A retried lease verb of b on a's lease shows nothing of a's lease.
	revoke := fmt.Sprintf(`{"operation_id":"v","lease_id":%q}`, id)
	s.req("b", "lease.revoke", revoke).want(t, "lease_not_found").absent(t, "lease")
	r = s.req("b", "lease.revoke", revoke).want(t, "lease_not_found")
	r.absent(t, "lease")
	if r.field(t, "from_retry_cache") != true || contains(r.raw, "alice") {
		t.Fatalf("replayed revoke: %s", r.raw)
	}
	// a's lease is untouched.
	r = s.req("a", "lease.get", fmt.Sprintf(`{"lease_id":%q}`, id)).want(t, "ok")
	if r.str(t, "lease", "state") != "reserved" {
		t.Fatalf("a's lease: %s", r.raw)
	}
	// A failed holder verb replayed from the retry cache shows no lease either.
	rel := fmt.Sprintf(`{"operation_id":"m","lease_id":%q,"holder_id":"mallory","lease_epoch":1}`, id)
	s.req("a", "lease.release", rel).want(t, "holder_mismatch").absent(t, "lease")
	r = s.req("a", "lease.release", rel).want(t, "holder_mismatch")
	if r.field(t, "from_retry_cache") != true || contains(r.raw, "alice") {
		t.Fatalf("replayed holder_mismatch: %s", r.raw)
	}
}

func TestLeaseListSpansShards(t *testing.T) {
	const shards = 4
	s := startStack(t, startNATS(t), stackOptions{shards: shards})
	// Two leases on every shard, created in the shard order 3, 1, 0, 2.
	for _, sh := range []uint32{3, 1, 0, 2} {
		key := keyOnShard("t", sh, shards, "k")
		for j := 0; j < 2; j++ {
			id := fmt.Sprintf("%s/r%d", key, j)
			s.req("t", "resource.create", fmt.Sprintf(`{"operation_id":"c-%s","resource_id":%q}`, id, id)).want(t, "ok")
			s.req("t", "lease.reserve", fmt.Sprintf(`{"operation_id":"r-%s","holder_id":"h","ttl_ms":60000,"members":[{"resource_id":%q}]}`, id, id)).want(t, "ok")
		}
	}
	s.req("t", "lease.reserve", fmt.Sprintf(`{"operation_id":"other","holder_id":"h2","ttl_ms":60000,"members":[{"resource_id":"%s/x"}]}`, keyOnShard("t", 0, shards, "k"))).want(t, "resource_not_found")

	full := s.req("t", "lease.list", `{"holder_id":"h"}`).want(t, "ok")
	if len(full.typ.Leases) != 8 || full.typ.Truncated {
		t.Fatalf("full list: %s", full.raw)
	}
	prevShard, prevLSN := uint32(0), uint64(0)
	for i, l := range full.typ.Leases {
		sh, lsn, ok := contract.ParseLeaseID(l.LeaseId)
		if !ok || sh < prevShard || (sh == prevShard && lsn <= prevLSN) {
			t.Fatalf("lease %d (%s) out of order: %s", i, l.LeaseId, full.raw)
		}
		prevShard, prevLSN = sh, lsn
	}
	if len(full.typ.AppliedLsns) != shards {
		t.Fatalf("applied_lsns: %s", full.raw)
	}
	for i, a := range full.typ.AppliedLsns {
		if a.Shard != uint32(i) || a.Lsn < 4 {
			t.Fatalf("applied_lsns[%d]: %s", i, full.raw)
		}
	}
	if !contains(full.raw, `"applied_lsns":[{"shard":0,"lsn":"`) { // shard 0 shown, as docs/api.md writes it
		t.Fatalf("applied_lsns JSON form: %s", full.raw)
	}

	cut := s.req("t", "lease.list", `{"holder_id":"h","limit":5}`).want(t, "ok")
	if len(cut.typ.Leases) != 5 || !cut.typ.Truncated {
		t.Fatalf("limit 5: %s", cut.raw)
	}
	for i := range cut.typ.Leases {
		if cut.typ.Leases[i].LeaseId != full.typ.Leases[i].LeaseId {
			t.Fatalf("limit 5 is not a prefix of the full list: %s", cut.raw)
		}
	}
	exact := s.req("t", "lease.list", `{"holder_id":"h","limit":8}`).want(t, "ok")
	if len(exact.typ.Leases) != 8 || exact.typ.Truncated {
		t.Fatalf("limit 8: %s", exact.raw)
	}
	// Only the last shard holds the holder's leases, more than the limit.
	last := keyOnShard("t", shards-1, shards, "solo")
	for j := 0; j < 3; j++ {
		id := fmt.Sprintf("%s/r%d", last, j)
		s.req("t", "resource.create", fmt.Sprintf(`{"operation_id":"c-%s","resource_id":%q}`, id, id)).want(t, "ok")
		s.req("t", "lease.reserve", fmt.Sprintf(`{"operation_id":"r-%s","holder_id":"solo","ttl_ms":60000,"members":[{"resource_id":%q}]}`, id, id)).want(t, "ok")
	}
	solo := s.req("t", "lease.list", `{"holder_id":"solo","limit":2}`).want(t, "ok")
	if len(solo.typ.Leases) != 2 || !solo.typ.Truncated {
		t.Fatalf("solo limit 2: %s", solo.raw)
	}
	one := s.req("t", "lease.list", `{"holder_id":"h","limit":"1"}`).want(t, "ok")
	if len(one.typ.Leases) != 1 || !one.typ.Truncated || one.typ.Leases[0].LeaseId != full.typ.Leases[0].LeaseId {
		t.Fatalf("limit 1: %s", one.raw)
	}
}

func TestReadWaitsForMinLSN(t *testing.T) {
	s := startStack(t, startNATS(t), stackOptions{})
	s.req("t", "resource.create", `{"operation_id":"c1","resource_id":"a"}`).want(t, "ok")
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(150 * time.Millisecond)
		s.req("t", "resource.create", `{"operation_id":"c2","resource_id":"b"}`)
	}()
	start := time.Now()
	// lsn 1 is the shard's settings, 2 the first create: wait for the second.
	r := s.req("t", "resource.get", `{"resource_id":"a","min_lsn":3,"wait_ms":5000}`).want(t, "ok")
	wg.Wait()
	if r.str(t, "applied_lsn") != "3" || time.Since(start) < 100*time.Millisecond {
		t.Fatalf("fenced read: %s after %v", r.raw, time.Since(start))
	}
	start = time.Now()
	r = s.req("t", "resource.get", `{"resource_id":"a","min_lsn":4,"wait_ms":100}`).want(t, "fence_not_applied")
	if r.str(t, "applied_lsn") != "3" || time.Since(start) < 90*time.Millisecond {
		t.Fatalf("fence_not_applied: %s after %v", r.raw, time.Since(start))
	}
	s.req("t", "resource.get", `{"resource_id":"a","min_lsn":4,"wait_ms":0}`).want(t, "fence_not_applied")
}

func TestMicroServiceDiscovery(t *testing.T) {
	s := startStack(t, startNATS(t), stackOptions{shards: 3})
	m, err := s.client.Request("$SRV.PING.holdfast", nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var ping micro.Ping
	if err := json.Unmarshal(m.Data, &ping); err != nil || ping.Name != "holdfast" || ping.Version == "" {
		t.Fatalf("ping: %v %s", err, m.Data)
	}
	m, err = s.client.Request("$SRV.INFO.holdfast", nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var info micro.Info
	if err := json.Unmarshal(m.Data, &info); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{}
	for _, v := range []string{"resource.create", "resource.get", "pool.create", "pool.get", "range.create", "range.get",
		"lease.reserve", "lease.activate", "lease.renew", "lease.release", "lease.revoke", "lease.reclaim", "lease.get", "lease.list", "cluster.status",
		"run.create", "run.register", "run.complete", "run.fail", "run.cancel", "run.get", "work.get", "work.checkpoint",
		"work.complete", "work.park", "work.unpark", "work.split_replace", "work.split_residual",
		"resource.delete", "pool.delete", "range.delete", "run.delete",
		"resource.list", "pool.list", "range.list", "run.list", "range.lookup", "range.allocations", "range.release",
		"range.revoke", "range.reclaim", "range.exclude", "range.include", "range.resize", "pool.resize",
		"lease.consume", "lease.import", "lease.release_all", "lease.revoke_all", "pool.holdings", "work.list"} {
		want["holdfast.v1.*."+v] = true
	}
	for _, e := range info.Endpoints {
		if !want[e.Subject] || e.QueueGroup != QueueGroup {
			t.Fatalf("unexpected endpoint %+v", e)
		}
		delete(want, e.Subject)
	}
	if len(want) != 0 || info.Metadata["shards"] != "3" {
		t.Fatalf("missing endpoints %v; info %s", want, m.Data)
	}
	s.req("t", "resource.create", `{"operation_id":"c1","resource_id":"a"}`).want(t, "ok")
	s.req("t", "resource.get", `{"resource_id":"x"}`).want(t, "resource_not_found") // an answer, not a rejection
	s.req("t", "resource.get", `{"resource_id":""}`).want(t, "invalid_request")
	// A fenced read that waits 100 ms for an lsn that never comes: the endpoint's time is
	// the time to its reply, not the hand-off to a worker.
	s.req("t", "resource.get", `{"resource_id":"a","min_lsn":9,"wait_ms":100}`).want(t, "fence_not_applied")
	m, err = s.client.Request("$SRV.STATS.holdfast", nil, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	var stats micro.Stats
	if err := json.Unmarshal(m.Data, &stats); err != nil || len(stats.Endpoints) != len(contract.Verbs()) || stats.Type != micro.StatsResponseType ||
		stats.ID != ping.ID {
		t.Fatalf("stats: %v %s", err, m.Data)
	}
	got := map[string]*micro.EndpointStats{}
	for _, e := range stats.Endpoints {
		got[e.Name] = e
	}
	if e := got["resource_create"]; e == nil || e.NumRequests != 1 || e.NumErrors != 0 || e.LastError != "" {
		t.Fatalf("resource_create stats %+v", e)
	}
	e := got["resource_get"]
	if e == nil || e.NumRequests != 3 || e.NumErrors != 2 || e.LastError != "fence_not_applied" {
		t.Fatalf("resource_get stats %+v (want 3 requests, 2 rejections, the last fence_not_applied)", e)
	}
	if e.ProcessingTime < 90*time.Millisecond || e.AverageProcessingTime != e.ProcessingTime/3 {
		t.Fatalf("resource_get processing time %v, average %v: the fenced read alone waited 100ms", e.ProcessingTime, e.AverageProcessingTime)
	}
	if e := got["lease_reserve"]; e == nil || e.NumRequests != 0 || e.Subject != "holdfast.v1.*.lease.reserve" || e.QueueGroup != QueueGroup {
		t.Fatalf("lease_reserve stats %+v", e)
	}
	// The instance's own subject answers too.
	if _, err := s.client.Request("$SRV.STATS.holdfast."+ping.ID, nil, 5*time.Second); err != nil {
		t.Fatal(err)
	}
}

// Deletes: an object in use answers object_in_use with its view; an idle one is deleted,
// its id then unknown to reads and free for a new create; a retry replays ok.
func TestDeleteVerbs(t *testing.T) {
	s := startStack(t, startNATS(t), stackOptions{shards: 2})
	const tenant = "acme"
	s.req(tenant, "resource.create", `{"operation_id":"c1","resource_id":"n1/gpu"}`).want(t, "ok")
	r := s.req(tenant, "lease.reserve", `{"operation_id":"r1","holder_id":"h","ttl_ms":60000,"members":[{"resource_id":"n1/gpu"}]}`).want(t, "ok")
	id := r.str(t, "lease", "lease_id")
	r = s.req(tenant, "resource.delete", `{"operation_id":"d1","resource_id":"n1/gpu"}`).want(t, "object_in_use")
	if r.str(t, "resource", "state") != "reserved" {
		t.Fatalf("object_in_use shows the resource: %s", r.raw)
	}
	r.absent(t, "category")
	if !contains(r.str(t, "message"), "a reserved lease holds the resource: it is released or expires first") {
		t.Fatalf("object_in_use message: %s", r.raw)
	}
	s.req(tenant, "lease.release", fmt.Sprintf(`{"operation_id":"r2","lease_id":%q,"holder_id":"h","lease_epoch":1}`, id)).want(t, "ok")
	r = s.req(tenant, "resource.delete", `{"operation_id":"d2","resource_id":"n1/gpu"}`).want(t, "ok")
	wantKeys(t, "resource.delete", r.obj, "outcome", "code", "lsn", "resource")
	s.req(tenant, "resource.delete", `{"operation_id":"d2","resource_id":"n1/gpu"}`).want(t, "ok") // a retry
	s.req(tenant, "resource.get", `{"resource_id":"n1/gpu"}`).want(t, "resource_not_found")
	s.req(tenant, "resource.delete", `{"operation_id":"d3","resource_id":"n1/gpu"}`).want(t, "resource_not_found")
	// The ended lease still names what it held.
	r = s.req(tenant, "lease.get", fmt.Sprintf(`{"lease_id":%q}`, id)).want(t, "ok")
	if !contains(r.raw, `"resource_id":"n1/gpu"`) {
		t.Fatalf("ended lease of a deleted resource: %s", r.raw)
	}
	s.req(tenant, "resource.create", `{"operation_id":"c2","resource_id":"n1/gpu"}`).want(t, "ok")

	s.req(tenant, "pool.delete", `{"operation_id":"d4","pool_id":"n1/none"}`).want(t, "pool_not_found")
	s.req(tenant, "range.delete", `{"operation_id":"d5","range_id":"n1/none"}`).want(t, "range_not_found")
	s.req(tenant, "pool.delete", `{"operation_id":"d6","pool_id":""}`).want(t, "invalid_request")
	s.req(tenant, "run.create", `{"operation_id":"w1","run_id":"crawl","shards":[{"name":"a","start":"","end":""}]}`).want(t, "ok")
	s.req(tenant, "run.delete", `{"operation_id":"w2","run_id":"crawl"}`).want(t, "object_in_use")
	s.req(tenant, "run.cancel", `{"operation_id":"w3","run_id":"crawl"}`).want(t, "ok")
	r = s.req(tenant, "run.delete", `{"operation_id":"w4","run_id":"crawl"}`).want(t, "ok")
	if r.str(t, "run", "status") != "cancelled" {
		t.Fatalf("run.delete: %s", r.raw)
	}
	s.req(tenant, "run.get", `{"run_id":"crawl"}`).want(t, "run_not_found")
}

// Every verb the contract serves has exactly one endpoint.
func TestEveryServedVerbHasAnEndpoint(t *testing.T) {
	specs := map[contract.Verb]int{}
	for _, s := range verbSpecs() {
		specs[s.verb]++
	}
	for _, v := range contract.Verbs() {
		if specs[v] != 1 {
			t.Errorf("%s: %d endpoints", v, specs[v])
		}
		delete(specs, v)
	}
	if len(specs) != 0 {
		t.Errorf("endpoints of verbs the contract does not serve: %v", specs)
	}
}
