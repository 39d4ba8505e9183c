package kernel

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/holdfast/holdfast/contract"
)

// The allocator verbs' costs on a shard whose range has 1,000,000 scattered values
// allocated (a million intervals in [0, 2^32), each held by a lease of its own labelled
// with one of 1,000 owners): range.lookup, a reserve of a specific value released by
// value, a page of range.allocations and of lease.list by label; and lease.import of
// 1,000 leases per entry.

var allocLoaded struct {
	s      *benchShard
	values []uint64
	next   int
}

func allocShard(b *testing.B) *benchShard {
	if allocLoaded.s != nil {
		return allocLoaded.s
	}
	s := newBenchShard(b, benchConfig())
	s.apply(b, &Command{Verb: contract.VerbCreateRange, Tenant: "default", OperationID: "create", ObjectID: "vxlan",
		First: 0, Last: 1<<32 - 1, Strategy: StrategyRandom})
	hold := &Command{Verb: contract.VerbReserve, Tenant: "default", HolderID: "nova", Activate: true,
		Members: []Member{{Kind: MemberRange, ID: "vxlan"}}}
	ops := opIDs(1 << 14)
	for i := 0; i < 1_000_000; i++ {
		hold.OperationID = ops[i%len(ops)]
		hold.Labels = []Label{{Key: "owner_uuid", Value: fmt.Sprintf("vm-%03d", i%1000)}}
		out := s.apply(b, hold)
		allocLoaded.values = append(allocLoaded.values, out.Lease.Members[0].Value)
	}
	allocLoaded.s = s
	return s
}

// nextOp is an operation id not used by the loading (they would hit the retry cache).
func nextOp() string {
	allocLoaded.next++
	return fmt.Sprintf("bench-%d", allocLoaded.next)
}

func BenchmarkLookupValue(b *testing.B) {
	s := allocShard(b)
	r := rand.New(rand.NewPCG(1, 2))
	var out Output
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		v := allocLoaded.values[r.IntN(len(allocLoaded.values))]
		if s.k.LookupValue("default", "vxlan", v, &out) != contract.ValueHeld {
			b.Fatal("not held")
		}
	}
}

// BenchmarkReleaseValue: reserve a specific free value, then release it by value.
func BenchmarkReleaseValue(b *testing.B) {
	s := allocShard(b)
	reserve := &Command{Verb: contract.VerbReserve, Tenant: "default", HolderID: "neutron", Activate: true,
		Members: []Member{{Kind: MemberRange, ID: "vxlan", HasValue: true}}}
	release := &Command{Verb: contract.VerbReleaseValue, Tenant: "default", ObjectID: "vxlan", HolderID: "neutron"}
	var out Output
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for {
			reserve.Members[0].Value = uint64(i*7919) % (1 << 32)
			if s.k.LookupValue("default", "vxlan", reserve.Members[0].Value, &out) == contract.ValueFree {
				break
			}
			i++
		}
		reserve.OperationID = nextOp()
		s.apply(b, reserve)
		release.OperationID, release.Value = nextOp(), reserve.Members[0].Value
		s.apply(b, release)
	}
}

// BenchmarkListAllocationsPage: a page of 100 allocations from a random cursor.
func BenchmarkListAllocationsPage(b *testing.B) {
	s := allocShard(b)
	r := rand.New(rand.NewPCG(3, 4))
	var p ListPage
	q := ListQuery{Verb: contract.VerbListAllocations, Tenant: "default", ID: "vxlan", Limit: 100}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q.From = r.Uint64N(1 << 32)
		s.k.List(&q, &p)
		if p.Code != contract.CodeOK {
			b.Fatal(p.Code)
		}
	}
}

// BenchmarkListLeasesByLabel: a page of the 1,000 leases of one owner, 100 at a time.
func BenchmarkListLeasesByLabel(b *testing.B) {
	s := allocShard(b)
	var p ListPage
	q := ListQuery{Verb: contract.VerbListLeases, Tenant: "default", Limit: 100, HasLabel: true}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		q.Label = Label{Key: "owner_uuid", Value: fmt.Sprintf("vm-%03d", i%1000)}
		s.k.List(&q, &p)
		if p.Code != contract.CodeOK || len(p.Leases) != 100 {
			b.Fatal(p.Code, len(p.Leases))
		}
	}
}

// BenchmarkImport1000: one lease.import of 1,000 single-value leases (999 skip entries
// and the import), into a range of 2^32 values; 100 of them import 100,000 allocations.
// Reports ns per imported lease too.
func BenchmarkImport1000(b *testing.B) {
	s := newBenchShard(b, benchConfig())
	s.slotEvery = 1 << 62
	s.apply(b, &Command{Verb: contract.VerbCreateRange, Tenant: "default", OperationID: "create", ObjectID: "cids",
		First: 3, Last: 1<<32 - 1})
	imp := &Command{Verb: contract.VerbImport, Tenant: "default", Imports: make([]ImportLease, 1000)}
	skip := &Command{Verb: contract.VerbSkip}
	next := uint64(3)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if s.k.Stats().Leases+1000 > s.k.shape.MaxLeases {
			b.StopTimer()
			s = newBenchShard(b, benchConfig())
			s.slotEvery = 1 << 62
			s.apply(b, &Command{Verb: contract.VerbCreateRange, Tenant: "default", OperationID: "create", ObjectID: "cids",
				First: 3, Last: 1<<32 - 1})
			b.StartTimer()
		}
		for j := range imp.Imports {
			imp.Imports[j] = ImportLease{HolderID: "compute", Activate: true,
				Members: []Member{{Kind: MemberRange, ID: "cids", Value: next, HasValue: true}}}
			next += 7
		}
		imp.OperationID = fmt.Sprintf("imp-%d", i)
		for range SkipsBefore(imp) {
			s.lsn++
			s.k.Apply(Entry{LSN: s.lsn, Slot: s.slot, Cmd: skip}, &s.out)
		}
		s.apply(b, imp)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/lease")
}
