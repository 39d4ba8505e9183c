package cluster

import (
	"slices"

	"github.com/holdfast/holdfast/contract"
)

// The claim table: this node's hold on each shard, one pure state machine for all of
// them. It decides; the node's one ownership goroutine (run.go) feeds it what happened —
// a balancing round's view of the bucket, a claim's create, a renewal's answer, a shard
// opened or closed — and carries out the acts it returns. It does no I/O and reads no
// clock (now comes with every event), so every decision about ownership is in this
// file and tested by script (testdata/claims) without NATS. Before it, the claims were
// mutated by a renewal loop, a balancing loop and Stop, under a mutex and a lock per
// shard (the shape nats-server's monitorStream avoids with one goroutine per asset).
//
// A served shard's standing (actors.Standing): Leased while its last renewal landed
// within the serve window; then Fenced — still served, fenced by its journal, answers
// that append nothing wait for a barrier — until a renewal lands again or the claim is
// known lost (a renewal refused: another node's or gone and not made again here). A
// claim store electing a leader, or out of reach, so stalls no shard: the owner gives a
// shard up only when it learns it lost the claim or its journal refuses it (halted).
//
// A shard's phases:
//
//	free ──round──▶ claiming ──created──▶ opening ──opened──▶ serving
//	  ▲                │ exists/error        │ error: release     │ lost, halted,
//	  │                ▼                     │ lost: lose         │ placed elsewhere, stop
//	  └──────────── free ◀──── closed ◀──── closing(how) ◀───────┘
//
// Time is monotonic nanoseconds (actors.MonoNow).

// phase is where this node's hold on one shard stands.
type phase uint8

const (
	free     phase = iota // not held here
	claiming              // the claim's create is on its way
	opening               // claimed; the shard is loading
	serving               // open and taking requests
	closing               // being given up, in the way its how says
)

var phaseNames = [...]string{"free", "claiming", "opening", "serving", "closing"}

func (p phase) String() string { return phaseNames[p] }

// closeHow is the way a shard is given up.
type closeHow uint8

const (
	// handOff is orderly: no new requests, those taken answered, its events published and
	// the position recorded while the claim is still renewed, then the claim deleted so
	// that the next owner need not wait for it to lapse.
	handOff closeHow = iota + 1
	// lose stops at once: the claim may be another node's already, so nothing is deleted
	// and the next owner publishes the events not published here.
	lose
	// giveUp closes a halted shard and deletes its claim; it is claimed again, here after
	// a round or elsewhere, and recovered from its journal.
	giveUp
)

var howNames = [...]string{"", "hand-off", "lose", "give-up"}

func (h closeHow) String() string { return howNames[h] }

// actKind is what the ownership goroutine is asked to do.
type actKind uint8

const (
	actClaim   actKind = iota + 1 // create the shard's claim key
	actOpen                       // open the shard at the claim's epoch (slow: off the goroutine)
	actAccept                     // route the shard's requests here
	actClose                      // close the shard in the way how says (slow: off the goroutine)
	actRelease                    // delete the claim key if it is still at rev
	actRound                      // run a balancing round soon
	actConfirm                    // prove the journal still this node's (a barrier), after a claim made again
)

var actNames = [...]string{"", "claim", "open", "accept", "close", "release", "round", "confirm"}

// act is one thing to do. why says what decided it, for the log.
type act struct {
	kind  actKind
	shard uint32
	rev   uint64
	how   closeHow
	why   string
}

// shardClaim is this node's hold on one shard.
type shardClaim struct {
	phase phase
	how   closeHow // while closing
	rev   uint64   // the claim's KV revision: the ownership epoch
	sent  int64    // when the write of rev was sent
	// serveUntil is when the lease window ends (0: not served): the serve window after
	// the send of the last renewal known to have landed in time. Past it the shard is
	// served Fenced; fencedOnly: Fenced until a barrier confirms a claim made again.
	serveUntil int64
	// fenced: the window passed without a renewal landing (logged once, until one does).
	fenced bool
	// confirming counts the claims made again (Recreated); the barrier of the newest one
	// decides (Confirmed), while serveUntil is fencedOnly.
	confirming uint64
	// notBefore: no new claim before it, after a failed open or a halt (one try per
	// round, not a loop of claims on a journal that cannot be read yet).
	notBefore int64
}

// claimTable is the state machine. Every method returns the acts its event calls for.
type claimTable struct {
	node     string
	timing   contract.Timing
	shards   []shardClaim
	stopping bool
	alone    bool // stopping as the last live node: nobody to hand over to
	// settleUntil: before it, a bucket where no shard is claimed by anybody (a cluster
	// starting) has none claimed here either (Joined).
	settleUntil int64
	// quietUntil: before it no unclaimed shard is claimed here. The bucket just answered
	// again after a silence (a leader's election), and the keys that lapsed meanwhile
	// are their owners' to make again first (Recreated), not orphans to take.
	quietUntil int64
	silent     bool // the bucket's last renewal went unanswered
}

func newClaimTable(node string, shards uint32, timing contract.Timing) *claimTable {
	return &claimTable{node: node, timing: timing, shards: make([]shardClaim, shards)}
}

// held says whether the shard's claim is this node's (or about to be).
func (c *shardClaim) held() bool { return c.phase != free }

// renewable says whether the claim is renewed: held and not lost, being lost or given up.
func (c *shardClaim) renewable() bool {
	return c.served() && (c.phase == opening || c.phase == serving || (c.phase == closing && c.how == handOff))
}

// fencedOnly is a serve window over before it began: Fenced, not lost.
const fencedOnly = 1

// served says whether the shard may be served (Leased or Fenced): its claim is not
// known lost.
func (c *shardClaim) served() bool { return c.serveUntil != 0 }

// leased says whether the shard is Leased at now.
func (c *shardClaim) leased(now int64) bool { return c.serveUntil != 0 && now < c.serveUntil }

// closeAct moves a shard to closing; a lost or halted shard is not served from now on.
func (t *claimTable) closeAct(k uint32, how closeHow, why string) act {
	c := &t.shards[k]
	c.phase, c.how = closing, how
	if how != handOff {
		c.serveUntil = 0
	}
	return act{kind: actClose, shard: k, rev: c.rev, how: how, why: why}
}

// forget makes the shard free here; its no-claim-before time stays.
func (c *shardClaim) forget() { *c = shardClaim{notBefore: c.notBefore} }

// releaseAct forgets the claim and asks for its key to be deleted.
func (t *claimTable) releaseAct(k uint32, why string) act {
	c := &t.shards[k]
	rev := c.rev
	c.forget()
	return act{kind: actRelease, shard: k, rev: rev, why: why}
}

// Joined is this node's join, at now. Nodes started together join within moments of
// each other, and the first one's round would see itself alone: it would claim every
// shard and then hand them on one at a time. So while no shard is claimed by anybody,
// claims wait the timing's Settle from the join, by which the others are members too
// and the shards are split between them at once. A running cluster (any shard claimed)
// is joined without waiting: there the unclaimed shards are orphans to serve again.
func (t *claimTable) Joined(now int64) { t.settleUntil = now + int64(t.timing.Settle) }

// Round is a balancing round. It gives up the served shards whose claims were lost or
// that halted, then — given the bucket's view (members nil: it could not be read) —
// hands one shard on when its place is on another live node and claims the unclaimed
// shards placed here. One hand-off at a time: a shard still handing over holds the
// next one back.
func (t *claimTable) Round(now int64, members, owners []string, halted func(uint32) bool) []act {
	var acts []act
	for k := range t.shards {
		c := &t.shards[k]
		switch {
		case c.phase != serving:
		case !c.served():
			acts = append(acts, t.closeAct(uint32(k), lose, "claim lost"))
		case halted(uint32(k)):
			acts = append(acts, t.closeAct(uint32(k), giveUp, "shard halted; giving it up to be recovered from its journal"))
		}
	}
	if t.stopping || members == nil {
		return acts
	}
	view := make([]string, len(owners))
	copy(view, owners)
	handing := false
	for k := range t.shards {
		switch c := &t.shards[k]; c.phase {
		case claiming, opening, serving:
			view[k] = t.node // this node's own claims, whatever the read said
		case closing:
			handing = handing || c.how == handOff
		}
	}
	if now < t.settleUntil && !slices.ContainsFunc(view, func(o string) bool { return o != "" }) {
		return acts
	}
	desired := Place(members, view)
	for k := range t.shards {
		if !handing && t.shards[k].phase == serving && desired[k] != t.node {
			acts = append(acts, t.closeAct(uint32(k), handOff, "placed on "+desired[k]))
			handing = true
		}
	}
	for k := range t.shards {
		c := &t.shards[k]
		if desired[k] == t.node && view[k] == "" && c.phase == free && now >= c.notBefore && !t.Quiet(now) {
			c.phase = claiming
			acts = append(acts, act{kind: actClaim, shard: uint32(k)})
		}
	}
	return acts
}

// Claimed is the answer to a claim's create: rev 0 when it was not created (another
// node's claim exists, or an error), else the claim's revision, sent at sent. A claim
// made as the node stops is deleted again.
func (t *claimTable) Claimed(now int64, k uint32, rev uint64, sent int64) []act {
	c := &t.shards[k]
	if c.phase != claiming {
		return nil
	}
	if rev == 0 {
		c.phase = free
		return nil
	}
	c.phase, c.rev, c.sent, c.serveUntil = opening, rev, sent, sent+int64(t.timing.Serve)
	if t.stopping {
		return []act{t.releaseAct(k, "claimed as the node stops")}
	}
	return []act{{kind: actOpen, shard: k, rev: rev}}
}

// Opened is the end of a shard's load (err: it failed, nothing is open). A shard whose
// claim was lost while it loaded is closed; one loaded as the node stops is handed over.
func (t *claimTable) Opened(now int64, k uint32, err error) []act {
	c := &t.shards[k]
	if c.phase != opening {
		return nil
	}
	switch {
	case err != nil && t.stopping && t.alone:
		c.forget() // the last node stops: its claim lapses, as every other one does
		return nil
	case err != nil:
		c.notBefore = now + int64(t.timing.Renew)
		return []act{t.releaseAct(k, "opening the claimed shard failed: "+err.Error())}
	case !c.served():
		return []act{t.closeAct(k, lose, "claim lost while the shard loaded")}
	case t.stopping && t.alone:
		return []act{t.closeAct(k, lose, "loaded as the last live node stops")}
	case t.stopping:
		return []act{t.closeAct(k, handOff, "loaded as the node stops")}
	}
	c.phase = serving
	return []act{{kind: actAccept, shard: k, rev: c.rev}}
}

// AcceptFailed: the shard is open but its requests cannot be routed here.
func (t *claimTable) AcceptFailed(k uint32) []act {
	if t.shards[k].phase != serving {
		return nil
	}
	return []act{t.closeAct(k, giveUp, "taking requests for the shard failed")}
}

// Closed is the end of a shard's close. A hand-off or a halted shard's claim is deleted;
// a lost one is left to its TTL (it may be another node's). A halted shard is not
// claimed again here before a round has passed.
func (t *claimTable) Closed(now int64, k uint32) []act {
	c := &t.shards[k]
	if c.phase != closing {
		return nil
	}
	switch c.how {
	case lose:
		c.forget()
		return nil
	case giveUp:
		c.notBefore = now + int64(t.timing.Renew)
		return []act{t.releaseAct(k, "halted shard closed")}
	}
	return []act{t.releaseAct(k, "handed over")}
}

// Renewals lists the claims to renew with their revisions: every claim held, except
// those being lost or given up (they are not served again).
func (t *claimTable) Renewals() []act {
	var acts []act
	for k := range t.shards {
		if c := &t.shards[k]; c.renewable() {
			acts = append(acts, act{shard: uint32(k), rev: c.rev})
		}
	}
	return acts
}

// renewal is how a claim's renewal went.
type renewal uint8

const (
	renewedInTime     renewal = iota + 1 // served Leased for another serve window
	renewedLate                          // landed as its predecessor may have been expiring: not Leased until the next one confirms it
	renewRefused                         // the claim is another's or gone: not served from now on
	renewFailed                          // no answer; served on (Leased while the window lasts, then Fenced)
	renewFenced                          // no answer, and the window has passed: served Fenced from now on
	renewedAgain                         // landed after the shard was served Fenced: Leased again
	renewedConfirming                    // landed while a claim made again waits for its barrier: still Fenced
	renewStale                           // the claim changed meanwhile: nothing learnt
)

// Renewed is the answer to the renewal of the claim at rev sent at sent: its new
// revision (acked at acked), or refused (the key is not at rev: lost), or neither (no
// answer). A refused claim asks for a round, which gives it up; one not answered is
// served on, Fenced once its window has passed.
func (t *claimTable) Renewed(now int64, k uint32, rev, newRev uint64, sent, acked int64, refused bool) (renewal, []act) {
	c := &t.shards[k]
	if !c.renewable() || c.rev != rev {
		return renewStale, nil
	}
	switch {
	case newRev != 0 && c.serveUntil == fencedOnly:
		c.rev, c.sent = newRev, sent // kept while its barrier is on its way; Confirmed leases it
		return renewedConfirming, nil
	case newRev != 0:
		prev := c.sent
		c.rev, c.sent = newRev, sent
		if !landedBeforeExpiry(prev, acked, t.timing.OwnershipTTL) {
			return renewedLate, nil
		}
		c.serveUntil = sent + int64(t.timing.Serve)
		if c.fenced {
			c.fenced = false
			return renewedAgain, nil
		}
		return renewedInTime, nil
	case refused:
		c.serveUntil = 0
		return renewRefused, []act{{kind: actRound, shard: k, why: "claim lost to another node"}}
	case !c.leased(now) && !c.fenced:
		c.fenced = true
		return renewFenced, nil
	}
	return renewFailed, nil
}

// Recreated: the claim at rev was refused because its key was gone (it lapsed while the
// bucket elected a leader) and this node made it again at newRev, sent at sent, before
// any other node. Another node may have held it in between and written the journal, so
// the shard is served Fenced until a barrier through its journal confirms that it did
// not (Confirmed); the journal's fence, unchanged, refuses every append if it did.
func (t *claimTable) Recreated(k uint32, rev, newRev uint64, sent int64) []act {
	c := &t.shards[k]
	if !c.renewable() || c.rev != rev {
		return nil
	}
	c.rev, c.sent, c.serveUntil, c.fenced = newRev, sent, fencedOnly, true
	c.confirming++
	return []act{{kind: actConfirm, shard: k, rev: c.confirming}}
}

// Confirmed is the end of the barrier the claim made again as the confirming-th waits
// for: ok, the shard is Leased until the window from its last renewal's send; not, the
// journal refused it and the shard halted (its give-up follows from the halt).
func (t *claimTable) Confirmed(now int64, k uint32, confirming uint64, ok bool) renewal {
	c := &t.shards[k]
	if !c.renewable() || c.confirming != confirming || c.serveUntil != fencedOnly {
		return renewStale
	}
	if !ok {
		return renewFailed
	}
	c.serveUntil = c.sent + int64(t.timing.Serve)
	if !c.leased(now) {
		return renewFenced
	}
	c.fenced = false
	return renewedAgain
}

// Quiet says whether now is in the quiet time after the bucket's silence (Bucket).
func (t *claimTable) Quiet(now int64) bool { return now < t.quietUntil }

// Bucket is whether the bucket answered a renewal of this node's (at now). The first
// answer after a silence starts a quiet time of two renewal periods, in which no
// unclaimed shard is claimed here: the survivors' keys that lapsed during the silence
// are made again by their owners within it (a renewal in flight waits up to two periods).
//
// It returns whether the bucket fell silent or answered again just now, to log once.
func (t *claimTable) Bucket(now int64, answered bool) (changed bool) {
	if answered && t.silent {
		t.quietUntil = now + 2*int64(t.timing.Renew)
	}
	changed = t.silent == answered
	t.silent = !answered
	return changed
}

// Stop hands every served shard over (one known lost is just closed); shards being
// claimed or loaded are handed over or released when that ends. The last live node
// (alone) has nobody to hand over to — and, with the others' NATS servers gone, often no
// JetStream quorum to write the hand-over with: it closes every shard and leaves the
// claims to lapse; the next node to start recovers them from the journals. Done says
// when nothing is held.
func (t *claimTable) Stop(now int64, alone bool) []act {
	t.stopping, t.alone = true, alone
	var acts []act
	for k := range t.shards {
		c := &t.shards[k]
		switch {
		case c.phase != serving:
		case !c.served():
			acts = append(acts, t.closeAct(uint32(k), lose, "the node stops; claim lost"))
		case alone:
			acts = append(acts, t.closeAct(uint32(k), lose, "the last live node stops"))
		default:
			acts = append(acts, t.closeAct(uint32(k), handOff, "the node stops"))
		}
	}
	return acts
}

// Done says whether the node holds nothing (after Stop: whether it may leave).
func (t *claimTable) Done() bool {
	for k := range t.shards {
		if t.shards[k].held() {
			return false
		}
	}
	return true
}
