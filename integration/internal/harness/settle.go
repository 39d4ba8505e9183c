//go:build unix

package harness

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// settle waits, up to limit, until the cluster's JetStream is whole again after a fault:
// the meta group answers (streams are listed through its leader) and every stream has a
// leader with every replica current. A partition is measured from a whole cluster: one
// cut while the last one's raft groups still catch up costs their catch-up as well —
// nats-server's raft has no pre-vote, so a server back from isolation, its term raised by
// the elections it held alone, unseats leaders when it rejoins, and the majority of the
// next cut may not elect one until it is current (seen: no bucket leader for a whole
// 6 s cut made 1.3 s after the previous heal). It returns how long it waited and what
// was still catching up when limit passed ("" when whole).
func (c *Cluster) settle(ctx context.Context, limit time.Duration) (time.Duration, string) {
	start := time.Now()
	nc, err := dial(c.ClientURLs[0], "settle")
	if err != nil {
		return 0, err.Error()
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return 0, err.Error()
	}
	for {
		behind := c.behind(ctx, js)
		if behind == "" || time.Since(start) > limit || ctx.Err() != nil {
			return time.Since(start), behind
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// behind says which stream is without a leader or has a replica catching up ("" none).
func (c *Cluster) behind(ctx context.Context, js jetstream.JetStream) string {
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	streams := js.ListStreams(lctx)
	for info := range streams.Info() {
		if info.Cluster == nil {
			continue
		}
		if info.Cluster.Leader == "" {
			return fmt.Sprintf("stream %s has no leader", info.Config.Name)
		}
		for _, r := range info.Cluster.Replicas {
			if !r.Current || r.Offline {
				return fmt.Sprintf("stream %s: replica %s is catching up", info.Config.Name, r.Name)
			}
		}
	}
	if err := streams.Err(); err != nil {
		return "listing streams: " + err.Error()
	}
	return ""
}
