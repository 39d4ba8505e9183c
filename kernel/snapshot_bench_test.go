package kernel

import (
	"fmt"
	"testing"
)

// BenchmarkSnapshot encodes a shard with its default-size operation table full (the
// state a busy shard reaches within minutes: every committed write is remembered for
// the dedupe window) plus 10,000 resources and 1,000,000 ended leases in their history
// window. The shard runtime takes snapshots on the shard's goroutine, so this is how
// long its writes wait. "presized" starts from a buffer the size of the last snapshot;
// "restore" is the start-up side.
func BenchmarkSnapshot(b *testing.B) {
	cfg := DefaultConfig()
	s := newBenchShard(b, cfg)
	s.slotEvery = 1 << 62 // one slot: nothing leaves a window
	create := &Command{Verb: VerbCreateResource, Tenant: "default"}
	for i := 0; i < 10_000; i++ {
		id := fmt.Sprintf("seat-%05d", i)
		create.OperationID, create.ObjectID = "c-"+id, id
		s.apply(b, create)
	}
	reserve := &Command{Verb: VerbReserve, Tenant: "default", HolderID: "worker-1", TTLMillis: 30_000,
		Members: []Member{{Kind: MemberResource}}}
	release := &Command{Verb: VerbRelease, Tenant: "default", HolderID: "worker-1", Epoch: 1}
	for i := 0; s.k.ops.len() < cfg.MaxOperations-2; i++ {
		reserve.OperationID = fmt.Sprintf("r-%d", i)
		reserve.Members[0].ID = fmt.Sprintf("seat-%05d", i%10_000)
		out := s.apply(b, reserve)
		release.OperationID = fmt.Sprintf("x-%d", i)
		release.LeaseLSN = out.Lease.LSN
		s.apply(b, release)
	}
	size := len(s.k.Snapshot(nil))
	b.Logf("%d operations, %d leases: snapshot of %d bytes", s.k.ops.len(), len(s.k.leases), size)
	b.Run("fresh", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			_ = s.k.Snapshot(nil)
		}
		b.ReportMetric(float64(size), "bytes")
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
