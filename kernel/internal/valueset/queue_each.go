package valueset

// Each calls fn for queued values front to back (least recently freed first) until fn
// returns false. The kernel walks the front of the queue to skip values an earlier member
// of the same reserve already took.
func (q *FreedQueue) Each(fn func(v uint64) bool) {
	if len(q.nodes) == 0 {
		return
	}
	for i := q.nodes[0].next; i != 0; i = q.nodes[i].next {
		if !fn(q.nodes[i].v) {
			return
		}
	}
}
