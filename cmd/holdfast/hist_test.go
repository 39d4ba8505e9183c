package main

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestHistogramBucketsTileTheRange(t *testing.T) {
	var prevHi uint64
	for i := 0; i < histBuckets; i++ {
		lo, hi := bucketBounds(i)
		if i > 0 && lo != prevHi+1 {
			t.Fatalf("bucket %d starts at %d, previous ended at %d", i, lo, prevHi)
		}
		if bucketOf(lo) != i || bucketOf(hi) != i {
			t.Fatalf("bucket %d [%d, %d] maps to %d, %d", i, lo, hi, bucketOf(lo), bucketOf(hi))
		}
		if lo >= histSub && float64(hi-lo+1)/float64(lo) > 1.0/histSub+1e-12 {
			t.Fatalf("bucket %d [%d, %d] wider than 1/%d", i, lo, hi, histSub)
		}
		prevHi = hi
	}
	if prevHi != histMax {
		t.Fatalf("last bucket ends at %d, want %d", prevHi, uint64(histMax))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 100000 {
		v := r.Uint64N(histMax + 1)
		lo, hi := bucketBounds(bucketOf(v))
		if v < lo || v > hi {
			t.Fatalf("%d not in its bucket [%d, %d]", v, lo, hi)
		}
	}
}

func TestHistogramQuantiles(t *testing.T) {
	var h histogram
	if h.quantile(0.5) != 0 || h.mean() != 0 {
		t.Fatal("empty histogram")
	}
	// 1µs .. 10000µs, shuffled.
	vals := make([]time.Duration, 10000)
	for i := range vals {
		vals[i] = time.Duration(i+1) * time.Microsecond
	}
	rand.Shuffle(len(vals), func(i, j int) { vals[i], vals[j] = vals[j], vals[i] })
	var a, b histogram
	for i, v := range vals {
		h.record(v)
		if i%2 == 0 {
			a.record(v)
		} else {
			b.record(v)
		}
	}
	for q, want := range map[float64]time.Duration{0.5: 5000 * time.Microsecond, 0.99: 9900 * time.Microsecond,
		0.999: 9990 * time.Microsecond, 1: 10000 * time.Microsecond, 0.0001: time.Microsecond} {
		got := h.quantile(q)
		if got < want || float64(got-want) > float64(want)/histSub {
			t.Errorf("quantile(%v) = %v, want %v (+1/%d)", q, got, want, histSub)
		}
	}
	if h.count() != 10000 || h.max != uint64(10*time.Millisecond) || h.min != uint64(time.Microsecond) {
		t.Fatalf("count %d min %d max %d", h.count(), h.min, h.max)
	}
	if m := h.mean(); m != 5000500*time.Nanosecond {
		t.Fatalf("mean = %v", m)
	}
	a.merge(&b)
	if a != h {
		t.Fatal("merged halves differ from the whole")
	}
	var c histogram
	c.record(-5)
	c.record(time.Hour)
	if c.min != 0 || c.max != histMax || c.quantile(1) != time.Duration(histMax) {
		t.Fatalf("clamping: min %d max %d", c.min, c.max)
	}
}

func BenchmarkHistogramRecord(b *testing.B) {
	var h histogram
	for i := 0; b.Loop(); i++ {
		h.record(time.Duration(i&0xfffff) * 100)
	}
}
