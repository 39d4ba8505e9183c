package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Where a shard's journal stream is led. An append waits for the stream's leader and one
// follower; a leader on another server than the owner's costs every append two more
// route crossings, and — worse — when that server dies, the owner's appends wait for the
// stream's election (4–9 s), its journal fails and the shard halts on a node that is
// alive. So the owner asks for the leadership when it claims the journal and keeps
// asking for as long as it owns it: JetStream moves a leadership away for reasons of its
// own (a leader falling behind, a server restarting), and nothing brings it back.

// leadCheckEvery is how often an owner checks where its journal's leader is.
var leadCheckEvery = 2 * time.Second // a variable for a test

// leadHere asks JetStream to make the NATS server this node is connected to the leader
// of the shard's journal stream (a leader step-down with a preferred successor), and
// waits a little for it: the owner's appends then go to a leader on its own server and
// wait for one follower, not for a round trip to another server first. Best effort: a
// server that holds no replica of the stream, or a step-down that does not happen,
// leaves the leader where it is, and so does a replica here that is catching up (asked
// again at the next check). It takes at most one JetStream call's time (the claim's
// time is the shard's unavailability): a step-down JetStream does not answer — a leader
// paused or cut off — must not hold the claim up. asked says whether a step-down was
// asked for and accepted (the stream's API may not answer for a while after it).
func (j *Journal) leadHere(ctx context.Context) (asked bool) {
	ctx, cancel := context.WithTimeout(ctx, openCall)
	defer cancel()
	nc := j.cfg.JS.Conn()
	here := nc.ConnectedServerName()
	info, err := j.stream.Info(ctx)
	if err != nil || info.Cluster == nil || here == "" || info.Cluster.Leader == here {
		return false
	}
	// Only a replica that is current: JetStream hands a leadership to the preferred peer
	// if it is alive, however far behind — a server back from a partition, still
	// catching up, would campaign and lose while the stream has no leader at all.
	current := false
	for _, p := range info.Cluster.Replicas {
		current = current || (p.Name == here && p.Current && !p.Offline)
	}
	if !current {
		return false
	}
	req := fmt.Sprintf(`{"placement":{"preferred":%q}}`, here)
	resp, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+j.cfg.Names.JournalStream(j.cfg.Shard), []byte(req))
	if err != nil || !strings.Contains(string(resp.Data), `"success":true`) {
		return false
	}
	for ctx.Err() == nil {
		if info, err := j.stream.Info(ctx); err == nil && info.Cluster != nil && info.Cluster.Leader == here {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// keepLead checks the stream's leader every leadCheckEvery until Close, and asks for the
// leadership again when it has moved to another server.
func (j *Journal) keepLead() {
	if j.cfg.Replicas <= 1 {
		return
	}
	ctx, stop := context.WithCancel(context.Background()) // Close ends a check under way too
	j.leadStop, j.leadDone = stop, make(chan struct{})
	go func() {
		defer close(j.leadDone)
		tick := time.NewTicker(leadCheckEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if j.leadHere(ctx) && j.cfg.Logger != nil {
				j.cfg.Logger.Info("asked for the journal stream's leadership back on this node's server", "shard", j.cfg.Shard,
					"stream", j.cfg.Names.JournalStream(j.cfg.Shard))
			}
		}
	}()
}
