package server

import (
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/cluster"
)

// peerLink carries the messages of bundles across shards between the nodes of a cluster
// (actors.Peers): a core NATS publish to the peer subject of the shard it is for, where
// that shard's owner subscribes while it serves it. Nothing waits for it: the protocol
// takes a message lost while a shard moves (docs/design.md "Bundles across shards").
type peerLink struct {
	nc    *nats.Conn
	names cluster.Names
	log   *slog.Logger
	sys   *actors.System // set once the shards start, before any is opened
	subs  shardSubs

	warned atomic.Int64 // unix nanos of the last unreadable message logged: one a minute
}

func (p *peerLink) Send(k uint32, msg []byte) {
	if err := p.nc.Publish(p.names.PeerSubject(k), msg); err != nil {
		p.log.Debug("sending a bundle message", "shard", k, "err", err)
	}
}

// Accept starts taking shard k's peer messages (this node now serves it).
func (p *peerLink) Accept(k uint32) error {
	sub, err := p.nc.Subscribe(p.names.PeerSubject(k), func(m *nats.Msg) {
		if err := p.sys.Deliver(k, m.Data); err != nil {
			if now, last := time.Now().UnixNano(), p.warned.Load(); now-last > int64(time.Minute) && p.warned.CompareAndSwap(last, now) {
				p.log.Warn("a bundle message this build cannot read (a node of another version?)", "shard", k, "err", err)
			}
		}
	})
	if err != nil {
		return err
	}
	p.subs.set(k, sub)
	return nil
}

// Release stops taking shard k's peer messages; those still on the way are dropped (the
// next owner is sent them again).
func (p *peerLink) Release(k uint32) { p.subs.drop(k) }
