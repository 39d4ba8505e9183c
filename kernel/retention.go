package kernel

// retireBudget bounds the retirement work one entry does, so no entry's latency depends
// on how much history happens to fall due at once. Each entry adds at most one operation
// and ends at most one lease, so a budget above one per kind drains any backlog.
const retireBudget = 8

// noRef marks an operation whose outcome names no object (a failed reserve, a full table).
const noRef = ^uint64(0)

// operation is the remembered outcome of one client write, for retries within the dedupe
// window: the same command again gets the same code and lsn.
type operation struct {
	key         opKey
	hash        uint64 // of the command's contents: a different command is a conflict
	verb        Verb
	code        Code
	member      int16 // failing member of a reserve, -1 otherwise: a retry names it too
	lsn         uint64
	ref         uint64 // lease lsn (lease verbs) or object index (creates), or noRef
	retireAfter uint64
}

// opTable keeps operations in the order they committed. The dedupe window is the same
// for all of them, so that order is also the order they retire in: a FIFO, no index by
// time needed.
type opTable struct {
	index map[opKey]uint64 // key → sequence number of its newest record
	q     ring[operation]
	base  uint64 // sequence number of q's front
}

func (t *opTable) init() { t.index = make(map[opKey]uint64) }

func (t *opTable) len() int { return t.q.len() }

func (t *opTable) push(op operation) {
	t.q.push(op)
	t.index[op.key] = t.base + uint64(t.q.len()-1)
}

// get returns the live record for key at slot, if any. A record past its window is
// treated as gone even before retire drops it.
func (t *opTable) get(key opKey, slot uint64) *operation {
	seq, ok := t.index[key]
	if !ok {
		return nil
	}
	op := t.q.at(int(seq - t.base))
	if op.retireAfter < slot {
		return nil
	}
	return op
}

// retireFront drops the oldest record if its window has passed.
func (t *opTable) retireFront(slot uint64) bool {
	if t.q.len() == 0 {
		return false
	}
	op := t.q.at(0)
	if op.retireAfter >= slot {
		return false
	}
	if seq, ok := t.index[op.key]; ok && seq == t.base {
		delete(t.index, op.key)
	}
	t.q.pop()
	t.base++
	return true
}

// retire drops at most budget operations and budget terminal leases whose windows ended
// before slot.
func (k *Kernel) retire(slot uint64, budget int) {
	for i := 0; i < budget && k.ops.retireFront(slot); i++ {
	}
	for i := 0; i < budget && k.retireLease(slot); i++ {
	}
}

// retireLease drops the lease that ended first, if its history window has passed, and
// raises the retired watermark.
func (k *Kernel) retireLease(slot uint64) bool {
	if k.ended.len() == 0 {
		return false
	}
	lsn := *k.ended.at(0)
	idx := k.leaseIdx[lsn]
	l := &k.leases[idx]
	if l.retireAfter >= slot {
		return false
	}
	k.ended.pop()
	if lsn > k.retired {
		k.retired = lsn
	}
	k.freeLease(idx)
	return true
}

// opRoom makes room for one more operation if the oldest has retired; it reports whether
// a new outcome can be remembered.
func (k *Kernel) opRoom(slot uint64) bool {
	if k.ops.len() < k.cfg.MaxOperations {
		return true
	}
	return k.ops.retireFront(slot)
}

// OperationRoom is how many new operations the table can take at slot without evicting
// anything still in its window; the shard checks it before sequencing so that
// operation_table_full is a definite rejection.
func (k *Kernel) OperationRoom(slot uint64) int {
	room := k.cfg.MaxOperations - k.ops.len()
	// Count retirable records at the front, but only as far as any batch could need:
	// the answer is "enough", and the walk stays bounded.
	const enough = 1 << 16
	for i := 0; i < k.ops.len() && room < enough; i++ {
		if k.ops.q.at(i).retireAfter >= slot {
			break
		}
		room++
	}
	return room
}

// replay answers a retried operation from the table. It reports whether it answered.
func (k *Kernel) replay(tenant string, key opKey, hash uint64, slot uint64, out *Output) bool {
	op := k.ops.get(key, slot)
	if op == nil {
		return false
	}
	if op.hash != hash {
		out.Code = CodeOperationConflict
		return true
	}
	out.Code = op.code
	out.LSN = op.lsn
	out.MemberIndex = int(op.member)
	out.FromRetryCache = true
	k.viewRef(tenant, op.verb, op.ref, slot, out)
	return true
}

// LookupOperation answers a retry of a remembered operation without a new entry: the
// shard calls it before sequencing. It reports false when the operation is unknown (or
// past its window), in which case the command must be sequenced.
func (k *Kernel) LookupOperation(c *Command, slot uint64, out *Output) bool {
	if c.Verb == VerbExpire {
		return false
	}
	out.reset(k.lastLSN)
	var hash uint64
	hash, k.hashBuf = commandHash(c, k.hashBuf)
	return k.replay(c.Tenant, makeOpKey(c.Tenant, c.OperationID), hash, slot, out)
}

// viewRef fills the current view of the object an operation named, if tenant can still
// see it.
func (k *Kernel) viewRef(tenant string, v Verb, ref uint64, slot uint64, out *Output) {
	if ref == noRef {
		return
	}
	switch v {
	case VerbCreateResource:
		k.viewResource(int32(ref), out)
	case VerbCreatePool:
		k.viewPool(int32(ref), out)
	case VerbCreateRange:
		k.viewRange(int32(ref), out)
	default:
		if idx, code := k.findLease(tenant, ref, slot); code == CodeOK {
			k.viewLease(idx, out)
		}
	}
}

// ring is a growable FIFO; growth doubles up to the caller's bound, so steady state never
// allocates.
type ring[T any] struct {
	buf  []T
	head int
	n    int
}

func (r *ring[T]) len() int { return r.n }

func (r *ring[T]) at(i int) *T { return &r.buf[(r.head+i)%len(r.buf)] }

func (r *ring[T]) push(v T) {
	if r.n == len(r.buf) {
		size := 2 * len(r.buf)
		if size == 0 {
			size = 16
		}
		nb := make([]T, size)
		for i := 0; i < r.n; i++ {
			nb[i] = *r.at(i)
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = v
	r.n++
}

func (r *ring[T]) pop() {
	var zero T
	r.buf[r.head] = zero
	r.head = (r.head + 1) % len(r.buf)
	r.n--
}
