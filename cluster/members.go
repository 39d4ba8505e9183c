package cluster

import (
	"slices"
	"sync"
	"time"
)

// A node lost. When a node dies with its machine, its liveness key and its claims lapse
// and its shards move; every survivor says so once, with what the node held, and keeps
// it for cluster.status for a while. A node that stopped (SIGTERM) handed its shards over
// and removed its key while it was live: it left, and is logged as such. Which one it was
// is told by the key's age when it was last seen: a dead node's key goes a TTL after its
// last renewal and is lapsing (half a TTL old) for the rounds before, one every quarter
// TTL; a stopped node's key goes fresh. The view is a round's (the bucket read off the
// ownership goroutine), so it is judged there too.

// lostKept bounds how many lost nodes cluster.status names, and lostFor for how long.
const (
	lostKept = 16
	lostFor  = 10 * time.Minute
)

// memberChange is a node gone from the bucket since the last round that saw it.
type memberChange struct {
	node string
	held []uint32 // the shards it held at the last round that saw it
	lost bool     // its key lapsed (else it removed it: it left)
}

// memberWatch remembers the live nodes of the last round, what each held and whether
// it was lapsing.
type memberWatch struct {
	held    map[string][]uint32
	lapsing map[string]bool
}

// round takes a round's view (members, each shard's owner) and says which nodes are gone
// since the last one, sorted by name. The first view says nothing.
func (w *memberWatch) round(self string, members []string, lapsing map[string]bool, owners []string) []memberChange {
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
				gone = append(gone, memberChange{node: node, held: shards, lost: w.lapsing[node]})
			}
		}
	}
	slices.SortFunc(gone, func(a, b memberChange) int {
		switch {
		case a.node < b.node:
			return -1
		case a.node > b.node:
			return 1
		}
		return 0
	})
	w.held, w.lapsing = held, lapsing
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
