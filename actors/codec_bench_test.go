package actors

import (
	"testing"

	"github.com/vmihailenco/msgpack/v5"
	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/messages"
)

// The journal stores commands. These benchmarks compare the candidate payload
// encodings on a typical command (a 3-member reserve): the kernel's canonical binary
// form, msgpack of the same struct, and protobuf of the equivalent wire message.
// docs/design.md records the numbers and the choice.

func benchCommand() *kernel.Command {
	return &kernel.Command{Verb: contract.VerbReserve, Tenant: "acme", OperationID: "7f3a9c2e-reserve-000042",
		HolderID: "scheduler-3", TTLMillis: 30_000, TTLSlots: 300, Members: []kernel.Member{
			{Kind: kernel.MemberResource, ID: "node14/gpu0"},
			{Kind: kernel.MemberPool, ID: "node14/mem", Quantity: 4},
			{Kind: kernel.MemberRange, ID: "node14/vxlan"},
		}}
}

func BenchmarkPayloadKernelBinary(b *testing.B) {
	c := benchCommand()
	var buf []byte
	var d kernel.Command
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		buf = c.AppendBinary(buf[:0])
		if err := kernel.DecodeCommand(buf, &d); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(buf)), "bytes")
}

func BenchmarkPayloadMsgpack(b *testing.B) {
	c := benchCommand()
	var buf []byte
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var err error
		if buf, err = msgpack.Marshal(c); err != nil {
			b.Fatal(err)
		}
		var d kernel.Command
		if err := msgpack.Unmarshal(buf, &d); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(buf)), "bytes")
}

func BenchmarkPayloadProtobuf(b *testing.B) {
	m := &messages.ReserveRequest{OperationId: "7f3a9c2e-reserve-000042", HolderId: "scheduler-3", TtlMs: 30_000,
		Members: []*messages.Member{{ResourceId: "node14/gpu0"}, {PoolId: "node14/mem", Quantity: 4}, {RangeId: "node14/vxlan"}}}
	var buf []byte
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var err error
		if buf, err = (proto.MarshalOptions{}).MarshalAppend(buf[:0], m); err != nil {
			b.Fatal(err)
		}
		var d messages.ReserveRequest
		if err := proto.Unmarshal(buf, &d); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(buf)), "bytes")
}
