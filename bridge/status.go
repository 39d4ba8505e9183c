package bridge

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/messages"
)

// StatusSource is the cluster's view for cluster.status: the nodes and each shard's
// owner ("" while nobody serves it).
type StatusSource func(ctx context.Context) (nodes []NodeStatus, owners []string, err error)

// NodeStatus is one node of cluster.status.
type NodeStatus struct {
	Node       string
	RenewalAge time.Duration // behind the freshest node's last renewal
	Lapsing    bool          // missed a renewal: its claims lapse unless it renews
	// Lost: its liveness lapsed lately (it serves nothing); LostAgo is how long ago this
	// node saw it gone, Held the shards it held then.
	Lost    bool
	LostAgo time.Duration
	Held    []uint32
}

// serveStatus answers cluster.status: the nodes, the owner of every shard and the
// position it has applied (asked of the owner; 0 when it does not answer in time).
func (b *Bridge) serveStatus(c *call, j *job) {
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timing.Request)
	defer cancel()
	n := int(b.cfg.Shards)
	nodes, owners := []NodeStatus{{Node: b.cfg.Node}}, make([]string, n)
	for k := range owners {
		owners[k] = b.cfg.Node
	}
	if b.cfg.Status != nil {
		var err error
		if nodes, owners, err = b.cfg.Status(ctx); err != nil {
			if c.settle() {
				c.res = rejectReply(contract.CodeEngineHalted, "the cluster's state could not be read; retry")
				b.respond(c)
			}
			return
		}
	}
	applied := make([]uint64, n)
	var wg sync.WaitGroup
	for k := 0; k < n; k++ {
		switch {
		case b.sys.IsOpen(uint32(k)):
			applied[k] = b.sys.Stats(uint32(k)).AppliedLSN
		case b.cfg.Routing != nil && owners[k] != "":
			wg.Add(1)
			go func(k int) {
				defer wg.Done()
				applied[k] = b.remoteApplied(ctx, j, uint32(k))
			}(k)
		}
	}
	wg.Wait()
	m := &messages.Reply{SlotMs: b.slotMillis}
	for _, node := range nodes {
		cn := &messages.ClusterNode{Node: node.Node, Lapsing: node.Lapsing, RenewalAgeMs: uint64(node.RenewalAge.Milliseconds())}
		if node.Lost {
			cn = &messages.ClusterNode{Node: node.Node, Lost: true, LostAgoMs: uint64(node.LostAgo.Milliseconds()), Held: node.Held}
			m.Nodes = append(m.Nodes, cn)
			continue
		}
		for k, o := range owners {
			if o == node.Node {
				cn.Shards = append(cn.Shards, uint32(k))
			}
		}
		m.Nodes = append(m.Nodes, cn)
	}
	for k, o := range owners {
		if o == "?" {
			o = ""
		}
		m.Shards = append(m.Shards, &messages.ClusterShard{Shard: uint32(k), Owner: o, AppliedLsn: applied[k]})
	}
	if c.op.hasKey {
		k := c.op.shard
		m.Shard = &k
	}
	if !c.settle() {
		return // the call's timer answered first
	}
	c.status = m
	c.res = &actors.Reply{Code: contract.CodeOK, MemberIndex: -1}
	b.respond(c)
}

// remoteApplied asks the owner of shard k for its applied position.
func (b *Bridge) remoteApplied(ctx context.Context, j *job, k uint32) uint64 {
	msg := b.shardRequest(j, k, true)
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	resp, err := b.nc.RequestMsgWithContext(rctx, msg)
	if err != nil {
		return 0
	}
	var p partReply
	if json.Unmarshal(resp.Data, &p) != nil {
		return 0
	}
	return p.AppliedLSN
}
