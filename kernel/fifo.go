package kernel

import "slices"

// fifoChunk is how many records one chunk of a fifo holds: large enough that the chunk
// list is short, small enough that a queue's memory follows its length within one chunk.
const fifoChunk = 1024

// fifoView reads a queue of fixed-size records kept in chunks. Records are numbered by a
// sequence that starts at 0 with the queue and never repeats while the queue lives;
// at(seq) finds one in O(1). The numbering is internal: snapshots store records in
// order, never their sequence.
type fifoView[T any] struct {
	chunks [][]T // chunks[0] holds the front; head is the front's offset in it
	head   int
	n      int
	base   uint64 // sequence number of the front record
}

// fifo is a queue of fixed-size records in chunks. Unlike a ring that doubles, its memory
// follows its length (plus at most one chunk). A record is never written after its push —
// pop neither clears it nor reuses its chunk — so a view taken with freeze stays valid
// while the queue goes on: a snapshot encodes the queues beside the shard (snapshot.go).
type fifo[T any] struct {
	fifoView[T]
}

func (q *fifoView[T]) len() int { return q.n }

// next is the sequence number the next push gets.
func (q *fifoView[T]) next() uint64 { return q.base + uint64(q.n) }

// at returns the record numbered seq; the caller knows it is in the queue.
func (q *fifoView[T]) at(seq uint64) *T {
	i := q.head + int(seq-q.base)
	return &q.chunks[i/fifoChunk][i%fifoChunk]
}

// nth returns the i-th record from the front.
func (q *fifoView[T]) nth(i int) *T {
	i += q.head
	return &q.chunks[i/fifoChunk][i%fifoChunk]
}

func (q *fifoView[T]) front() *T { return &q.chunks[0][q.head] }

// freeze returns a view of the queue as it is now, unaffected by later pushes and pops.
func (q *fifo[T]) freeze() fifoView[T] {
	v := q.fifoView
	v.chunks = slices.Clone(v.chunks)
	return v
}

// push appends v and returns its sequence number.
func (q *fifo[T]) push(v T) uint64 {
	end := q.head + q.n
	if end == len(q.chunks)*fifoChunk {
		q.chunks = append(q.chunks, make([]T, fifoChunk))
	}
	q.chunks[end/fifoChunk][end%fifoChunk] = v
	q.n++
	return q.base + uint64(q.n-1)
}

// pop drops the front record. The chunk it empties is left to the garbage collector (a
// frozen view may still read it), never reused.
func (q *fifo[T]) pop() {
	q.head++
	q.n--
	q.base++
	if q.head == fifoChunk || q.n == 0 {
		q.chunks[0] = nil
		q.chunks = q.chunks[1:]
		if q.n == 0 && q.head < fifoChunk {
			q.chunks = nil // the partly used chunk goes too; the next push starts afresh
		}
		q.head = 0
	}
}
