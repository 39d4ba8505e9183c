// Package actors runs Holdfast's shards: one protoactor actor per shard owns a kernel and
// its journal, sequences commands, makes every batch durable before it is applied
// (group commit), answers the requests of the batch, hands its events on, expires holds
// on its slot clock, and snapshots on a cadence.
package actors

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/persistence"
)

// Clock is the wall clock the slot clock reads; tests inject their own.
type Clock interface{ Now() time.Time }

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

// SystemClock is the machine's clock.
var SystemClock Clock = systemClock{}

// DefaultSnapshotEvery is how many entries a shard journals between snapshots: recovery
// replays at most this many after loading the newest snapshot, and the journal is
// compacted below each one.
const DefaultSnapshotEvery = 200_000

// DefaultJournalWindow is one append in flight per shard: on three nodes sharing a disk
// the bigger batches it gathers served 10–18 % more than a window of 8 on every workload
// (docs/benchmarks.md, "What the events cost"); a window pays where a quorum round is
// long against the time a batch takes to fill (--journal-window).
const DefaultJournalWindow = 1

// MaxJournalWindow bounds JournalWindow.
const MaxJournalWindow = 64

// Options configures the shards of one process.
type Options struct {
	Dir    string // data directory; shard i keeps its journal and snapshots in Dir/shard-NNN (file storage)
	Shards uint32
	Slot   time.Duration // slot length; slots count from the Unix epoch
	// Kernel is what the shards are asked to run with: its Limits admit writes, and its
	// Shape is journaled by each shard whose journal does not carry it yet (a configure
	// entry at start), so it takes effect at a start and never reaches back into a
	// journal (Configure changes both while serving). Shard and SlotMillis are set per
	// shard and from Slot.
	Kernel kernel.Config
	Clock  Clock

	MaxQueue int // requests waiting per shard (mailbox, batch and in flight); past it: overloaded
	MaxBatch int // entries per journal append
	// JournalWindow is the batches a shard keeps in flight on a pipelined journal
	// (persistence.Pipelined); a file journal takes one at a time.
	// DefaultJournalWindow when 0.
	JournalWindow int
	ExpirePerTick int // expire entries committed per tick at most
	// MaxUnpublished bounds a shard's events not yet published: those the sink holds and
	// those its sequenced entries may yield (kernel.EventBound). A client write past it
	// is refused overloaded and expiries wait, so a shard never hands the sink more than
	// it can hold (a sink that overflows drops events until the shard restarts). The
	// entries a shard writes itself are never refused: leave the sink room beyond it
	// (the server gives half the publisher's queue). 0: no bound.
	MaxUnpublished int
	SnapshotEvery  int // entries between snapshots (0: DefaultSnapshotEvery; negative: never)
	SegmentSize    int64

	// Events receives each applied batch's events and reports back how far they are
	// published (EventSink). When nil, no events are produced and snapshots are not held
	// back for publishing.
	Events EventSink
	// Faults injects journal write and fsync failures (tests only).
	Faults *persistence.Faults
	// Storage gives a shard its journal, snapshots and published position; the shard uses
	// them through the Storage interface only. Default: FileStorage in Dir/shard-NNN
	// (journal segments of SegmentSize, with Faults).
	Storage func(shard uint32) (Storage, error)
	// Ownership decides which shards this process serves (a cluster node). nil: every
	// shard, each opened at Start. Set: none is opened at Start — the owner opens and
	// closes shards one at a time (Open, Close) — and a shard answers only while the
	// owner says it serves it.
	Ownership Ownership
	// Peers carries bundle messages to shards served by other nodes (a cluster); nil: a
	// shard not open here takes none.
	Peers Peers
	// Observer receives batch sizes and append latencies (metrics); may be nil.
	Observer Observer
	Logger   *slog.Logger

	// PrepareBound is how long a bundle's home waits for its participants' votes, and a
	// participant holding intents before it asks the home (bundles.go). 2 s when 0.
	PrepareBound time.Duration
	// WaitBound is how long a request may wait in its shard because of undecided bundles
	// (a parked write or read, a held answer, a bundle that gave way and runs again, a
	// home's undecided bundle since its first run): past it, timeout (indefinite). The
	// server sets the request bound (contract.Timing.Request), when the bridge answers the
	// client timeout, so that a write is never sequenced after its client was told so —
	// a bundle granted then would hold its members, unknown to anyone, for its whole TTL.
	// 2 × PrepareBound when 0.
	WaitBound time.Duration
	// BundleStep, when set, is called (on the shard's goroutine) at each step of a bundle
	// across shards, named as in docs/design.md — tests stop a process exactly there.
	BundleStep func(step string, shard uint32)
}

// Ownership is who decides which shards this process serves: a cluster node
// (cluster.Node implements it), the one meaning of "is shard k mine".
type Ownership interface {
	// Standing is asked before a shard answers a request (Standing says what each answer
	// means). It must be cheap and safe from any goroutine.
	Standing(shard uint32) Standing
	// Halted is told (on the shard's goroutine; it must not block) that a shard halted:
	// a cluster node gives the shard up, so that a new claim recovers it from the
	// replicated journal instead of it answering engine_halted until a restart.
	Halted(shard uint32)
}

// Standing is how far a node knows that its claim on a shard is current.
type Standing uint8

const (
	// NotServing: the claim is lost, lapsed while the shard loaded, or never was; the
	// shard answers engine_halted (indefinite: a retry reaches the current owner).
	NotServing Standing = iota
	// Leased: the claim was renewed within its serve window, so no other node can hold
	// it: answers come from the shard's state at once (a lease read, as etcd's).
	Leased
	// Fenced: the claim could not be renewed lately (the claims store is electing a
	// leader, or out of reach) but is not known lost. Writes go on, fenced by the
	// journal as always; an answer that does not append (a read, a refusal, a retry's
	// remembered outcome) waits for a barrier through the journal, which proves that
	// no other node had claimed it meanwhile (etcd's ReadIndex).
	Fenced
)

var standingNames = [...]string{"not-serving", "leased", "fenced"}

func (s Standing) String() string { return standingNames[s] }

// withDefaults fills what the caller left zero.
func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" && o.Storage == nil {
		return o, errors.New("actors: data directory or storage required")
	}
	if o.Shards == 0 {
		o.Shards = 1
	}
	if o.Slot == 0 {
		o.Slot = 100 * time.Millisecond
	}
	if o.PrepareBound <= 0 {
		o.PrepareBound = 2 * time.Second
	}
	if o.WaitBound <= 0 {
		o.WaitBound = 2 * o.PrepareBound
	}
	if o.Slot < time.Millisecond {
		return o, fmt.Errorf("actors: slot %v shorter than 1ms", o.Slot)
	}
	if o.Kernel == (kernel.Config{}) {
		o.Kernel = kernel.DefaultConfig()
	}
	o.Kernel.SlotMillis = uint64(o.Slot / time.Millisecond)
	if o.Kernel.MaxCommandBytes == 0 {
		o.Kernel.MaxCommandBytes = kernel.DefaultMaxCommandBytes
	}
	if err := o.Kernel.Validate(); err != nil {
		return o, err
	}
	if o.Clock == nil {
		o.Clock = SystemClock
	}
	if o.MaxQueue == 0 {
		o.MaxQueue = 16384
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = 1024
	}
	if o.JournalWindow <= 0 {
		o.JournalWindow = DefaultJournalWindow
	}
	if o.ExpirePerTick == 0 {
		o.ExpirePerTick = 1024
	}
	if o.Storage == nil {
		root, segment, faults := o.Dir, o.SegmentSize, o.Faults
		o.Storage = func(shard uint32) (Storage, error) {
			dir := ShardDir(root, shard)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
			return FileStorage{Dir: dir, Journal: persistence.FileOptions{SegmentSize: segment, Faults: faults}}, nil
		}
	}
	if o.SnapshotEvery == 0 {
		o.SnapshotEvery = DefaultSnapshotEvery
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// slotAt is the slot of a wall-clock instant.
func (o *Options) slotAt(t time.Time) uint64 {
	ns := t.UnixNano()
	if ns < 0 {
		return 0
	}
	return uint64(ns) / uint64(o.Slot)
}

// ShardDir is where shard k of a data directory keeps its journal and snapshots.
func ShardDir(root string, k uint32) string { return filepath.Join(root, fmt.Sprintf("shard-%03d", k)) }
