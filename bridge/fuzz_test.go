package bridge

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/messages"
)

// Fuzz targets for the bridge's request path: decoding (JSON and protobuf) and every
// check before a request reaches a shard (Bridge.prepare). Whatever the bytes, prepare
// must not panic and must end in exactly one of two ways:
//
//   - a definite rejection whose message names what is wrong: a field ("holder_id: ...",
//     "members[2].quantity: ..."), the decoded message type and the field or position
//     (`invalid JSON holdfast.v1.ReserveRequest: (line 1:35): unknown field "ttl"`), or
//     the size of an oversized request;
//   - a valid operation: a write command that kernel.Validate accepts, that survives the
//     journal encoding unchanged (so the shard can replay it), routed to an existing
//     shard by the placement rules; or a read within its bounds.
//
// And the two encodings agree: a request that decodes in one encoding, re-encoded in the
// other, gets the same answer.
//
//	go test ./bridge -run '^$' -fuzz FuzzPrepareJSON -fuzztime 1m
//	go test ./bridge -run '^$' -fuzz FuzzPrepareProto -fuzztime 1m

const (
	fuzzShards   = 4
	fuzzMaxBytes = 4 << 10 // small, so the fuzzer reaches command_too_large with small inputs
)

func fuzzBridge() *Bridge {
	b := &Bridge{cfg: Config{Prefix: contract.DefaultPrefix, Shards: fuzzShards, MaxRequestBytes: fuzzMaxBytes}}
	b.specs = verbSpecs()
	for _, s := range b.specs {
		s.bind(b.cfg.Prefix)
	}
	return b
}

// fuzzTenant turns fuzz input into a tenant token NATS could deliver: one subject token
// (no dots, no whitespace, not empty); anything else in it is the bridge's to judge.
func fuzzTenant(t string) string {
	if t == "" || strings.ContainsAny(t, ". \t\r\n\f\v\x00*>") {
		return "t1"
	}
	return t
}

// A rejection message names a field path, a decoding error with the message type, or
// the request's size.
var (
	fieldMessage  = regexp.MustCompile(`^[a-z_]+(\[\d+\])?(\.[a-z_]+)?: \S`)
	labelMessage  = regexp.MustCompile(`^labels\.[A-Za-z0-9][A-Za-z0-9_./-]*: \S`) // a label's value, named by its key
	decodeMessage = regexp.MustCompile(`^invalid (JSON|protobuf) holdfast\.v1\.[A-Za-z]+: \S`)
	sizeMessage   = regexp.MustCompile(`^request of \d+ bytes exceeds the limit of \d+$`)
)

type outcome struct {
	rejected *kernel.Rejection
	kind     opKind
	shard    uint32
	cmd      []byte // the journal encoding of a write
	read     string // a read's request, rendered
}

func (o outcome) String() string {
	if o.rejected != nil {
		return fmt.Sprintf("rejected %s: %s", o.rejected.Code, o.rejected.Message)
	}
	return fmt.Sprintf("kind %d shard %d cmd %x read %s", o.kind, o.shard, o.cmd, o.read)
}

// same compares outcomes of the two encodings: the same code, or the same operation. A
// rejection's text may differ in the decoder's own words.
func (o outcome) same(p outcome) bool {
	if (o.rejected == nil) != (p.rejected == nil) {
		return false
	}
	if o.rejected != nil {
		return o.rejected.Code == p.rejected.Code
	}
	return o.kind == p.kind && o.shard == p.shard && bytes.Equal(o.cmd, p.cmd) && o.read == p.read
}

// renderRead prints a read request with its listing query.
func renderRead(r actors.ReadRequest) string {
	l := r.List
	r.List = nil
	s := fmt.Sprintf("%+v", r)
	if l != nil {
		s += fmt.Sprintf(" list %+v", *l)
	}
	return s
}

// prepareOnce runs prepare and checks its invariants.
func prepareOnce(t *testing.T, b *Bridge, spec *verbSpec, tenant string, data []byte, isProto bool) outcome {
	t.Helper()
	j := &job{spec: spec, subject: spec.verb.Subject(b.cfg.Prefix, tenant), data: data, proto: isProto}
	c := &call{b: b, spec: spec}
	rej := b.prepare(c, j)
	if rej != nil {
		if !rej.Code.IsRejection() || rej.Code.IsIndefinite() {
			t.Fatalf("%s: rejected with %s, not a definite rejection", spec.verb, rej.Code)
		}
		switch {
		case fieldMessage.MatchString(rej.Message), labelMessage.MatchString(rej.Message):
		case decodeMessage.MatchString(rej.Message) && rej.Code == contract.CodeInvalidRequest:
		case sizeMessage.MatchString(rej.Message) && rej.Code == contract.CodeCommandTooLarge:
		default:
			t.Fatalf("%s: %s rejection names no field: %q", spec.verb, rej.Code, rej.Message)
		}
		return outcome{rejected: rej}
	}
	o := outcome{kind: c.op.kind, shard: c.op.shard}
	switch c.op.kind {
	case opWrite:
		cmd := c.op.cmd
		if cmd == nil || cmd.Verb != spec.verb || !spec.verb.IsWrite() || cmd.Tenant != tenant {
			t.Fatalf("%s: accepted as a write without its command: %+v", spec.verb, cmd)
		}
		if c.op.shard >= fuzzShards {
			t.Fatalf("%s: routed to shard %d of %d", spec.verb, c.op.shard, fuzzShards)
		}
		again := *cmd
		again.Members = append([]kernel.Member(nil), cmd.Members...)
		if r := kernel.Validate(&again); r != nil {
			t.Fatalf("%s: accepted, but a second validation rejects it: %s %s", spec.verb, r.Code, r.Message)
		}
		enc := cmd.AppendBinary(nil)
		var dec kernel.Command
		if err := kernel.DecodeCommand(enc, &dec); err != nil {
			t.Fatalf("%s: accepted command cannot be read back from its journal encoding: %v", spec.verb, err)
		}
		if re := dec.AppendBinary(nil); !bytes.Equal(re, enc) {
			t.Fatalf("%s: journal encoding does not round-trip:\n%x\n%x", spec.verb, enc, re)
		}
		var want uint32
		switch spec.verb {
		case contract.VerbCreateResource, contract.VerbCreatePool, contract.VerbCreateRange:
			want = contract.ShardOf(tenant, contract.PlacementKey(cmd.ObjectID), fuzzShards)
		case contract.VerbImport:
			want = contract.ShardOf(tenant, contract.PlacementKey(cmd.Imports[0].Members[0].ID), fuzzShards)
		case contract.VerbReserve:
			want = contract.ShardOf(tenant, contract.PlacementKey(cmd.Members[0].ID), fuzzShards)
			// A bundle of several placement keys goes to its first member's shard, its
			// home, knowing each member's shard; one of a single key knows none.
			several := false
			for i := range cmd.Members {
				several = several || contract.PlacementKey(cmd.Members[i].ID) != contract.PlacementKey(cmd.Members[0].ID)
			}
			if several != (len(cmd.Shards) > 0) {
				t.Fatalf("a bundle of several placement keys: %v, shards %v", several, cmd.Shards)
			}
			for i, sh := range cmd.Shards {
				if sh != contract.ShardOf(tenant, contract.PlacementKey(cmd.Members[i].ID), fuzzShards) {
					t.Fatalf("members[%d] placed on shard %d", i, sh)
				}
			}
		default:
			want = c.op.shard // lease verbs: checked below through the lease id
		}
		if c.op.shard != want {
			t.Fatalf("%s routed to shard %d, placement says %d", spec.verb, c.op.shard, want)
		}
		o.cmd = enc
	case opRead:
		if !spec.verb.IsRead() || c.op.read.Verb != spec.verb || c.op.shard >= fuzzShards || c.op.read.Tenant != tenant {
			t.Fatalf("%s: bad read %+v to shard %d", spec.verb, c.op.read, c.op.shard)
		}
		if c.op.read.Wait < 0 || c.op.read.Wait > messages.MaxWaitMs*1e6 {
			t.Fatalf("%s: wait %v out of bounds", spec.verb, c.op.read.Wait)
		}
		o.read = renderRead(c.op.read)
	case opList:
		if spec.verb.Info().Target != contract.TargetAll || c.op.read.Limit < messages.MinListLimit || c.op.read.Limit > messages.MaxListLimit {
			t.Fatalf("%s: bad list %+v", spec.verb, c.op.read)
		}
		o.read = renderRead(c.op.read)
	case opFan:
		cmd := c.op.cmd
		if cmd == nil || cmd.Verb != spec.verb || spec.verb.Info().Target != contract.TargetAll || cmd.Tenant != tenant {
			t.Fatalf("%s: accepted as a write to every shard without its command: %+v", spec.verb, cmd)
		}
		o.cmd = cmd.AppendBinary(nil)
	case opStatus:
		if spec.verb != contract.VerbClusterStatus || (c.op.hasKey && c.op.shard >= fuzzShards) {
			t.Fatalf("%s: bad status %+v", spec.verb, c.op)
		}
		o.read = fmt.Sprintf("status key=%v shard=%d", c.op.hasKey, c.op.shard)
	default:
		t.Fatalf("%s: accepted without an operation", spec.verb)
	}
	return o
}

// fuzzSeeds are valid and invalid requests of every verb (index into verbSpecs()).
func fuzzSeeds() []struct {
	verb uint8
	m    proto.Message
} {
	u64 := proto.Uint64
	u32 := proto.Uint32
	return []struct {
		verb uint8
		m    proto.Message
	}{
		{0, &messages.CreateResourceRequest{OperationId: "op1", ResourceId: "node14/gpu0"}},
		{1, &messages.GetResourceRequest{ResourceId: "node14/gpu0", MinLsn: 7, WaitMs: u32(100)}},
		{2, &messages.CreatePoolRequest{OperationId: "op2", PoolId: "node14/mem", Capacity: 80}},
		{3, &messages.GetPoolRequest{PoolId: "node14/mem"}},
		{4, &messages.CreateRangeRequest{OperationId: "op3", RangeId: "vxlan", First: 0, Last: 1<<64 - 1, Strategy: "random"}},
		{5, &messages.GetRangeRequest{RangeId: "vxlan", WaitMs: u32(0)}},
		{6, &messages.ReserveRequest{OperationId: "op4", HolderId: "job-7", TtlMs: 30000, Members: []*messages.Member{
			{ResourceId: "node14/gpu0"}, {PoolId: "node14/mem", Quantity: 4}, {RangeId: "node14/vx"}, {RangeId: "node14/vx", Value: u64(42)}}}},
		{6, &messages.ReserveRequest{OperationId: "op5", HolderId: "job-7", Activate: true, Members: []*messages.Member{{ResourceId: "a"}, {ResourceId: "b"}}}},
		{6, &messages.ReserveRequest{OperationId: "op7", HolderId: "job-7", TtlMs: 1000, Members: []*messages.Member{{ResourceId: "a"}},
			Labels: map[string]string{"team": "ml", "node14/gpu0": " padded "}}}, // a label value refused, named by its key
		{6, &messages.ReserveRequest{OperationId: "op6", HolderId: "job-7", TtlMs: 1, Members: []*messages.Member{{ResourceId: "a/x"}, {ResourceId: "a/x"}}}},
		{7, &messages.ActivateRequest{OperationId: "op7", LeaseId: "3-1042", HolderId: "job-7", LeaseEpoch: 1}},
		{8, &messages.RenewRequest{OperationId: "op8", LeaseId: "0-1", HolderId: "job-7", LeaseEpoch: 2, TtlMs: 3600000}},
		{9, &messages.ReleaseRequest{OperationId: "op9", LeaseId: "1-99", HolderId: "job-7", LeaseEpoch: 1}},
		{10, &messages.RevokeRequest{OperationId: "op10", LeaseId: "2-5"}},
		{11, &messages.ReclaimRequest{OperationId: "op11", LeaseId: "2-5"}},
		{12, &messages.GetLeaseRequest{LeaseId: "2-5", MinLsn: 9, WaitMs: u32(10000)}},
		{13, &messages.ListLeasesRequest{HolderId: "job-7", Limit: u32(10000)}},
		{13, &messages.ListLeasesRequest{HolderId: "job-7", Limit: u32(0)}},
		{7, &messages.ActivateRequest{OperationId: "op12", LeaseId: "9-1", HolderId: "job-7", LeaseEpoch: 0}},
	}
}

func FuzzPrepareJSON(f *testing.F) {
	for _, s := range fuzzSeeds() {
		b, err := messages.MarshalJSON(s.m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(s.verb, "acme", b)
	}
	for _, s := range []struct {
		verb   uint8
		tenant string
		body   string
	}{
		{6, "acme", `{"operation_id":"op","holder_id":"h","members":[{"resource_id":"a","pool_id":"b"}],"ttl_ms":5}`},
		{6, "acme", `{"operation_id":"op","holder_id":"h","members":[{"pool_id":"a/p"},{"range_id":"a/r","quantity":"3"}],"ttl_ms":"5"}`},
		{6, "acme", `{"operation_id":"op","holder_id":"h","members":"x","ttl_ms":5}`},
		{6, "acme", `{"operation_id":"op","holder_id":"h","members":[null],"ttl_ms":5}`},
		{6, "acme", `{"operation_id":"op","holder_id":"h","members":[{"resource_id":"a"},{"resource_id":"b/c"}],"ttl_ms":99999999999}`},
		{7, "acme", `{"operation_id":"op","lease_id":"03-1","holder_id":"h","lease_epoch":1}`},
		{7, "acme", `{"operation_id":"op","lease_id":"7-1","holder_id":"h","lease_epoch":"18446744073709551615"}`},
		{4, "acme", `{"operation_id":"op","range_id":"r","first":"9","last":"1"}`},
		{4, "acme", `{"operation_id":"op","range_id":"r","first":0,"last":1,"strategy":"fastest"}`},
		{2, "acme", `{"operation_id":"op","pool_id":"p","capacity":-1}`},
		{1, "acme", `{"resource_id":"r","wait_ms":10001}`},
		{13, "acme", `{"holder_id":"h","limit":10001}`},
		{0, "acme", `{"operation_id":"op","resource_id":"r","extra":true}`},
		{0, "acme", `{"operationId":"op","resource_id":"r"}`},
		{0, "acme", `{"operation_id":"op","operation_id":"op2","resource_id":"r"}`},
		{0, "acme", `{"operation_id":"\ud800","resource_id":"r"}`},
		{0, strings.Repeat("t", 65), `{"operation_id":"op","resource_id":"r"}`},
		{0, "ü", `{"operation_id":"op","resource_id":"r"}`},
		{0, "acme", `{"operation_id":"op","resource_id":"` + strings.Repeat("r", 129) + `"}`},
		{0, "acme", `{`},
		{0, "acme", `[]`},
		{0, "acme", `{} {}`},
		{12, "acme", ``},
	} {
		f.Add(s.verb, s.tenant, []byte(s.body))
	}
	f.Add(uint8(0), "acme", []byte(`{"operation_id":"op","resource_id":"`+strings.Repeat("r", fuzzMaxBytes)+`"}`))
	b := fuzzBridge()
	f.Fuzz(func(t *testing.T, verb uint8, tenant string, data []byte) {
		spec := b.specs[int(verb)%len(b.specs)]
		tenant = fuzzTenant(tenant)
		got := prepareOnce(t, b, spec, tenant, data, false)
		// The same request in protobuf gets the same answer.
		m := spec.newReq()
		if len(data) > fuzzMaxBytes {
			return
		}
		if len(data) > 0 {
			if err := messages.UnmarshalJSON(data, m); err != nil {
				return
			}
		}
		pb, err := messages.MarshalProto(m)
		if err != nil {
			t.Fatalf("a decoded request does not encode as protobuf: %v", err)
		}
		if len(pb) > fuzzMaxBytes {
			return
		}
		if other := prepareOnce(t, b, spec, tenant, pb, true); !got.same(other) {
			t.Fatalf("%s: JSON and protobuf disagree:\nJSON  %s\nproto %s", spec.verb, got, other)
		}
	})
}

func FuzzPrepareProto(f *testing.F) {
	for _, s := range fuzzSeeds() {
		b, err := messages.MarshalProto(s.m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(s.verb, b)
	}
	f.Add(uint8(0), []byte{0x98, 0x06, 0x01})                    // unknown field 99
	f.Add(uint8(0), []byte{0x0a, 0x01, 0xff})                    // invalid UTF-8 operation_id
	f.Add(uint8(6), []byte{0x1a, 0x02, 0xd0, 0x02})              // a member with unknown field 42
	f.Add(uint8(6), []byte{0x1a, 0x00, 0x1a, 0x00})              // two empty members
	f.Add(uint8(0), []byte{0x0a, 0x05, 'a'})                     // truncated
	f.Add(uint8(12), []byte{0x10, 0xff, 0xff, 0xff, 0xff, 0x1f}) // a huge min_lsn varint
	b := fuzzBridge()
	f.Fuzz(func(t *testing.T, verb uint8, data []byte) {
		spec := b.specs[int(verb)%len(b.specs)]
		got := prepareOnce(t, b, spec, "acme", data, true)
		m := spec.newReq()
		if len(data) > fuzzMaxBytes || messages.UnmarshalProto(data, m) != nil {
			return
		}
		js, err := messages.MarshalJSON(m)
		if err != nil {
			t.Fatalf("a decoded request does not encode as JSON: %v", err)
		}
		if len(js) > fuzzMaxBytes {
			return
		}
		if other := prepareOnce(t, b, spec, "acme", js, false); !got.same(other) {
			t.Fatalf("%s: protobuf and JSON disagree:\nproto %s\nJSON  %s", spec.verb, got, other)
		}
	})
}
