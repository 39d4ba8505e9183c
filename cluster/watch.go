package cluster

import (
	"context"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// bucketWatch is an open watch on the bucket's claims and liveness keys.
type bucketWatch struct {
	w      jetstream.KeyWatcher
	cancel context.CancelFunc
}

// openWatch watches for updates only: a watch that returns has its consumer in place,
// so nothing stored after this call is missed. Its context is the watch's lifetime, so
// it has no deadline. It returns nil when the watch cannot be opened; the rounds carry
// on without it.
func (n *Node) openWatch() *bucketWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w, err := n.kv.WatchFiltered(ctx, []string{"shard.*", "node.*", settingsKey}, jetstream.UpdatesOnly(), jetstream.MetaOnly())
	if err != nil {
		cancel()
		return nil
	}
	return &bucketWatch{w: w, cancel: cancel}
}

func (b *bucketWatch) close() {
	_ = b.w.Stop()
	b.cancel()
}

// watchBucket asks the ownership goroutine for a balancing round when a shard's claim
// is given up or lapses and when a node joins or leaves, so a shard moves as soon as it
// can instead of at the next round, up to a quarter of the TTL later: a hand-off's next
// owner claims within milliseconds, and a dead owner's shard is claimed as its claim's
// expiry lands. It is only a hint: the rounds still run, and a missed or late event
// costs that wait. It closes opened once its first watch is open (or could not be). A
// watch that ends (a reconnect, a stream leader change) is opened again, and a round is
// kicked then, since the news between the two watches was not seen. It also follows the
// cluster's settings: read again whenever a watch opens (a change made before it was in
// place) and on every update of their key.
func (n *Node) watchBucket(opened chan<- struct{}) {
	defer n.wg.Done()
	live := map[string]bool{} // node keys seen, so renewals of a known node kick nothing
	for first := true; ; first = false {
		w := n.openWatch()
		if first {
			close(opened)
		} else if w != nil {
			n.kickBalance()
		}
		if w != nil {
			n.refreshSettings()
			n.follow(w.w, live)
			w.close()
		}
		select {
		case <-n.stop:
			return
		case <-time.After(n.timing.Renew):
		}
	}
}

// refreshSettings reads the cluster's settings and hands newer ones to OnSettings.
func (n *Node) refreshSettings() {
	if n.cfg.OnSettings == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.timing.Renew)
	defer cancel()
	s, err := LoadSettings(ctx, n.kv)
	if err != nil {
		n.log.Warn("reading the cluster's settings", "err", err)
		return
	}
	for {
		have := n.settingsRev.Load()
		if s.Shape.Version <= have {
			return
		}
		if n.settingsRev.CompareAndSwap(have, s.Shape.Version) {
			break
		}
	}
	n.log.Info("serving the cluster's new settings", "revision", s.Shape.Version)
	n.cfg.OnSettings(s)
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
			case key == settingsKey:
				if !gone {
					n.refreshSettings()
				}
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
