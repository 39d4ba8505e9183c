package actors

import (
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// batchStats is an Observer that averages batch sizes.
type batchStats struct {
	batches, entries atomic.Int64
}

func (b *batchStats) Batch(_ uint32, n int, _ time.Duration) {
	b.batches.Add(1)
	b.entries.Add(int64(n))
}

func (b *batchStats) Expired(uint32, time.Duration) {}

func benchOptions(dir string, shards uint32) Options {
	cfg := kernel.DefaultConfig()
	cfg.MaxOperations = 1 << 22
	cfg.MaxLeases = 1 << 21
	cfg.DedupeWindowSlots = 100 // 1 s at 10 ms: the tables stay in steady state
	cfg.HistoryWindowSlots = 100
	return Options{Dir: dir, Shards: shards, Slot: 10 * time.Millisecond, Kernel: cfg, SnapshotEvery: -1,
		MaxQueue: 1 << 16}
}

// runDurable drives 64 goroutines, each doing reserve then release against the shards
// through the real on-disk journal, and reports durable ops/s, latency percentiles and
// the mean batch size.
func runDurable(b *testing.B, shards uint32, maxBatch int) {
	const workers = 64
	o := benchOptions(b.TempDir(), shards)
	o.MaxBatch = maxBatch
	stats := &batchStats{}
	o.Observer = stats
	sys, err := Start(o)
	if err != nil {
		b.Fatal(err)
	}
	defer sys.Stop()
	res := make([]string, workers)
	for w := range res {
		res[w] = fmt.Sprintf("n%d/gpu", w)
		shard := contract.ShardOf("t", contract.PlacementKey(res[w]), shards)
		if r := do(b, sys, shard, createResource("c"+res[w], res[w])); r.Code != contract.CodeOK {
			b.Fatal(r.Code)
		}
	}
	lat := make([][]time.Duration, workers)
	var next atomic.Int64
	var run atomic.Int64
	run.Add(1)
	b.ResetTimer()
	start := time.Now()
	stats.batches.Store(0)
	stats.entries.Store(0)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			shard := contract.ShardOf("t", contract.PlacementKey(res[w]), shards)
			ch := make(chan *Reply, 1)
			reply := func(r *Reply) { ch <- r }
			for next.Add(1) <= int64(b.N) {
				i := run.Add(1)
				t0 := time.Now()
				sys.Write(shard, reserve(fmt.Sprintf("r%d", i), "h", res[w], 60_000), reply)
				r := <-ch
				t1 := time.Now()
				if r.Code != contract.CodeOK {
					b.Errorf("reserve: %s", r.Code)
					return
				}
				sys.Write(shard, release(fmt.Sprintf("x%d", i), "h", r.Lease.LSN, 1), reply)
				if x := <-ch; x.Code != contract.CodeOK {
					b.Errorf("release: %s", x.Code)
					return
				}
				lat[w] = append(lat[w], t1.Sub(t0), time.Since(t1))
			}
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	if len(all) == 0 {
		return
	}
	pct := func(p float64) float64 { return float64(all[int(p*float64(len(all)-1))].Microseconds()) }
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "ops/s")
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	if n := stats.batches.Load(); n > 0 {
		b.ReportMetric(float64(stats.entries.Load())/float64(n), "entries/batch")
	}
}

// BenchmarkShardDurable: one shard, group commit. One op is one durable write.
func BenchmarkShardDurable(b *testing.B) { runDurable(b, 1, 0) }

// BenchmarkShardDurable8: the same load spread over 8 shards.
func BenchmarkShardDurable8(b *testing.B) { runDurable(b, 8, 0) }

// BenchmarkShardDurablePerOpFsync: one shard with batches of one entry: an fsync per write.
func BenchmarkShardDurablePerOpFsync(b *testing.B) { runDurable(b, 1, 1) }

// BenchmarkRecovery: start-up time of a shard whose journal holds 1,000,000 entries,
// replayed from the start or from a snapshot near the end.
func BenchmarkRecovery(b *testing.B) {
	for _, snap := range []bool{false, true} {
		b.Run(fmt.Sprintf("snapshot=%v", snap), func(b *testing.B) {
			const n = 1_000_000
			dir := b.TempDir()
			o := benchOptions(dir, 1)
			if snap {
				o.SnapshotEvery = n - 1000
			}
			sys, err := Start(o)
			if err != nil {
				b.Fatal(err)
			}
			var wg sync.WaitGroup
			const workers = 64
			for w := 0; w < workers; w++ {
				wg.Add(1)
				go func(w int) {
					defer wg.Done()
					ch := make(chan *Reply, 1)
					for i := w; i < n; i += workers {
						sys.Write(0, createResource(fmt.Sprintf("c%d", i), fmt.Sprintf("r%d", i)), func(r *Reply) { ch <- r })
						<-ch
					}
				}(w)
			}
			wg.Wait()
			time.Sleep(time.Second) // the snapshot is written beside the actor
			sys.Stop()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s, err := Start(o)
				if err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				s.Stop()
				b.StartTimer()
			}
		})
	}
}
