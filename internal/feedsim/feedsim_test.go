package feedsim

import (
	"strings"
	"testing"
)

// walk visits every state reachable from w within its bounds (each once), checking
// Check after every step and Settled in every quiet state (see quiet), and stops at the
// first break: what it is and the steps that led there ("" when none).
func walk(w *World) (states, quiet int, broke string, path []Step) {
	seen := map[string]bool{}
	var visit func(w *World) bool
	visit = func(w *World) bool {
		k := w.Key()
		if seen[k] {
			return true
		}
		seen[k] = true
		if err := w.Check(); err != nil {
			broke = err.Error()
			return false
		}
		if w.quiet() {
			quiet++
			if msg := w.Settled(); msg != "" {
				broke = "quiet but " + msg
				return false
			}
		}
		for _, s := range w.Steps() {
			next := w.Clone()
			next.Do(s)
			path = append(path, s)
			if !visit(next) {
				return false
			}
			path = path[:len(path)-1]
		}
		return true
	}
	visit(w)
	return len(seen), quiet, broke, path
}

// quiet: nothing in flight, and the owner of the subject's last claim serves with
// nothing left to send. (A node whose claim was overtaken may still think it serves, but
// its next append is refused; an owner that halted leaves the shard to the next claim.)
func (w *World) quiet() bool {
	if len(w.Net) > 0 || len(w.Replies) > 0 {
		return false
	}
	epoch := 0
	for _, m := range w.Stream {
		if m.Claim != 0 {
			epoch = m.Claim
		}
	}
	for _, n := range w.Nodes {
		if n.Serving && n.Epoch == epoch {
			return n.Flight == nil && len(n.Waiting) == 0 && n.Through == last(n.Applied)
		}
	}
	return false
}

// Every order of claims, writes, appends, deliveries, answers, a lost answer and a
// crash, over two nodes: no event is stored twice, out of order or before its entry, no
// stale owner's record lands after a claim, and once things are quiet every stored
// entry's events are stored.
func TestFeedExactlyOnceInOrder(t *testing.T) {
	for _, c := range []struct {
		name                            string
		writes, crashes, claims, losses int
	}{
		{"one owner", 3, 0, 1, 0},
		{"a lost answer", 3, 0, 2, 1},
		{"a crash", 3, 1, 2, 0},
		{"both", 2, 1, 3, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			states, quiet, broke, path := walk(NewWorld(2, c.writes, c.crashes, c.claims, c.losses))
			if broke != "" {
				t.Fatalf("%s\nafter %v", broke, path)
			}
			t.Logf("%d states, %d quiet", states, quiet)
			if quiet == 0 {
				t.Fatal("no quiet state reached: nothing was checked settled")
			}
		})
	}
}

// The explorer finds each protocol break it is meant to: a rebuild that takes the events
// as stored through the first record's "through" (some are stored twice), appends stored
// without the per-subject fence (a stale owner's record after a claim), and events sent
// as stored by the record that carries their entries (a rebuild after it never sends them).
func TestExplorerFindsBrokenProtocols(t *testing.T) {
	for _, c := range []struct{ mutation, want string }{
		{"rebuild-first", "twice"},
		{"no-fence", "after the claim"},
		{"through-ahead", "is not"},
	} {
		t.Run(c.mutation, func(t *testing.T) {
			mutation = c.mutation
			defer func() { mutation = "" }()
			_, _, found, _ := walk(NewWorld(2, 3, 1, 3, 1))
			if !strings.Contains(found, c.want) {
				t.Fatalf("%s went unnoticed: found %q, want %q", c.mutation, found, c.want)
			}
		})
	}
}
