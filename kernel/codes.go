package kernel

// Code is a result code of the contract (API.md §4). Domain codes are committed outcomes;
// rejection codes are never committed. The numeric values are internal (snapshots store
// them), the names are the wire form.
type Code uint8

// The closed set of codes. Append only: snapshots store the numbers.
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
	codeCount
)

var codeNames = [codeCount]string{
	CodeOK:                   "ok",
	CodeAlreadyExists:        "already_exists",
	CodeResourceTableFull:    "resource_table_full",
	CodePoolTableFull:        "pool_table_full",
	CodeRangeTableFull:       "range_table_full",
	CodeResourceNotFound:     "resource_not_found",
	CodePoolNotFound:         "pool_not_found",
	CodeRangeNotFound:        "range_not_found",
	CodeResourceBusy:         "resource_busy",
	CodeInsufficientCapacity: "insufficient_capacity",
	CodeValueBusy:            "value_busy",
	CodeValueOutOfRange:      "value_out_of_range",
	CodeRangeExhausted:       "range_exhausted",
	CodeLeaseTableFull:       "lease_table_full",
	CodeLeaseMemberTableFull: "lease_member_table_full",
	CodeExpirationIndexFull:  "expiration_index_full",
	CodeLeaseNotFound:        "lease_not_found",
	CodeLeaseRetired:         "lease_retired",
	CodeHolderMismatch:       "holder_mismatch",
	CodeStaleEpoch:           "stale_epoch",
	CodeInvalidState:         "invalid_state",
	CodeLeaseExpired:         "lease_expired",
	CodeInvalidRequest:       "invalid_request",
	CodeCommandTooLarge:      "command_too_large",
	CodeCrossShard:           "cross_shard",
	CodeDuplicateMember:      "duplicate_member",
	CodeBundleTooLarge:       "bundle_too_large",
	CodeTTLOutOfRange:        "ttl_out_of_range",
	CodeSlotOverflow:         "slot_overflow",
	CodeOverloaded:           "overloaded",
	CodeLSNExhausted:         "lsn_exhausted",
	CodeOperationConflict:    "operation_conflict",
	CodeOperationTableFull:   "operation_table_full",
	CodeFenceNotApplied:      "fence_not_applied",
	CodeEngineHalted:         "engine_halted",
	CodeStorageFailure:       "storage_failure",
	CodeTimeout:              "timeout",
	CodeNoop:                 "noop",
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

// IsRejection reports whether the code is a rejection (never committed) rather than ok or
// a committed domain outcome.
func (c Code) IsRejection() bool { return c >= CodeInvalidRequest && c <= CodeTimeout }

// IsIndefinite reports whether a rejection leaves the client unable to know whether the
// command committed; the client resolves it by retrying the same operation_id.
func (c Code) IsIndefinite() bool {
	return c == CodeEngineHalted || c == CodeStorageFailure || c == CodeTimeout
}

// HTTPStatus is the Nats-Service-Error-Code that accompanies a rejection (API.md §1).
func (c Code) HTTPStatus() int {
	switch c {
	case CodeInvalidRequest, CodeCommandTooLarge, CodeCrossShard, CodeDuplicateMember,
		CodeBundleTooLarge, CodeTTLOutOfRange, CodeSlotOverflow:
		return 400
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

// rejectionCodesOfWrites are the rejection codes any write verb may return (API.md §4).
var rejectionCodesOfWrites = []Code{
	CodeInvalidRequest, CodeCommandTooLarge, CodeCrossShard, CodeDuplicateMember,
	CodeBundleTooLarge, CodeTTLOutOfRange, CodeSlotOverflow, CodeOverloaded, CodeLSNExhausted,
	CodeOperationConflict, CodeOperationTableFull, CodeEngineHalted, CodeStorageFailure, CodeTimeout,
}

// rejectionCodesOfReads are the rejection codes a read may return.
var rejectionCodesOfReads = []Code{
	CodeInvalidRequest, CodeCommandTooLarge, CodeOverloaded, CodeFenceNotApplied,
	CodeEngineHalted, CodeTimeout,
}

var leaseHolderCodes = []Code{CodeLeaseNotFound, CodeLeaseRetired, CodeHolderMismatch, CodeStaleEpoch, CodeInvalidState}

// domainCodes is the one table of the domain codes each verb may return besides ok and
// the rejection codes (API.md §4). Tests check that no verb ever returns anything else.
var domainCodes = map[Verb][]Code{
	VerbCreateResource: {CodeAlreadyExists, CodeResourceTableFull},
	VerbCreatePool:     {CodeAlreadyExists, CodePoolTableFull},
	VerbCreateRange:    {CodeAlreadyExists, CodeRangeTableFull},
	VerbReserve: {CodeResourceNotFound, CodePoolNotFound, CodeRangeNotFound, CodeResourceBusy,
		CodeInsufficientCapacity, CodeValueBusy, CodeValueOutOfRange, CodeRangeExhausted,
		CodeLeaseTableFull, CodeLeaseMemberTableFull, CodeExpirationIndexFull},
	VerbActivate:    append(append([]Code{}, leaseHolderCodes...), CodeLeaseExpired),
	VerbRenew:       append(append([]Code{}, leaseHolderCodes...), CodeLeaseExpired),
	VerbRelease:     leaseHolderCodes,
	VerbRevoke:      {CodeLeaseNotFound, CodeLeaseRetired, CodeInvalidState},
	VerbReclaim:     {CodeLeaseNotFound, CodeLeaseRetired, CodeInvalidState},
	VerbExpire:      {CodeNoop},
	VerbGetResource: {CodeResourceNotFound},
	VerbGetPool:     {CodePoolNotFound},
	VerbGetRange:    {CodeRangeNotFound},
	VerbGetLease:    {CodeLeaseNotFound, CodeLeaseRetired},
	VerbListLeases:  {},
}

// Allowed reports whether verb may return code under the contract.
func Allowed(v Verb, c Code) bool {
	if c == CodeOK {
		return true
	}
	for _, d := range domainCodes[v] {
		if d == c {
			return true
		}
	}
	rej := rejectionCodesOfWrites
	if v.IsRead() {
		rej = rejectionCodesOfReads
	}
	for _, r := range rej {
		if r == c {
			return true
		}
	}
	return false
}
