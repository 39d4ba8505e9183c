package valueset

import "math"

// FreedQueue remembers freed values in the order they were freed, for the
// least_recently_freed strategy: Front is the value freed longest ago.
//
// It is a doubly linked list over a slice-backed pool of int32-indexed
// nodes (pointer-free, recycled through a free list) plus a map from value
// to node for O(1) Contains and for O(1) Remove of an arbitrary value, which
// is needed when a specific value is allocated out of order. The map is only
// ever used for lookup: everything observable (Front, encoding) follows list
// order, so map iteration order cannot leak into replicated state.
//
// The zero value is an empty queue ready to use. A FreedQueue is not safe
// for concurrent use.
type FreedQueue struct {
	// nodes[0] is the list head sentinel: its next is the front and its prev
	// the back, which makes the list circular and removal branch-free.
	nodes []qnode
	index map[uint64]int32
	free  int32 // head of the free-node list, chained through next
	peak  int   // most entries ever held; maps never shrink
}

type qnode struct {
	v          uint64
	prev, next int32
}

// qnodeBytes is unsafe.Sizeof(qnode{}); a test pins the two together.
const qnodeBytes = 16

// Len returns the number of queued values.
func (q *FreedQueue) Len() int { return len(q.index) }

// Contains reports whether v is queued.
func (q *FreedQueue) Contains(v uint64) bool {
	_, ok := q.index[v]
	return ok
}

// Front returns the value freed longest ago, without removing it.
func (q *FreedQueue) Front() (uint64, bool) {
	if len(q.index) == 0 {
		return 0, false
	}
	return q.nodes[q.nodes[0].next].v, true
}

// PushBack appends v as the most recently freed value. v must not already
// be queued: a value can only be freed once before it is allocated again,
// so a duplicate means the caller's bookkeeping is broken, and PushBack
// panics rather than silently corrupting the order.
func (q *FreedQueue) PushBack(v uint64) {
	if _, ok := q.index[v]; ok {
		panic("valueset: FreedQueue.PushBack of a queued value")
	}
	if q.index == nil {
		q.index = make(map[uint64]int32)
	}
	i := q.alloc(v)
	back := q.nodes[0].prev
	q.nodes[i].prev, q.nodes[i].next = back, 0
	q.nodes[back].next = i
	q.nodes[0].prev = i
	q.index[v] = i
	q.peak = max(q.peak, len(q.index))
}

// Remove unlinks v from the queue and reports whether it was queued.
func (q *FreedQueue) Remove(v uint64) bool {
	i, ok := q.index[v]
	if !ok {
		return false
	}
	delete(q.index, v)
	n := q.nodes[i]
	q.nodes[n.prev].next = n.next
	q.nodes[n.next].prev = n.prev
	q.nodes[i] = qnode{next: q.free}
	q.free = i
	return true
}

// alloc returns an unlinked node holding v, reusing a free one if any.
func (q *FreedQueue) alloc(v uint64) int32 {
	if i := q.free; i != 0 {
		q.free = q.nodes[i].next
		q.nodes[i] = qnode{v: v}
		return i
	}
	if len(q.nodes) == 0 {
		q.nodes = append(q.nodes, qnode{}) // the empty circular list
	}
	if len(q.nodes) > math.MaxInt32 {
		panic("valueset: more than 2^31-1 queued values")
	}
	q.nodes = append(q.nodes, qnode{v: v})
	return int32(len(q.nodes) - 1)
}

// MemoryBytes approximates the bytes held by the queue: the node pool plus
// an estimate of the map, sized from the most entries it ever held because
// Go maps do not shrink. The estimate assumes Go's swiss-table layout:
// slots of key+value (16 bytes) plus a control byte, at most 7/8 full, with
// the slot count a power of two.
func (q *FreedQueue) MemoryBytes() int {
	const header = 64 // slice header, map pointer, free, peak, map header
	slots := 8
	for slots*7/8 < q.peak {
		slots *= 2
	}
	if q.index == nil {
		slots = 0
	}
	return header + cap(q.nodes)*qnodeBytes + slots*17
}
