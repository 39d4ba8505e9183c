package kernel

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/holdfast/holdfast/contract"
)

// BenchmarkRetentionMemory measures what a shard's sustained writes cost in memory: the
// heap bytes per remembered operation (the retry cache) and per ended lease retained for
// its history window, with n of each in the tables (nothing leaves a window during the
// run). These are the numbers the table bounds are sized from (docs/benchmarks.md).
//
//	go test ./kernel -run '^$' -bench RetentionMemory -benchtime 1x
func BenchmarkRetentionMemory(b *testing.B) {
	for _, n := range []int{1 << 18, 1 << 20, 3 << 20} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				op, ended := retentionBytes(b, n)
				b.ReportMetric(op, "B/operation")
				b.ReportMetric(ended, "B/ended-lease")
			}
		})
	}
}

func retentionBytes(b *testing.B, n int) (perOp, perEnded float64) {
	cfg := DefaultConfig()
	cfg.MaxOperations, cfg.MaxLeases, cfg.MaxMembers = 1<<30, 1<<30, 1<<30
	s := newFrozenBenchShard(b, cfg, 1024)
	ids := make([]string, 2*n)
	for i := range ids {
		ids[i] = fmt.Sprintf("op-%09d", i)
	}
	renew := &Command{Verb: contract.VerbRenew, Tenant: "default", HolderID: "worker-1", Epoch: 1, TTLMillis: 30_000, TTLSlots: 300}
	reserve := &Command{Verb: contract.VerbReserve, Tenant: "default", HolderID: "worker-1", TTLMillis: 30_000, TTLSlots: 300,
		Members: []Member{{Kind: MemberResource, ID: "seat-00000"}}}
	reserve.OperationID = "first"
	renew.LeaseLSN = s.apply(b, reserve).Lease.LSN

	// Operations alone: n renews of one lease, each an outcome that changed state.
	before := heapInUse()
	for i := 0; i < n; i++ {
		renew.OperationID = ids[i]
		s.apply(b, renew)
	}
	perOp = (float64(heapInUse()) - float64(before)) / float64(n)

	// Ended leases: n/2 reserve + release cycles add n operations and n/2 ended leases.
	release := &Command{Verb: contract.VerbRelease, Tenant: "default", HolderID: "worker-1", Epoch: 1}
	before = heapInUse()
	for i := 0; i < n/2; i++ {
		reserve.OperationID = ids[n+2*i]
		reserve.Members[0].ID = fmt.Sprintf("seat-%05d", 1+i%1023)
		release.LeaseLSN = s.apply(b, reserve).Lease.LSN
		release.OperationID = ids[n+2*i+1]
		s.apply(b, release)
	}
	after := heapInUse()
	perEnded = (float64(after) - float64(before) - float64(n)*perOp) / float64(n/2)
	runtime.KeepAlive(s)
	runtime.KeepAlive(ids)
	return perOp, perEnded
}
