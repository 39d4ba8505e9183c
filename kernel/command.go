package kernel

import (
	"cmp"

	"github.com/holdfast/holdfast/contract"
)

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
	// MemberWork claims a work shard of a run (ID): the one named by Name, or with Name
	// empty the next claimable one (docs/api.md Part III).
	MemberWork
)

// Member is one requested part of a bundle: a resource, a quantity of a pool, or a value
// of a range (a specific one when HasValue, else any free one by the range's strategy).
type Member struct {
	Kind     MemberKind
	ID       string
	Quantity uint64 // pools only
	Value    uint64 // ranges only, when HasValue
	HasValue bool
	Name     string // work only: the work shard's name within the run; empty: any
}

// WorkSpec is one work shard of a run.create or run.register manifest, or (Name empty) one
// child range of a split_replace: a key range [Start, End) of byte strings (End empty:
// unbounded) and optional metadata.
type WorkSpec struct {
	Name     string
	Start    string
	End      string
	Metadata string
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
	// lease.activate and lease.reserve with Activate: an optional keep-alive for the
	// active lease (docs/api.md Part III), as sent and in slots (Normalize).
	KeepAliveMillis uint64
	KeepAliveSlots  uint64

	// lease verbs: the lease's lsn within this shard (the shard is the routing part of
	// the wire lease id) and the fencing epoch for holder-authorized verbs.
	LeaseLSN uint64
	Epoch    uint64

	// lease.expire: the deadline the expiry was scheduled for; a lease renewed since
	// keeps its new deadline and the expire is a no-op.
	Deadline uint64

	// Work coordination (docs/api.md Part III). The run's id is ObjectID; a work verb
	// names its lease with LeaseLSN, HolderID and Epoch.
	Name        string     // work.unpark: the work shard
	Work        []WorkSpec // run.create, run.register: the manifest; work.split_replace: the children
	CursorKey   string     // work.checkpoint, work.complete: the cursor
	CursorToken string
	HasCursor   bool
	Reason      string // run.fail, run.cancel, work.park
	SplitKey    string // work.split_residual

	// shard.configure (internal): the shape in force from this entry on.
	Settings Shape

	// Allocators (docs/api.md Part IV), in command format 4.
	Labels     []Label    // lease.reserve: the lease's labels, sorted by key
	Value      uint64     // range.lookup, range.release, range.revoke, range.reclaim: the value
	WholeLease bool       // range.release: also the lease's other members
	Excluded   []Interval // range.create: values "any" never picks; range.exclude, range.include: First/Last
	Band       Interval   // range.create, range.resize: the static band (HasBand)
	HasBand    bool       //
	Format     string     // range.create: how clients show the values
	Label      Label      // lease.release_all, lease.revoke_all: the selector
	Limit      uint32     // lease.release_all, lease.revoke_all: leases at most
	Reclaim    bool       // lease.revoke_all: reclaim them too
	// range.resize: a bound the request omitted keeps its value (First or Last is then
	// not read). Journal format 5 carries them; a command with neither keeps format 4.
	KeepFirst bool
	KeepLast  bool
	Imports   []ImportLease // lease.import: one lease each

	// Bundles across shards (docs/design.md "Bundles across shards"), in command format 6.
	// A lease.reserve begun at its home carries Shards, the shard of each member (parallel
	// to Members; at least one is not the home's); without it a reserve is one shard's.
	Shards []uint32
	// bundle.prepare, bundle.decide, bundle.mirror: the transaction — its home shard and
	// the lsn of its begin there, which is also the lease id.
	Txn TxnRef
	// A begun lease.reserve and bundle.prepare: the transaction's wait-die priority
	// (lower is older), kept when the bundle is run again.
	Priority uint64
	// bundle.decide: commit or abort. A commit carries the bundle's members resolved
	// (Members: every range value chosen); an abort for a definite refusal carries its
	// code and the member's index in the reserve plus one (0: a table's refusal, no
	// member), remembered for retries (an abort without one — a bundle its home never
	// finished — is not remembered).
	Commit        bool
	Refusal       Code
	RefusalMember uint32
	// bundle.mirror: the lease's state from now on (terminal: the members are freed) and
	// its deadline at the home, for display.
	State LeaseState
	// Endings in two rounds (command format 7; docs/design.md "Endings in two rounds"): a
	// reserve begun across shards says its lease ends in two rounds (PhaseEnding, set by
	// Normalize); a bundle.mirror of a terminal state says which round it is (PhaseEnding:
	// the part stays held, read by nobody; PhaseFree: the part is freed, also the home's
	// own). Zero in format 6: a bundle begun so ends in one round, its terminal mirror
	// freeing the part at once.
	Phase Phase
	// Parallel (command format 8; docs/design.md "Parallel commits"): a reserve begun
	// across shards whose home answers once the begin and every prepare are durable, its
	// commit following; its lease's id is the position of the skip entry right before the
	// begin. Set by Normalize for bundles without a work member.
	Parallel bool
	// Group (command format 9; docs/design.md "lease.import across keys"): a lease.import
	// across shards — one transaction per lease, begun by one entry and decided by one.
	// At its home the import carries Shards, the shard of each member of every lease in
	// order, follows n skips (lease i's id and transaction are the i-th), and is the
	// group's begin; its position names the group. A bundle.prepare of a group carries
	// Imports, each lease's members on the participant (none: an empty list), and Txn the
	// group; a bundle.decide of a group carries Txn the group, Limit its leases, and —
	// committing — Imports with every member resolved, or — refused — Value the refused
	// lease's index plus one. Set by Normalize.
	Group bool
}

// Phase is a round of a bundle lease's end.
type Phase uint8

// The rounds of an end.
const (
	PhaseNone   Phase = iota // one round: a format 6 bundle's, or not an end
	PhaseEnding              // the part stays held, read by nobody, until PhaseFree
	PhaseFree                // every part is ending: free it
)

// fits reports whether a command may carry phase p (format 7 carries one, never none): a
// reserve begun across shards says it ends in two rounds, a mirror of a terminal state
// says which round.
func (p Phase) fits(c *Command) bool {
	switch {
	case p == PhaseEnding && c.Verb == contract.VerbReserve && len(c.Shards) > 0:
		return true
	case p == PhaseEnding && c.Group:
		return c.Verb == contract.VerbImport
	case (p == PhaseEnding || p == PhaseFree) && c.Verb == contract.VerbMirror:
		return c.State.Terminal()
	}
	return false
}

// TxnRef names a transaction across shards: its home shard and its begin's lsn there.
type TxnRef struct {
	Shard uint32
	LSN   uint64
}

// Compare orders transactions by home shard, then lsn.
func (t TxnRef) Compare(u TxnRef) int {
	return cmp.Or(cmp.Compare(t.Shard, u.Shard), cmp.Compare(t.LSN, u.LSN))
}

// groupParts is how many leases of a group's prepare have members on its participant.
func groupParts(c *Command) int {
	n := 0
	for i := range c.Imports {
		if len(c.Imports[i].Members) > 0 {
			n++
		}
	}
	return n
}

// groupShaped reports whether a command of format 9 has a group step's fields: an import
// with a shard for every member of every lease, a prepare with the import's leases and no
// members of its own, a decide naming its leases' count.
func (c *Command) groupShaped() bool {
	members := 0
	for i := range c.Imports {
		members += len(c.Imports[i].Members)
	}
	begin := c.Verb == contract.VerbImport && len(c.Imports) > 0 && len(c.Shards) == members && len(c.Members) == 0
	prepare := c.Verb == contract.VerbPrepare && len(c.Imports) > 0 && len(c.Shards) == 0 && len(c.Members) == 0 && members > 0
	decide := c.Verb == contract.VerbDecide && c.Limit > 0 && len(c.Shards) == 0 && (len(c.Imports) == 0 || len(c.Imports) == int(c.Limit))
	return begin || prepare || decide
}

// usesBundle reports whether the command is a step of a bundle across shards, which
// only command format 6 encodes.
func (c *Command) usesBundle() bool {
	return len(c.Shards) > 0 || c.Verb == contract.VerbPrepare || c.Verb == contract.VerbDecide ||
		c.Verb == contract.VerbMirror
}

// Label is one key/value pair of a lease (docs/api.md Part IV).
type Label struct {
	Key, Value string
}

// Interval is the values first..last of a range, both included.
type Interval struct {
	First, Last uint64
}

// ImportLease is one lease of a lease.import: a reserve's fields.
type ImportLease struct {
	HolderID        string
	Members         []Member
	Activate        bool
	TTLMillis       uint64
	TTLSlots        uint64
	KeepAliveMillis uint64
	KeepAliveSlots  uint64
	Labels          []Label
}

// usesAllocators reports whether the command carries a field of the allocator verbs,
// which only command format 4 encodes.
func (c *Command) usesAllocators() bool {
	return c.Verb > contract.VerbConfigure || len(c.Labels) > 0 || len(c.Excluded) > 0 || c.HasBand || c.Format != ""
}

// usesWork reports whether the command carries work coordination fields (runs, work
// members, keep-alives), which only the newer journal format encodes.
func (c *Command) usesWork() bool {
	if c.Verb >= contract.VerbCreateRun || c.KeepAliveMillis != 0 {
		return true
	}
	for i := range c.Members {
		if c.Members[i].Kind == MemberWork {
			return true
		}
	}
	return false
}

// Entry is one journal position: the command and the slot the shard stamped on it.
type Entry struct {
	LSN  uint64
	Slot uint64
	Cmd  *Command
}
