package kernel

import "github.com/holdfast/holdfast/contract"

// LeaseState is the lifecycle of a lease (docs/api.md §4).
type LeaseState uint8

// Lease states. released, expired and revoked are terminal.
const (
	LeaseReserved LeaseState = iota + 1
	LeaseActive
	LeaseRevoking
	LeaseReleased
	LeaseExpired
	LeaseRevoked
	// LeaseConsumed: a pool hold confirmed as used up; its units left the pool for good.
	LeaseConsumed
)

var leaseStateNames = [...]string{"", contract.StateReserved, contract.StateActive, contract.StateRevoking,
	contract.StateReleased, contract.StateExpired, contract.StateRevoked, contract.StateConsumed}

func (s LeaseState) String() string {
	return nameOf(leaseStateNames[:], s)
}

// Terminal reports whether the lease has ended for good.
func (s LeaseState) Terminal() bool { return s >= LeaseReleased && s <= LeaseConsumed }

// Live reports whether the lease still holds its members.
func (s LeaseState) Live() bool { return s >= LeaseReserved && s <= LeaseRevoking }

// ResourceState is what a resource's current lease makes of it.
type ResourceState uint8

// Resource states.
const (
	ResourceAvailable ResourceState = iota
	ResourceReserved
	ResourceActive
	ResourceRevoking
)

var resourceStateNames = [...]string{contract.StateAvailable, contract.StateReserved, contract.StateActive, contract.StateRevoking}

func (s ResourceState) String() string {
	return nameOf(resourceStateNames[:], s)
}

// resourceStateOf is the resource state a live lease in state s imposes.
func resourceStateOf(s LeaseState) ResourceState {
	switch s {
	case LeaseReserved:
		return ResourceReserved
	case LeaseActive:
		return ResourceActive
	case LeaseRevoking:
		return ResourceRevoking
	}
	return ResourceAvailable
}

// nameOf is the name of enum value v in names, "unknown" past them.
func nameOf[E ~uint8](names []string, v E) string {
	if int(v) < len(names) {
		return names[v]
	}
	return "unknown"
}

// EventKind names the event an entry emits (docs/api.md §5); EventNone when nothing changed.
type EventKind uint8

// Events.
const (
	EventNone EventKind = iota
	EventResourceCreated
	EventPoolCreated
	EventRangeCreated
	EventLeaseReserved
	EventLeaseActivated
	EventLeaseRenewed
	EventLeaseReleased
	EventLeaseExpired
	EventLeaseRevoking
	EventLeaseRevoked
	EventRunCreated
	EventRunRegistered
	EventRunCompleted
	EventRunFailed
	EventRunCancelled
	EventWorkCheckpointed
	EventWorkCompleted
	EventWorkParked
	EventWorkUnparked
	EventWorkSplit
	EventResourceDeleted
	EventPoolDeleted
	EventRangeDeleted
	EventRunDeleted
	EventLeaseConsumed
	EventRangeExcluded
	EventRangeIncluded
	EventRangeResized
	EventPoolResized
)

var eventNames = [...]string{"", contract.EventResourceCreated, contract.EventPoolCreated, contract.EventRangeCreated,
	contract.EventLeaseReserved, contract.EventLeaseActivated, contract.EventLeaseRenewed, contract.EventLeaseReleased,
	contract.EventLeaseExpired, contract.EventLeaseRevoking, contract.EventLeaseRevoked,
	contract.EventRunCreated, contract.EventRunRegistered, contract.EventRunCompleted, contract.EventRunFailed,
	contract.EventRunCancelled, contract.EventWorkCheckpointed, contract.EventWorkCompleted,
	contract.EventWorkParked, contract.EventWorkUnparked, contract.EventWorkSplit,
	contract.EventResourceDeleted, contract.EventPoolDeleted, contract.EventRangeDeleted, contract.EventRunDeleted,
	contract.EventLeaseConsumed, contract.EventRangeExcluded, contract.EventRangeIncluded, contract.EventRangeResized,
	contract.EventPoolResized}

func (e EventKind) String() string {
	return nameOf(eventNames[:], e)
}

// ObjectKind says which view of an Output is filled.
type ObjectKind uint8

// Object kinds.
const (
	ObjectNone ObjectKind = iota
	ObjectResource
	ObjectPool
	ObjectRange
	ObjectLease
	ObjectRun
	ObjectWork
)

// ResourceView is the read form of a resource. Strings point into kernel storage and stay
// valid; the view is a copy as of the entry that produced it.
type ResourceView struct {
	Tenant     string
	ID         string
	State      ResourceState
	LeaseLSN   uint64 // the current lease (with LeaseShard, its id); 0 when available
	LeaseShard uint32 // this shard, or a bundle's home when the lease lives there
	Version    uint64
}

// PoolView is the read form of a pool.
type PoolView struct {
	Tenant    string
	ID        string
	Capacity  uint64
	Reserved  uint64 // units in reserved leases
	Active    uint64 // units in active or revoking leases
	Consumed  uint64 // units used up for good (lease.consume)
	Available uint64
}

// RangeView is the read form of a value range.
type RangeView struct {
	Tenant    string
	ID        string
	First     uint64
	Last      uint64
	Strategy  Strategy
	Allocated uint64
	Free      uint64 // values left, saturating at 2^64-1
	Excluded  uint64 // values never handed out, saturating at 2^64-1
	Band      Interval
	HasBand   bool
	Format    string
}

// MemberView is one member of a lease as granted: for range members, Value is the value
// the lease holds.
type MemberView struct {
	Kind     MemberKind
	ID       string
	Name     string // work members: the work shard's name in run ID
	Quantity uint64
	Value    uint64
}

// LeaseView is the read form of a lease. Members reuses the Output's buffer.
type LeaseView struct {
	Shard           uint32
	LSN             uint64 // with Shard, the lease id
	Tenant          string
	HolderID        string
	State           LeaseState
	Epoch           uint64
	CreatedLSN      uint64
	DeadlineSlot    uint64
	KeepAliveSlots  uint64 // an active lease's keep-alive (0: none)
	ReleasedLSN     uint64
	RetireAfterSlot uint64
	Members         []MemberView
	Labels          []Label // sorted by key; nil when none
	// AllocatedAtMillis is when the lease was created: its entry's slot in Unix
	// milliseconds (0: not known, a lease restored from a snapshot before format 8).
	AllocatedAtMillis uint64
}

// Output is the result of one entry or read, written into a caller-owned value so the
// hot path allocates nothing: the caller reuses it and copies what it keeps.
type Output struct {
	Code           Code
	LSN            uint64 // the entry's lsn (writes), or the applied lsn (reads)
	FromRetryCache bool
	// MemberIndex is the failing member of a reserve (-1 otherwise), so a message can say
	// which member was busy without naming anybody.
	MemberIndex int
	// Event is what the entry changed; its payload is the filled view.
	Event    EventKind
	Object   ObjectKind
	Resource ResourceView
	Pool     PoolView
	Range    RangeView
	Lease    LeaseView
	// Work coordination: the run, the work shard (also beside a lease: the one a claim
	// or a work verb acts on), a split's children, and a claim's capacity hint.
	Run      RunView
	Work     WorkView
	HasWork  bool
	Children []WorkView
	Capacity CapacityView
	// EarliestDeadlineSlot is, with resource_busy or none_available, the slot at which
	// a claim that blocks the request may end (0: none will by itself).
	EarliestDeadlineSlot uint64
	// Value is, with value_busy or object_in_use of a range verb, the held value that is
	// in the way (its lease is Lease.LSN), for the message.
	Value uint64
	// Changes are the leases an entry of several changed, each with its event, in order:
	// a lease.import's leases, the leases a lease.release_all or lease.revoke_all ended.
	// ItemIndex is the lease of an import that failed (-1 otherwise), as MemberIndex is
	// its member.
	Changes []LeaseChange
	// Parts are a participant's parts of an import across shards, lease by lease (an
	// empty view for a lease it holds nothing of), after its prepare: what its vote tells
	// the home. No events: the leases live at their home.
	Parts     []LeaseView
	ItemIndex int
	// Count is how many leases a lease.release_all or lease.revoke_all ended or moved;
	// More says whether more carry the label (another call continues).
	Count int
	More  bool

	// Bundles across shards (docs/design.md "Bundles across shards").
	// Pending says the entry left a transaction undecided: a begun reserve (Lease is the
	// lease it will be, holding the home's members) or a prepare (Lease holds the
	// participant's members, every range value chosen). Its outcome is not remembered yet.
	Pending bool
	// Undecided says a member was refused only because an undecided bundle holds it as
	// an intent: Txn is that transaction and TxnPriority its priority (both zero when the
	// member is a pool's units, a range's "any" value or a run's next work shard, whose
	// intents are not told apart; also for a run's end while an undecided claim holds a
	// work shard of it). The refusal is neither remembered nor final: the caller waits
	// for the decision and tries again.
	Undecided   bool
	Txn         TxnRef
	TxnPriority uint64
	// Elsewhere says a verb by value found the value held by a bundle whose lease lives
	// at another shard, its home: Txn is then the lease's id there (the home shard and the
	// commit's lsn, not the begin's), and the verb is for the home to answer. Nothing
	// changed here and nothing is remembered.
	Elsewhere bool
	// Mirror says the lease the entry changed (Lease) is a bundle's at its home: its
	// participants (Kernel.BundleShards) learn the new state by a bundle.mirror.
	Mirror bool
}

// ShowsLease reports whether the output carries a lease (Lease): a lease verb's, or a
// work verb's that also answers with the claim (work.complete ends it, for one).
func (o *Output) ShowsLease() bool {
	return o.Object == ObjectLease || (o.Object == ObjectWork && o.Lease.LSN != 0)
}

// LeaseChange is one lease an entry changed, and how.
type LeaseChange struct {
	Event EventKind
	Lease LeaseView
}

func (o *Output) reset(lsn uint64) {
	members, children := o.Lease.Members[:0], o.Children[:0]
	*o = Output{LSN: lsn, MemberIndex: -1, ItemIndex: -1}
	o.Lease.Members, o.Children = members, children
}
