package valueset

import (
	"bytes"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestFreedQueueMatchesModel drives a FreedQueue and a plain slice with the
// same operations, comparing answers, the full order, the invariants and
// the encoding round trip after every step.
func TestFreedQueueMatchesModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var q FreedQueue
		var m []uint64 // front first
		value := rapid.OneOf(rapid.Uint64Range(0, 40), rapid.Uint64Range(maxU-40, maxU))
		steps := rapid.IntRange(10, 300).Draw(t, "steps")
		for range steps {
			switch rapid.IntRange(0, 4).Draw(t, "op") {
			case 0, 1: // push is most common so the queue gets long
				v := value.Draw(t, "v")
				if slices.Contains(m, v) {
					if !q.Contains(v) {
						t.Fatalf("Contains(%d) = false", v)
					}
					continue
				}
				q.PushBack(v)
				m = append(m, v)
			case 2:
				v := value.Draw(t, "v")
				i := slices.Index(m, v)
				if got := q.Remove(v); got != (i >= 0) {
					t.Fatalf("Remove(%d) = %v", v, got)
				}
				if i >= 0 {
					m = slices.Delete(m, i, i+1)
				}
			case 3: // allocate the least recently freed value
				v, ok := q.Front()
				if ok != (len(m) > 0) || (ok && v != m[0]) {
					t.Fatalf("Front() = %d, %v; model %v", v, ok, m)
				}
				if ok {
					q.Remove(v)
					m = m[1:]
				}
			case 4:
				v := value.Draw(t, "v")
				if got := q.Contains(v); got != slices.Contains(m, v) {
					t.Fatalf("Contains(%d) = %v", v, got)
				}
			}
			if err := checkQueue(&q); err != nil {
				t.Fatal(err)
			}
			if q.Len() != len(m) || !slices.Equal(queueValues(&q), m) {
				t.Fatalf("queue %v, model %v", queueValues(&q), m)
			}
			enc := q.AppendBinary(nil)
			var d FreedQueue
			if rest, err := d.DecodeBinary(enc); err != nil || len(rest) != 0 {
				t.Fatalf("decode: %v, %d bytes left", err, len(rest))
			}
			if err := checkQueue(&d); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(queueValues(&d), m) || !bytes.Equal(d.AppendBinary(nil), enc) {
				t.Fatalf("round trip changed the queue")
			}
		}
	})
}

func TestFreedQueuePushDuplicatePanics(t *testing.T) {
	var q FreedQueue
	q.PushBack(9)
	defer func() {
		if recover() == nil {
			t.Fatal("no panic on duplicate PushBack")
		}
	}()
	q.PushBack(9)
}

func TestFreedQueueZeroAndReuse(t *testing.T) {
	var q FreedQueue
	if _, ok := q.Front(); ok || q.Len() != 0 || q.Contains(0) || q.Remove(0) {
		t.Fatal("zero queue not empty")
	}
	if got := q.AppendBinary(nil); !bytes.Equal(got, []byte{0}) {
		t.Fatalf("empty encoding %x", got)
	}
	for v := range uint64(100) {
		q.PushBack(v)
	}
	size := len(q.nodes)
	for v := range uint64(1000) {
		f, _ := q.Front()
		q.Remove(f)
		q.PushBack(f + 100 + v%3) // distinct from everything queued
		q.Remove(f + 100 + v%3)
		q.PushBack(f + 100)
	}
	if err := checkQueue(&q); err != nil {
		t.Fatal(err)
	}
	if len(q.nodes) != size {
		t.Fatalf("pool grew from %d to %d", size, len(q.nodes))
	}
	if q.MemoryBytes() > 100*64+1024 {
		t.Fatalf("%d bytes for 100 values", q.MemoryBytes())
	}
}

func TestFreedQueueEachStops(t *testing.T) {
	var q FreedQueue
	for _, v := range []uint64{5, 1, 9} {
		q.PushBack(v)
	}
	var seen []uint64
	q.Each(func(v uint64) bool {
		seen = append(seen, v)
		return v != 1
	})
	if !slices.Equal(seen, []uint64{5, 1}) {
		t.Fatalf("Each visited %v", seen)
	}
}
