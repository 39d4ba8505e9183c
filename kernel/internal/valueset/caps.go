//go:build !valueset_small

package valueset

// Node capacities of the B+tree behind Set. 64 intervals make a leaf of
// 1 KiB: a binary search over its starts touches a handful of cache lines and
// the complement-rank scan of NthAbsent reads it sequentially. 64 children
// keep a million intervals within three inner levels whose ~0.6 MB stays
// cache-resident. Building with -tags valueset_small swaps in tiny
// capacities (caps_small.go) so the tests exercise deep trees and every
// split, borrow and merge path with few intervals.
const (
	leafCap  = 64
	innerCap = 64
	// maxHeight bounds the inner levels. Every node left of the rightmost
	// spine holds at least half its capacity, so 2^37 intervals (2^31 full
	// leaves) need fewer than 8 levels.
	maxHeight = 10
)
