package valueset

import "math/bits"

// Rand is a splitmix64 generator. It is deterministic for a given seed and
// its whole state is one uint64, so a replicated state machine can persist
// it in snapshots and every replica draws the same values. It is not
// cryptographically secure, and does not need to be: it only spreads
// allocations.
type Rand struct{ state uint64 }

// NewRand returns a generator seeded with seed.
func NewRand(seed uint64) Rand { return Rand{state: seed} }

// Uint64 returns the next pseudo-random value.
func (r *Rand) Uint64() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Below returns a value uniform in [0, n) using Lemire's multiply-and-reject
// method: the high word of x*n is uniform once the few low words that would
// bias it are rejected, which avoids both modulo bias and a division on the
// common path. It panics if n is 0, since [0, 0) is empty.
func (r *Rand) Below(n uint64) uint64 {
	if n == 0 {
		panic("valueset: Rand.Below(0)")
	}
	hi, lo := bits.Mul64(r.Uint64(), n)
	if lo < n {
		threshold := -n % n // 2^64 mod n
		for lo < threshold {
			hi, lo = bits.Mul64(r.Uint64(), n)
		}
	}
	return hi
}
