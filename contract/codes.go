package contract

// Code is a result code of the contract. Domain codes are committed outcomes; rejection
// codes are never committed. The numbers are internal (snapshots store them: append
// only), the names are the wire form.
type Code uint8

// The closed set of codes, in a fixed order: snapshots store the numbers.
const (
	CodeOK Code = iota
	// Domain codes.
	CodeAlreadyExists
	CodeResourceTableFull
	CodePoolTableFull
	CodeRangeTableFull
	CodeResourceNotFound
	CodePoolNotFound
	CodeRangeNotFound
	CodeResourceBusy
	CodeInsufficientCapacity
	CodeValueBusy
	CodeValueOutOfRange
	CodeRangeExhausted
	CodeLeaseTableFull
	CodeLeaseMemberTableFull
	CodeExpirationIndexFull
	CodeLeaseNotFound
	CodeLeaseRetired
	CodeHolderMismatch
	CodeStaleEpoch
	CodeInvalidState
	CodeLeaseExpired
	// Rejection codes, definite.
	CodeInvalidRequest
	CodeCommandTooLarge
	CodeCrossShard
	CodeDuplicateMember
	CodeBundleTooLarge
	CodeTTLOutOfRange
	CodeSlotOverflow
	CodeOverloaded
	CodeLSNExhausted
	CodeOperationConflict
	CodeOperationTableFull
	CodeFenceNotApplied
	// Rejection codes, indefinite.
	CodeEngineHalted
	CodeStorageFailure
	CodeTimeout
	// CodeNoop is the result of an internal expire entry that found nothing to do (the
	// lease was activated, released or renewed since the expiry was scheduled). It never
	// reaches the wire.
	CodeNoop
	// Domain codes of work coordination (docs/api.md Part III), appended.
	CodeRunNotFound
	CodeRunTerminal
	CodeWorkNotFound
	CodeWorkTerminal
	CodeCursorMissingKey
	CodeCursorTooLarge
	CodeCursorRegression
	CodeCursorOutOfBounds
	CodeSplitInvalid
	CodeWorkTableFull
	CodeNoneAvailable
	// CodeObjectInUse: a delete found the object held (docs/api.md §4 "Deleting objects").
	CodeObjectInUse
	// Domain codes of the allocator verbs (docs/api.md Part IV), appended.
	CodeValueFree            // range.release/revoke/reclaim: no lease holds the value
	CodeValueExcluded        // a specific value that is excluded from the range
	CodeLeaseHasOtherMembers // range.release of a value whose lease holds more, without whole_lease
	CodeExclusionTableFull   // range.exclude/include: the range would have too many excluded intervals
	// CodePermissionDenied: under --holders bound, a holder_id the caller may not act as
	// (docs/api.md §A.12). A rejection, definite, appended after the domain codes.
	CodePermissionDenied
	codeCount
)

// The wire names of the codes, to compare a reply's code with.
const (
	NameOK                   = "ok"
	NameAlreadyExists        = "already_exists"
	NameResourceTableFull    = "resource_table_full"
	NamePoolTableFull        = "pool_table_full"
	NameRangeTableFull       = "range_table_full"
	NameResourceNotFound     = "resource_not_found"
	NamePoolNotFound         = "pool_not_found"
	NameRangeNotFound        = "range_not_found"
	NameResourceBusy         = "resource_busy"
	NameInsufficientCapacity = "insufficient_capacity"
	NameValueBusy            = "value_busy"
	NameValueOutOfRange      = "value_out_of_range"
	NameRangeExhausted       = "range_exhausted"
	NameLeaseTableFull       = "lease_table_full"
	NameLeaseMemberTableFull = "lease_member_table_full"
	NameExpirationIndexFull  = "expiration_index_full"
	NameLeaseNotFound        = "lease_not_found"
	NameLeaseRetired         = "lease_retired"
	NameHolderMismatch       = "holder_mismatch"
	NameStaleEpoch           = "stale_epoch"
	NameInvalidState         = "invalid_state"
	NameLeaseExpired         = "lease_expired"
	NameInvalidRequest       = "invalid_request"
	NameCommandTooLarge      = "command_too_large"
	NameCrossShard           = "cross_shard"
	NameDuplicateMember      = "duplicate_member"
	NameBundleTooLarge       = "bundle_too_large"
	NameTTLOutOfRange        = "ttl_out_of_range"
	NameSlotOverflow         = "slot_overflow"
	NameOverloaded           = "overloaded"
	NameLSNExhausted         = "lsn_exhausted"
	NameOperationConflict    = "operation_conflict"
	NameOperationTableFull   = "operation_table_full"
	NameFenceNotApplied      = "fence_not_applied"
	NameEngineHalted         = "engine_halted"
	NameStorageFailure       = "storage_failure"
	NameTimeout              = "timeout"
	NameNoop                 = "noop"
	NameRunNotFound          = "run_not_found"
	NameRunTerminal          = "run_terminal"
	NameWorkNotFound         = "work_not_found"
	NameWorkTerminal         = "work_terminal"
	NameCursorMissingKey     = "cursor_missing_key"
	NameCursorTooLarge       = "cursor_too_large"
	NameCursorRegression     = "cursor_regression"
	NameCursorOutOfBounds    = "cursor_out_of_bounds"
	NameSplitInvalid         = "split_invalid"
	NameWorkTableFull        = "work_table_full"
	NameNoneAvailable        = "none_available"
	NameObjectInUse          = "object_in_use"
	NameValueFree            = "value_free"
	NameValueExcluded        = "value_excluded"
	NameLeaseHasOtherMembers = "lease_has_other_members"
	NameExclusionTableFull   = "exclusion_table_full"
	NamePermissionDenied     = "permission_denied"
)

var codeNames = [codeCount]string{
	CodeOK:                   NameOK,
	CodeAlreadyExists:        NameAlreadyExists,
	CodeResourceTableFull:    NameResourceTableFull,
	CodePoolTableFull:        NamePoolTableFull,
	CodeRangeTableFull:       NameRangeTableFull,
	CodeResourceNotFound:     NameResourceNotFound,
	CodePoolNotFound:         NamePoolNotFound,
	CodeRangeNotFound:        NameRangeNotFound,
	CodeResourceBusy:         NameResourceBusy,
	CodeInsufficientCapacity: NameInsufficientCapacity,
	CodeValueBusy:            NameValueBusy,
	CodeValueOutOfRange:      NameValueOutOfRange,
	CodeRangeExhausted:       NameRangeExhausted,
	CodeLeaseTableFull:       NameLeaseTableFull,
	CodeLeaseMemberTableFull: NameLeaseMemberTableFull,
	CodeExpirationIndexFull:  NameExpirationIndexFull,
	CodeLeaseNotFound:        NameLeaseNotFound,
	CodeLeaseRetired:         NameLeaseRetired,
	CodeHolderMismatch:       NameHolderMismatch,
	CodeStaleEpoch:           NameStaleEpoch,
	CodeInvalidState:         NameInvalidState,
	CodeLeaseExpired:         NameLeaseExpired,
	CodeInvalidRequest:       NameInvalidRequest,
	CodeCommandTooLarge:      NameCommandTooLarge,
	CodeCrossShard:           NameCrossShard,
	CodeDuplicateMember:      NameDuplicateMember,
	CodeBundleTooLarge:       NameBundleTooLarge,
	CodeTTLOutOfRange:        NameTTLOutOfRange,
	CodeSlotOverflow:         NameSlotOverflow,
	CodeOverloaded:           NameOverloaded,
	CodeLSNExhausted:         NameLSNExhausted,
	CodeOperationConflict:    NameOperationConflict,
	CodeOperationTableFull:   NameOperationTableFull,
	CodeFenceNotApplied:      NameFenceNotApplied,
	CodeEngineHalted:         NameEngineHalted,
	CodeStorageFailure:       NameStorageFailure,
	CodeTimeout:              NameTimeout,
	CodeNoop:                 NameNoop,
	CodeRunNotFound:          NameRunNotFound,
	CodeRunTerminal:          NameRunTerminal,
	CodeWorkNotFound:         NameWorkNotFound,
	CodeWorkTerminal:         NameWorkTerminal,
	CodeCursorMissingKey:     NameCursorMissingKey,
	CodeCursorTooLarge:       NameCursorTooLarge,
	CodeCursorRegression:     NameCursorRegression,
	CodeCursorOutOfBounds:    NameCursorOutOfBounds,
	CodeSplitInvalid:         NameSplitInvalid,
	CodeWorkTableFull:        NameWorkTableFull,
	CodeNoneAvailable:        NameNoneAvailable,
	CodeObjectInUse:          NameObjectInUse,
	CodeValueFree:            NameValueFree,
	CodeValueExcluded:        NameValueExcluded,
	CodeLeaseHasOtherMembers: NameLeaseHasOtherMembers,
	CodeExclusionTableFull:   NameExclusionTableFull,
	CodePermissionDenied:     NamePermissionDenied,
}

// String returns the wire name of the code.
func (c Code) String() string {
	if c < codeCount {
		return codeNames[c]
	}
	return "unknown"
}

// ParseCode maps a wire name back to its code.
func ParseCode(s string) (Code, bool) {
	for c := Code(0); c < codeCount; c++ {
		if codeNames[c] == s {
			return c, true
		}
	}
	return 0, false
}

// Valid reports whether c is one of the codes.
func (c Code) Valid() bool { return c < codeCount }

// IsRejection reports whether the code is a rejection (never committed) rather than ok or
// a committed domain outcome.
func (c Code) IsRejection() bool {
	return (c >= CodeInvalidRequest && c <= CodeTimeout) || c == CodePermissionDenied
}

// IsIndefinite reports whether a rejection leaves the client unable to know whether the
// command committed; the client resolves it by retrying the same operation_id.
func (c Code) IsIndefinite() bool {
	return c == CodeEngineHalted || c == CodeStorageFailure || c == CodeTimeout
}

// Category is a rejection's category on the wire: "definite" or "indefinite"; "" for ok
// and domain codes.
func (c Code) Category() string {
	switch {
	case !c.IsRejection():
		return ""
	case c.IsIndefinite():
		return CategoryIndefinite
	}
	return CategoryDefinite
}

// Reply.category values.
const (
	CategoryDefinite   = "definite"
	CategoryIndefinite = "indefinite"
)

// HTTPStatus is the Nats-Service-Error-Code that accompanies a rejection (0 for others).
func (c Code) HTTPStatus() int {
	switch c {
	case CodeInvalidRequest, CodeCommandTooLarge, CodeCrossShard, CodeDuplicateMember,
		CodeBundleTooLarge, CodeTTLOutOfRange, CodeSlotOverflow:
		return 400
	case CodePermissionDenied:
		return 403
	case CodeOperationConflict:
		return 409
	case CodeFenceNotApplied:
		return 412
	case CodeOverloaded, CodeOperationTableFull, CodeEngineHalted, CodeStorageFailure, CodeLSNExhausted:
		return 503
	case CodeTimeout:
		return 504
	}
	return 0
}
