// Package actors runs Holdfast's shards: one protoactor actor per shard owns a kernel and
// its journal, sequences commands, makes every batch durable before it is applied
// (group commit), answers the requests of the batch, hands its events on, expires holds
// on its slot clock, and snapshots on a cadence.
package actors

import (
	"errors"
	"fmt"
	"log/slog"
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

// Options configures the shards of one process.
type Options struct {
	Dir    string // data directory; shard i keeps its journal and snapshots in Dir/shard-NNN
	Shards uint32
	Slot   time.Duration // slot length; slots count from the Unix epoch
	Kernel kernel.Config // per-shard bounds; Shard and SlotMillis are set per shard
	Clock  Clock

	MaxQueue        int // requests waiting per shard (mailbox, batch and in flight); past it: overloaded
	MaxBatch        int // entries per journal append
	MaxCommandBytes int // encoded command size; past it: command_too_large
	ExpirePerTick   int // expire entries committed per tick at most
	SnapshotEvery   int // entries between snapshots (0: 200,000; negative: never)
	SegmentSize     int64

	// Events receives each applied batch's events, in lsn order per shard, with the lsn
	// the batch ends at. It runs on the shard's goroutine and must not block. When nil,
	// no events are produced and snapshots are not held back for publishing.
	Events func(shard uint32, throughLSN uint64, events []Event)
	// Faults injects journal write and fsync failures (tests only).
	Faults *persistence.Faults
	// OpenJournal opens a shard's journal; the shard recovers from it and appends to it,
	// through the persistence.Journal interface only. Default: the file journal in the
	// shard's directory dir (segments of SegmentSize, with Faults).
	OpenJournal func(shard uint32, dir string) (persistence.Journal, error)
	// Observer receives batch sizes and append latencies (metrics); may be nil.
	Observer Observer
	Logger   *slog.Logger
}

// withDefaults fills what the caller left zero.
func (o Options) withDefaults() (Options, error) {
	if o.Dir == "" {
		return o, errors.New("actors: data directory required")
	}
	if o.Shards == 0 {
		o.Shards = 1
	}
	if o.Slot == 0 {
		o.Slot = 100 * time.Millisecond
	}
	if o.Slot < time.Millisecond {
		return o, fmt.Errorf("actors: slot %v shorter than 1ms", o.Slot)
	}
	if o.Kernel == (kernel.Config{}) {
		o.Kernel = kernel.DefaultConfig()
	}
	o.Kernel.SlotMillis = uint64(o.Slot / time.Millisecond)
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
	if o.MaxCommandBytes == 0 {
		o.MaxCommandBytes = 64 << 10
	}
	if o.ExpirePerTick == 0 {
		o.ExpirePerTick = 1024
	}
	if o.OpenJournal == nil {
		segment, faults := o.SegmentSize, o.Faults
		o.OpenJournal = func(_ uint32, dir string) (persistence.Journal, error) {
			return persistence.OpenFileJournal(dir, persistence.FileOptions{SegmentSize: segment, Faults: faults})
		}
	}
	if o.SnapshotEvery == 0 {
		o.SnapshotEvery = 200_000
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
