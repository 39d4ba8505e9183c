package messages

import (
	"testing"

	"google.golang.org/protobuf/proto"
)

// BenchmarkJSONPath is the JSON work of one lease.reserve on each side: the client
// writes the request and reads the reply, the server reads the request (it writes the
// reply with AppendReplyJSON). "protojson" runs the same through protojson alone, what
// the codec falls back on; "protobuf" is the binary encoding's cost for comparison.
//
//	go test ./messages -run '^$' -bench JSONPath -benchmem
func BenchmarkJSONPath(b *testing.B) {
	req := &ReserveRequest{OperationId: "op-123456", HolderId: "h12", TtlMs: 30000, Members: []*Member{{ResourceId: "gpu/node-17"}}}
	rep := &Reply{Outcome: "committed", Code: "ok", Lsn: 1234, Lease: &Lease{LeaseId: "0000000000001234-03", LeaseEpoch: 1,
		State: "reserved", HolderId: "h12", DeadlineSlot: 99, Members: []*Member{{ResourceId: "gpu/node-17"}}}}
	reqJSON, _ := MarshalJSON(req)
	repJSON, _ := MarshalJSON(rep)
	reqProto, _ := proto.Marshal(req)
	repProto, _ := proto.Marshal(rep)
	b.Run("request-encode/fast", func(b *testing.B) {
		for b.Loop() {
			_, _ = MarshalJSON(req)
		}
	})
	b.Run("request-encode/protojson", func(b *testing.B) {
		for b.Loop() {
			_, _ = marshalJSONSlow(req)
		}
	})
	b.Run("request-encode/protobuf", func(b *testing.B) {
		for b.Loop() {
			_, _ = proto.Marshal(req)
		}
	})
	b.Run("request-decode/fast", func(b *testing.B) {
		for b.Loop() {
			_ = UnmarshalJSON(reqJSON, &ReserveRequest{})
		}
	})
	b.Run("request-decode/protojson", func(b *testing.B) {
		for b.Loop() {
			_ = jsonStrict.Unmarshal(reqJSON, &ReserveRequest{})
		}
	})
	b.Run("request-decode/protobuf", func(b *testing.B) {
		for b.Loop() {
			_ = UnmarshalProto(reqProto, &ReserveRequest{})
		}
	})
	b.Run("reply-decode/fast", func(b *testing.B) {
		for b.Loop() {
			_ = UnmarshalJSONTolerant(repJSON, &Reply{})
		}
	})
	b.Run("reply-decode/protojson", func(b *testing.B) {
		for b.Loop() {
			_ = jsonTolerant.Unmarshal(repJSON, &Reply{})
		}
	})
	b.Run("reply-decode/protobuf", func(b *testing.B) {
		for b.Loop() {
			_ = proto.Unmarshal(repProto, &Reply{})
		}
	})
}
