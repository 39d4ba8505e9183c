package events

import (
	"slices"
	"testing"
)

// testEntry is a queue entry for advance's test: v keeps a value alive, end is its batch
// end (its own number, every third entry).
type testEntry struct {
	v     *int
	end   uint64
	acked bool
}

func (e *testEntry) acknowledged() bool { return e.acked }
func (e *testEntry) event() bool        { return e.v != nil }
func (e *testEntry) batchEnd() uint64   { return e.end }

// advance must drop only the acknowledged prefix, report the last batch end it dropped,
// keep the live entries in order, and move them to the front once the consumed head
// passes half of the array; otherwise a steady stream would grow it. The slots it vacates
// must not keep entries alive.
func TestAdvanceDropsTheAcknowledgedPrefixAndBoundsTheArray(t *testing.T) {
	var q []testEntry
	head := 0
	next := 0
	for round := 0; round < 10_000; round++ {
		for range 3 {
			v := next
			next++
			e := testEntry{v: &v}
			if v%3 == 2 {
				e.end = uint64(v)
			}
			q = append(q, e)
		}
		// Acknowledgements keep about 100 entries in flight, and come out of order: the
		// one after the head first, which must not move the head. Once in a while every
		// one is acknowledged and the queue empties.
		if head+1 < len(q) {
			q[head+1].acked = true
			moved := 0
			if _, _, through := advance(slices.Clone(q), head, func(bool) { moved++ }); moved != 0 || through != 0 {
				t.Fatalf("round %d: the head moved past an unacknowledged entry", round)
			}
		}
		want, wantThrough := head, uint64(0)
		for want < len(q) && (len(q)-want > 100 || round%500 == 0) {
			q[want].acked = true
			if q[want].end > 0 {
				wantThrough = q[want].end
			}
			want++
		}
		for want < len(q) && q[want].acked { // acknowledged ahead of the head earlier
			if q[want].end > 0 {
				wantThrough = q[want].end
			}
			want++
		}
		live := slices.Clone(q[want:])
		dropped := 0
		var through uint64
		q, head, through = advance(q, head, func(published bool) {
			if !published {
				t.Fatalf("round %d: an entry with an event reported as none", round)
			}
			dropped++
		})
		if through != wantThrough {
			t.Fatalf("round %d: published through %d, want %d", round, through, wantThrough)
		}
		if !slices.EqualFunc(q[head:], live, func(a, b testEntry) bool { return a.v == b.v && a.acked == b.acked }) {
			t.Fatalf("round %d: live entries changed", round)
		}
		if cap(q) > 512 {
			t.Fatalf("round %d: array grew to %d with %d live entries", round, cap(q), len(q)-head)
		}
		for _, e := range q[:head] {
			if e.v != nil {
				t.Fatalf("round %d: a dropped entry is still held", round)
			}
		}
		for _, e := range q[len(q):cap(q)] {
			if e.v != nil {
				t.Fatalf("round %d: a vacated slot still holds an entry", round)
			}
		}
	}
	for i := head; i < len(q); i++ {
		q[i].acked = true
	}
	q, head, _ = advance(q, head, func(bool) {})
	if len(q) != 0 || head != 0 {
		t.Fatal("an emptied queue does not rewind")
	}
}
