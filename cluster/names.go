// Package cluster runs Holdfast as several processes on one NATS deployment (API §7):
// shard journals, snapshots and published positions in JetStream (Storage), one owner
// per shard by a claim that is renewed in a KV bucket and fenced in the journal itself
// (Node), and the bookkeeping that lets any node route a request to the shard's owner.
// JetStream is the distributed engine: Holdfast runs no consensus of its own.
package cluster

import (
	"strconv"
	"strings"

	"github.com/holdfast/holdfast/contract"
)

// Names are the JetStream resources of one prefix. A prefix other than the default gets
// its own, so several deployments can share a NATS account.
type Names struct {
	Prefix string
	base   string
}

// NamesFor returns the resource names of a prefix.
func NamesFor(prefix string) Names {
	base := "HOLDFAST"
	if prefix != contract.DefaultPrefix {
		var b strings.Builder
		b.WriteString("HOLDFAST_")
		for _, r := range strings.ToUpper(prefix) {
			if r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' {
				b.WriteRune(r)
			} else {
				b.WriteByte('_')
			}
		}
		base = b.String()
	}
	return Names{Prefix: prefix, base: base}
}

// JournalStream is shard k's journal stream.
func (n Names) JournalStream(k uint32) string {
	return n.base + "_J_" + strconv.FormatUint(uint64(k), 10)
}

// JournalSubject is the only subject of shard k's journal stream.
func (n Names) JournalSubject(k uint32) string {
	return n.Prefix + "._j." + strconv.FormatUint(uint64(k), 10)
}

// JournalSubjects is the filter of every shard's journal subject.
func (n Names) JournalSubjects() string { return n.Prefix + "._j.*" }

// Snapshots is the object store bucket of shard snapshots.
func (n Names) Snapshots() string { return n.base + "_SNAP" }

// Bucket is the KV bucket of the prefix's registry, node liveness, shard claims and
// published positions.
func (n Names) Bucket() string { return n.base + "_CLUSTER" }

// ShardSubject is where the owner of shard k takes requests forwarded by other nodes.
func (n Names) ShardSubject(k uint32) string { return contract.ShardSubject(n.Prefix, k) }

// PeerSubject is where the owner of shard k takes the messages of bundles across shards
// from the other nodes (prepares, votes, mirrors and their acknowledgements, queries).
// Like the shard subjects it is the service account's own, never a tenant's.
func (n Names) PeerSubject(k uint32) string { return contract.ShardSubject(n.Prefix, k) + ".peer" }
