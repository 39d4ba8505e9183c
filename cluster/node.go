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
	// StopTimeout bounds Stop's hand-over; what is still held then is left to lapse
	// (0: DefaultStopTimeout).
	StopTimeout time.Duration
	// ServersGoWithNodes: every node embeds its NATS server, so when no other node is
	// live no other server is either, and a replicated stream has no quorum: the last
	// node to stop does not try to hand its shards over (it closes them and leaves the
	// claims to lapse). On a NATS deployment the last node hands over as every other.
	ServersGoWithNodes bool
	// Feed, for a prefix of FeedFormat, keeps the journals in the events stream (nil: a
	// stream per shard's journal).
	Feed *FeedLayout
}

// FeedLayout is where a cluster of FeedFormat keeps its journals, and how their appends
// carry events (Feed).
type FeedLayout struct {
	Stream  string                                 // the events stream
	Encode  func(*actors.Event) (*nats.Msg, error) // an event's message; nil: events disabled
	Metrics FeedMetrics                            // nil: none
}

// FeedMetrics is what a feed reports of its events, under the publisher's names
// (events.Metrics), so that one dashboard and one set of alerts serve both layouts.
type FeedMetrics interface {
	EventsQueued(shard string, n int) // n more (or fewer) events handed over, not yet stored
	EventPublished(shard string, real bool)
	PublishError(shard string)
	PublishedLSN(shard string, lsn uint64)
}

// DefaultStopTimeout is Config.StopTimeout's default.
const DefaultStopTimeout = 30 * time.Second

// Metrics is what a node reports about its claims; the process's metrics (metrics.Metrics)
// implement it.
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

// Host is what a node drives as it gains and loses shards, its one seam into the shard
// runtime, the routing and the events.
type Host interface {
	// Open loads shard k at this node's claim (Storage gives its epoch).
	Open(k uint32) error
	// Accept routes shard k's requests here.
	Accept(k uint32) error
	// Close stops routing shard k here and closes it; handOver first publishes its
	// events and records how far they are for the next owner.
	Close(k uint32, handOver bool)
	// Halted says whether shard k has halted here (a journal failure).
	Halted(k uint32) bool
	// Confirm returns once a barrier through shard k's journal is stored (nil: no other
	// node has appended since this one claimed it), after its claim was made again.
	Confirm(k uint32) error
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
	// served here, 0 when not; epoch[k] is the revision of this node's claim on it, 0
	// when none. Both are the claim table's, published by the ownership goroutine for
	// the goroutines that serve requests and load shards.
	serveUntil []atomic.Int64
	epoch      []atomic.Uint64

	settingsRev atomic.Uint64 // revision of the settings this node serves under

	ownerRecord []byte // this node's claim value: {"node": <name>}

	// The ownership goroutine's own (run.go): no lock, nothing else touches them.
	table     *claimTable
	memberRev uint64
	reading   bool // a round's read of the bucket is under way
	again     bool // and another round was asked for meanwhile
	hostOps   int  // opens and closes under way
	// listFailing: the last round's read of the live nodes failed (logged once a streak).
	listFailing atomic.Bool

	watch     memberWatch     // the live nodes of the last round, and what each held
	lost      lostNodes       // nodes lost lately, for cluster.status (its own lock)
	views     chan bucketView // a round's read, back to the ownership goroutine
	done      chan hostDone   // an open or close, back to the ownership goroutine
	abandoned atomic.Bool
	// loads ends the shards' loading when the node stops (Storage.Ctx): a claim being
	// loaded as the node stops is given up, not waited for.
	loads     context.Context
	stopLoads context.CancelFunc
	renewing  atomic.Pointer[context.CancelFunc] // ends the renewal pass under way
	stop      chan struct{}
	kick      chan struct{}  // a balancing round now, please (capacity 1: kicks coalesce)
	wg        sync.WaitGroup // the ownership goroutine and the bucket watch
}

// member is a live node as the cluster bucket shows it.
type member struct {
	Node    string `json:"node"`
	Started string `json:"started"`
	// Leaving: the node stops and hands its shards over; when its key goes, it left
	// (else it was lost).
	Leaving bool `json:"leaving,omitempty"`
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
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	timing := contract.NewTiming(cfg.OwnershipTTL, 0)
	n := &Node{cfg: cfg, timing: timing, log: cfg.Logger, table: newClaimTable(cfg.Node, cfg.Shards, timing),
		serveUntil: make([]atomic.Int64, cfg.Shards), epoch: make([]atomic.Uint64, cfg.Shards),
		views: make(chan bucketView, 1), done: make(chan hostDone, cfg.Shards),
		stop: make(chan struct{}), kick: make(chan struct{}, 1)}
	n.loads, n.stopLoads = context.WithCancel(context.Background())
	n.ownerRecord, _ = json.Marshal(ownerRecord{Node: cfg.Node})
	n.settingsRev.Store(cfg.Settings.Shape.Version)
	var err error
	if n.kv, err = OpenBucket(ctx, cfg.JS, cfg.Names, cfg.Replicas); err != nil {
		return nil, err
	}
	if n.objects, err = openSnapshots(ctx, cfg.JS, cfg.Names, cfg.Replicas); err != nil {
		return nil, err
	}
	err = attemptsToOpen(ctx, func(actx context.Context) (err error) {
		n.bucket, err = cfg.JS.Stream(actx, "KV_"+cfg.Names.Bucket())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cluster bucket %s: %w", cfg.Names.Bucket(), err)
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
	var kv jetstream.KeyValue
	var st jetstream.KeyValueStatus
	err := attemptsToOpen(ctx, func(actx context.Context) (err error) {
		kv, err = js.CreateKeyValue(actx, jetstream.KeyValueConfig{Bucket: names.Bucket(),
			Description: "Holdfast cluster: registry, live nodes, shard claims, published positions",
			History:     1, Storage: jetstream.FileStorage, Replicas: replicas, LimitMarkerTTL: time.Second})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = js.KeyValue(actx, names.Bucket())
		}
		if err == nil {
			st, err = kv.Status(actx)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cluster bucket %s: %w", names.Bucket(), err)
	}
	if s, ok := st.(*jetstream.KeyValueBucketStatus); ok && s.LimitMarkerTTL() == 0 {
		return nil, fmt.Errorf("cluster bucket %s exists without per-key TTLs (limit marker TTL); delete it or use another --prefix", names.Bucket())
	}
	return withLeaderGets(js, kv, names.Bucket()), nil
}

// openSnapshots creates or opens the snapshot object store, the same way.
func openSnapshots(ctx context.Context, js jetstream.JetStream, names Names, replicas int) (jetstream.ObjectStore, error) {
	var obs jetstream.ObjectStore
	err := attemptsToOpen(ctx, func(actx context.Context) (err error) {
		obs, err = js.CreateObjectStore(actx, jetstream.ObjectStoreConfig{Bucket: names.Snapshots(),
			Description: "Holdfast shard snapshots", Storage: jetstream.FileStorage, Replicas: replicas})
		if errors.Is(err, jetstream.ErrBucketExists) {
			obs, err = js.ObjectStore(actx, names.Snapshots())
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot store %s: %w", names.Snapshots(), err)
	}
	return obs, nil
}

func memberKey(node string) string { return "node." + node }
func shardKey(k uint32) string     { return "shard." + strconv.FormatUint(uint64(k), 10) }

// Storage is the actors.Options.Storage of a cluster node: shard k's storage at the
// epoch of this node's current claim.
func (n *Node) Storage(k uint32) (actors.Storage, error) {
	epoch := n.epoch[k].Load()
	if epoch == 0 {
		return nil, fmt.Errorf("shard %d is not claimed by node %q", k, n.cfg.Node)
	}
	return &Storage{JS: n.cfg.JS, Names: n.cfg.Names, Shard: k, Replicas: n.cfg.Replicas, Node: n.cfg.Node,
		Epoch: epoch, Objects: n.objects, Bucket: n.kv, JournalCall: n.timing.JournalCall, Valid: func() bool { return n.Serving(k) }, Logger: n.log, Ctx: n.loads,
		Feed: n.cfg.Feed}, nil
}

// Standing is the actors.Ownership of a cluster node: Leased while this node's claim on
// shard k was renewed within its serve window, Fenced while it serves the shard on its
// journal's fence (the claim not renewed lately, not known lost), else NotServing.
func (n *Node) Standing(k uint32) actors.Standing {
	switch until := n.serveUntil[k].Load(); {
	case until == 0:
		return actors.NotServing
	case actors.MonoNow() >= until: // fencedOnly among them

		return actors.Fenced
	}
	return actors.Leased
}

// Serving says whether this node serves shard k (Leased or Fenced).
func (n *Node) Serving(k uint32) bool { return n.Standing(k) != actors.NotServing }

// renewMember keeps this node's liveness key (a lost key is created again) and says
// whether the bucket answered.
func (n *Node) renewMember(ctx context.Context) bool {
	val, _ := json.Marshal(member{Node: n.cfg.Node, Leaving: n.table.stopping})
	rev, err := n.renewKey(ctx, memberKey(n.cfg.Node), val, n.memberRev)
	if err != nil {
		answered := isWrongLast(err)
		if rev, err = n.kv.Create(ctx, memberKey(n.cfg.Node), val, jetstream.KeyTTL(n.cfg.OwnershipTTL)); err != nil {
			n.log.Debug("renewing node liveness", "err", err)
			return answered || errors.Is(err, jetstream.ErrKeyExists)
		}
	}
	n.memberRev = rev
	return true
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
	// Leaving: it stops, handing its shards over.
	Leaving bool
}

// Status is the cluster's view for cluster.status: each node with a key in the bucket
// (lapsing ones included, by name) and the owner of each shard.
func (n *Node) Status(ctx context.Context) ([]NodeState, []string, error) {
	nodes, err := n.nodeStates(ctx)
	if err != nil {
		return nil, nil, err
	}
	return nodes, n.owners(ctx), nil
}

// nodeStates is each node with a key in the bucket, sorted by name, with its liveness.
func (n *Node) nodeStates(ctx context.Context) ([]NodeState, error) {
	entries, err := n.nodeEntries(ctx)
	if err != nil {
		return nil, err
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
		var m member
		_ = json.Unmarshal(e.Value(), &m)
		out[i] = NodeState{Node: strings.TrimPrefix(e.Key(), "node."), RenewalAge: age, Lapsing: age > n.cfg.OwnershipTTL/2,
			Leaving: m.Leaving}
	}
	slices.SortFunc(out, func(a, b NodeState) int { return strings.Compare(a.Node, b.Node) })
	return out, nil
}
