package kernel

import "github.com/holdfast/holdfast/contract"

// Verb names an operation of the contract (contract.Verb); journal payloads store its
// number.
type Verb = contract.Verb

// Strategy is how a range picks an "any free" value.
type Strategy uint8

// Strategies of docs/api.md §4.
const (
	StrategyLowestFree Strategy = iota
	StrategyRandom
	StrategyLeastRecentlyFreed
	strategyCount
)

var strategyNames = [strategyCount]string{contract.StrategyLowestFree, contract.StrategyRandom, contract.StrategyLeastRecentlyFreed}

func (s Strategy) String() string {
	if s < strategyCount {
		return strategyNames[s]
	}
	return "unknown"
}

// ParseStrategy maps a wire name to a strategy; the empty string is the default.
func ParseStrategy(s string) (Strategy, bool) {
	if s == "" {
		return StrategyLowestFree, true
	}
	for i, n := range strategyNames {
		if n == s {
			return Strategy(i), true
		}
	}
	return 0, false
}

// MemberKind says which namespace a lease member addresses.
type MemberKind uint8

// Member kinds.
const (
	MemberResource MemberKind = iota + 1
	MemberPool
	MemberRange
)

// Member is one requested part of a bundle: a resource, a quantity of a pool, or a value
// of a range (a specific one when HasValue, else any free one by the range's strategy).
type Member struct {
	Kind     MemberKind
	ID       string
	Quantity uint64 // pools only
	Value    uint64 // ranges only, when HasValue
	HasValue bool
}

// Command is one client write (or the internal expire) as it is journaled. One flat
// struct keeps encoding, hashing and validation in one place; each verb uses the fields
// it names in docs/api.md §4.
type Command struct {
	Verb        Verb
	Tenant      string
	OperationID string // empty only for the internal expire

	// resource.create / pool.create / range.create
	ObjectID string
	Capacity uint64
	First    uint64
	Last     uint64
	Strategy Strategy

	// lease.reserve
	HolderID string
	Members  []Member
	Activate bool

	// lease.reserve and lease.renew: TTLMillis as sent, TTLSlots derived by Normalize with
	// the shard's slot length (journaled, so replay never depends on a changed flag).
	TTLMillis uint64
	TTLSlots  uint64

	// lease verbs: the lease's lsn within this shard (the shard is the routing part of
	// the wire lease id) and the fencing epoch for holder-authorized verbs.
	LeaseLSN uint64
	Epoch    uint64

	// lease.expire: the deadline the expiry was scheduled for; a lease renewed since
	// keeps its new deadline and the expire is a no-op.
	Deadline uint64
}

// Entry is one journal position: the command and the slot the shard stamped on it.
type Entry struct {
	LSN  uint64
	Slot uint64
	Cmd  *Command
}
