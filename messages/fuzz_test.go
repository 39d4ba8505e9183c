package messages

import (
	"testing"

	"google.golang.org/protobuf/proto"
)

// fuzzMessages are the message types the fuzz targets decode into, selected
// by the first fuzz argument (modulo the count).
var fuzzMessages = []func() proto.Message{
	func() proto.Message { return &Reply{} },
	func() proto.Message { return &Event{} },
	func() proto.Message { return &ReserveRequest{} },
	func() proto.Message { return &CreateResourceRequest{} },
	func() proto.Message { return &CreatePoolRequest{} },
	func() proto.Message { return &CreateRangeRequest{} },
	func() proto.Message { return &ActivateRequest{} },
	func() proto.Message { return &RenewRequest{} },
	func() proto.Message { return &ReleaseRequest{} },
	func() proto.Message { return &RevokeRequest{} },
	func() proto.Message { return &ReclaimRequest{} },
	func() proto.Message { return &GetResourceRequest{} },
	func() proto.Message { return &GetLeaseRequest{} },
	func() proto.Message { return &GetPoolRequest{} },
	func() proto.Message { return &GetRangeRequest{} },
	func() proto.Message { return &ListLeasesRequest{} },
}

// checkRoundTrips asserts that a successfully decoded m survives both
// encodings: JSON and protobuf re-encode it, decode strictly, and give back an
// equal message.
func checkRoundTrips(t *testing.T, m proto.Message) {
	j, err := MarshalJSON(m)
	if err != nil {
		t.Fatalf("MarshalJSON of a decoded %T: %v", m, err)
	}
	fromJSON := m.ProtoReflect().New().Interface()
	if err := UnmarshalJSON(j, fromJSON); err != nil {
		t.Fatalf("UnmarshalJSON(%s): %v", j, err)
	}
	if !proto.Equal(m, fromJSON) {
		t.Fatalf("JSON round trip: got %v, want %v", fromJSON, m)
	}
	p, err := MarshalProto(m)
	if err != nil {
		t.Fatalf("MarshalProto of a decoded %T: %v", m, err)
	}
	fromProto := m.ProtoReflect().New().Interface()
	if err := UnmarshalProto(p, fromProto); err != nil {
		t.Fatalf("UnmarshalProto: %v", err)
	}
	if !proto.Equal(m, fromProto) {
		t.Fatalf("protobuf round trip: got %v, want %v", fromProto, m)
	}
}

// FuzzUnmarshalJSON: decoding arbitrary bytes never panics, whatever the fast decoder
// takes protojson takes as the same message, and whatever decodes round-trips through
// both encodings.
func FuzzUnmarshalJSON(f *testing.F) {
	seeds := []struct {
		kind uint8
		in   string
	}{
		{0, `{"outcome":"committed","code":"ok","lsn":"1042","lease":{"lease_id":"L1","members":[{"range_id":"r","value":"7"}]}}`},
		{0, `{"outcome":"rejected","code":"timeout","category":"indefinite","applied_lsns":[{"shard":1,"lsn":2}]}`},
		{1, `{"event":"pool.created","tenant":"t","shard":2,"lsn":"3","slot":4,"pool":{"pool_id":"p","capacity":"10"}}`},
		{2, `{"operation_id":"op","holder_id":"h","members":[{"resource_id":"a/b"},{"pool_id":"a/m","quantity":4},{"range_id":"v"}],"ttl_ms":1000,"activate":true}`},
		{2, `{"members":[{"qty":1}]}`},
		{4, `{"operation_id":"op","pool_id":"p","capacity":18446744073709551615}`},
		{4, `{"capacity":-1}`},
		{5, `{"range_id":"r","first":"0","last":"18446744073709551616"}`},
		{11, `{"resource_id":"r","min_lsn":"5","wait_ms":0}`},
		{11, `{"resource_id":"r","wait_ms":null}`},
		{15, `{"holder_id":"h","limit":10000}`},
		{0, `{"outcome":"committed","code":"resource_busy","message":"members[0]: resource \"r\\0\" is held by \u0061nother lease\n"}`},
		{3, `{"operation_id":"\ud800"}`},
		{3, `{"resourceId":"x","resource_id":"y"}`},
		{0, ``},
		{0, `{`},
		{0, `[1,2]`},
	}
	for _, s := range seeds {
		f.Add(s.kind, []byte(s.in))
	}
	f.Fuzz(func(t *testing.T, kind uint8, in []byte) {
		newMsg := fuzzMessages[int(kind)%len(fuzzMessages)]
		fastAgrees(t, in, newMsg)
		m := newMsg()
		if err := UnmarshalJSON(in, m); err != nil {
			_ = err.Error()
			return
		}
		checkRoundTrips(t, m)
	})
}

// FuzzUnmarshalProto: decoding arbitrary bytes never panics, strict decoding
// accepts exactly what round-trips, and tolerant decoding never fails where
// strict decoding succeeds.
func FuzzUnmarshalProto(f *testing.F) {
	seedMsgs := []struct {
		kind uint8
		m    proto.Message
	}{
		{0, sampleReply()},
		{1, &Event{Event: EventLeaseActivated, Shard: 7, Lsn: 9, Lease: &Lease{LeaseId: "L"}}},
		{2, &ReserveRequest{OperationId: "op", Members: []*Member{{RangeId: "r", Value: u64(0)}, {PoolId: "p", Quantity: 1}}}},
		{11, &GetResourceRequest{ResourceId: "r", WaitMs: u32(0)}},
		{15, &ListLeasesRequest{HolderId: "h", Limit: u32(1)}},
	}
	for _, s := range seedMsgs {
		b, err := MarshalProto(s.m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(s.kind, b)
	}
	f.Add(uint8(3), []byte{0x98, 0x06, 0x01})       // unknown field 99
	f.Add(uint8(3), []byte{0x0a, 0x01, 0xff})       // invalid UTF-8
	f.Add(uint8(2), []byte{0x1a, 0x02, 0xd0, 0x02}) // member with unknown field 42
	f.Add(uint8(0), []byte{0x0a, 0x05, 'a'})        // truncated
	f.Fuzz(func(t *testing.T, kind uint8, in []byte) {
		newMsg := fuzzMessages[int(kind)%len(fuzzMessages)]
		tolerant := newMsg()
		tolerantErr := UnmarshalProtoTolerant(in, tolerant)
		m := newMsg()
		if err := UnmarshalProto(in, m); err != nil {
			_ = err.Error()
			return
		}
		if tolerantErr != nil {
			t.Fatalf("strict decoding succeeded, tolerant failed: %v", tolerantErr)
		}
		if !proto.Equal(m, tolerant) {
			t.Fatalf("strict %v != tolerant %v", m, tolerant)
		}
		checkRoundTrips(t, m)
	})
}
