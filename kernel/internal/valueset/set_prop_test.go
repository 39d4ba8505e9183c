package valueset

import (
	"bytes"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// TestSetMatchesModel drives a Set and the slice model with the same random
// operations over a small universe at the bottom of the uint64 range and one
// at the very top (where end+1 would wrap), comparing every answer and
// checking the tree invariants after every step.
func TestSetMatchesModel(t *testing.T) {
	universes := map[string]uint64{"bottom": 0, "top": math.MaxUint64 - 200}
	for _, name := range []string{"bottom", "top"} {
		base := universes[name]
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) { runSetModel(t, base) })
		})
	}
}

func runSetModel(t *rapid.T, base uint64) {
	// A narrow universe makes long runs and a full window likely; a wide one
	// makes many intervals.
	width := rapid.SampledFrom([]uint64{8, 40, 200}).Draw(t, "width")
	value := rapid.Uint64Range(base, base+width)
	// Query bounds: inside or just around the universe, or the extremes.
	bound := rapid.OneOf(
		rapid.Uint64Range(base-min(base, 3), base+width+min(math.MaxUint64-base-width, 3)),
		rapid.SampledFrom([]uint64{0, 1, math.MaxUint64 - 1, math.MaxUint64}),
	)
	index := rapid.OneOf(
		rapid.Uint64Range(0, 2*width),
		rapid.Uint64Range(math.MaxUint64-2*width, math.MaxUint64),
	)

	var s Set
	var m model
	// Start from a random subset of the universe so trees of a hundred or so
	// intervals (height 7+) are common; rapid alone favours tiny inputs.
	density := rapid.Uint64Range(0, 100).Draw(t, "density")
	fill := NewRand(rapid.Uint64().Draw(t, "fillSeed"))
	for v := base; v <= base+width; v++ {
		if fill.Below(100) < density && s.Add(v) != m.add(v) {
			t.Fatalf("initial Add(%d) disagrees", v)
		}
		if v == math.MaxUint64 {
			break
		}
	}
	check(t, &s, &m)

	steps := rapid.IntRange(10, 200).Draw(t, "steps")
	for range steps {
		switch op := rapid.IntRange(0, 6).Draw(t, "op"); op {
		case 0:
			v := value.Draw(t, "v")
			if got, want := s.Add(v), m.add(v); got != want {
				t.Fatalf("Add(%d) = %v, want %v", v, got, want)
			}
		case 1:
			v := value.Draw(t, "v")
			if got, want := s.Remove(v), m.remove(v); got != want {
				t.Fatalf("Remove(%d) = %v, want %v", v, got, want)
			}
		case 2:
			v := value.Draw(t, "v")
			if got, want := s.Contains(v), m.contains(v); got != want {
				t.Fatalf("Contains(%d) = %v, want %v", v, got, want)
			}
		case 3:
			lo, hi := bound.Draw(t, "lo"), bound.Draw(t, "hi")
			gv, gok := s.FirstAbsent(lo, hi)
			wv, wok := m.firstAbsent(lo, hi)
			if gv != wv || gok != wok {
				t.Fatalf("FirstAbsent(%d, %d) = %d, %v; want %d, %v", lo, hi, gv, gok, wv, wok)
			}
		case 4:
			lo, hi := bound.Draw(t, "lo"), bound.Draw(t, "hi")
			gn, gfull := s.AbsentCount(lo, hi)
			wn, wfull := m.absentCount(lo, hi)
			if gn != wn || gfull != wfull {
				t.Fatalf("AbsentCount(%d, %d) = %d, %v; want %d, %v", lo, hi, gn, gfull, wn, wfull)
			}
		case 5:
			lo, hi, n := bound.Draw(t, "lo"), bound.Draw(t, "hi"), index.Draw(t, "n")
			gv, gok := s.NthAbsent(lo, hi, n)
			wv, wok := m.nthAbsent(lo, hi, n)
			if gv != wv || gok != wok {
				t.Fatalf("NthAbsent(%d, %d, %d) = %d, %v; want %d, %v", lo, hi, n, gv, gok, wv, wok)
			}
		case 6:
			if got, want := s.Len(), uint64(len(m.vals)); got != want {
				t.Fatalf("Len() = %d, want %d", got, want)
			}
		}
		check(t, &s, &m)
	}
}

// check compares the whole Set with the model and verifies invariants, the
// encoding round trip and Clone.
func check(t *rapid.T, s *Set, m *model) {
	t.Helper()
	if err := checkSet(s); err != nil {
		t.Fatal(err)
	}
	if got, want := intervals(s), m.intervals(); !slices.Equal(got, want) {
		t.Fatalf("intervals %v, want %v", got, want)
	}
	if s.Intervals() != len(m.intervals()) {
		t.Fatalf("Intervals() = %d, want %d", s.Intervals(), len(m.intervals()))
	}
	enc := s.AppendBinary(nil)
	var d Set
	rest, err := d.DecodeBinary(enc)
	if err != nil || len(rest) != 0 {
		t.Fatalf("decode of own encoding: %v, %d bytes left", err, len(rest))
	}
	if err := checkSet(&d); err != nil {
		t.Fatalf("decoded set: %v", err)
	}
	if !bytes.Equal(d.AppendBinary(nil), enc) || !slices.Equal(intervals(&d), intervals(s)) {
		t.Fatalf("round trip changed the set")
	}
	c := s.Clone()
	if !bytes.Equal(c.AppendBinary(nil), enc) {
		t.Fatalf("clone differs")
	}
}
