package bridge

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/messages"
)

// BenchmarkImport100k imports 100,000 allocations over NATS, 1,000 leases per
// lease.import (protobuf), as a migration's cut-over would; one op is the whole 100,000.
func BenchmarkImport100k(b *testing.B) {
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s := startStack(b, startNATS(b), stackOptions{shards: 4, kernel: defaultBounds})
		s.req("t", "range.create", `{"operation_id":"c","range_id":"vsock","first":3,"last":4294967295}`).want(b, "ok")
		b.StartTimer()
		for call := 0; call < 100; call++ {
			req := &messages.ImportRequest{OperationId: fmt.Sprintf("imp-%d", call)}
			for j := 0; j < 1000; j++ {
				v := uint64(3 + 7*(call*1000+j))
				req.Leases = append(req.Leases, &messages.ImportLease{HolderId: "compute", Activate: true,
					Members: []*messages.Member{{RangeId: "vsock", Value: &v}}, Labels: map[string]string{"owner_uuid": fmt.Sprintf("vm-%d", j%100)}})
			}
			r, _ := s.preq("t", "lease.import", req)
			if r.Code != messages.CodeOK || len(r.Leases) != 1000 {
				b.Fatalf("import %d: %s %s", call, r.Code, r.Message)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*100_000), "ns/allocation")
}

// BenchmarkAllocatorRoundTrips: range.lookup, a reserve released by value, and a page
// of 100 allocations, each one request over NATS (protobuf), on a range with 10,000
// values allocated.
func BenchmarkAllocatorRoundTrips(b *testing.B) {
	s := startStack(b, startNATS(b), stackOptions{shards: 4, kernel: defaultBounds})
	s.req("t", "range.create", `{"operation_id":"c","range_id":"vx","first":1,"last":16777215,"strategy":"random"}`).want(b, "ok")
	var held []uint64
	for call := 0; call < 10; call++ {
		req := &messages.ImportRequest{OperationId: fmt.Sprintf("imp-%d", call)}
		for j := 0; j < 1000; j++ {
			v := uint64(1 + 997*(call*1000+j))
			held = append(held, v)
			req.Leases = append(req.Leases, &messages.ImportLease{HolderId: "net", Activate: true, Members: []*messages.Member{{RangeId: "vx", Value: &v}}})
		}
		if r, _ := s.preq("t", "lease.import", req); r.Code != messages.CodeOK {
			b.Fatal(r.Code, r.Message)
		}
	}
	b.Run("lookup", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			r, _ := s.preq("t", "range.lookup", &messages.LookupValueRequest{RangeId: "vx", Value: held[i%len(held)]})
			if r.ValueState != "held" {
				b.Fatal(r.Code, r.ValueState)
			}
		}
	})
	b.Run("reserve+release_by_value", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			v := uint64(2 + 997*(i%10000))
			r, _ := s.preq("t", "lease.reserve", &messages.ReserveRequest{OperationId: fmt.Sprintf("r%d", i), HolderId: "h", Activate: true,
				Members: []*messages.Member{{RangeId: "vx", Value: proto.Uint64(v)}}})
			if r.Code != messages.CodeOK {
				b.Fatal(r.Code, r.Message)
			}
			r, _ = s.preq("t", "range.release", &messages.ValueRequest{OperationId: fmt.Sprintf("v%d", i), RangeId: "vx", Value: v, HolderId: "h"})
			if r.Code != messages.CodeOK {
				b.Fatal(r.Code, r.Message)
			}
		}
	})
	b.Run("allocations_page_100", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			r, _ := s.preq("t", "range.allocations", &messages.ListAllocationsRequest{RangeId: "vx", Limit: proto.Uint32(100)})
			if len(r.Allocations) != 100 {
				b.Fatal(r.Code, len(r.Allocations))
			}
		}
	})
}

// defaultBounds gives the benchmarks the service's default table bounds (the tests'
// are small).
func defaultBounds(k *kernel.Config) {
	slot := k.SlotMillis
	k.Shape = kernel.DefaultConfig().Shape
	k.SlotMillis = slot
}
