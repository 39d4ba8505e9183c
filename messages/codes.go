package messages

// String values of the enum-like fields of the wire contract. They are plain
// strings in the schema (see holdfast.proto) so that the JSON form is
// lowercase and new codes need no renumbering; these constants are the only
// spellings the server emits.

// Reply.outcome values.
const (
	// OutcomeCommitted: the command has a log position and a durable, final
	// result (reads: the answer reflects committed state). Its code may be a
	// domain failure.
	OutcomeCommitted = "committed"
	// OutcomeRejected: the command was not committed (definite) or its fate is
	// unknown (indefinite); see Reply.category.
	OutcomeRejected = "rejected"
)

// Reply.category values (rejected replies only).
const (
	// CategoryDefinite: not committed, no effect, and not remembered; retrying
	// the same operation_id later executes it fresh.
	CategoryDefinite = "definite"
	// CategoryIndefinite: the client cannot know whether the command
	// committed; it resolves that by retrying the same operation_id.
	CategoryIndefinite = "indefinite"
)

// Reply.code: success.
const CodeOK = "ok"

// Reply.code: domain codes. They come with OutcomeCommitted: the command has a
// log position and this is its final result, not an error.
const (
	CodeAlreadyExists        = "already_exists"
	CodeResourceTableFull    = "resource_table_full"
	CodePoolTableFull        = "pool_table_full"
	CodeRangeTableFull       = "range_table_full"
	CodeResourceNotFound     = "resource_not_found"
	CodePoolNotFound         = "pool_not_found"
	CodeRangeNotFound        = "range_not_found"
	CodeResourceBusy         = "resource_busy"
	CodeInsufficientCapacity = "insufficient_capacity"
	CodeValueBusy            = "value_busy"
	CodeValueOutOfRange      = "value_out_of_range"
	CodeRangeExhausted       = "range_exhausted"
	CodeLeaseTableFull       = "lease_table_full"
	CodeLeaseMemberTableFull = "lease_member_table_full"
	CodeExpirationIndexFull  = "expiration_index_full"
	CodeLeaseNotFound        = "lease_not_found"
	CodeLeaseRetired         = "lease_retired"
	CodeHolderMismatch       = "holder_mismatch"
	CodeStaleEpoch           = "stale_epoch"
	CodeInvalidState         = "invalid_state"
	CodeLeaseExpired         = "lease_expired"
)

// Reply.code: rejection codes. They come with OutcomeRejected; see
// RejectionCategory and ServiceErrorStatus.
const (
	// Definite rejections (request faults, status 400).
	CodeInvalidRequest  = "invalid_request"
	CodeCommandTooLarge = "command_too_large"
	CodeCrossShard      = "cross_shard"
	CodeDuplicateMember = "duplicate_member"
	CodeBundleTooLarge  = "bundle_too_large"
	CodeTTLOutOfRange   = "ttl_out_of_range"
	CodeSlotOverflow    = "slot_overflow"
	// Definite rejections of other kinds.
	CodeOperationConflict  = "operation_conflict"   // 409
	CodeFenceNotApplied    = "fence_not_applied"    // 412, reads with min_lsn
	CodeOverloaded         = "overloaded"           // 503
	CodeOperationTableFull = "operation_table_full" // 503
	CodeLSNExhausted       = "lsn_exhausted"        // 503
	// Indefinite rejections.
	CodeEngineHalted   = "engine_halted"   // 503
	CodeStorageFailure = "storage_failure" // 503
	CodeTimeout        = "timeout"         // 504
)

// rejection describes one rejection code: its category and the status carried
// in the Nats-Service-Error-Code header.
type rejection struct {
	category string
	status   int
}

var rejections = map[string]rejection{
	CodeInvalidRequest:     {CategoryDefinite, 400},
	CodeCommandTooLarge:    {CategoryDefinite, 400},
	CodeCrossShard:         {CategoryDefinite, 400},
	CodeDuplicateMember:    {CategoryDefinite, 400},
	CodeBundleTooLarge:     {CategoryDefinite, 400},
	CodeTTLOutOfRange:      {CategoryDefinite, 400},
	CodeSlotOverflow:       {CategoryDefinite, 400},
	CodeOperationConflict:  {CategoryDefinite, 409},
	CodeFenceNotApplied:    {CategoryDefinite, 412},
	CodeOverloaded:         {CategoryDefinite, 503},
	CodeOperationTableFull: {CategoryDefinite, 503},
	CodeLSNExhausted:       {CategoryDefinite, 503},
	CodeEngineHalted:       {CategoryIndefinite, 503},
	CodeStorageFailure:     {CategoryIndefinite, 503},
	CodeTimeout:            {CategoryIndefinite, 504},
}

// IsRejectionCode reports whether code is a rejection code (one that comes
// with OutcomeRejected) rather than ok or a domain code.
func IsRejectionCode(code string) bool {
	_, ok := rejections[code]
	return ok
}

// RejectionCategory returns the Reply.category of a rejection code
// (CategoryDefinite or CategoryIndefinite), or "" if code is not a rejection
// code.
func RejectionCategory(code string) string {
	return rejections[code].category
}

// ServiceErrorStatus returns the status a rejected reply carries in the
// Nats-Service-Error-Code header (400, 409, 412, 503 or 504), or 0 if code is
// not a rejection code.
func ServiceErrorStatus(code string) int {
	return rejections[code].status
}

// Resource.state and Lease.state values. A resource is StateAvailable,
// StateReserved, StateActive or StateRevoking; a lease is StateReserved,
// StateActive, StateRevoking or one of the terminal StateReleased,
// StateExpired, StateRevoked.
const (
	StateAvailable = "available"
	StateReserved  = "reserved"
	StateActive    = "active"
	StateRevoking  = "revoking"
	StateReleased  = "released"
	StateExpired   = "expired"
	StateRevoked   = "revoked"
)

// Range.strategy values (CreateRangeRequest.strategy; empty means
// StrategyLowestFree).
const (
	// StrategyLowestFree picks the lowest free value.
	StrategyLowestFree = "lowest_free"
	// StrategyRandom picks a value seeded from the log position (the same
	// choice on replay).
	StrategyRandom = "random"
	// StrategyLeastRecentlyFreed picks never-used values in ascending order
	// first, then freed values in the order they were freed.
	StrategyLeastRecentlyFreed = "least_recently_freed"
)

// Event.event values; the event subject is <prefix>.v1.<tenant>.events.<event>.
const (
	EventResourceCreated = "resource.created"
	EventPoolCreated     = "pool.created"
	EventRangeCreated    = "range.created"
	EventLeaseReserved   = "lease.reserved"
	// EventLeaseActivated is also the only event of a reserve with
	// activate: true.
	EventLeaseActivated = "lease.activated"
	EventLeaseRenewed   = "lease.renewed"
	EventLeaseReleased  = "lease.released"
	EventLeaseExpired   = "lease.expired"
	EventLeaseRevoking  = "lease.revoking"
	EventLeaseRevoked   = "lease.revoked"
)

// Defaults and bounds of read request fields. Values outside the bounds are
// invalid_request, never silently capped.
const (
	// DefaultWaitMs is the wait_ms of a read whose wait_ms is absent.
	DefaultWaitMs = 1000
	// MaxWaitMs is the largest accepted wait_ms.
	MaxWaitMs = 10000
	// DefaultListLimit is the limit of a lease.list whose limit is absent.
	DefaultListLimit = 1000
	// MinListLimit and MaxListLimit bound an explicit lease.list limit.
	MinListLimit = 1
	MaxListLimit = 10000
)
