package kernel

// seqIndex is an open-addressing hash index (linear probing, backward-shift deletion)
// from a key to a record of a fifo, holding one uint32 per slot: 4/load bytes per record
// instead of a Go map's key, value and control bytes. Keys live in the records, so the
// index asks its owner, through refs, to compare and to rehash.
//
// A ref is a record's queue (0 or 1) and its sequence number modulo 2³¹−1, plus one, so 0
// marks an empty slot: refOf and (*fifo).seqOf convert. Any queue shorter than 2³¹−1
// resolves every ref unambiguously (Config caps tables at 2³⁰).
type seqIndex struct {
	slots []uint32
	n     int
}

const refModulus = 1<<31 - 1

func refOf(queue int, seq uint64) uint32 {
	return uint32(queue)<<31 | uint32(modRef(seq)+1)
}

// modRef is x mod 2³¹−1 without a division (a Mersenne modulus: fold the high bits onto
// the low ones), on every probe of a lookup.
func modRef(x uint64) uint64 {
	x = (x & refModulus) + (x >> 31)
	x = (x & refModulus) + (x >> 31)
	if x >= refModulus {
		x -= refModulus
	}
	return x
}

func refQueue(ref uint32) int { return int(ref >> 31) }

// seqOf resolves the low part of ref to the sequence number it names in q, which is in q
// if the ref was made from one of q's records still queued.
func seqOf[T any](q *fifo[T], ref uint32) uint64 {
	r := uint64(ref&(1<<31-1)) - 1
	return q.base + modRef(r+refModulus-modRef(q.base))
}

// refOwner is what an index needs of the table it indexes: the hash of the key a ref's
// record holds.
type refOwner interface {
	refHash(ref uint32) uint64
}

func (x *seqIndex) len() int { return x.n }

func (x *seqIndex) mask() uint64 { return uint64(len(x.slots) - 1) }

// probe returns the slot to start a search for hash h at.
func (x *seqIndex) probe(h uint64) int { return int(mix64(h) & x.mask()) }

// reserve sizes the index for n entries at once (a restore knows its count), so it
// never grows, and rehashes, on the way.
func (x *seqIndex) reserve(n int) {
	size := 16
	for size*3 < n*4 {
		size *= 2
	}
	if size > len(x.slots) && x.n == 0 {
		x.slots = make([]uint32, size)
	}
}

// insert adds ref (whose key hashes to h); the caller has checked the key is absent.
func insertRef[O refOwner](x *seqIndex, o O, h uint64, ref uint32) {
	if (x.n+1)*4 > len(x.slots)*3 {
		growIndex(x, o)
	}
	i := x.probe(h)
	for x.slots[i] != 0 {
		i = (i + 1) & int(x.mask())
	}
	x.slots[i] = ref
	x.n++
}

func growIndex[O refOwner](x *seqIndex, o O) {
	old := x.slots
	size := max(16, 2*len(old))
	x.slots = make([]uint32, size)
	for _, ref := range old {
		if ref == 0 {
			continue
		}
		i := x.probe(o.refHash(ref))
		for x.slots[i] != 0 {
			i = (i + 1) & int(x.mask())
		}
		x.slots[i] = ref
	}
}

// deleteAt empties slot i and shifts back the entries of its probe run that may now sit
// closer to home, so every search still finds what it looks for without tombstones.
func deleteAt[O refOwner](x *seqIndex, o O, i int) {
	m := int(x.mask())
	for {
		x.slots[i] = 0
		j := i
		for {
			j = (j + 1) & m
			ref := x.slots[j]
			if ref == 0 {
				x.n--
				return
			}
			home := x.probe(o.refHash(ref))
			// Move ref into the hole at i unless its home lies cyclically in (i, j].
			if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
				x.slots[i] = ref
				i = j
				break
			}
		}
	}
}

// mix64 spreads a key's hash over the slot bits (keys that are lsns are sequential).
func mix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xFF51AFD7ED558CCD
	h ^= h >> 33
	return h
}
