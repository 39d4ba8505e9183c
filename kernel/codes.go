package kernel

import "github.com/holdfast/holdfast/contract"

// Code is a result code of the contract (contract.Code): the kernel's results speak it.
type Code = contract.Code

// rejectionCodesOfWrites are the rejection codes any write verb may return (docs/api.md §4).
var rejectionCodesOfWrites = []Code{
	contract.CodeInvalidRequest, contract.CodeCommandTooLarge, contract.CodeCrossShard, contract.CodeDuplicateMember,
	contract.CodeBundleTooLarge, contract.CodeTTLOutOfRange, contract.CodeSlotOverflow, contract.CodeOverloaded, contract.CodeLSNExhausted,
	contract.CodeOperationConflict, contract.CodeOperationTableFull, contract.CodeEngineHalted, contract.CodeStorageFailure, contract.CodeTimeout,
}

// rejectionCodesOfReads are the rejection codes a read may return.
var rejectionCodesOfReads = []Code{
	contract.CodeInvalidRequest, contract.CodeCommandTooLarge, contract.CodeOverloaded, contract.CodeFenceNotApplied,
	contract.CodeEngineHalted, contract.CodeTimeout,
}

var leaseHolderCodes = []Code{contract.CodeLeaseNotFound, contract.CodeLeaseRetired, contract.CodeHolderMismatch, contract.CodeStaleEpoch, contract.CodeInvalidState}

// workFenceCodes are what a work verb's fence and target may answer (docs/api.md Part III).
var workFenceCodes = []Code{contract.CodeLeaseNotFound, contract.CodeLeaseRetired, contract.CodeHolderMismatch, contract.CodeStaleEpoch,
	contract.CodeLeaseExpired, contract.CodeWorkNotFound, contract.CodeRunTerminal, contract.CodeWorkTerminal}

func with(base []Code, more ...Code) []Code { return append(append([]Code{}, base...), more...) }

// domainCodes is the one table of the domain codes each verb may return besides ok and
// the rejection codes (docs/api.md §4). Tests check that no verb ever returns anything else.
var domainCodes = map[Verb][]Code{
	contract.VerbCreateResource: {contract.CodeAlreadyExists, contract.CodeResourceTableFull},
	contract.VerbCreatePool:     {contract.CodeAlreadyExists, contract.CodePoolTableFull},
	contract.VerbCreateRange:    {contract.CodeAlreadyExists, contract.CodeRangeTableFull},
	contract.VerbReserve: {contract.CodeResourceNotFound, contract.CodePoolNotFound, contract.CodeRangeNotFound, contract.CodeResourceBusy,
		contract.CodeInsufficientCapacity, contract.CodeValueBusy, contract.CodeValueOutOfRange, contract.CodeRangeExhausted,
		contract.CodeLeaseTableFull, contract.CodeLeaseMemberTableFull, contract.CodeExpirationIndexFull,
		contract.CodeRunNotFound, contract.CodeRunTerminal, contract.CodeWorkNotFound, contract.CodeWorkTerminal, contract.CodeNoneAvailable},
	contract.VerbActivate:      append(append([]Code{}, leaseHolderCodes...), contract.CodeLeaseExpired),
	contract.VerbRenew:         append(append([]Code{}, leaseHolderCodes...), contract.CodeLeaseExpired),
	contract.VerbRelease:       leaseHolderCodes,
	contract.VerbRevoke:        {contract.CodeLeaseNotFound, contract.CodeLeaseRetired, contract.CodeInvalidState},
	contract.VerbReclaim:       {contract.CodeLeaseNotFound, contract.CodeLeaseRetired, contract.CodeInvalidState},
	contract.VerbExpire:        {contract.CodeNoop},
	contract.VerbGetResource:   {contract.CodeResourceNotFound},
	contract.VerbGetPool:       {contract.CodePoolNotFound},
	contract.VerbGetRange:      {contract.CodeRangeNotFound},
	contract.VerbGetLease:      {contract.CodeLeaseNotFound, contract.CodeLeaseRetired},
	contract.VerbListLeases:    {},
	contract.VerbClusterStatus: {},
	contract.VerbCreateRun:     {contract.CodeAlreadyExists, contract.CodeWorkTableFull},
	contract.VerbRegisterRun:   {contract.CodeRunNotFound, contract.CodeRunTerminal, contract.CodeAlreadyExists, contract.CodeWorkTableFull},
	contract.VerbCompleteRun:   {contract.CodeRunNotFound, contract.CodeRunTerminal, contract.CodeInvalidState},
	contract.VerbFailRun:       {contract.CodeRunNotFound, contract.CodeRunTerminal},
	contract.VerbCancelRun:     {contract.CodeRunNotFound, contract.CodeRunTerminal},
	contract.VerbCheckpoint: with(workFenceCodes, contract.CodeCursorMissingKey, contract.CodeCursorTooLarge,
		contract.CodeCursorRegression, contract.CodeCursorOutOfBounds),
	contract.VerbCompleteWork:   with(workFenceCodes, contract.CodeCursorTooLarge, contract.CodeCursorRegression, contract.CodeCursorOutOfBounds),
	contract.VerbParkWork:       workFenceCodes,
	contract.VerbUnparkWork:     {contract.CodeRunNotFound, contract.CodeWorkNotFound, contract.CodeRunTerminal, contract.CodeInvalidState},
	contract.VerbSplitReplace:   with(workFenceCodes, contract.CodeSplitInvalid, contract.CodeWorkTableFull),
	contract.VerbSplitResidual:  with(workFenceCodes, contract.CodeSplitInvalid, contract.CodeWorkTableFull),
	contract.VerbGetRun:         {contract.CodeRunNotFound},
	contract.VerbGetWork:        {contract.CodeRunNotFound, contract.CodeWorkNotFound},
	contract.VerbDeleteResource: {contract.CodeResourceNotFound, contract.CodeObjectInUse},
	contract.VerbDeletePool:     {contract.CodePoolNotFound, contract.CodeObjectInUse},
	contract.VerbDeleteRange:    {contract.CodeRangeNotFound, contract.CodeObjectInUse},
	contract.VerbDeleteRun:      {contract.CodeRunNotFound, contract.CodeObjectInUse},
}

// Allowed reports whether verb may return code under the contract.
func Allowed(v Verb, c Code) bool {
	if c == contract.CodeOK {
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
