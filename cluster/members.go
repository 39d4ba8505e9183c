package cluster

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// A node lost. When a node dies with its machine, its liveness key and its claims lapse
// and its shards move; every survivor says so once, with what the node held, and keeps
// it for cluster.status for a while. A node that stops (SIGTERM) says so in its key
// (leaving) before it hands its shards over and removes the key: the rounds its hand-
// over sets off see that, and it is logged as having left. The view is a round's (the
// bucket read off the ownership goroutine), so it is judged there too.

// lostKept bounds how many lost nodes cluster.status names, and lostFor for how long.
const (
	lostKept = 16
	lostFor  = 10 * time.Minute
)

// memberChange is a node gone from the bucket since the last round that saw it.
type memberChange struct {
	node string
	held []uint32 // the shards it held at the last round that saw it
	lost bool     // it was not seen leaving: its key lapsed
}

// memberWatch remembers the live nodes of the last round, what each held, and which
// were seen leaving.
type memberWatch struct {
	held    map[string][]uint32
	leaving map[string]bool
}

// round takes a round's view (members, each shard's owner) and says which nodes are gone
// since the last one, sorted by name. The first view says nothing.
func (w *memberWatch) round(self string, members []string, leaving map[string]bool, owners []string) []memberChange {
	held := make(map[string][]uint32, len(members))
	for _, m := range members {
		held[m] = nil
	}
	for k, o := range owners {
		if _, ok := held[o]; ok {
			held[o] = append(held[o], uint32(k))
		}
	}
	var gone []memberChange
	if w.held != nil {
		for node, shards := range w.held {
			if _, ok := held[node]; !ok && node != self {
				gone = append(gone, memberChange{node: node, held: shards, lost: !w.leaving[node]})
			}
		}
	}
	slices.SortFunc(gone, func(a, b memberChange) int { return strings.Compare(a.node, b.node) })
	// A dead node's claims can lapse a moment before its liveness key (each key's expiry
	// is placed on its own): a node that still shows but suddenly holds nothing, without
	// having said it leaves, keeps what it held, so that its loss names its shards.
	for m, shards := range held {
		if len(shards) == 0 && !leaving[m] && !w.leaving[m] {
			held[m] = w.held[m]
		}
	}
	seen := map[string]bool{}
	for m := range held {
		seen[m] = w.leaving[m] || leaving[m] // once seen leaving, it is leaving
	}
	w.held, w.leaving = held, seen
	return gone
}

// LostNode is a node lost lately, for cluster.status.
type LostNode struct {
	Node string
	Held []uint32  // the shards it held when it was lost (they have moved or are moving)
	At   time.Time // when this node saw it gone
}

// lostNodes keeps the nodes lost lately, newest last, for cluster.status.
type lostNodes struct {
	mu    sync.Mutex
	nodes []LostNode
}

func (l *lostNodes) add(n LostNode) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nodes = slices.DeleteFunc(l.nodes, func(o LostNode) bool { return o.Node == n.Node })
	l.nodes = append(l.nodes, n)
	if len(l.nodes) > lostKept {
		l.nodes = slices.Delete(l.nodes, 0, len(l.nodes)-lostKept)
	}
}

// back forgets a lost node that is live again.
func (l *lostNodes) back(members []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nodes = slices.DeleteFunc(l.nodes, func(o LostNode) bool { return slices.Contains(members, o.Node) })
}

// list is the nodes lost within lostFor of now.
func (l *lostNodes) list(now time.Time) []LostNode {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []LostNode
	for _, n := range l.nodes {
		if now.Sub(n.At) < lostFor {
			out = append(out, n)
		}
	}
	return out
}
