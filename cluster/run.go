package cluster

import (
	"bytes"
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/actors"
)

// The ownership goroutine: the one place the claim table (claims.go) lives. It renews
// this node's liveness and its claims every quarter of the TTL, runs a balancing round
// then and whenever it is kicked (the bucket's news, a shard halting, a claim lost), and
// carries out the table's acts. What can take long runs off it and reports back: a
// round's reading of the bucket (one at a time) and a shard's open or close (one at a
// time per shard, its phase says so), so no load, drain or slow read ever holds up a
// renewal. Its calls into the bucket — renewals, a claim's create, a claim's delete —
// are each bounded by a quarter of the TTL.

// bucketView is a round's reading of the bucket: the live nodes and each shard's
// owner; members is nil when it could not be read.
type bucketView struct {
	members, owners []string
	leaving         map[string]bool // the members that said they stop
}

// hostDone is the end of a shard's open or close made off the ownership goroutine.
type hostDone struct {
	shard   uint32
	opened  bool   // an open (else a close or a confirm)
	confirm uint64 // a confirm: the claim made again it is for (claimTable.Recreated)
	how     closeHow
	err     error
	took    time.Duration
}

// Run drives host until Stop or Abandon: the bucket watch, and the ownership goroutine.
// The first round waits for the watch to be open (a claim given up after the round's
// read is then news the watch sees, not a wait for the next round).
func (n *Node) Run(host Host) {
	n.host = host
	opened := make(chan struct{})
	n.wg.Add(2)
	go n.watchBucket(opened)
	go n.run(opened)
}

func (n *Node) run(watching <-chan struct{}) {
	defer n.wg.Done()
	n.table.Joined(actors.MonoNow())
	settled := time.After(n.timing.Settle) // a round then: a starting cluster's first claims
	tick := time.NewTicker(n.timing.Renew)
	defer tick.Stop()
	n.renewAll()
	stop := n.stop
	var overdue <-chan time.Time
	for {
		select {
		case <-overdue:
			// A load or close that does not end (a JetStream call past its bounds) must not
			// keep the process from stopping: serve nothing more and leave what is still
			// held to lapse by its TTL, as a crash would (fencing keeps that safe).
			n.log.Warn("stopping: hand-over not done in time; leaving the claims still held to lapse",
				"after", n.cfg.StopTimeout, "loads_and_closes_running", n.hostOps)
			for k := range n.serveUntil {
				n.serveUntil[k].Store(0)
			}
			return
		case <-settled:
			n.askRound()
		case <-watching:
			watching = nil
			n.askRound()
		case <-tick.C:
			n.renewAll()
			n.askRound()
		case <-n.kick:
			n.askRound()
		case v := <-n.views:
			n.reading = false
			n.noticeMembers(v)
			n.do(n.table.Round(actors.MonoNow(), v.members, v.owners, n.host.Halted))
			if n.again {
				n.again = false
				n.askRound()
			}
		case d := <-n.done:
			n.hostOps--
			n.ended(d)
		case <-stop:
			stop = nil
			if n.abandoned.Load() {
				for ; n.hostOps > 0; n.hostOps-- {
					<-n.done
				}
				return
			}
			n.beginStop()
			overdue = time.After(n.cfg.StopTimeout)
		}
		if stop == nil && n.table.Done() && n.hostOps == 0 && !n.reading {
			return
		}
	}
}

// beginStop starts the hand-over of every shard this node holds (or, the last live node,
// closes them and leaves their claims to lapse), and says so in its liveness key.
func (n *Node) beginStop() {
	_, seen := n.watch.held[n.cfg.Node]
	// The last round saw no other live node, and their servers went with them.
	alone := seen && len(n.watch.held) == 1 && n.cfg.ServersGoWithNodes
	if alone {
		n.log.Info("the last live node stops: its shards are closed and their claims left to lapse; the next node to start recovers them from their journals")
	}
	n.do(n.table.Stop(actors.MonoNow(), alone))
	// Say so in the liveness key (renewMember reads the table's stopping): the
	// others log this node as having left, not lost, when its key goes.
	if !alone {
		lctx, cancel := context.WithTimeout(context.Background(), n.timing.Renew)
		n.renewMember(lctx)
		cancel()
	}
}

// askRound reads the bucket for a balancing round, off this goroutine; a round asked
// for while one reads runs once that one is done.
func (n *Node) askRound() {
	if n.table.stopping {
		return
	}
	if n.reading {
		n.again = true
		return
	}
	n.reading = true
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), n.timing.Renew*2)
		defer cancel()
		var v bucketView
		nodes, err := n.nodeStates(ctx)
		if err != nil {
			// Once per streak: while the bucket elects a leader every round fails alike.
			if !n.listFailing.Swap(true) {
				n.log.Warn("listing live nodes failed; the shards are placed again once it answers", "err", err)
			}
		} else {
			if n.listFailing.Swap(false) {
				n.log.Info("listing live nodes again")
			}
			v = bucketView{members: make([]string, len(nodes)), owners: n.owners(ctx), leaving: map[string]bool{}}
			for i, s := range nodes {
				v.members[i] = s.Node
				v.leaving[s.Node] = s.Leaving
			}
		}
		n.views <- v
	}()
}

// noticeMembers logs, once, each node gone since the last round: left (it said it was
// leaving before its key went) or lost (its key lapsed), and keeps the lost ones for
// cluster.status. Not in the quiet time after the bucket's silence: the survivors' keys
// that lapsed meanwhile are being made again, and are not news.
func (n *Node) noticeMembers(v bucketView) {
	if v.members == nil || n.table.Quiet(actors.MonoNow()) {
		return
	}
	n.lost.back(v.members)
	for _, g := range n.watch.round(n.cfg.Node, v.members, v.leaving, v.owners) {
		if !g.lost {
			n.log.Info("node left the cluster", "node", g.node)
			continue
		}
		n.log.Warn("node lost: its liveness lapsed; the shards it held are claimed again by the live nodes",
			"node", g.node, "held", g.held)
		n.lost.add(LostNode{Node: g.node, Held: g.held, At: time.Now()})
	}
}

// Lost is the nodes lost lately (at most 16, for 10 minutes), for cluster.status.
func (n *Node) Lost() []LostNode { return n.lost.list(time.Now()) }

// Halted is the actors.Ownership's word that a shard halted: a balancing round now, which
// gives the halted shard up.
func (n *Node) Halted(uint32) { n.kickBalance() }

// ended hands the end of an open or close to the table.
func (n *Node) ended(d hostDone) {
	now := actors.MonoNow()
	if d.confirm != 0 {
		n.logStanding(d.shard, n.table.Confirmed(now, d.shard, d.confirm, d.err == nil), d.err)
		n.publish()
		return
	}
	if d.opened {
		switch {
		case d.err != nil && n.loads.Err() != nil:
			n.log.Info("loading a claimed shard stopped: the node stops", "shard", d.shard)
		case d.err != nil:
			n.log.Error("opening claimed shard", "shard", d.shard, "err", d.err)
		}
		n.do(n.table.Opened(now, d.shard, d.err), "load", d.took.Round(time.Millisecond))
		return
	}
	if d.how == handOff {
		n.cfg.Metrics.ShardHandedOff()
	}
	n.do(n.table.Closed(now, d.shard))
}

// do carries out acts. It first publishes the table (what Serving and Storage read), so
// a shard decided lost is not served from this moment, before its close begins. logArgs
// go with the acts' log lines.
func (n *Node) do(acts []act, logArgs ...any) {
	n.publish()
	for _, a := range acts {
		switch a.kind {
		case actClaim:
			n.do(n.claim(a.shard))
		case actOpen:
			n.hostOp(a)
		case actAccept:
			if err := n.host.Accept(a.shard); err != nil {
				n.log.Error("taking requests for shard", "shard", a.shard, "err", err)
				n.do(n.table.AcceptFailed(a.shard))
				continue
			}
			n.log.Info("serving shard", append([]any{"shard", a.shard, "epoch", a.rev}, logArgs...)...)
			n.cfg.Metrics.ShardAcquired()
		case actClose:
			if a.how == handOff {
				n.log.Info("handing shard over", "shard", a.shard, "why", a.why)
			} else if n.table.alone {
				n.log.Info("closing shard", "shard", a.shard, "why", a.why)
			} else {
				n.log.Warn("giving shard up", append([]any{"shard", a.shard, "how", a.how.String(), "why", a.why}, logArgs...)...)
				n.cfg.Metrics.ClaimLost()
			}
			n.hostOp(a)
		case actRelease:
			n.releaseKey(a.shard, a.rev)
		case actRound:
			n.log.Warn(a.why, "shard", a.shard)
			n.askRound()
		case actConfirm:
			n.confirm(a)
		}
	}
	n.cfg.Metrics.ShardsOwned(len(n.owned()))
}

// publish copies the table's epochs and serve windows where other goroutines read them.
func (n *Node) publish() {
	for k := range n.table.shards {
		c := &n.table.shards[k]
		n.serveUntil[k].Store(c.serveUntil)
		n.epoch[k].Store(c.rev)
	}
}

// hostOp opens or closes a shard off the ownership goroutine.
func (n *Node) hostOp(a act) {
	n.hostOps++
	go func() {
		d := hostDone{shard: a.shard, how: a.how, opened: a.kind == actOpen}
		start := time.Now()
		if d.opened {
			d.err = n.host.Open(a.shard)
		} else {
			n.host.Close(a.shard, a.how == handOff)
		}
		d.took = time.Since(start)
		n.done <- d
	}()
}

// confirm asks the host, off the ownership goroutine, for a barrier through shard k's
// journal after its claim was made again.
func (n *Node) confirm(a act) {
	n.hostOps++
	go func() {
		start := time.Now()
		err := n.host.Confirm(a.shard)
		n.done <- hostDone{shard: a.shard, confirm: a.rev, err: err, took: time.Since(start)}
	}()
}

// claim creates shard k's claim key: its revision is the epoch at which the shard's
// journal is claimed, which fences every earlier owner.
func (n *Node) claim(k uint32) []act {
	ctx, cancel := context.WithTimeout(context.Background(), n.timing.Renew)
	defer cancel()
	sent := actors.MonoNow()
	rev, err := n.kv.Create(ctx, shardKey(k), n.ownerRecord, jetstream.KeyTTL(n.cfg.OwnershipTTL))
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			n.log.Warn("claiming shard", "shard", k, "err", err)
		}
		rev = 0
	}
	return n.table.Claimed(actors.MonoNow(), k, rev, sent)
}

// releaseKey deletes shard k's claim key if it is still at rev.
func (n *Node) releaseKey(k uint32, rev uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), n.timing.Renew)
	defer cancel()
	if err := n.kv.Delete(ctx, shardKey(k), jetstream.LastRevision(rev)); err != nil {
		n.log.Warn("releasing claim", "shard", k, "err", err)
	}
}

// renewAll renews this node's liveness and every claim it holds.
func (n *Node) renewAll() {
	ctx, cancel := context.WithTimeout(context.Background(), n.timing.Renew*2)
	defer cancel()
	n.renewing.Store(&cancel) // Stop ends a pass the bucket does not answer
	defer n.renewing.Store(nil)
	answered := n.renewMember(ctx)
	switch changed := n.table.Bucket(actors.MonoNow(), answered); {
	case changed && answered:
		n.log.Info("the cluster bucket answers renewals again")
	case changed:
		n.log.Warn("the cluster bucket does not answer renewals (electing a leader, or out of reach); shards are served on, fenced by their journals")
	}
	for _, a := range n.table.Renewals() {
		n.renewClaim(ctx, a.shard, a.rev)
	}
	n.publish()
}

// renewClaim extends this node's claim on shard k at revision rev and tells the table
// how it went. A claim refused because its key is gone — it lapsed while the bucket
// could not renew it — is made again if no other node has made it first (the journal's
// barrier then confirms that none held it in between); one that is another's is given
// up. One not answered is served on, fenced by its journal once its window passes.
func (n *Node) renewClaim(ctx context.Context, k uint32, rev uint64) {
	sent := actors.MonoNow()
	newRev, err := n.renewKey(ctx, shardKey(k), n.ownerRecord, rev)
	refused := err != nil && isWrongLast(err)
	if refused && !n.table.stopping { // a stopping node's claims are on their way out
		if again, made, why := n.reclaim(ctx, k); again != 0 {
			n.log.Warn(why+"; serving the shard fenced until its journal confirms it is still this node's", "shard", k, "epoch", again)
			if !made {
				// When that renewal was sent is not known: leased only from the next one.
				sent = 0
			}
			n.do(n.table.Recreated(k, rev, again, sent))
			return
		}
	}
	how, acts := n.table.Renewed(actors.MonoNow(), k, rev, newRev, sent, actors.MonoNow(), refused)
	n.cfg.Metrics.ClaimRenewed(how == renewedInTime || how == renewedAgain)
	n.logStanding(k, how, err)
	if len(acts) > 0 {
		n.do(acts)
	}
}

// reclaim looks at shard k's claim key after a renewal was refused: a renewal of ours
// that timed out may have landed after all (the key is ours at a later revision), or the
// key lapsed while the bucket could not renew it (it is gone, and made again here if no
// other node has made it first). The revision the key is now ours at, whether it was
// made just now, and why; 0 when it is another node's, or cannot be told.
func (n *Node) reclaim(ctx context.Context, k uint32) (uint64, bool, string) {
	e, err := n.kv.Get(ctx, shardKey(k))
	switch {
	case err == nil && bytes.Equal(e.Value(), n.ownerRecord):
		return e.Revision(), false, "claim renewal refused, but the key is this node's at a later revision (a renewal that timed out landed)"
	case err == nil:
		return 0, false, ""
	case !errors.Is(err, jetstream.ErrKeyNotFound) && !errors.Is(err, jetstream.ErrKeyDeleted):
		return 0, false, ""
	}
	again, err := n.kv.Create(ctx, shardKey(k), n.ownerRecord, jetstream.KeyTTL(n.cfg.OwnershipTTL))
	if err != nil {
		return 0, false, ""
	}
	return again, true, "claim lapsed while the cluster bucket could not renew it; made it again"
}

// logStanding logs a claim's change of standing, once per change.
func (n *Node) logStanding(k uint32, how renewal, err error) {
	switch how {
	case renewedLate:
		n.log.Warn("claim renewed only as its last revision may have been expiring; not leased until the next renewal confirms it", "shard", k)
	case renewFenced:
		if n.table.stopping {
			n.log.Debug("claim not renewed within its serve window as the node stops", "shard", k, "err", err)
			return
		}
		n.log.Warn("claim not renewed within its serve window; serving the shard fenced by its journal, answers that append nothing after a barrier through it",
			"shard", k, "err", err)
	case renewedAgain:
		n.log.Info("claim renewed again; the shard is leased", "shard", k)
	case renewFailed:
		n.log.Debug("renewing claim", "shard", k, "err", err)
	}
}

// owned lists the shards this node holds a claim on (being opened, served or closed).
func (n *Node) owned() []uint32 {
	var ks []uint32
	for k := range n.epoch {
		if n.epoch[k].Load() != 0 {
			ks = append(ks, uint32(k))
		}
	}
	return ks
}

// Stop hands every shard over and leaves the cluster (a SIGTERM). The shards are handed
// over together, each closed first so that every request it took is answered, while the
// ownership goroutine goes on renewing their claims until each is deleted. A hand-over
// not done within Config.StopTimeout is left to lapse by the TTL.
func (n *Node) Stop() {
	select {
	case <-n.stop:
		return
	default:
	}
	n.stopLoads()
	if c := n.renewing.Load(); c != nil {
		(*c)() // the hand-over starts now, not after a pass the bucket does not answer
	}
	close(n.stop)
	n.wg.Wait()
	if n.abandoned.Load() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.timing.Renew)
	defer cancel()
	// A purge whose marker lapses: a plain delete's marker stays under the name for good,
	// one per node name ever stopped (pods of a Deployment come under new names).
	_ = n.kv.Purge(ctx, memberKey(n.cfg.Node), jetstream.PurgeTTL(n.cfg.OwnershipTTL))
}

// Abandon stops the node's goroutines and its serving without handing anything over
// (tests: a crash, after which the claims lapse by their TTL); a later Stop does nothing
// more.
func (n *Node) Abandon() {
	select {
	case <-n.stop:
		return
	default:
	}
	n.abandoned.Store(true)
	n.stopLoads()
	close(n.stop)
	n.wg.Wait()
	for k := range n.serveUntil {
		n.serveUntil[k].Store(0)
	}
}
