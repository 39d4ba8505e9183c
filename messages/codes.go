package messages

import "github.com/holdfast/holdfast/contract"

// String values of the enum-like fields of the wire contract. They are plain
// strings in the schema (see holdfast.proto) so that the JSON form is
// lowercase and new codes need no renumbering. The codes, their categories and
// statuses are defined once, in package contract; these are its names under the
// schema's package, for clients that compare a reply's code.

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
	CategoryDefinite = contract.CategoryDefinite
	// CategoryIndefinite: the client cannot know whether the command
	// committed; it resolves that by retrying the same operation_id.
	CategoryIndefinite = contract.CategoryIndefinite
)

// Reply.code: success.
const CodeOK = contract.NameOK

// Reply.code: domain codes. They come with OutcomeCommitted: the command has a
// log position and this is its final result, not an error.
const (
	CodeAlreadyExists        = contract.NameAlreadyExists
	CodeResourceTableFull    = contract.NameResourceTableFull
	CodePoolTableFull        = contract.NamePoolTableFull
	CodeRangeTableFull       = contract.NameRangeTableFull
	CodeResourceNotFound     = contract.NameResourceNotFound
	CodePoolNotFound         = contract.NamePoolNotFound
	CodeRangeNotFound        = contract.NameRangeNotFound
	CodeResourceBusy         = contract.NameResourceBusy
	CodeInsufficientCapacity = contract.NameInsufficientCapacity
	CodeValueBusy            = contract.NameValueBusy
	CodeValueOutOfRange      = contract.NameValueOutOfRange
	CodeRangeExhausted       = contract.NameRangeExhausted
	CodeLeaseTableFull       = contract.NameLeaseTableFull
	CodeLeaseMemberTableFull = contract.NameLeaseMemberTableFull
	CodeExpirationIndexFull  = contract.NameExpirationIndexFull
	CodeLeaseNotFound        = contract.NameLeaseNotFound
	CodeLeaseRetired         = contract.NameLeaseRetired
	CodeHolderMismatch       = contract.NameHolderMismatch
	CodeStaleEpoch           = contract.NameStaleEpoch
	CodeInvalidState         = contract.NameInvalidState
	CodeLeaseExpired         = contract.NameLeaseExpired
	// Work coordination (docs/api.md Part III).
	CodeRunNotFound       = contract.NameRunNotFound
	CodeRunTerminal       = contract.NameRunTerminal
	CodeWorkNotFound      = contract.NameWorkNotFound
	CodeWorkTerminal      = contract.NameWorkTerminal
	CodeCursorMissingKey  = contract.NameCursorMissingKey
	CodeCursorTooLarge    = contract.NameCursorTooLarge
	CodeCursorRegression  = contract.NameCursorRegression
	CodeCursorOutOfBounds = contract.NameCursorOutOfBounds
	CodeSplitInvalid      = contract.NameSplitInvalid
	CodeWorkTableFull     = contract.NameWorkTableFull
	CodeNoneAvailable     = contract.NameNoneAvailable
	// CodeObjectInUse answers a delete of an object that is held (docs/api.md
	// §4 "Deleting objects").
	CodeObjectInUse = contract.NameObjectInUse
	// The allocator verbs' codes (docs/api.md Part IV).
	CodeValueFree            = contract.NameValueFree
	CodeValueExcluded        = contract.NameValueExcluded
	CodeLeaseHasOtherMembers = contract.NameLeaseHasOtherMembers
	CodeExclusionTableFull   = contract.NameExclusionTableFull
	CodePermissionDenied     = contract.NamePermissionDenied
)

// Reply.code: rejection codes. They come with OutcomeRejected; see
// RejectionCategory and ServiceErrorStatus.
const (
	// Definite rejections (request faults, status 400).
	CodeInvalidRequest  = contract.NameInvalidRequest
	CodeCommandTooLarge = contract.NameCommandTooLarge
	CodeCrossShard      = contract.NameCrossShard
	CodeDuplicateMember = contract.NameDuplicateMember
	CodeBundleTooLarge  = contract.NameBundleTooLarge
	CodeTTLOutOfRange   = contract.NameTTLOutOfRange
	CodeSlotOverflow    = contract.NameSlotOverflow
	// Definite rejections of other kinds.
	CodeOperationConflict  = contract.NameOperationConflict  // 409
	CodeFenceNotApplied    = contract.NameFenceNotApplied    // 412, reads with min_lsn
	CodeOverloaded         = contract.NameOverloaded         // 503
	CodeOperationTableFull = contract.NameOperationTableFull // 503
	CodeLSNExhausted       = contract.NameLSNExhausted       // 503
	// Indefinite rejections.
	CodeEngineHalted   = contract.NameEngineHalted   // 503
	CodeStorageFailure = contract.NameStorageFailure // 503
	CodeTimeout        = contract.NameTimeout        // 504
)

// IsRejectionCode reports whether code is a rejection code (one that comes
// with OutcomeRejected) rather than ok or a domain code.
func IsRejectionCode(code string) bool {
	c, ok := contract.ParseCode(code)
	return ok && c.IsRejection()
}

// RejectionCategory returns the Reply.category of a rejection code
// (CategoryDefinite or CategoryIndefinite), or "" if code is not a rejection
// code.
func RejectionCategory(code string) string {
	c, _ := contract.ParseCode(code)
	return c.Category()
}

// ServiceErrorStatus returns the status a rejected reply carries in the
// Nats-Service-Error-Code header (400, 409, 412, 503 or 504), or 0 if code is
// not a rejection code.
func ServiceErrorStatus(code string) int {
	c, _ := contract.ParseCode(code)
	return c.HTTPStatus()
}

// Resource.state and Lease.state values. A resource is StateAvailable,
// StateReserved, StateActive or StateRevoking; a lease is StateReserved,
// StateActive, StateRevoking or one of the terminal StateReleased,
// StateExpired, StateRevoked.
const (
	StateAvailable = contract.StateAvailable
	StateReserved  = contract.StateReserved
	StateActive    = contract.StateActive
	StateRevoking  = contract.StateRevoking
	StateReleased  = contract.StateReleased
	StateExpired   = contract.StateExpired
	StateRevoked   = contract.StateRevoked
	StateConsumed  = contract.StateConsumed
)

// Range.strategy values (CreateRangeRequest.strategy; empty means
// StrategyLowestFree).
const (
	// StrategyLowestFree picks the lowest free value.
	StrategyLowestFree = contract.StrategyLowestFree
	// StrategyRandom picks a value seeded from the log position (the same
	// choice on replay).
	StrategyRandom = contract.StrategyRandom
	// StrategyLeastRecentlyFreed picks never-used values in ascending order
	// first, then freed values in the order they were freed.
	StrategyLeastRecentlyFreed = contract.StrategyLeastRecentlyFreed
)

// Event.event values; the event subject is <prefix>.v1.<tenant>.events.<event>.
const (
	EventResourceCreated = contract.EventResourceCreated
	EventPoolCreated     = contract.EventPoolCreated
	EventRangeCreated    = contract.EventRangeCreated
	EventLeaseReserved   = contract.EventLeaseReserved
	// EventLeaseActivated is also the only event of a reserve with
	// activate: true.
	EventLeaseActivated = contract.EventLeaseActivated
	EventLeaseRenewed   = contract.EventLeaseRenewed
	EventLeaseReleased  = contract.EventLeaseReleased
	EventLeaseExpired   = contract.EventLeaseExpired
	EventLeaseRevoking  = contract.EventLeaseRevoking
	EventLeaseRevoked   = contract.EventLeaseRevoked
	// The deletes' events carry the object as it was.
	EventResourceDeleted = contract.EventResourceDeleted
	EventPoolDeleted     = contract.EventPoolDeleted
	EventRangeDeleted    = contract.EventRangeDeleted
	EventRunDeleted      = contract.EventRunDeleted
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
