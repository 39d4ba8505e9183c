package kernel

import "fmt"

// Config is everything a shard is run with, in three parts by what each decides:
//
//   - Shard, its identity: the first half of every lease id it issues.
//   - Limits, which judge requests when they are admitted (Admit, and the bridge before
//     routing) and never again: a command that was journaled was admitted, whatever the
//     limits are when its journal is replayed. They take effect for new requests.
//   - Shape, which decides what Apply answers or what a later read sees: the journal
//     carries it (a configure entry, VerbConfigure, at the lsn it takes effect, and every
//     snapshot), so replay applies each entry under the shape in force at its lsn, under
//     any command line and on any node. A shape passed to New is only where a journal
//     that has no configure entry yet starts (docs/design.md, "Settings").
type Config struct {
	Shard uint32
	Limits
	Shape
}

// Limits are the admission limits: what a request may ask for.
type Limits struct {
	MaxTTLMillis    uint64 // largest ttl_ms and keepalive_ms accepted (at most one hour)
	MaxBundle       int    // members per reserve
	MaxCommandBytes int    // the encoded command; past it command_too_large
}

// Shape is what shapes a shard's state: the slot length that the journaled slots count
// in, the retention windows, and the bound of every table. Comparable, so the runtime can
// tell whether a shard's journaled shape is the one it is asked to serve.
type Shape struct {
	// Version orders the shapes a cluster's settings have had (the revision of the
	// settings they come from; 0 in a single process): a node never journals a shape
	// older than the one a shard's journal already carries. Apply does not read it.
	Version uint64

	SlotMillis uint64 // length of a slot in milliseconds: fixed for a journal's life

	DedupeWindowSlots  uint64 // how long an operation's outcome is remembered
	HistoryWindowSlots uint64 // how long a terminal lease stays readable

	MaxResources   int
	MaxPools       int
	MaxRanges      int
	MaxLeases      int // live and retained terminal leases
	MaxMembers     int // members over all leases in the lease table
	MaxOperations  int // remembered operation outcomes
	MaxExpirations int // reserved leases waiting for their deadline
	MaxRangeValues int // freed values remembered for least_recently_freed (bounds range memory)
	MaxRuns        int // runs (work coordination)
	MaxWork        int // work shards over all runs
}

// MaxTTLMillisLimit is the product-level ceiling on ttl_ms: one hour.
const MaxTTLMillisLimit = 3_600_000

// DefaultMaxCommandBytes bounds a command's journal encoding (docs/api.md §A.3).
const DefaultMaxCommandBytes = 64 << 10

// maxTableBound is the largest any table bound may be; it also bounds the counts a
// snapshot may claim, whatever the shape it carries.
const maxTableBound = 1 << 30

// DefaultConfig is sized for about a million resources per shard with a 100 ms slot,
// 10-minute retention windows, and the rate-driven tables sized for DefaultShardMemory.
func DefaultConfig() Config {
	c := Config{
		Limits: Limits{MaxTTLMillis: MaxTTLMillisLimit, MaxBundle: 64, MaxCommandBytes: DefaultMaxCommandBytes},
		Shape: Shape{
			SlotMillis:         100,
			DedupeWindowSlots:  10 * 60 * 10,
			HistoryWindowSlots: 10 * 60 * 10,
			MaxResources:       1 << 20,
			MaxPools:           1 << 16,
			MaxRanges:          1 << 12,
			MaxRuns:            1 << 12,
			MaxWork:            1 << 16,
		},
	}
	c.SizeForMemory(DefaultShardMemory)
	return c
}

// What one entry of the tables that grow with the write rate costs in memory, rounded up
// from BenchmarkRetentionMemory (56–59 B per remembered operation, 69–72 B per ended
// lease) and, for a live lease, its record, one member, its index entries and its holder
// link. A retained ended lease costs half of LeaseBytes; sizing by the live cost keeps
// the bound honest for a table full of live leases.
const (
	OperationBytes = 64
	LeaseBytes     = 160
)

// DefaultShardMemory is the retention memory of one shard under the defaults (the server's
// --max-memory, 8 GiB, over its default 8 shards): 8,388,608 remembered operations and
// 3,355,443 leases. Over the 10-minute windows that holds ~14,000 writes/s and ~5,600
// ended leases/s on one shard, sustained — more than a whole server's peak (docs/benchmarks.md).
const DefaultShardMemory = 1 << 30

// SizeForMemory sets the bounds of the tables that fill with the write rate — remembered
// operations, leases (with their members, expiry index and remembered range values) —
// from the bytes one shard may use for them: half for operations, half for leases.
// Memory in use follows what the windows hold, never the bounds: see OperationBytes.
func (s *Shape) SizeForMemory(bytes uint64) {
	clamp := func(n uint64) int { return int(min(max(n, 1), maxTableBound)) }
	s.MaxOperations = clamp(bytes / 2 / OperationBytes)
	leases := bytes / 2 / LeaseBytes
	s.MaxLeases = clamp(leases)
	s.MaxExpirations = clamp(leases)
	s.MaxMembers = clamp(4 * leases)
	s.MaxRangeValues = clamp(2 * leases)
}

// Validate rejects configurations the kernel cannot honour.
func (c *Config) Validate() error {
	if err := c.Limits.Validate(); err != nil {
		return err
	}
	return c.Shape.Validate()
}

// Validate rejects limits the kernel cannot honour.
func (l *Limits) Validate() error {
	switch {
	case l.MaxTTLMillis == 0 || l.MaxTTLMillis > MaxTTLMillisLimit:
		return fmt.Errorf("max ttl must be between 1ms and 1h, got %dms", l.MaxTTLMillis)
	case l.MaxBundle < 1 || l.MaxBundle > maxEncodedMembers:
		return fmt.Errorf("max bundle must be between 1 and %d, got %d", maxEncodedMembers, l.MaxBundle)
	case l.MaxCommandBytes < 1:
		return fmt.Errorf("max command bytes must be at least 1, got %d", l.MaxCommandBytes)
	}
	return nil
}

// Validate rejects shapes the kernel cannot honour. Apply refuses a configure entry
// whose shape does not pass it, so it is the one home of these rules.
func (s *Shape) Validate() error {
	switch {
	case s.SlotMillis == 0:
		return fmt.Errorf("slot length must be at least 1ms")
	case s.DedupeWindowSlots == 0 || s.HistoryWindowSlots == 0:
		return fmt.Errorf("dedupe and history windows must be at least one slot")
	}
	for _, b := range s.bounds() {
		if b.v < 1 || b.v > maxTableBound {
			return fmt.Errorf("%s must be between 1 and %d, got %d", b.name, maxTableBound, b.v)
		}
	}
	return nil
}

type namedBound struct {
	name string
	v    int
}

func (s *Shape) bounds() []namedBound {
	return []namedBound{
		{"max resources", s.MaxResources}, {"max pools", s.MaxPools}, {"max ranges", s.MaxRanges},
		{"max leases", s.MaxLeases}, {"max members", s.MaxMembers},
		{"max operations", s.MaxOperations}, {"max expirations", s.MaxExpirations},
		{"max range values", s.MaxRangeValues}, {"max runs", s.MaxRuns}, {"max work", s.MaxWork},
	}
}

// SameSettings reports whether two shapes shape state alike (Version aside).
func (s Shape) SameSettings(o Shape) bool {
	s.Version, o.Version = 0, 0
	return s == o
}

// TTLSlots converts ttl_ms to whole slots, rounding up, so a hold never ends early.
func (s *Shape) TTLSlots(ttlMillis uint64) uint64 {
	return ttlMillis/s.SlotMillis + boolToUint(ttlMillis%s.SlotMillis != 0)
}

func boolToUint(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
