package kernel

import (
	"fmt"
	"testing"

	"github.com/holdfast/holdfast/contract"
)

// BenchmarkSnapshot encodes a shard with its default-size lease and operation tables
// full (8,388,608 remembered operations, 3,355,443 leases in their history window) plus
// 10,000 resources: the largest state a shard reaches under the defaults. The shard runtime takes snapshots on the shard's goroutine, so this is how
// long its writes wait. "presized" starts from a buffer the size of the last snapshot;
// "restore" is the start-up side.
func BenchmarkSnapshot(b *testing.B) {
	cfg := DefaultConfig()
	s := newFrozenBenchShard(b, cfg, 10_000)
	reserve := &Command{Verb: contract.VerbReserve, Tenant: "default", HolderID: "worker-1", TTLMillis: 30_000,
		Members: []Member{{Kind: MemberResource}}}
	release := &Command{Verb: contract.VerbRelease, Tenant: "default", HolderID: "worker-1", Epoch: 1}
	for i := 0; s.k.ops.len() < cfg.MaxOperations-2 && s.k.leaseCount() < cfg.MaxLeases-1; i++ {
		reserve.OperationID = fmt.Sprintf("r-%d", i)
		reserve.Members[0].ID = fmt.Sprintf("seat-%05d", i%10_000)
		out := s.apply(b, reserve)
		release.OperationID = fmt.Sprintf("x-%d", i)
		release.LeaseLSN = out.Lease.LSN
		s.apply(b, release)
	}
	// The lease table is full: renews of one lease fill the rest of the retry cache.
	reserve.OperationID, reserve.Members[0].ID = "last", "seat-00000"
	renew := &Command{Verb: contract.VerbRenew, Tenant: "default", HolderID: "worker-1", Epoch: 1, TTLMillis: 30_000,
		LeaseLSN: s.apply(b, reserve).Lease.LSN}
	for i := 0; s.k.ops.len() < cfg.MaxOperations; i++ {
		renew.OperationID = fmt.Sprintf("n-%d", i)
		s.apply(b, renew)
	}
	size := len(s.k.Snapshot(nil))
	b.Logf("%d operations, %d leases: snapshot of %d bytes", s.k.ops.len(), s.k.leaseCount(), size)
	b.Run("fresh", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_ = s.k.Snapshot(nil)
		}
		b.ReportMetric(float64(size), "bytes")
	})
	// What the shard's writes wait for: the capture; the encoding runs beside them.
	b.Run("capture", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_ = s.k.Capture(nil)
		}
	})
	b.Run("presized", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_ = s.k.Snapshot(make([]byte, 0, size+size/8))
		}
	})
	b.Run("restore", func(b *testing.B) {
		snap := s.k.Snapshot(nil)
		for i := 0; i < b.N; i++ {
			if _, err := Restore(cfg, snap); err != nil {
				b.Fatal(err)
			}
		}
	})
}
