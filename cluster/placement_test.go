package cluster

import (
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// Place: every shard on a live node, counts within one, nothing moved off a live node
// that holds no more than its share, a balanced spread left as it is, and the same
// answer whatever order the live nodes come in.
func TestPlace(t *testing.T) {
	pool := []string{"a", "b", "c", "d", "e", "f"}
	rapid.Check(t, func(t *rapid.T) {
		members := rapid.SliceOfNDistinct(rapid.SampledFrom(pool), 0, 5, rapid.ID[string]).Draw(t, "members")
		shards := rapid.IntRange(1, 40).Draw(t, "shards")
		holders := append(slices.Clone(pool), "", "")
		if rapid.Bool().Draw(t, "unknowns") {
			holders = append(holders, "?")
		}
		owners := make([]string, shards)
		for k := range owners {
			owners[k] = rapid.SampledFrom(holders).Draw(t, "owner")
		}
		out := Place(members, owners)

		shuffled := rapid.Permutation(members).Draw(t, "shuffled")
		if again := Place(shuffled, owners); !slices.Equal(again, out) {
			t.Fatalf("members in another order: %v, then %v", out, again)
		}
		if len(members) == 0 {
			for k := range out {
				if out[k] != "" {
					t.Fatalf("no live nodes, yet shard %d placed on %q", k, out[k])
				}
			}
			return
		}
		live := map[string]bool{}
		for _, m := range members {
			live[m] = true
		}
		count, held := map[string]int{}, map[string]int{}
		unknown := 0
		for k, o := range owners {
			held[o]++
			if o == "?" {
				unknown++
				if out[k] != "?" {
					t.Fatalf("shard %d of unknown holder placed on %q", k, out[k])
				}
				continue
			}
			if !live[out[k]] {
				t.Fatalf("shard %d placed on %q, not a live node %v", k, out[k], members)
			}
			count[out[k]]++
		}
		base := shards / len(members)
		for k, o := range owners {
			if live[o] && out[k] != o && held[o] <= base {
				t.Fatalf("shard %d moved off live %s, which held %d (share at least %d): %v -> %v", k, o, held[o], base, owners, out)
			}
		}
		if unknown > 0 {
			return
		}
		lo, hi := shards, 0
		for _, m := range members {
			lo, hi = min(lo, count[m]), max(hi, count[m])
		}
		if hi-lo > 1 {
			t.Fatalf("counts from %d to %d over %v: %v", lo, hi, members, out)
		}
		// A balanced spread over the live nodes, every shard held, stays as it is.
		balanced := true
		lo, hi = shards, 0
		for _, m := range members {
			lo, hi = min(lo, held[m]), max(hi, held[m])
		}
		for _, o := range owners {
			balanced = balanced && live[o]
		}
		if balanced && hi-lo <= 1 && !slices.Equal(out, owners) {
			t.Fatalf("a balanced spread moved: %v -> %v", owners, out)
		}
	})
}

// The cases that motivated it: one node of three dies, one joins two.
func TestPlaceMovesOnlyWhatItMust(t *testing.T) {
	three := Place([]string{"a", "b", "c"}, make([]string, 8))
	moved := func(before, after []string) int {
		n := 0
		for k := range before {
			if before[k] != after[k] {
				n++
			}
		}
		return n
	}
	withoutA := Place([]string{"b", "c"}, three)
	if got, want := moved(three, withoutA), 3; got != want { // a's three shards
		t.Fatalf("a died: %d shards moved, want %d: %v -> %v", got, want, three, withoutA)
	}
	back := Place([]string{"a", "b", "c"}, withoutA)
	if got, want := moved(withoutA, back), 2; got != want { // b and c keep three each, a takes two
		t.Fatalf("a joined again: %d shards moved, want %d: %v -> %v", got, want, withoutA, back)
	}
}
