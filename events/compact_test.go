package events

import (
	"slices"
	"testing"
)

// compact must keep the live entries, in order, and move them to the front once the
// consumed head passes half of the array; otherwise a steady stream would grow it. The
// slots it vacates must not keep entries alive.
func TestCompactKeepsLiveEntriesAndBoundsTheArray(t *testing.T) {
	var q []*int
	head := 0
	next := 0
	for round := 0; round < 10_000; round++ {
		for range 3 {
			v := next
			next++
			q = append(q, &v)
		}
		// Acknowledgements keep about 100 entries in flight; once in a while every
		// one is acknowledged and the queue empties. An acknowledged entry is zeroed, as
		// Window and Batches do.
		for len(q)-head > 100 || (round%500 == 0 && head < len(q)) {
			q[head] = nil
			head++
		}
		before := slices.Clone(q[head:])
		q, head = compact(q, head)
		if !slices.Equal(q[head:], before) {
			t.Fatalf("round %d: live entries changed", round)
		}
		if cap(q) > 512 {
			t.Fatalf("round %d: array grew to %d with %d live entries", round, cap(q), len(q)-head)
		}
		for _, p := range q[len(q):cap(q)] {
			if p != nil {
				t.Fatalf("round %d: a vacated slot still holds an entry", round)
			}
		}
	}
	q, head = compact(q, len(q))
	if len(q) != 0 || head != 0 {
		t.Fatal("an emptied queue does not rewind")
	}
}
