package kernel

// fifoChunk is how many records one chunk of a fifo holds: large enough that the chunk
// list is short, small enough that a queue's memory follows its length within one chunk.
const fifoChunk = 1024

// fifo is a queue of fixed-size records in chunks. Unlike a ring that doubles, its memory
// follows its length (plus at most two chunks), so a table that is full for a while and
// then shrinks does not keep twice its peak. Records are numbered by a sequence that starts
// at 0 with the queue and never repeats while the queue lives; at(seq) finds one in O(1).
// The numbering is internal: snapshots store records in order, never their sequence.
type fifo[T any] struct {
	chunks [][]T // chunks[0] holds the front; head is the front's offset in it
	head   int
	n      int
	base   uint64 // sequence number of the front record
	spare  []T    // one emptied chunk kept for the next push, so a steady queue never allocates
}

func (q *fifo[T]) len() int { return q.n }

// next is the sequence number the next push gets.
func (q *fifo[T]) next() uint64 { return q.base + uint64(q.n) }

// contains reports whether seq names a record in the queue.
func (q *fifo[T]) contains(seq uint64) bool { return seq-q.base < uint64(q.n) }

// at returns the record numbered seq; the caller knows it is in the queue.
func (q *fifo[T]) at(seq uint64) *T {
	i := q.head + int(seq-q.base)
	return &q.chunks[i/fifoChunk][i%fifoChunk]
}

// nth returns the i-th record from the front.
func (q *fifo[T]) nth(i int) *T {
	i += q.head
	return &q.chunks[i/fifoChunk][i%fifoChunk]
}

func (q *fifo[T]) front() *T { return &q.chunks[0][q.head] }

// push appends v and returns its sequence number.
func (q *fifo[T]) push(v T) uint64 {
	end := q.head + q.n
	if end == len(q.chunks)*fifoChunk {
		c := q.spare
		q.spare = nil
		if c == nil {
			c = make([]T, fifoChunk)
		}
		q.chunks = append(q.chunks, c)
	}
	q.chunks[end/fifoChunk][end%fifoChunk] = v
	q.n++
	return q.base + uint64(q.n-1)
}

// pop drops the front record.
func (q *fifo[T]) pop() {
	var zero T
	q.chunks[0][q.head] = zero
	q.head++
	q.n--
	q.base++
	if q.head == fifoChunk || q.n == 0 {
		if q.head == fifoChunk || len(q.chunks) == 1 {
			q.spare = q.chunks[0]
			q.chunks[0] = nil
			q.chunks = q.chunks[1:]
			if len(q.chunks) == 0 {
				q.chunks = nil
			}
		}
		q.head = 0
	}
}
