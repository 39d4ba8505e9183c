// Package valueset holds the data structures a shard uses to allocate values
// (VXLAN ids, ports, MACs, ...) out of ranges [first, last] of uint64.
//
// A range may be as large as [0, 2^64-1], so nothing here ever materialises a
// range: memory grows with the number of allocated values (more precisely with
// the number of maximal runs of them), never with the size of the range.
//
// The package sits inside a deterministic, replicated state machine. It
// therefore uses no clock, no real randomness, no goroutines and no floats,
// and no map iteration order ever reaches an output: two replicas that apply
// the same operations hold the same structures and encode them to the same
// bytes.
//
// The three allocation strategies map onto the types as follows:
//
//   - lowest_free: [Set.FirstAbsent] over the set of allocated values.
//   - random: [Set.NthAbsent] with an index drawn by [Rand.Below] from
//     [Set.AbsentCount] (or [Set.RandomAbsent], which does both and handles the
//     2^64-values case).
//   - least_recently_freed: never-used values come from a second Set holding
//     every value ever handed out (FirstAbsent over it yields them in
//     ascending order); once those run out, [FreedQueue.Front] yields freed
//     values in the order they were freed.
package valueset
