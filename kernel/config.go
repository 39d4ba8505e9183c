package kernel

import "fmt"

// Config bounds one shard. Every table has a capacity; past it the kernel answers the
// contract's *_table_full code instead of growing.
type Config struct {
	Shard uint32 // this shard's number: the first half of every lease id it issues

	SlotMillis   uint64 // length of a slot in milliseconds (ttl_ms → slots, rounding up)
	MaxTTLMillis uint64 // largest ttl_ms accepted (at most one hour)

	DedupeWindowSlots  uint64 // how long an operation's outcome is remembered
	HistoryWindowSlots uint64 // how long a terminal lease stays readable

	MaxResources   int
	MaxPools       int
	MaxRanges      int
	MaxLeases      int // live and retained terminal leases
	MaxMembers     int // members over all leases in the lease table
	MaxOperations  int // remembered operation outcomes
	MaxExpirations int // reserved leases waiting for their deadline
	MaxBundle      int // members per reserve
	MaxRangeValues int // allocated values over all ranges (bounds range memory)
	MaxRuns        int // runs (work coordination)
	MaxWork        int // work shards over all runs
}

// MaxTTLMillisLimit is the product-level ceiling on ttl_ms: one hour.
const MaxTTLMillisLimit = 3_600_000

// DefaultConfig is sized for about a million resources per shard with a 100 ms slot,
// 10-minute retention windows, and the rate-driven tables sized for DefaultShardMemory.
func DefaultConfig() Config {
	c := Config{
		SlotMillis:         100,
		MaxTTLMillis:       MaxTTLMillisLimit,
		DedupeWindowSlots:  10 * 60 * 10,
		HistoryWindowSlots: 10 * 60 * 10,
		MaxResources:       1 << 20,
		MaxPools:           1 << 16,
		MaxRanges:          1 << 12,
		MaxBundle:          64,
		MaxRuns:            1 << 12,
		MaxWork:            1 << 16,
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
func (c *Config) SizeForMemory(bytes uint64) {
	clamp := func(n uint64) int { return int(min(max(n, 1), 1<<30)) }
	c.MaxOperations = clamp(bytes / 2 / OperationBytes)
	leases := bytes / 2 / LeaseBytes
	c.MaxLeases = clamp(leases)
	c.MaxExpirations = clamp(leases)
	c.MaxMembers = clamp(4 * leases)
	c.MaxRangeValues = clamp(2 * leases)
}

// Validate rejects configurations the kernel cannot honour.
func (c *Config) Validate() error {
	switch {
	case c.SlotMillis == 0:
		return fmt.Errorf("slot length must be at least 1ms")
	case c.MaxTTLMillis == 0 || c.MaxTTLMillis > MaxTTLMillisLimit:
		return fmt.Errorf("max ttl must be between 1ms and 1h, got %dms", c.MaxTTLMillis)
	case c.DedupeWindowSlots == 0 || c.HistoryWindowSlots == 0:
		return fmt.Errorf("dedupe and history windows must be at least one slot")
	case c.MaxBundle < 1 || c.MaxBundle > maxEncodedMembers:
		return fmt.Errorf("max bundle must be between 1 and %d", maxEncodedMembers)
	}
	for _, b := range []struct {
		name string
		v    int
	}{
		{"max resources", c.MaxResources}, {"max pools", c.MaxPools}, {"max ranges", c.MaxRanges},
		{"max leases", c.MaxLeases}, {"max members", c.MaxMembers},
		{"max operations", c.MaxOperations}, {"max expirations", c.MaxExpirations},
		{"max range values", c.MaxRangeValues}, {"max runs", c.MaxRuns}, {"max work", c.MaxWork},
	} {
		if b.v < 1 || b.v > 1<<30 {
			return fmt.Errorf("%s must be between 1 and %d, got %d", b.name, 1<<30, b.v)
		}
	}
	return nil
}

// TTLSlots converts ttl_ms to whole slots, rounding up, so a hold never ends early.
func (c *Config) TTLSlots(ttlMillis uint64) uint64 {
	return ttlMillis/c.SlotMillis + boolToUint(ttlMillis%c.SlotMillis != 0)
}

func boolToUint(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
