package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/contract"
)

// Config is one node of a cluster.
type Config struct {
	NC       *nats.Conn
	JS       jetstream.JetStream
	Names    Names
	Node     string // this node's name, unique among live nodes
	Shards   uint32
	Replicas int
	// OwnershipTTL is how long a claim lasts without renewal. The renewal period, the
	// serve window and the journal's call timeout are derived from it (contract.Timing).
	OwnershipTTL time.Duration
	Logger       *slog.Logger
	Metrics      Metrics // nil: none
	// Settings are the cluster's settings as this node adopted them (AdoptSettings);
	// OnSettings, when set, is called (from the bucket watch) with the settings each
	// time they change after that, newest revision only.
	Settings   Settings
	OnSettings func(Settings)
}

// Metrics is what a node reports about its claims; the bridge's metrics implement it.
type Metrics interface {
	ClaimRenewed(ok bool)
	ClaimLost()
	ShardAcquired()
	ShardHandedOff()
	ShardsOwned(n int)
}

type noMetrics struct{}

func (noMetrics) ClaimRenewed(bool) {}
func (noMetrics) ClaimLost()        {}
func (noMetrics) ShardAcquired()    {}
func (noMetrics) ShardHandedOff()   {}
func (noMetrics) ShardsOwned(int)   {}

// Host is what a node drives as it gains and loses shards: the shard runtime and the
// bridge's routing.
type Host interface {
	Open(k uint32) error
	Close(k uint32)
	Accept(k uint32) error
	Release(k uint32)
	// FlushEvents waits (bounded) until a closed shard's events are published and
	// returns how far they are; DropEvents forgets the ones not yet published.
	FlushEvents(k uint32) uint64
	DropEvents(k uint32)
	// Halted says whether shard k has halted here (a journal failure).
	Halted(k uint32) bool
}

// claim is this node's hold on one shard.
type claim struct {
	rev  uint64 // KV revision of the claim: the ownership epoch
	sent int64  // when the write of revision rev was sent (actors.MonoNow)
}

// Node holds shard claims in the cluster bucket and opens and closes shards on its host
// to match: it renews its own liveness and its claims, spreads shards evenly over live
// nodes (one move at a time), takes shards whose owner has gone, and hands its shards
// over when it stops.
type Node struct {
	cfg     Config
	timing  contract.Timing // derived from cfg.OwnershipTTL: renewals, the serve window, journal calls
	log     *slog.Logger
	kv      jetstream.KeyValue
	bucket  jetstream.Stream // the KV bucket's stream: which keys have messages
	objects jetstream.ObjectStore
	host    Host

	// serveUntil[k] is the monotonic time (actors.MonoNow) until which shard k may be
	// served here; 0 when not owned.
	serveUntil []atomic.Int64
	// notBefore[k] is the monotonic time before which this node does not claim shard k
	// again after it failed to open it or gave it up halted: one try per round, not a
	// loop of claims on a journal that cannot be read yet.
	notBefore []atomic.Int64

	settingsRev atomic.Uint64 // revision of the settings this node serves under

	mu        sync.Mutex
	abandoned bool
	claims    map[uint32]*claim
	memberRev uint64
	stop      chan struct{}
	kick      chan struct{}  // a balancing round now, please (capacity 1: kicks coalesce)
	wg        sync.WaitGroup // the two loops and the bucket watch
	shardMu   []sync.Mutex   // per shard: open, hand-off and loss one at a time
}

// Member is a live node as the cluster bucket shows it.
type member struct {
	Node    string `json:"node"`
	Started string `json:"started"`
}

type ownerRecord struct {
	Node string `json:"node"`
}

// Join opens the cluster's bucket and object store and makes this node a live member.
// A node of the same name that is still live makes Join fail after waiting one
// OwnershipTTL for it to lapse (a restart of this node after a crash).
func Join(ctx context.Context, cfg Config) (*Node, error) {
	if cfg.OwnershipTTL < time.Second {
		return nil, fmt.Errorf("ownership ttl %v: at least 1s (JetStream key TTLs are whole seconds)", cfg.OwnershipTTL)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.Metrics == nil {
		cfg.Metrics = noMetrics{}
	}
	n := &Node{cfg: cfg, timing: contract.NewTiming(cfg.OwnershipTTL, 0), log: cfg.Logger, claims: make(map[uint32]*claim), serveUntil: make([]atomic.Int64, cfg.Shards),
		notBefore: make([]atomic.Int64, cfg.Shards),
		stop:      make(chan struct{}), kick: make(chan struct{}, 1), shardMu: make([]sync.Mutex, cfg.Shards)}
	n.settingsRev.Store(cfg.Settings.Shape.Version)
	var err error
	if n.kv, err = OpenBucket(ctx, cfg.JS, cfg.Names, cfg.Replicas); err != nil {
		return nil, err
	}
	if n.objects, err = openSnapshots(ctx, cfg.JS, cfg.Names, cfg.Replicas); err != nil {
		return nil, err
	}
	for {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		n.bucket, err = cfg.JS.Stream(actx, "KV_"+cfg.Names.Bucket())
		cancel()
		if err == nil {
			break
		}
		if !(notYetVisible(err) || retryable(err)) || ctx.Err() != nil {
			return nil, fmt.Errorf("cluster bucket %s: %w", cfg.Names.Bucket(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	val, _ := json.Marshal(member{Node: cfg.Node, Started: time.Now().UTC().Format(time.RFC3339)})
	deadline := time.Now().Add(cfg.OwnershipTTL + time.Second)
	for {
		rev, err := n.kv.Create(ctx, memberKey(cfg.Node), val, jetstream.KeyTTL(cfg.OwnershipTTL))
		if err == nil {
			n.memberRev = rev
			return n, nil
		}
		if transient(err) && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("joining the cluster as %q: %w", cfg.Node, err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("a live node is already named %q in this cluster (--node must be unique)", cfg.Node)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// OpenBucket creates the cluster's KV bucket (per-key TTLs enabled) or opens it. Nodes
// starting together race here: one creates it and the others open what it created
// (creating-or-updating from several nodes at once was measured to stall on R3).
func OpenBucket(ctx context.Context, js jetstream.JetStream, names Names, replicas int) (jetstream.KeyValue, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		kv, err := js.CreateKeyValue(actx, jetstream.KeyValueConfig{Bucket: names.Bucket(),
			Description: "Holdfast cluster: registry, live nodes, shard claims, published positions",
			History:     1, Storage: jetstream.FileStorage, Replicas: replicas, LimitMarkerTTL: time.Second})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(actx, names.Bucket())
		}
		var st jetstream.KeyValueStatus
		if err == nil {
			st, err = kv.Status(actx)
		}
		cancel()
		if err == nil {
			if s, ok := st.(*jetstream.KeyValueBucketStatus); ok && s.LimitMarkerTTL() == 0 {
				return nil, fmt.Errorf("cluster bucket %s exists without per-key TTLs (limit marker TTL); delete it or use another --prefix", names.Bucket())
			}
			return kv, nil
		}
		if !(notYetVisible(err) || retryable(err)) || ctx.Err() != nil {
			return nil, fmt.Errorf("cluster bucket %s: %w", names.Bucket(), err)
		}
		time.Sleep(50 * time.Millisecond) // created and not yet visible: look again
	}
}

// openSnapshots creates or opens the snapshot object store, the same way.
func openSnapshots(ctx context.Context, js jetstream.JetStream, names Names, replicas int) (jetstream.ObjectStore, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		obs, err := js.CreateObjectStore(actx, jetstream.ObjectStoreConfig{Bucket: names.Snapshots(),
			Description: "Holdfast shard snapshots", Storage: jetstream.FileStorage, Replicas: replicas})
		if errors.Is(err, jetstream.ErrBucketExists) {
			obs, err = js.ObjectStore(actx, names.Snapshots())
		}
		cancel()
		if err == nil {
			return obs, nil
		}
		if !(notYetVisible(err) || retryable(err)) || ctx.Err() != nil {
			return nil, fmt.Errorf("snapshot store %s: %w", names.Snapshots(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func memberKey(node string) string { return "node." + node }
func shardKey(k uint32) string     { return "shard." + strconv.FormatUint(uint64(k), 10) }

// Storage is the actors.Options.Storage of a cluster node: shard k's storage at the
// epoch of this node's current claim.
func (n *Node) Storage(k uint32) (actors.Storage, error) {
	n.mu.Lock()
	c := n.claims[k]
	n.mu.Unlock()
	if c == nil {
		return nil, fmt.Errorf("shard %d is not claimed by node %q", k, n.cfg.Node)
	}
	return &Storage{JS: n.cfg.JS, Names: n.cfg.Names, Shard: k, Replicas: n.cfg.Replicas, Node: n.cfg.Node,
		Epoch: c.rev, Objects: n.objects, Bucket: n.kv, JournalCall: n.timing.JournalCall, Valid: func() bool { return n.Serving(k) }}, nil
}

// Serving is the actors.Options.Serving of a cluster node: true while this node's claim
// on shard k is certainly current.
func (n *Node) Serving(k uint32) bool {
	until := n.serveUntil[k].Load()
	return until != 0 && actors.MonoNow() < until
}

// Run drives host until Stop. Two loops: one renews this node's liveness and claims
// every quarter of the TTL, and nothing it waits on is a shard's load; the other
// spreads shards (claims, opens, hands over), which can take as long as a load takes,
// every quarter of the TTL and at once when the bucket shows a claim given up or lapsed
// or a node come or gone (watchBucket), or a shard here halts (ShardHalted). The
// watch is open before the first round reads the bucket, so a claim given up after
// that read is news the watch sees rather than a wait for the next round; a JetStream
// that does not answer holds the rounds up for a quarter of the TTL at most.
func (n *Node) Run(host Host) {
	n.host = host
	opened := make(chan struct{})
	n.wg.Add(3)
	go n.loop(n.renewAll, nil)
	go n.watchBucket(opened)
	select {
	case <-opened:
	case <-time.After(n.timing.Renew):
	}
	go n.loop(n.balance, n.kick)
}

func (n *Node) loop(step func(), kick <-chan struct{}) {
	defer n.wg.Done()
	t := time.NewTicker(n.timing.Renew)
	defer t.Stop()
	step()
	for {
		select {
		case <-n.stop:
			return
		case <-t.C:
			step()
		case <-kick:
			step()
		}
	}
}

// renewAll renews this node's liveness and every claim it holds.
func (n *Node) renewAll() {
	ctx, cancel := context.WithTimeout(context.Background(), n.timing.Renew*2)
	defer cancel()
	n.renewMember(ctx)
	for _, k := range n.owned() {
		n.renew(ctx, k)
	}
}

// balance moves at most one shard towards the balanced spread, gives up shards whose
// claims lapsed while they were busy, and claims the unclaimed shards placed here.
func (n *Node) balance() {
	ctx, cancel := context.WithTimeout(context.Background(), n.timing.Renew*2)
	defer cancel()
	for _, k := range n.owned() {
		switch {
		case !n.Serving(k):
			n.withShard(k, func() { n.lose(k) })
		case n.host.Halted(k):
			n.withShard(k, func() { n.giveUp(k) })
		}
	}
	members, err := n.members(ctx)
	if err != nil {
		n.log.Warn("listing live nodes", "err", err)
		return
	}
	owners := n.owners(ctx)
	for _, k := range n.owned() {
		owners[k] = n.cfg.Node // this node's own claims, whatever the read said
	}
	desired := Place(members, owners)
	// Hand one shard on when its place is on another live node.
	for _, k := range n.owned() {
		if desired[k] != n.cfg.Node {
			n.log.Info("shard placed on another node", "shard", k, "node", desired[k], "live", members)
			n.withShard(k, func() { n.handOff(k) })
			break
		}
	}
	for k := uint32(0); k < n.cfg.Shards; k++ {
		if desired[k] == n.cfg.Node && owners[k] == "" && actors.MonoNow() >= n.notBefore[k].Load() {
			n.withShard(k, func() { n.acquire(ctx, k) })
		}
	}
}

// withShard runs op holding shard k's lock: opening, handing over and losing a shard
// never overlap.
func (n *Node) withShard(k uint32, op func()) {
	n.shardMu[k].Lock()
	defer n.shardMu[k].Unlock()
	op()
}

func (n *Node) owned() []uint32 {
	n.mu.Lock()
	defer n.mu.Unlock()
	ks := make([]uint32, 0, len(n.claims))
	for k := range n.claims {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// renewMember keeps this node's liveness key; a lost key is created again.
func (n *Node) renewMember(ctx context.Context) {
	val, _ := json.Marshal(member{Node: n.cfg.Node})
	rev, err := n.renewKey(ctx, memberKey(n.cfg.Node), val, n.memberRev)
	if err != nil {
		if rev, err = n.kv.Create(ctx, memberKey(n.cfg.Node), val, jetstream.KeyTTL(n.cfg.OwnershipTTL)); err != nil {
			n.log.Warn("renewing node liveness", "err", err)
			return
		}
	}
	n.memberRev = rev
}

// renewKey rewrites a key with a fresh TTL if it is still at rev (kv.Update would drop
// the TTL, so this publishes to the bucket's subject directly).
func (n *Node) renewKey(ctx context.Context, key string, val []byte, rev uint64) (uint64, error) {
	ack, err := n.cfg.JS.Publish(ctx, "$KV."+n.cfg.Names.Bucket()+"."+key, val,
		jetstream.WithExpectLastSequencePerSubject(rev), jetstream.WithMsgTTL(n.cfg.OwnershipTTL))
	if err != nil {
		return 0, err
	}
	return ack.Sequence, nil
}

// renew extends this node's claim on shard k. A claim that is gone, or that could not
// be renewed before it may have lapsed, is no longer served (Serving is false from
// then on) and the balancing loop gives it up: the renewal loop never waits on a shard
// (a drain, a journal's appends settling), so one shard's slow close cannot make the
// node's other claims lapse. A renewal that succeeds before the balancing loop got to
// it serves the shard again: the claim was still this node's revision.
func (n *Node) renew(ctx context.Context, k uint32) {
	n.mu.Lock()
	c := n.claims[k]
	n.mu.Unlock()
	if c == nil {
		return
	}
	sent := actors.MonoNow()
	val, _ := json.Marshal(ownerRecord{Node: n.cfg.Node})
	rev, err := n.renewKey(ctx, shardKey(k), val, c.rev)
	switch {
	case err == nil:
		acked := actors.MonoNow()
		n.mu.Lock()
		prev := c.sent
		c.rev, c.sent = rev, sent
		n.mu.Unlock()
		if !landedBeforeExpiry(prev, acked, n.cfg.OwnershipTTL) {
			n.cfg.Metrics.ClaimRenewed(false)
			n.log.Warn("claim renewed only as its last revision may have been expiring; not served on until the next renewal confirms it", "shard", k)
			return
		}
		n.serveUntil[k].Store(sent + int64(n.timing.Serve))
		n.cfg.Metrics.ClaimRenewed(true)
	case isWrongLast(err):
		n.cfg.Metrics.ClaimRenewed(false)
		n.log.Warn("claim on shard lost to another node", "shard", k)
		n.serveUntil[k].Store(0)
		n.kickBalance()
	case !n.Serving(k):
		n.cfg.Metrics.ClaimRenewed(false)
		n.log.Warn("claim on shard not renewed in time; giving it up", "shard", k, "err", err)
		n.kickBalance()
	default:
		n.cfg.Metrics.ClaimRenewed(false)
		n.log.Warn("renewing claim", "shard", k, "err", err)
	}
}

// landedBeforeExpiry says whether a renewal acknowledged at acked certainly landed before
// the revision it replaced, sent at prevSent, could expire. The server expires a revision
// a TTL after it stored it, which is after prevSent, by placing a marker that is accepted
// whatever the subject's last revision and rolls the subject up: a renewal landing in the
// same instant as that expiry can be acknowledged and then purged by the marker, and
// another node can claim the shard. Such a renewal is not served on; the next one, which
// expects its revision, confirms it or finds the claim gone. A tenth of the TTL is left
// for the rates of this clock and the server's to differ.
func landedBeforeExpiry(prevSent, acked int64, ttl time.Duration) bool {
	return acked-prevSent < int64(ttl-ttl/10)
}

// members lists live node names, read in two steps that each see one moment: the
// bucket's stream says which node keys have a message, then each key is read (a key whose
// last message is a delete or expiry marker is not live). The KV key lister is not used:
// under concurrent renewals it was measured to leave out live keys without an error (16
// lists of 2,000 short with three keys renewed every millisecond), and a short list
// places shards as if live nodes had gone.
func (n *Node) members(ctx context.Context) ([]string, error) {
	entries, err := n.nodeEntries(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = strings.TrimPrefix(e.Key(), "node.")
	}
	slices.Sort(out)
	return out, nil
}

// nodeEntries reads the node keys in the bucket, each with its last renewal.
func (n *Node) nodeEntries(ctx context.Context) ([]jetstream.KeyValueEntry, error) {
	prefix := "$KV." + n.cfg.Names.Bucket() + "."
	info, err := n.bucket.Info(ctx, jetstream.WithSubjectFilter(prefix+"node.*"))
	if err != nil {
		return nil, fmt.Errorf("listing live nodes: %w", err)
	}
	var out []jetstream.KeyValueEntry
	for subject := range info.State.Subjects {
		key := strings.TrimPrefix(subject, prefix)
		e, err := n.kv.Get(ctx, key)
		switch {
		case err == nil:
			out = append(out, e)
		case errors.Is(err, jetstream.ErrKeyNotFound), errors.Is(err, jetstream.ErrKeyDeleted):
		default:
			return nil, fmt.Errorf("reading %s: %w", key, err)
		}
	}
	return out, nil
}

// owners reads who holds each shard ("" none; unknown counts as held).
func (n *Node) owners(ctx context.Context) []string {
	out := make([]string, n.cfg.Shards)
	for k := range out {
		e, err := n.kv.Get(ctx, shardKey(uint32(k)))
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			out[k] = "?"
		default:
			var o ownerRecord
			if json.Unmarshal(e.Value(), &o) != nil || o.Node == "" {
				out[k] = "?"
			} else {
				out[k] = o.Node
			}
		}
	}
	return out
}

// Owners is the cluster's view of who serves each shard, for cluster.status.
func (n *Node) Owners(ctx context.Context) ([]string, []string, error) {
	members, err := n.members(ctx)
	if err != nil {
		return nil, nil, err
	}
	slices.Sort(members)
	return members, n.owners(ctx), nil
}

// NodeState is a node's liveness as the bucket shows it, for cluster.status.
type NodeState struct {
	Node string
	// RenewalAge is how much older its last renewal is than the freshest node's (both
	// stamped by the bucket's stream leader, so no two clocks are compared).
	RenewalAge time.Duration
	// Lapsing: it has missed a renewal (renewals come every quarter of the ownership
	// TTL; lapsing past half of it): dead, paused or cut off, and its key and claims
	// lapse a TTL after its last renewal unless it renews again.
	Lapsing bool
}

// Status is the cluster's view for cluster.status: each node with a key in the bucket
// (lapsing ones included, by name) and the owner of each shard.
func (n *Node) Status(ctx context.Context) ([]NodeState, []string, error) {
	entries, err := n.nodeEntries(ctx)
	if err != nil {
		return nil, nil, err
	}
	var freshest time.Time
	for _, e := range entries {
		if e.Created().After(freshest) {
			freshest = e.Created()
		}
	}
	out := make([]NodeState, len(entries))
	for i, e := range entries {
		age := freshest.Sub(e.Created())
		out[i] = NodeState{Node: strings.TrimPrefix(e.Key(), "node."), RenewalAge: age, Lapsing: age > n.cfg.OwnershipTTL/2}
	}
	slices.SortFunc(out, func(a, b NodeState) int { return strings.Compare(a.Node, b.Node) })
	return out, n.owners(ctx), nil
}

// acquire claims an unclaimed shard and opens it: the claim's revision is the epoch at
// which the shard's journal is claimed, which fences every earlier owner.
func (n *Node) acquire(ctx context.Context, k uint32) {
	sent := actors.MonoNow()
	val, _ := json.Marshal(ownerRecord{Node: n.cfg.Node})
	rev, err := n.kv.Create(ctx, shardKey(k), val, jetstream.KeyTTL(n.cfg.OwnershipTTL))
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			n.log.Warn("claiming shard", "shard", k, "err", err)
		}
		return
	}
	n.mu.Lock()
	n.claims[k] = &claim{rev: rev, sent: sent}
	n.mu.Unlock()
	n.serveUntil[k].Store(sent + int64(n.timing.Serve))
	start := time.Now()
	if err := n.host.Open(k); err != nil {
		n.log.Error("opening claimed shard", "shard", k, "err", err)
		n.notBefore[k].Store(actors.MonoNow() + int64(n.timing.Renew))
		n.release(k)
		return
	}
	if !n.Serving(k) {
		n.log.Warn("claim on shard lapsed while it loaded; giving it up", "shard", k, "load", time.Since(start).Round(time.Millisecond))
		n.lose(k)
		return
	}
	if err := n.host.Accept(k); err != nil {
		n.log.Error("taking requests for shard", "shard", k, "err", err)
		n.host.Close(k)
		n.release(k)
		return
	}
	n.log.Info("serving shard", "shard", k, "epoch", rev, "load", time.Since(start).Round(time.Millisecond))
	n.cfg.Metrics.ShardAcquired()
	n.cfg.Metrics.ShardsOwned(len(n.owned()))
}

// lose stops serving shard k at once: its claim may belong to another node already, and
// its owner publishes the events this node had not published yet.
func (n *Node) lose(k uint32) {
	n.serveUntil[k].Store(0)
	n.host.Release(k)
	n.host.Close(k)
	n.host.DropEvents(k)
	n.mu.Lock()
	delete(n.claims, k)
	n.mu.Unlock()
	n.cfg.Metrics.ClaimLost()
	n.cfg.Metrics.ShardsOwned(len(n.owned()))
}

// giveUp closes a halted shard and deletes its claim. In a cluster a journal failure is
// mostly JetStream moving a stream's leadership (a lost server: appends unanswered for
// seconds); a new claim, here after a round or on another node, recovers the shard from
// the replicated journal, an append whose outcome was unknown included. Kept, the claim
// would hold the shard halted — answering engine_halted — until the node restarted.
func (n *Node) giveUp(k uint32) {
	n.log.Warn("shard halted; giving it up to be recovered from its journal", "shard", k)
	n.serveUntil[k].Store(0)
	n.host.Release(k)
	n.host.Close(k)
	n.host.DropEvents(k)
	n.notBefore[k].Store(actors.MonoNow() + int64(n.timing.Renew))
	n.release(k)
	n.cfg.Metrics.ClaimLost()
	n.cfg.Metrics.ShardsOwned(len(n.owned()))
}

// ShardHalted is the actors.Options.OnHalt of a cluster node: a balancing round now, which
// gives the halted shard up.
func (n *Node) ShardHalted(uint32) { n.kickBalance() }

// handOff gives shard k up in order: no new requests, those taken answered, the
// journal closed, its events published and the position recorded for the next owner,
// then the claim deleted so the next owner need not wait for it to lapse.
func (n *Node) handOff(k uint32) {
	n.log.Info("handing shard over", "shard", k)
	n.host.Release(k)
	n.host.Close(k)
	if published := n.host.FlushEvents(k); published > 0 {
		if st, err := n.Storage(k); err == nil {
			if err := st.WritePublished(published); err != nil {
				n.log.Warn("recording the published position at hand-off", "shard", k, "err", err)
			}
		}
	}
	n.host.DropEvents(k)
	n.serveUntil[k].Store(0)
	n.release(k)
	n.cfg.Metrics.ShardHandedOff()
	n.cfg.Metrics.ShardsOwned(len(n.owned()))
}

// release deletes this node's claim on shard k (if it is still at our revision).
func (n *Node) release(k uint32) {
	n.serveUntil[k].Store(0)
	n.mu.Lock()
	c := n.claims[k]
	delete(n.claims, k)
	n.mu.Unlock()
	if c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.kv.Delete(ctx, shardKey(k), jetstream.LastRevision(c.rev)); err != nil {
		n.log.Warn("releasing claim", "shard", k, "err", err)
	}
}

// Stop hands every shard over and leaves the cluster (a SIGTERM). The node's shards
// are closed first, so every request they took is answered.
func (n *Node) Stop() {
	select {
	case <-n.stop:
		return
	default:
	}
	close(n.stop)
	n.wg.Wait()
	n.mu.Lock()
	abandoned := n.abandoned
	n.mu.Unlock()
	if abandoned {
		return
	}
	if n.host != nil {
		for _, k := range n.owned() {
			// The loop no longer renews: renew the claim just before handing the shard
			// over, so it is still served while its last events are published.
			ctx, cancel := context.WithTimeout(context.Background(), n.timing.Renew)
			n.renew(ctx, k)
			cancel()
			n.withShard(k, func() {
				if n.Serving(k) {
					n.handOff(k)
				} else {
					n.lose(k)
				}
			})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// A purge whose marker lapses: a plain delete's marker stays under the name for good,
	// one per node name ever stopped (pods of a Deployment come under new names).
	_ = n.kv.Purge(ctx, memberKey(n.cfg.Node), jetstream.PurgeTTL(n.cfg.OwnershipTTL))
}

// Abandon stops the node's loop and its serving without handing anything over (tests:
// a crash, after which the claims lapse by their TTL); a later Stop does nothing more.
func (n *Node) Abandon() {
	select {
	case <-n.stop:
		return
	default:
	}
	n.mu.Lock()
	n.abandoned = true
	n.mu.Unlock()
	close(n.stop)
	n.wg.Wait()
	for k := range n.serveUntil {
		n.serveUntil[k].Store(0)
	}
}

// attemptTimeout bounds one JetStream API call at start-up: a replicated asset another
// node is creating may not answer until its group has a leader, and a silent call is
// better sent again than waited on.
const attemptTimeout = 3 * time.Second

// notYetVisible is an asset another node has just created, not yet known to the server
// that answered (a replicated stream's group is still forming): look again.
func notYetVisible(err error) bool {
	return errors.Is(err, jetstream.ErrBucketNotFound) || errors.Is(err, jetstream.ErrStreamNotFound)
}

// retryable is an error worth one more attempt at start-up.
func retryable(err error) bool {
	return transient(err) || errors.Is(err, context.DeadlineExceeded)
}
