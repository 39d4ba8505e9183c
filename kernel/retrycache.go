package kernel

import "github.com/holdfast/holdfast/contract"

// opKey identifies an operation within a shard: 96 bits of the 128-bit FNV-1a of
// "tenant\x00operation_id". A fixed-size key keeps the cache free of a string per entry;
// at 96 bits a collision among the at most 2³⁰ outcomes a shard remembers has a
// probability below 10⁻¹¹, far below that of undetected disk corruption.
type opKey struct {
	hi uint64
	lo uint32
}

// outcome is the remembered result of one client write, for retries within the dedupe
// window: the same command again gets the same code, lsn and lease id. 48 bytes, no
// pointers: the object a reply showed is found again from the retried command itself
// (it is the same command, by hash), so only what the command cannot say is kept.
type outcome struct {
	keyHi       uint64
	hash        uint64 // of the command's contents: a different command is a conflict
	lsn         uint64
	retireAfter uint64
	// ref is what the reply named that the command does not: the lease of a value verb
	// (range.release, ...), or count<<1|more of a bulk verb (lease.release_all, ...).
	ref    uint64
	keyLo  uint32
	member int16 // failing member of a reserve, -1 otherwise: a retry names it too; with code noop, the lease's home shard
	epoch  uint8 // the lease_epoch the reply carried (lease verbs with ok): 1 or 2
	code   Code
}

func (o *outcome) key() opKey { return opKey{o.keyHi, o.keyLo} }

// Outcomes that changed state are kept for the whole window; a committed failure that
// changed nothing is forgettable: when room runs short the oldest of those go first (API
// "Room for remembering"), so a storm of failing attempts never denies a write that would
// change something.
const (
	keptQueue        = 0
	forgettableQueue = 1
)

// A verb by value answered at the lease's home (CodeNoop: outcome of Apply's Elsewhere)
// is kept as an ok is: forgotten, its retry would act on whatever holds the value then.
func forgettable(c Code) bool { return c != contract.CodeOK && c != contract.CodeNoop }

// retryCache remembers outcomes in two queues, each in commit order. The dedupe window is
// the same for all of them, so commit order is also the order they leave the window in:
// retirement pops fronts, and forgetting pops the forgettable front.
type retryCache struct {
	q     [2]fifo[outcome]
	index seqIndex // key → newest record for it
}

func (t *retryCache) len() int { return t.q[0].len() + t.q[1].len() }

func (t *retryCache) refHash(ref uint32) uint64 { return t.record(ref).keyHi }

func (t *retryCache) record(ref uint32) *outcome {
	q := &t.q[refQueue(ref)]
	return q.at(seqOf(q, ref))
}

// find returns the index slot and record for key, or -1.
func (t *retryCache) find(key opKey) (int, *outcome) {
	i, o := t.probe(key)
	if o == nil {
		return -1, nil
	}
	return i, o
}

// probe returns the slot holding key and its record, or the empty slot where key would
// go and nil (-1 when the index has no slots yet).
func (t *retryCache) probe(key opKey) (int, *outcome) {
	if len(t.index.slots) == 0 {
		return -1, nil
	}
	m := int(t.index.mask())
	for i := t.index.probe(key.hi); ; i = (i + 1) & m {
		ref := t.index.slots[i]
		if ref == 0 {
			return i, nil
		}
		if o := t.record(ref); o.keyHi == key.hi && o.keyLo == key.lo {
			return i, o
		}
	}
}

// push remembers an outcome. An older record of the same key (one whose window ended: a
// live one would have answered the retry) stays queued until it retires, but the index
// names the newest. Restore pushes queue by queue, so the newest may come first.
func (t *retryCache) push(o outcome) {
	qi := keptQueue
	if forgettable(o.code) {
		qi = forgettableQueue
	}
	// Each queue stays in retirement order when the dedupe window is lowered: an outcome
	// is then remembered at least as long as the one before it (late, never early).
	if n := t.q[qi].len(); n > 0 {
		o.retireAfter = max(o.retireAfter, t.q[qi].nth(n-1).retireAfter)
	}
	seq := t.q[qi].push(o)
	ref := refOf(qi, seq)
	if (t.index.n+1)*4 > len(t.index.slots)*3 {
		growIndex(&t.index, t)
	}
	i, cur := t.probe(o.key())
	switch {
	case cur == nil:
		t.index.slots[i] = ref
		t.index.n++
	case cur.lsn < o.lsn:
		t.index.slots[i] = ref
	}
}

// get returns the live record for key at slot, if any. A record past its window is
// treated as gone even before retire drops it.
func (t *retryCache) get(key opKey, slot uint64) *outcome {
	_, o := t.find(key)
	if o == nil || o.retireAfter < slot {
		return nil
	}
	return o
}

// popFront drops the front of queue qi, and its index entry if the index still names it.
func (t *retryCache) popFront(qi int) {
	q := &t.q[qi]
	o := q.front()
	if i, cur := t.find(o.key()); i >= 0 && cur == o {
		deleteAt(&t.index, t, i)
	}
	q.pop()
}

// retireFront drops the oldest record of either queue whose window has passed.
func (t *retryCache) retireFront(slot uint64) bool {
	for qi := range t.q {
		if t.q[qi].len() > 0 && t.q[qi].front().retireAfter < slot {
			t.popFront(qi)
			return true
		}
	}
	return false
}

// forgetOldest forgets the oldest forgettable record; false when there is none.
func (t *retryCache) forgetOldest() bool {
	if t.q[forgettableQueue].len() > 0 {
		t.popFront(forgettableQueue)
		return true
	}
	return false
}

// keptRoom is how many more outcomes that change state the cache can take at slot, given
// max records: forgettable records never count against it, and kept records whose window
// has ended count only as far as a bounded walk sees them ("enough" is all any batch needs).
func (t *retryCache) keptRoom(slot uint64, max int) int {
	q := &t.q[keptQueue]
	room := max - q.len()
	const enough = 1 << 16
	for i := 0; i < q.len() && room < enough; i++ {
		if q.nth(i).retireAfter >= slot {
			break
		}
		room++
	}
	return room
}
