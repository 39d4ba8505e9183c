package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/holdfast/holdfast/client"
)

func init() {
	registerCLI("cluster", "show which node serves which shard (status)", cmdCluster)
}

func cmdCluster(e *env, args []string) int {
	return dispatch(e, "cluster", []subcommand{
		{"status", clusterStatus},
	}, args)
}

func clusterStatus(e *env, args []string) int {
	c := newCall(e, "cluster status", "cluster status [--key KEY] [flags]",
		"Show the live nodes, the node serving each shard and the position it has applied;\nwith --key, also the shard a placement key maps to in --tenant.")
	key := c.fs.String("key", "", "placement `key` whose shard to show")
	if code := c.prepare(args, 0, ""); code >= 0 {
		return code
	}
	return c.run(func(ctx context.Context, cl *client.Client) int {
		res, err := cl.ClusterStatus(ctx, *key)
		if err != nil {
			return errorExit(e, err, c.cf.json)
		}
		return c.show(&res.Result, true, func() string {
			var b strings.Builder
			for i, n := range res.Nodes {
				if i > 0 {
					b.WriteByte('\n')
				}
				shards := make([]string, len(n.GetShards()))
				for j, k := range n.GetShards() {
					shards[j] = fmt.Sprint(k)
				}
				fmt.Fprintf(&b, "node %s: shards %s", n.GetNode(), strings.Join(shards, " "))
			}
			for _, s := range res.Shards {
				owner := s.GetOwner()
				if owner == "" {
					owner = "(none: moving)"
				}
				fmt.Fprintf(&b, "\nshard %d: %s, applied lsn %d", s.GetShard(), owner, s.GetAppliedLsn())
			}
			if res.Shard != nil {
				fmt.Fprintf(&b, "\nkey %s: shard %d", *key, *res.Shard)
			}
			return b.String()
		})
	})
}
