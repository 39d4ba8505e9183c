package main

import (
	"math/bits"
	"time"
)

// histogram is a fixed log-linear latency histogram in the manner of HDR
// histograms: values below 2^histSubBits ns are exact; above, every power of
// two is split into 2^histSubBits equal buckets, so a recorded value is known
// to within 1/2^histSubBits (0.8%). Values are in nanoseconds, clamped to
// histMax (about 18 minutes). Recording is O(1) without allocation; the
// zero value is ready to use. Not safe for concurrent use: each client keeps
// its own and they are merged at the end.
type histogram struct {
	counts   [histBuckets]uint64
	n        uint64
	sum      uint64
	min, max uint64
}

const (
	histSubBits  = 7
	histSub      = 1 << histSubBits
	histMaxShift = 40 - 1 - histSubBits // values below 2^40 ns
	histBuckets  = (histMaxShift + 2) * histSub
	histMax      = 1<<40 - 1
)

// bucketOf returns the bucket index of v (v ≤ histMax).
func bucketOf(v uint64) int {
	if v < histSub {
		return int(v)
	}
	shift := bits.Len64(v) - 1 - histSubBits
	mant := v >> uint(shift) // in [histSub, 2*histSub)
	return (shift+1)*histSub + int(mant-histSub)
}

// bucketBounds returns the smallest and largest value of bucket i.
func bucketBounds(i int) (lo, hi uint64) {
	if i < histSub {
		return uint64(i), uint64(i)
	}
	shift := i/histSub - 1
	mant := uint64(i%histSub + histSub)
	return mant << uint(shift), (mant+1)<<uint(shift) - 1
}

// record adds one observation.
func (h *histogram) record(d time.Duration) {
	v := uint64(max(d, 0))
	if v > histMax {
		v = histMax
	}
	h.counts[bucketOf(v)]++
	if h.n == 0 || v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
	h.n++
	h.sum += v
}

// merge adds the observations of o.
func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// count returns the number of observations.
func (h *histogram) count() uint64 { return h.n }

// quantile returns the value at quantile q (0 < q ≤ 1): the largest value
// of the bucket holding the observation of rank ceil(q·n), never above the
// largest value recorded. It is 0 without observations.
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	rank := uint64(q * float64(h.n))
	if float64(rank) < q*float64(h.n) {
		rank++
	}
	rank = min(max(rank, 1), h.n)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			_, hi := bucketBounds(i)
			return time.Duration(min(hi, h.max))
		}
	}
	return time.Duration(h.max)
}

// mean returns the mean of the observations.
func (h *histogram) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return time.Duration(h.sum / h.n)
}
