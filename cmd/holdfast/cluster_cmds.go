package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/holdfast/holdfast/client"
)

type clusterCmd struct {
	Status    clusterStatusCmd    `cmd:"" help:"Show the live nodes, the node serving each shard and the position it has applied."`
	Configure clusterConfigureCmd `cmd:"" help:"Show or change the settings every node of a cluster serves under."`
}

type clusterStatusCmd struct {
	Key string `name:"key" help:"Placement key whose shard (in --tenant) to show as well."`
	connFlags
}

func (c *clusterStatusCmd) Run(e *env) error {
	return callAndShow(e, &c.connFlags, func(ctx context.Context, cl *client.Client) (*client.ClusterResult, error) {
		return cl.ClusterStatus(ctx, c.Key)
	}, func(res *client.ClusterResult) view {
		return view{&res.Result, clusterLines(res, c.Key), true}
	})
}

// shardList is shard numbers, space-separated.
func shardList(ks []uint32) string {
	s := make([]string, len(ks))
	for i, k := range ks {
		s[i] = fmt.Sprint(k)
	}
	return strings.Join(s, " ")
}

// clusterLines are cluster.status's lines: the nodes, the shards, the key's shard, the slot.
func clusterLines(res *client.ClusterResult, key string) string {
	var b strings.Builder
	for i, n := range res.Nodes {
		if i > 0 {
			b.WriteByte('\n')
		}
		if n.GetLost() {
			fmt.Fprintf(&b, "node %s: lost %v ago, holding shards %s (its liveness lapsed; they moved to live nodes)",
				n.GetNode(), (time.Duration(n.GetLostAgoMs()) * time.Millisecond).Round(time.Second), shardList(n.GetHeld()))
			continue
		}
		fmt.Fprintf(&b, "node %s: shards %s", n.GetNode(), shardList(n.GetShards()))
		if n.GetLapsing() {
			fmt.Fprintf(&b, " (lapsing: its last renewal is %v behind; its shards move when it lapses)",
				time.Duration(n.GetRenewalAgeMs())*time.Millisecond)
		}
	}
	for _, s := range res.Shards {
		owner := s.GetOwner()
		if owner == "" {
			owner = "(none: moving)"
		}
		fmt.Fprintf(&b, "\nshard %d: %s, applied lsn %d", s.GetShard(), owner, s.GetAppliedLsn())
	}
	if res.Shard != nil {
		fmt.Fprintf(&b, "\nkey %s: shard %d", key, *res.Shard)
	}
	if res.Slot > 0 {
		fmt.Fprintf(&b, "\nslot %v", res.Slot)
	}
	return b.String()
}
