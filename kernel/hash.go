package kernel

import (
	"encoding/binary"
	"math/bits"
)

// 128-bit FNV-1a: prime = 2^88 + 0x13B, offset basis below. Hashes here must be the same
// in every process and on every replay, so they are plain arithmetic, never the runtime's
// seeded hash.
const (
	fnv128OffHi = 0x6c62272e07bb0142
	fnv128OffLo = 0x62b821756295c58d
)

// wordHash hashes b eight bytes at a time (multiply and rotate per word, a final
// avalanche), several times faster than byte-wise FNV on command encodings. It is fixed
// arithmetic, so every process and every replay agrees.
func wordHash(b []byte) uint64 {
	const m1, m2 = 0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9
	h := uint64(len(b)) * m1
	for len(b) >= 8 {
		h ^= binary.LittleEndian.Uint64(b) * m2
		h = bits.RotateLeft64(h, 31) * m1
		b = b[8:]
	}
	var tail uint64
	for i := len(b) - 1; i >= 0; i-- {
		tail = tail<<8 | uint64(b[i])
	}
	h ^= tail * m2
	h = bits.RotateLeft64(h, 31) * m1
	h ^= h >> 33
	h *= 0xFF51AFD7ED558CCD
	h ^= h >> 33
	h *= 0xC4CEB9FE1A85EC53
	h ^= h >> 33
	return h
}

func fnv128Byte(hi, lo uint64, c byte) (uint64, uint64) {
	lo ^= uint64(c)
	// (hi·2^64 + lo) · (2^88 + 0x13B) mod 2^128
	mh, ml := bits.Mul64(lo, 0x13B)
	nhi := hi*0x13B + mh + lo<<24
	return nhi, ml
}

func makeOpKey(tenant, op string) opKey {
	hi, lo := uint64(fnv128OffHi), uint64(fnv128OffLo)
	for i := 0; i < len(tenant); i++ {
		hi, lo = fnv128Byte(hi, lo, tenant[i])
	}
	hi, lo = fnv128Byte(hi, lo, 0)
	for i := 0; i < len(op); i++ {
		hi, lo = fnv128Byte(hi, lo, op[i])
	}
	return opKey{hi: hi, lo: uint32(lo)}
}

// commandHash fingerprints a command's contents for operation_conflict detection: a retry
// must carry the same command. It hashes the canonical encoding of what the client sent,
// minus the TTLSlots Normalize derives from it: a retry is compared by its request.
func commandHash(c *Command, scratch []byte) (uint64, []byte) {
	scratch = appendCommandBody(scratch[:0], c, false)
	return wordHash(scratch), scratch
}

func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }

// satAdd is a+b saturating at the largest slot: a retention slot past u64 means "never".
func satAdd(a, b uint64) uint64 {
	if s := a + b; s >= a {
		return s
	}
	return ^uint64(0)
}
