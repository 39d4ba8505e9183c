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
}

// MaxTTLMillisLimit is the product-level ceiling on ttl_ms: one hour.
const MaxTTLMillisLimit = 3_600_000

// DefaultConfig is sized for about a million resources per shard with a 100 ms slot.
func DefaultConfig() Config {
	return Config{
		SlotMillis:         100,
		MaxTTLMillis:       MaxTTLMillisLimit,
		DedupeWindowSlots:  2 * 3600 * 10,
		HistoryWindowSlots: 3600 * 10,
		MaxResources:       1 << 20,
		MaxPools:           1 << 16,
		MaxRanges:          1 << 12,
		MaxLeases:          1 << 20,
		MaxMembers:         1 << 22,
		MaxOperations:      1 << 21,
		MaxExpirations:     1 << 20,
		MaxBundle:          64,
		MaxRangeValues:     1 << 21,
	}
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
		{"max range values", c.MaxRangeValues},
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
