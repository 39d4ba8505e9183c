package kernel

import (
	"fmt"
	"testing"

	"github.com/holdfast/holdfast/contract"
)

// BenchmarkClaimNext measures one claim of the next work shard and its release, applied
// to a shard (no journal, no network), with a run of n work shards of which half are
// held: claim-next scans the run's work shards, so its cost grows with the run.
func BenchmarkClaimNext(b *testing.B) {
	for _, n := range []int{16, 256, 4096, 65536} {
		b.Run(fmt.Sprintf("work=%d", n), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.MaxWork = n
			k, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			var out Output
			lsn := uint64(0)
			apply := func(c *Command) {
				lsn++
				c.Tenant = "t"
				c.OperationID = fmt.Sprintf("o%d", lsn)
				Normalize(&cfg.Shape, c)
				k.Apply(Entry{LSN: lsn, Slot: 1, Cmd: c}, &out)
			}
			for i := 0; i < n; i += contract.MaxManifestWork {
				c := &Command{ObjectID: "run", Verb: contract.VerbCreateRun}
				if i > 0 {
					c.Verb = contract.VerbRegisterRun
				}
				for j := i; j < min(n, i+contract.MaxManifestWork); j++ {
					c.Work = append(c.Work, WorkSpec{Name: fmt.Sprintf("w%06d", j)})
				}
				apply(c)
				if out.Code != contract.CodeOK {
					b.Fatalf("manifest: %s", out.Code)
				}
			}
			claim := func() uint64 {
				apply(&Command{Verb: contract.VerbReserve, HolderID: "h", TTLMillis: 3_600_000,
					Members: []Member{{Kind: MemberWork, ID: "run"}}})
				if out.Code != contract.CodeOK {
					b.Fatalf("claim: %s", out.Code)
				}
				return out.LSN
			}
			for i := 0; i < n/2; i++ {
				claim()
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l := claim()
				apply(&Command{Verb: contract.VerbRelease, HolderID: "h", LeaseLSN: l, Epoch: 1})
			}
		})
	}
}
