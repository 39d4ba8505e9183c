package valueset

import (
	"runtime"
	"testing"
)

const benchIntervals = 1_000_000

// scattered returns a set holding every other value 0, 2, 4, ..., so that
// each value is its own interval: the worst case for interval count.
func scattered(b *testing.B) *Set {
	b.Helper()
	var s Set
	for i := range uint64(benchIntervals) {
		s.Add(2 * i)
	}
	if s.Intervals() != benchIntervals {
		b.Fatalf("%d intervals", s.Intervals())
	}
	return &s
}

// reportMemory reports the set's own estimate and the live heap, both per
// interval.
func reportMemory(b *testing.B, s *Set, heapBefore uint64) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(s.MemoryBytes())/float64(s.Intervals()), "bytes/interval")
	b.ReportMetric(float64(ms.HeapAlloc-min(heapBefore, ms.HeapAlloc))/float64(s.Intervals()), "heap-bytes/interval")
	runtime.KeepAlive(s)
}

func heapNow() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkSetAddRemoveScattered: per op, add a random odd value (merging
// its two neighbours into one interval, freeing a node) and remove it again
// (splitting, reusing the freed node). Steady state must not allocate.
func BenchmarkSetAddRemoveScattered(b *testing.B) {
	before := heapNow()
	s := scattered(b)
	r := NewRand(1)
	b.ReportAllocs()
	for b.Loop() {
		v := 2*r.Below(benchIntervals-1) + 1
		if !s.Add(v) || !s.Remove(v) {
			b.Fatal("add/remove failed")
		}
	}
	b.StopTimer()
	reportMemory(b, s, before)
}

// BenchmarkNthAbsent: pick a uniformly random free value out of 1M
// intervals, the random strategy's query.
func BenchmarkNthAbsent(b *testing.B) {
	s := scattered(b)
	r := NewRand(2)
	hi := uint64(2*benchIntervals + 1000)
	free, _ := s.AbsentCount(0, hi)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := s.NthAbsent(0, hi, r.Below(free)); !ok {
			b.Fatal("no value")
		}
	}
}

// BenchmarkFirstAbsent: the lowest_free query from a random starting point.
func BenchmarkFirstAbsent(b *testing.B) {
	s := scattered(b)
	r := NewRand(3)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := s.FirstAbsent(r.Below(2*benchIntervals), 1<<40); !ok {
			b.Fatal("no value")
		}
	}
}

// BenchmarkFreedQueueCycle: the least_recently_freed steady state with 1M
// queued values: allocate the front, free it again at the back.
func BenchmarkFreedQueueCycle(b *testing.B) {
	before := heapNow()
	var q FreedQueue
	for v := range uint64(benchIntervals) {
		q.PushBack(v)
	}
	b.ReportAllocs()
	for b.Loop() {
		v, _ := q.Front()
		q.Remove(v)
		q.PushBack(v)
	}
	b.StopTimer()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	b.ReportMetric(float64(q.MemoryBytes())/float64(q.Len()), "bytes/value")
	b.ReportMetric(float64(ms.HeapAlloc-min(before, ms.HeapAlloc))/float64(q.Len()), "heap-bytes/value")
	runtime.KeepAlive(&q)
}

// BenchmarkRandomAllocateRelease is the set side of the kernel's random
// strategy at 1M intervals: a million values drawn at random from
// [0, 2^32) (so leaves fill in random order, unlike scattered's ascending
// build), then per op draw a free value with NthAbsent, Add it and Remove
// it again.
func BenchmarkRandomAllocateRelease(b *testing.B) {
	const last = 1<<32 - 1
	before := heapNow()
	var s Set
	r := NewRand(4)
	for s.Len() < benchIntervals {
		s.Add(r.Below(last + 1))
	}
	b.ReportAllocs()
	for b.Loop() {
		v, ok := s.NthAbsent(0, last, r.Below(last+1-s.Len()))
		if !ok || !s.Add(v) || !s.Remove(v) {
			b.Fatal("allocate/release failed")
		}
	}
	b.StopTimer()
	reportMemory(b, &s, before)
}
