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
	for _, bm := range []struct {
		name string
		run  func()
	}{
		{"request-encode/fast", func() { _, _ = MarshalJSON(req) }},
		{"request-encode/protojson", func() { _, _ = marshalJSONSlow(req) }},
		{"request-encode/protobuf", func() { _, _ = proto.Marshal(req) }},
		{"request-decode/fast", func() { _ = UnmarshalJSON(reqJSON, &ReserveRequest{}) }},
		{"request-decode/protojson", func() { _ = jsonStrict.Unmarshal(reqJSON, &ReserveRequest{}) }},
		{"request-decode/protobuf", func() { _ = UnmarshalProto(reqProto, &ReserveRequest{}) }},
		{"reply-decode/fast", func() { _ = UnmarshalJSONTolerant(repJSON, &Reply{}) }},
		{"reply-decode/protojson", func() { _ = jsonTolerant.Unmarshal(repJSON, &Reply{}) }},
		{"reply-decode/protobuf", func() { _ = proto.Unmarshal(repProto, &Reply{}) }},
	} {
		b.Run(bm.name, func(b *testing.B) {
			for b.Loop() {
				bm.run()
			}
		})
	}
}
