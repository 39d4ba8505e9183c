package cluster

import (
	"context"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// watchBucket kicks the balancing loop when a shard's claim is given up or lapses and
// when a node joins or leaves, so a shard moves as soon as it can instead of at the
// next round, up to a quarter of the TTL later: a hand-off's next owner claims within
// milliseconds, and a dead owner's shard is claimed as its claim's expiry lands. It is
// only a hint: the rounds still run, and a missed or late event costs that wait.
func (n *Node) watchBucket() {
	defer n.wg.Done()
	live := map[string]bool{} // node keys seen, so renewals of a known node kick nothing
	for {
		ctx, cancel := context.WithCancel(context.Background())
		w, err := n.kv.WatchFiltered(ctx, []string{"shard.*", "node.*"}, jetstream.UpdatesOnly(), jetstream.MetaOnly())
		if err == nil {
			n.follow(w, live)
			_ = w.Stop()
		}
		cancel()
		select {
		case <-n.stop:
			return
		case <-time.After(n.period()): // watch again (a reconnect, a stream leader change)
		}
	}
}

// follow reads the watch until the node stops or the watch ends.
func (n *Node) follow(w jetstream.KeyWatcher, live map[string]bool) {
	for {
		select {
		case <-n.stop:
			return
		case e, ok := <-w.Updates():
			if !ok {
				return
			}
			if e == nil {
				continue
			}
			gone := e.Operation() != jetstream.KeyValuePut
			switch key := e.Key(); {
			case strings.HasPrefix(key, "shard."):
				if gone {
					n.kickBalance()
				}
			case gone:
				delete(live, key)
				n.kickBalance()
			case !live[key]:
				live[key] = true
				n.kickBalance()
			}
		}
	}
}

// kickBalance asks for a balancing round now; a round already asked for covers it.
func (n *Node) kickBalance() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}
