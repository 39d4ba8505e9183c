package messages

import (
	"errors"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
)

func u64(v uint64) *uint64 { return &v }
func u32(v uint32) *uint32 { return &v }

func sampleReply() *Reply {
	return &Reply{
		Outcome:        OutcomeCommitted,
		Code:           CodeResourceBusy,
		Lsn:            math.MaxUint64,
		FromRetryCache: true,
		Message:        "resource node14/gpu0 is busy",
		Lease: &Lease{
			LeaseId:         "L-3-1042",
			HolderId:        "worker-7",
			State:           StateReserved,
			LeaseEpoch:      1,
			CreatedLsn:      1042,
			DeadlineSlot:    1 << 60,
			RetireAfterSlot: 0,
			Members: []*Member{
				{ResourceId: "node14/gpu0"},
				{PoolId: "node14/mem", Quantity: 4},
				{RangeId: "vxlan", Value: u64(0)},
			},
		},
		AppliedLsn: 7,
		Leases:     []*Lease{{LeaseId: "a"}, {LeaseId: "b"}},
		Truncated:  true,
		AppliedLsns: []*ShardLsn{
			{Shard: 0, Lsn: 17},
			{Shard: 3, Lsn: math.MaxUint64},
		},
	}
}

func TestMarshalJSONReply(t *testing.T) {
	b, err := MarshalJSON(sampleReply())
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"outcome":"committed","code":"resource_busy","lsn":"18446744073709551615",` +
		`"from_retry_cache":true,"message":"resource node14/gpu0 is busy",` +
		`"lease":{"lease_id":"L-3-1042","holder_id":"worker-7","state":"reserved","lease_epoch":"1",` +
		`"created_lsn":"1042","deadline_slot":"1152921504606846976",` +
		`"members":[{"resource_id":"node14/gpu0"},{"pool_id":"node14/mem","quantity":"4"},{"range_id":"vxlan","value":"0"}]},` +
		`"applied_lsn":"7","leases":[{"lease_id":"a"},{"lease_id":"b"}],"truncated":true,` +
		`"applied_lsns":[{"shard":0,"lsn":"17"},{"shard":3,"lsn":"18446744073709551615"}]}`
	if string(b) != want {
		t.Fatalf("MarshalJSON:\n got %s\nwant %s", b, want)
	}
	// Stable output: the same bytes every time (protojson alone may vary
	// whitespace).
	for range 3 {
		again, err := MarshalJSON(sampleReply())
		if err != nil || string(again) != want {
			t.Fatalf("MarshalJSON not stable: %s, %v", again, err)
		}
	}
	var back Reply
	if err := UnmarshalJSON(b, &back); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&back, sampleReply()) {
		t.Fatalf("round trip: got %v, want %v", &back, sampleReply())
	}
}

// cluster.status's nodes and shards, every field set, survive the JSON form.
func TestMarshalJSONClusterStatus(t *testing.T) {
	k := uint32(5)
	r := &Reply{Outcome: OutcomeCommitted, Code: CodeOK, SlotMs: 100, Shard: &k,
		Nodes:  []*ClusterNode{{Node: "a", Shards: []uint32{0, 2}}, {Node: "b", Shards: []uint32{1}, Lapsing: true, RenewalAgeMs: 3100}},
		Shards: []*ClusterShard{{Shard: 0, Owner: "a", AppliedLsn: 9}, {Shard: 1, Owner: "b", AppliedLsn: 4}}}
	b, err := MarshalJSON(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Reply
	if err := UnmarshalJSON(b, &back); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&back, r) {
		t.Fatalf("round trip of %s: got %v, want %v", b, &back, r)
	}
}

func TestMarshalJSONOmitsZeroFields(t *testing.T) {
	b, err := MarshalJSON(&Reply{Outcome: OutcomeRejected, Code: CodeTimeout, Category: CategoryIndefinite})
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"outcome":"rejected","code":"timeout","category":"indefinite"}`; string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
	b, err = MarshalJSON(&Reply{})
	if err != nil || string(b) != `{}` {
		t.Fatalf("empty reply: %s, %v", b, err)
	}
}

func TestUnmarshalJSONUint64AsNumberOrString(t *testing.T) {
	for _, in := range []string{
		`{"pool_id":"p","capacity":18446744073709551615,"reserved":"18446744073709551615"}`,
		`{"pool_id":"p","capacity":"18446744073709551615","reserved":18446744073709551615}`,
	} {
		var p Pool
		if err := UnmarshalJSON([]byte(in), &p); err != nil {
			t.Fatalf("%s: %v", in, err)
		}
		if p.Capacity != math.MaxUint64 || p.Reserved != math.MaxUint64 {
			t.Fatalf("%s: got %v", in, &p)
		}
	}
	var e Event
	in := `{"event":"lease.reserved","tenant":"acme","shard":3,"lsn":1042,"slot":"99",` +
		`"lease":{"lease_id":"x","state":"reserved"}}`
	if err := UnmarshalJSON([]byte(in), &e); err != nil {
		t.Fatal(err)
	}
	if e.Event != EventLeaseReserved || e.Shard != 3 || e.Lsn != 1042 || e.Slot != 99 || e.GetLease().GetState() != StateReserved {
		t.Fatalf("got %v", &e)
	}
	b, err := MarshalJSON(&e)
	if err != nil {
		t.Fatal(err)
	}
	// shard is a JSON number, lsn and slot are strings.
	if want := `{"event":"lease.reserved","tenant":"acme","shard":3,"lsn":"1042","slot":"99","lease":{"lease_id":"x","state":"reserved"}}`; string(b) != want {
		t.Fatalf("got %s, want %s", b, want)
	}
}

func TestUnmarshalJSONLowercaseStringsPassThrough(t *testing.T) {
	in := `{"operation_id":"op-1","range_id":"vxlan","first":"1","last":"4094","strategy":"least_recently_freed"}`
	var r CreateRangeRequest
	if err := UnmarshalJSON([]byte(in), &r); err != nil {
		t.Fatal(err)
	}
	if r.Strategy != StrategyLeastRecentlyFreed || r.First != 1 || r.Last != 4094 {
		t.Fatalf("got %v", &r)
	}
	b, err := MarshalJSON(&r)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != in {
		t.Fatalf("got %s, want %s", b, in)
	}
}

func TestUnmarshalJSONRejectsUnknownField(t *testing.T) {
	cases := []struct {
		msg   proto.Message
		in    string
		field string
	}{
		{&CreateResourceRequest{}, `{"operation_id":"op1","resource_id":"r","ttl":5}`, `"ttl"`},
		{&ReserveRequest{}, `{"operation_id":"op1","holder_id":"h","members":[{"resource_id":"x","qty":1}],"ttl_ms":1000}`, `"qty"`},
		{&GetLeaseRequest{}, `{"lease_id":"x","wait":5}`, `"wait"`},
	}
	for _, c := range cases {
		err := UnmarshalJSON([]byte(c.in), c.msg)
		var de *DecodeError
		if !errors.As(err, &de) {
			t.Fatalf("%s: got %v, want a *DecodeError", c.in, err)
		}
		if !strings.Contains(err.Error(), "unknown field "+c.field) {
			t.Fatalf("%s: error %q does not name field %s", c.in, err, c.field)
		}
		if strings.Contains(err.Error(), "proto:") {
			t.Fatalf("error %q keeps the protobuf-go prefix", err)
		}
		// Tolerant decoding (replies, events) skips unknown fields.
		if err := UnmarshalJSONTolerant([]byte(c.in), c.msg); err != nil {
			t.Fatalf("tolerant %s: %v", c.in, err)
		}
	}
}

func TestUnmarshalJSONErrorsNameTheField(t *testing.T) {
	for _, c := range []struct{ in, field string }{
		{`{"pool_id":"p","capacity":-1}`, "capacity"},
		{`{"pool_id":"p","capacity":"many"}`, "capacity"},
		{`{"pool_id":7}`, "pool_id"},
		{`{"pool_id":"p","pool_id":"q"}`, "pool_id"},
	} {
		err := UnmarshalJSON([]byte(c.in), &CreatePoolRequest{})
		if err == nil || !strings.Contains(err.Error(), c.field) {
			t.Fatalf("%s: error %v does not name %s", c.in, err, c.field)
		}
	}
	// Type errors name the field by its snake_case path, not protojson's
	// lowerCamelCase name, also in nested messages.
	for _, c := range []struct{ in, field string }{
		{`{"operation_id":"o","lease_id":"x","lease_epoch":"abc"}`, "lease_epoch"},
		{`{"operation_id":"o","members":[{"pool_id":"p","quantity":-4}]}`, "members[0].quantity"},
		{`{"operation_id":"o","members":[{"range_id":"r","value":1.5}]}`, "members[0].value"},
		{`{"operation_id":"o","ttl_ms":true}`, "ttl_ms"},
	} {
		var msg proto.Message = &ReserveRequest{}
		if strings.Contains(c.in, "lease_epoch") {
			msg = &ActivateRequest{}
		}
		err := UnmarshalJSON([]byte(c.in), msg)
		if err == nil || !strings.Contains(err.Error(), ": "+c.field+": must be") {
			t.Fatalf("%s: error %v does not name field %s", c.in, err, c.field)
		}
	}
	for _, in := range []string{``, `{`, `[]`, `{"pool_id":"p"} {}`, `null`} {
		if err := UnmarshalJSON([]byte(in), &CreatePoolRequest{}); err == nil {
			t.Fatalf("%q: no error", in)
		}
	}
}

// TestFieldNamesInvertible checks the assumption of protoFieldNames: every
// field's snake_case name is recovered from its JSON name.
func TestFieldNamesInvertible(t *testing.T) {
	msgs := File_holdfast_proto.Messages()
	for i := range msgs.Len() {
		fields := msgs.Get(i).Fields()
		for j := range fields.Len() {
			fd := fields.Get(j)
			in := "invalid value for string field " + fd.JSONName() + ": 1"
			want := "invalid value for string field " + string(fd.Name()) + ": 1"
			if got := protoFieldNames(in); got != want {
				t.Errorf("%s: protoFieldNames(%q) = %q", fd.FullName(), in, got)
			}
		}
	}
}

func TestWaitMsPresence(t *testing.T) {
	var absent, zero GetResourceRequest
	if err := UnmarshalJSON([]byte(`{"resource_id":"r"}`), &absent); err != nil {
		t.Fatal(err)
	}
	if err := UnmarshalJSON([]byte(`{"resource_id":"r","wait_ms":0}`), &zero); err != nil {
		t.Fatal(err)
	}
	if absent.WaitMs != nil {
		t.Fatalf("absent wait_ms decoded as %d", *absent.WaitMs)
	}
	if zero.WaitMs == nil || *zero.WaitMs != 0 {
		t.Fatalf("wait_ms 0 decoded as %v", zero.WaitMs)
	}
	// Presence survives both encodings.
	b, err := MarshalJSON(&zero)
	if err != nil || string(b) != `{"resource_id":"r","wait_ms":0}` {
		t.Fatalf("MarshalJSON: %s, %v", b, err)
	}
	pb, err := MarshalProto(&zero)
	if err != nil {
		t.Fatal(err)
	}
	var back GetResourceRequest
	if err := UnmarshalProto(pb, &back); err != nil {
		t.Fatal(err)
	}
	if back.WaitMs == nil || *back.WaitMs != 0 {
		t.Fatalf("protobuf round trip lost wait_ms presence: %v", &back)
	}
	// The same for limit and a range member's value.
	var l ListLeasesRequest
	if err := UnmarshalJSON([]byte(`{"holder_id":"h","limit":0}`), &l); err != nil || l.Limit == nil {
		t.Fatalf("limit 0: %v, %v", &l, err)
	}
	var m Member
	if err := UnmarshalJSON([]byte(`{"range_id":"vxlan"}`), &m); err != nil || m.Value != nil {
		t.Fatalf("any value: %v, %v", &m, err)
	}
	if err := UnmarshalJSON([]byte(`{"range_id":"vxlan","value":"0"}`), &m); err != nil || m.Value == nil || *m.Value != 0 {
		t.Fatalf("value 0: %v, %v", &m, err)
	}
}

func TestProtoRoundTrip(t *testing.T) {
	msgs := []proto.Message{
		sampleReply(),
		&ReserveRequest{OperationId: "op", HolderId: "h", TtlMs: 1000, Activate: true,
			Members: []*Member{{RangeId: "r"}, {RangeId: "r", Value: u64(math.MaxUint64)}}},
		&GetPoolRequest{PoolId: "p", MinLsn: 5, WaitMs: u32(0)},
		&Event{Event: EventRangeCreated, Tenant: "t", Shard: math.MaxUint32, Lsn: 1, Slot: 2,
			Range: &Range{RangeId: "r", First: 0, Last: math.MaxUint64, Strategy: StrategyRandom, Free: math.MaxUint64}},
	}
	for _, m := range msgs {
		b, err := MarshalProto(m)
		if err != nil {
			t.Fatal(err)
		}
		back := m.ProtoReflect().New().Interface()
		if err := UnmarshalProto(b, back); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(m, back) {
			t.Fatalf("round trip: got %v, want %v", back, m)
		}
	}
}

func TestUnmarshalProtoRejectsUnknownField(t *testing.T) {
	// A field 99 at the top level.
	b, err := MarshalProto(&CreateResourceRequest{OperationId: "op", ResourceId: "r"})
	if err != nil {
		t.Fatal(err)
	}
	b = protowire.AppendTag(b, 99, protowire.VarintType)
	b = protowire.AppendVarint(b, 1)
	err = UnmarshalProto(b, &CreateResourceRequest{})
	var de *DecodeError
	if !errors.As(err, &de) || !strings.Contains(err.Error(), "unknown field number 99") {
		t.Fatalf("got %v", err)
	}
	if err := UnmarshalProtoTolerant(b, &CreateResourceRequest{}); err != nil {
		t.Fatalf("tolerant: %v", err)
	}

	// A field 42 inside the second member.
	member := protowire.AppendTag(nil, 42, protowire.BytesType)
	member = protowire.AppendString(member, "x")
	b, err = MarshalProto(&ReserveRequest{OperationId: "op", Members: []*Member{{ResourceId: "a"}}})
	if err != nil {
		t.Fatal(err)
	}
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendBytes(b, member)
	err = UnmarshalProto(b, &ReserveRequest{})
	if err == nil || !strings.Contains(err.Error(), "unknown field number 42 in members[1]") {
		t.Fatalf("got %v", err)
	}
	var r ReserveRequest
	if err := UnmarshalProtoTolerant(b, &r); err != nil || len(r.Members) != 2 {
		t.Fatalf("tolerant: %v, %v", &r, err)
	}

	// Malformed input.
	if err := UnmarshalProto([]byte{0x0a, 0x05, 'a'}, &CreateResourceRequest{}); !errors.As(err, &de) {
		t.Fatalf("truncated input: got %v", err)
	}
	// Invalid UTF-8 in a string field.
	bad := protowire.AppendTag(nil, 1, protowire.BytesType)
	bad = protowire.AppendBytes(bad, []byte{0xff})
	if err := UnmarshalProto(bad, &CreateResourceRequest{}); err == nil {
		t.Fatal("invalid UTF-8 accepted")
	}
}
