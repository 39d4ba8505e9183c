package cluster

import (
	"fmt"
	"testing"
	"time"
)

// A node gone from the bucket is said once: left when a round saw it leaving (it
// stopped), else lost (with the shards it held at the last round that saw it); this node
// itself never.
func TestMemberWatch(t *testing.T) {
	var w memberWatch
	say := func(members []string, lapsing map[string]bool, owners []string) string {
		return fmt.Sprint(w.round("a", members, lapsing, owners))
	}
	if got := say([]string{"a", "b", "c", "d"}, nil, []string{"a", "b", "c", "b", ""}); got != "[]" {
		t.Fatalf("first view: %s", got)
	}
	if got := say([]string{"a", "b", "c", "d"}, map[string]bool{"d": true}, []string{"a", "b", "c", "b", "d"}); got != "[]" {
		t.Fatalf("nobody gone: %s", got)
	}
	if got := say([]string{"a", "b", "c", "d"}, nil, []string{"a", "b", "c", "b", "d"}); got != "[]" {
		t.Fatalf("nobody gone: %s", got)
	}
	// b's key went (its claims lapsed with it); d was seen leaving a round before.
	if got := say([]string{"a", "c"}, nil, []string{"a", "", "c", "", ""}); got != "[{b [1 3] true} {d [4] false}]" {
		t.Fatalf("b lost, d left: %s", got)
	}
	// c's claims lapse a moment before its key: it is still listed, holding nothing...
	if got := say([]string{"a", "c"}, nil, []string{"a", "", "", "a", ""}); got != "[]" {
		t.Fatalf("nobody gone: %s", got)
	}
	// ...and when its key goes, its loss names what it held.
	if got := say([]string{"a"}, nil, []string{"a", "a", "a", "a", "a"}); got != "[{c [2] true}]" {
		t.Fatalf("c lost: %s", got)
	}
	if got := say([]string{"a", "c"}, nil, []string{"a", "c", "c", "a", "c"}); got != "[]" {
		t.Fatalf("said twice: %s", got)
	}
	if got := say([]string{"c"}, nil, nil); got != "[]" {
		t.Fatalf("this node itself: %s", got)
	}
}

// cluster.status names the nodes lost lately, at most lostKept, the newest kept; a node
// live again is no longer lost.
func TestLostNodesBounded(t *testing.T) {
	var l lostNodes
	now := time.Now()
	for i := range lostKept + 4 {
		l.add(LostNode{Node: fmt.Sprint("n", i), At: now})
	}
	got := l.list(now)
	if len(got) != lostKept || got[0].Node != "n4" {
		t.Fatalf("%d kept, first %s", len(got), got[0].Node)
	}
	l.back([]string{"n4", "n5"})
	if got := l.list(now); len(got) != lostKept-2 || got[0].Node != "n6" {
		t.Fatalf("after two came back: %d, first %s", len(got), got[0].Node)
	}
	if got := l.list(now.Add(lostFor)); len(got) != 0 {
		t.Fatalf("%d still listed after %v", len(got), lostFor)
	}
}
