package cluster

import (
	"cmp"
	"slices"
)

// Place decides where each shard belongs from the live nodes and who holds each shard
// now (owners[k]: a node's name, "" unclaimed, "?" unknown, which stays "?"). Counts per
// live node differ by at most one, and a shard stays where it is unless its holder is
// gone or holds more than its share: when a node dies only its shards move, and when one
// joins only the shards it takes over. (Placing shard k on node k mod n moved shards
// between the surviving nodes too: three needless moves of eight when one of three
// nodes died, each an outage as long as that shard's load.) Every node computes the same
// placement from the same view; views that differ for a moment cost a move, never two
// owners (claims are created, never overwritten).
func Place(members []string, owners []string) []string {
	out := make([]string, len(owners))
	nodes := slices.Clone(members)
	slices.Sort(nodes)
	nodes = slices.Compact(nodes)
	if len(nodes) == 0 {
		return out
	}
	index := make(map[string]int, len(nodes))
	for i, name := range nodes {
		index[name] = i
	}
	held := make([]int, len(nodes))
	for _, o := range owners {
		if i, ok := index[o]; ok {
			held[i]++
		}
	}
	// Each node's share: the base, and one more for as many nodes as the division leaves
	// over — those holding most now, then by name, so a balanced spread stays as it is.
	order := make([]int, len(nodes))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(held[b], held[a]) })
	share := make([]int, len(nodes))
	base, extra := len(owners)/len(nodes), len(owners)%len(nodes)
	for rank, i := range order {
		share[i] = base
		if rank < extra {
			share[i]++
		}
	}
	// Shards stay with live holders up to their share (lowest shard numbers first).
	placed := make([]int, len(nodes))
	for k, o := range owners {
		if o == "?" {
			out[k] = "?"
			continue
		}
		if i, ok := index[o]; ok && placed[i] < share[i] {
			out[k] = o
			placed[i]++
		}
	}
	// The rest go to the node with the most room left, then the first by name.
	for k := range owners {
		if out[k] != "" {
			continue
		}
		best := -1
		for i := range nodes {
			if room := share[i] - placed[i]; room > 0 && (best < 0 || room > share[best]-placed[best]) {
				best = i
			}
		}
		if best >= 0 {
			out[k] = nodes[best]
			placed[best]++
		}
	}
	return out
}
