package kernel

import (
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/holdfast/holdfast/contract"
)

// benchShard applies entries the way the shard runtime does, with a slot that advances
// every slotEvery entries so retention windows pass and tables stay in steady state.
type benchShard struct {
	k         *Kernel
	lsn       uint64
	slot      uint64
	slotEvery uint64
	out       Output
}

func newBenchShard(tb testing.TB, cfg Config) *benchShard {
	k, err := New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return &benchShard{k: k, slotEvery: 1024}
}

func benchConfig() Config {
	cfg := DefaultConfig()
	cfg.MaxResources = 1 << 21
	cfg.MaxLeases = 1 << 21
	cfg.MaxMembers = 1 << 23
	cfg.MaxOperations = 1 << 16
	cfg.MaxRangeValues = 1 << 21
	cfg.DedupeWindowSlots = 1
	cfg.HistoryWindowSlots = 1
	return cfg
}

// newFrozenBenchShard is a bench shard whose clock stays in one slot (nothing leaves a
// window) holding resources seat-0000… of tenant default, created by operations c-<id>.
func newFrozenBenchShard(tb testing.TB, cfg Config, resources int) *benchShard {
	s := newBenchShard(tb, cfg)
	s.slotEvery = 1 << 62
	create := &Command{Verb: contract.VerbCreateResource, Tenant: "default"}
	for i := 0; i < resources; i++ {
		id := fmt.Sprintf("seat-%05d", i)
		create.OperationID, create.ObjectID = "c-"+id, id
		s.apply(tb, create)
	}
	return s
}

func (s *benchShard) apply(tb testing.TB, c *Command) *Output {
	s.lsn++
	if s.lsn%s.slotEvery == 0 {
		s.slot++
	}
	Normalize(&s.k.shape, c)
	s.k.Apply(Entry{LSN: s.lsn, Slot: s.slot, Cmd: c}, &s.out)
	if s.out.Code != contract.CodeOK {
		tb.Fatalf("lsn %d %s: %s", s.lsn, c.Verb, s.out.Code)
	}
	return &s.out
}

// opIDs is a pool of operation ids reused round-robin; with the windows above an id has
// long retired before it comes round again, so no entry hits the retry cache.
func opIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("op-%d", i)
	}
	return ids
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkReserveRelease: reserve then release one resource on a shard holding
// 1,000,000 resources. Reports bytes per resource of the loaded shard.
// The loaded shard is built once and shared by the benchmark's runs (b.N escalates).
var loaded struct {
	s           *benchShard
	perResource float64
	next        int // operation ids continue across runs: a reused id would hit the retry cache
}

func BenchmarkReserveRelease(b *testing.B) {
	const n = 1_000_000
	if loaded.s == nil {
		before := heapInUse()
		s := newBenchShard(b, benchConfig())
		create := &Command{Verb: contract.VerbCreateResource, Tenant: "default"}
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("seat-%07d", i)
			create.OperationID, create.ObjectID = id, id
			s.apply(b, create)
		}
		loaded.s, loaded.perResource = s, float64(heapInUse()-before)/n
	}
	s, perResource := loaded.s, loaded.perResource
	ops := opIDs(1 << 14)
	reserve := &Command{Verb: contract.VerbReserve, Tenant: "default", HolderID: "worker-1", TTLMillis: 30_000,
		Members: []Member{{Kind: MemberResource}}}
	release := &Command{Verb: contract.VerbRelease, Tenant: "default", HolderID: "worker-1", Epoch: 1}
	names := make([]string, 4096)
	for i := range names {
		names[i] = fmt.Sprintf("seat-%07d", (i*7919)%n)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		n := loaded.next
		loaded.next += 2
		reserve.OperationID = ops[n%len(ops)]
		reserve.Members[0].ID = names[i%len(names)]
		out := s.apply(b, reserve)
		release.OperationID = ops[(n+1)%len(ops)]
		release.LeaseLSN = out.Lease.LSN
		s.apply(b, release)
	}
	b.StopTimer()
	b.ReportMetric(perResource, "B/resource")
}

// BenchmarkReserveBundle8: reserve + release of an 8-member bundle (one placement key).
func BenchmarkReserveBundle8(b *testing.B) {
	s := newBenchShard(b, benchConfig())
	create := &Command{Verb: contract.VerbCreateResource, Tenant: "default"}
	const nodes = 1024
	for i := 0; i < nodes; i++ {
		for g := 0; g < 8; g++ {
			id := fmt.Sprintf("node%d/gpu%d", i, g)
			create.OperationID, create.ObjectID = id, id
			s.apply(b, create)
		}
	}
	bundles := make([][]Member, nodes)
	for i := range bundles {
		for g := 0; g < 8; g++ {
			bundles[i] = append(bundles[i], Member{Kind: MemberResource, ID: fmt.Sprintf("node%d/gpu%d", i, g)})
		}
	}
	ops := opIDs(1 << 14)
	reserve := &Command{Verb: contract.VerbReserve, Tenant: "default", HolderID: "scheduler", TTLMillis: 30_000}
	release := &Command{Verb: contract.VerbRelease, Tenant: "default", HolderID: "scheduler", Epoch: 1}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		reserve.OperationID = ops[(2*i)%len(ops)]
		reserve.Members = bundles[i%nodes]
		out := s.apply(b, reserve)
		release.OperationID = ops[(2*i+1)%len(ops)]
		release.LeaseLSN = out.Lease.LSN
		s.apply(b, release)
	}
}

// BenchmarkRangeAllocate: allocate ("any" value) + release on a range that already has
// 1,000,000 values allocated, for each strategy. Reports bytes per allocated value.
func BenchmarkRangeAllocate(b *testing.B) {
	for _, st := range []Strategy{StrategyLowestFree, StrategyRandom, StrategyLeastRecentlyFreed} {
		b.Run(st.String(), func(b *testing.B) {
			const n = 1_000_000
			s := newBenchShard(b, benchConfig())
			last := uint64(math.MaxUint64)
			if st == StrategyRandom {
				last = 1<<32 - 1 // a million scattered values: a million intervals
			}
			s.apply(b, &Command{Verb: contract.VerbCreateRange, Tenant: "default", OperationID: "create", ObjectID: "vxlan",
				First: 0, Last: last, Strategy: st})
			before := heapInUse()
			hold := &Command{Verb: contract.VerbReserve, Tenant: "default", HolderID: "filler", Activate: true,
				Members: []Member{{Kind: MemberRange, ID: "vxlan"}}}
			ops := opIDs(1 << 14)
			for i := 0; i < n; i++ {
				hold.OperationID = ops[i%len(ops)]
				s.apply(b, hold)
			}
			// Bytes per value of the whole shard: the range plus the leases holding them.
			perValue := float64(heapInUse()-before) / n
			r := &s.k.ranges[0]
			rangeBytes := float64(r.allocated.MemoryBytes()+r.used.MemoryBytes()+r.freed.MemoryBytes()) / n
			reserve := &Command{Verb: contract.VerbReserve, Tenant: "default", HolderID: "vtep", TTLMillis: 30_000,
				Members: []Member{{Kind: MemberRange, ID: "vxlan"}}}
			release := &Command{Verb: contract.VerbRelease, Tenant: "default", HolderID: "vtep", Epoch: 1}
			ops = opIDs(1 << 14)
			for i := range ops {
				ops[i] = "b" + ops[i] // distinct from the filler's ids, still in their window
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				reserve.OperationID = ops[(2*i)%len(ops)]
				out := s.apply(b, reserve)
				release.OperationID = ops[(2*i+1)%len(ops)]
				release.LeaseLSN = out.Lease.LSN
				s.apply(b, release)
			}
			b.StopTimer()
			b.ReportMetric(perValue, "B/value")
			b.ReportMetric(rangeBytes, "range-B/value")
		})
	}
}

// BenchmarkCreateDelete: create a resource, reserve and release it, delete it, on a
// shard holding 1,000,000 other resources, with the clock moving so every grave frees
// and its slot is reused: the churn of short-lived objects (a bench's, a scheduler's).
// One op is the four entries.
func BenchmarkCreateDelete(b *testing.B) {
	s := newBenchShard(b, benchConfig())
	create := &Command{Verb: contract.VerbCreateResource, Tenant: "default"}
	for i := 0; i < 1_000_000; i++ {
		id := fmt.Sprintf("seat-%07d", i)
		create.OperationID, create.ObjectID = id, id
		s.apply(b, create)
	}
	s.slotEvery = 64 // history window 1 slot: graves free within a few hundred entries
	ops := opIDs(1 << 14)
	reserve := &Command{Verb: contract.VerbReserve, Tenant: "default", HolderID: "worker-1", TTLMillis: 30_000,
		Members: []Member{{Kind: MemberResource}}}
	release := &Command{Verb: contract.VerbRelease, Tenant: "default", HolderID: "worker-1", Epoch: 1}
	del := &Command{Verb: contract.VerbDeleteResource, Tenant: "default"}
	names := make([]string, 256)
	for i := range names {
		names[i] = fmt.Sprintf("short-%03d", i)
	}
	slots := len(s.k.res)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := names[i%len(names)]
		create.OperationID, create.ObjectID = ops[(4*i)%len(ops)], id
		s.apply(b, create)
		reserve.OperationID, reserve.Members[0].ID = ops[(4*i+1)%len(ops)], id
		reserve.LeaseLSN = 0
		lsn := s.apply(b, reserve).Lease.LSN
		release.OperationID, release.LeaseLSN = ops[(4*i+2)%len(ops)], lsn
		s.apply(b, release)
		del.OperationID, del.ObjectID = ops[(4*i+3)%len(ops)], id
		s.apply(b, del)
	}
	b.StopTimer()
	if grown := len(s.k.res) - slots; grown > 1024 {
		b.Fatalf("the resource table grew by %d slots: graves are not reused", grown)
	}
}
