package cluster

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/holdfast/holdfast/contract"
)

// The claim table under any sequence of events, answers that fit its state or not (a
// stale renewal, a close of a shard not closing), in any order: its invariants hold after
// every step, every act it returns fits the state it leaves, nothing is claimed once the
// node stops, and a stopped node whose opens and closes all end holds nothing.
func TestClaimTableProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		const shards = 4
		tab := newClaimTable("a", shards, contract.NewTiming(4*time.Second, 0))
		now := int64(0)
		nextRev := uint64(1)
		shard := func() uint32 { return rapid.Uint32Range(0, shards-1).Draw(t, "shard") }
		// in is mostly a shard in phase p (the answer the table waits for), sometimes any.
		in := func(p phase) uint32 {
			var ks []uint32
			for k := range tab.shards {
				if tab.shards[k].phase == p {
					ks = append(ks, uint32(k))
				}
			}
			if len(ks) == 0 || !often(t, "a shard in that phase") {
				return shard()
			}
			return ks[rapid.IntRange(0, len(ks)-1).Draw(t, "which")]
		}
		if rapid.Bool().Draw(t, "joined") {
			tab.Joined(now) // a cluster starting: no claims for a renewal period while nothing is claimed
		}
		names := []string{"", "a", "b", "c", "?"}
		steps := rapid.IntRange(50, 300).Draw(t, "steps")
		for i := 0; i < steps; i++ {
			now += int64(rapid.IntRange(0, 400).Draw(t, "ms")) * int64(time.Millisecond)
			var acts []act
			// Weighted: rounds, answers and renewals often; a failed accept or a stop rarely.
			event := []int{0, 0, 0, 2, 2, 3, 3, 5, 5, 6, 6, 6, 4, 8}[rapid.IntRange(0, 13).Draw(t, "event")]
			switch event {
			case 0, 1:
				var members []string
				if often(t, "readable") {
					members = []string{} // read, maybe without this node (its key lapsed a moment)
					if often(t, "member a") {
						members = append(members, "a")
					}
					for _, m := range []string{"b", "c"} {
						if rapid.Bool().Draw(t, "member "+m) {
							members = append(members, m)
						}
					}
				}
				owners := make([]string, shards)
				for k := range owners {
					if !often(t, "unclaimed") {
						owners[k] = names[rapid.IntRange(1, len(names)-1).Draw(t, "owner")]
					}
				}
				halted := uint32(shards) // none, mostly
				if !often(t, "none halted") {
					halted = shard()
				}
				settling := now < tab.settleUntil && !slices.ContainsFunc(owners, func(o string) bool { return o != "" }) && tab.Done()
				acts = tab.Round(now, members, owners, func(k uint32) bool { return k == halted })
				if settling && slices.ContainsFunc(acts, func(a act) bool { return a.kind == actClaim }) {
					t.Fatalf("claimed while a starting cluster settles: %v", acts)
				}
			case 2:
				rev := uint64(0)
				if often(t, "created") {
					rev, nextRev = nextRev, nextRev+1
				}
				acts = tab.Claimed(now, in(claiming), rev, now-int64(rapid.IntRange(0, 100).Draw(t, "sent ms"))*int64(time.Millisecond))
			case 3:
				var err error
				if !often(t, "opens") {
					err = errors.New("journal unreadable")
				}
				acts = tab.Opened(now, in(opening), err)
			case 4:
				if !often(t, "accepted") {
					acts = tab.AcceptFailed(in(serving))
				}
			case 5:
				acts = tab.Closed(now, in(closing))
			case 6, 7:
				k := in(serving)
				rev := tab.shards[k].rev
				if !often(t, "current") {
					rev = nextRev + 1000
				}
				var newRev uint64
				refused := false
				switch rapid.IntRange(0, 3).Draw(t, "answer") {
				case 0, 1:
					newRev, nextRev = nextRev, nextRev+1
				case 2:
					refused = true
				}
				sent := now - int64(rapid.IntRange(0, 4000).Draw(t, "renewal age ms"))*int64(time.Millisecond)
				_, acts = tab.Renewed(now, k, rev, newRev, sent, now, refused)
			case 8:
				if rapid.IntRange(0, 9).Draw(t, "stop now") == 9 { // rarely: a stopped table claims nothing more
					acts = tab.Stop(now, rapid.Bool().Draw(t, "alone"))
				}
			}
			if err := checkClaimTable(tab, acts); err != nil {
				t.Fatalf("after event %d at %dms: %v", event, now/int64(time.Millisecond), err)
			}
		}
		// Stop, and let every open and close under way end: nothing is held.
		step := func(acts []act) {
			if err := checkClaimTable(tab, acts); err != nil {
				t.Fatal(err)
			}
		}
		step(tab.Stop(now, rapid.Bool().Draw(t, "alone at the end")))
		for range 3 * shards {
			for k := range uint32(shards) {
				switch tab.shards[k].phase {
				case opening:
					step(tab.Opened(now, k, nil))
				case closing:
					step(tab.Closed(now, k))
				case claiming:
					step(tab.Claimed(now, k, nextRev, now))
					nextRev++
				}
			}
		}
		if !tab.Done() {
			t.Fatalf("a stopped node still holds shards: %+v", tab.shards)
		}
	})
}

// often is true three times in four.
func often(t *rapid.T, label string) bool { return rapid.IntRange(0, 3).Draw(t, label) < 3 }

// checkClaimTable checks the table's invariants and that acts fit the state it is in.
func checkClaimTable(tab *claimTable, acts []act) error {
	handing := 0
	for k, c := range tab.shards {
		switch c.phase {
		case free:
			if c.rev != 0 || c.serveUntil != 0 || c.how != 0 {
				return fmt.Errorf("shard %d free with %+v", k, c)
			}
		case claiming:
			if c.rev != 0 || c.serveUntil != 0 {
				return fmt.Errorf("shard %d claiming with %+v", k, c)
			}
		case opening, serving:
			if c.rev == 0 || c.how != 0 {
				return fmt.Errorf("shard %d %s with %+v", k, c.phase, c)
			}
		case closing:
			if c.rev == 0 || c.how == 0 {
				return fmt.Errorf("shard %d closing with %+v", k, c)
			}
			if c.how != handOff && c.serveUntil != 0 {
				return fmt.Errorf("shard %d closing (%s) still servable: %+v", k, c.how, c)
			}
			if c.how == handOff {
				handing++
			}
		}
	}
	if !tab.stopping && handing > 1 {
		return fmt.Errorf("%d hand-offs at once", handing)
	}
	for _, a := range acts {
		c := tab.shards[a.shard]
		ok := true
		switch a.kind {
		case actClaim:
			ok = c.phase == claiming && !tab.stopping
		case actOpen:
			ok = c.phase == opening && c.rev == a.rev
		case actAccept:
			ok = (c.phase == serving && c.rev == a.rev) || c.phase == closing // accept failed after
		case actClose:
			ok = c.phase == closing && c.how == a.how
		case actRelease:
			ok = a.rev != 0 && c.rev != a.rev
		case actRound:
		default:
			ok = false
		}
		if !ok {
			return fmt.Errorf("%s of shard %d (rev %d) leaves it %+v", actNames[a.kind], a.shard, a.rev, c)
		}
	}
	return nil
}
