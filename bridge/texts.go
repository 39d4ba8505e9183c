package bridge

import (
	"fmt"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// The human texts of committed domain outcomes (a reply's message), as data: a text per
// code, and per verb the texts that need the request's own words (its value, its range,
// the object it deletes). domainMessage tries a member's text first, then the verb's,
// then the code's. Texts name only what the request itself named, never another holder.

// codeTexts is each domain code's text where no member or verb says more.
var codeTexts = map[contract.Code]string{
	contract.CodeAlreadyExists:        "an object with this id already exists in this tenant",
	contract.CodeResourceTableFull:    "the shard's resource table is full",
	contract.CodePoolTableFull:        "the shard's pool table is full",
	contract.CodeRangeTableFull:       "the shard's range table is full",
	contract.CodeResourceNotFound:     "no such resource",
	contract.CodePoolNotFound:         "no such pool",
	contract.CodeRangeNotFound:        "no such range",
	contract.CodeLeaseTableFull:       "the shard's lease table is full",
	contract.CodeLeaseMemberTableFull: "the shard's lease member table is full",
	contract.CodeExpirationIndexFull:  "the shard's expiration index is full",
	contract.CodeLeaseNotFound:        "no such lease",
	contract.CodeLeaseRetired:         "the lease has ended and left its history window",
	contract.CodeHolderMismatch:       "holder_id does not hold this lease",
	contract.CodeStaleEpoch:           "lease_epoch is not the lease's current epoch",
	contract.CodeLeaseExpired:         "the lease's deadline has passed",
	contract.CodeRunNotFound:          "no such run",
	contract.CodeRunTerminal:          "the run has ended (done, failed or cancelled)",
	contract.CodeWorkNotFound:         "no such work shard (or the lease holds none)",
	contract.CodeWorkTerminal:         "the work shard is done, split or parked",
	contract.CodeCursorMissingKey:     "cursor: required by work.checkpoint",
	contract.CodeCursorRegression:     "cursor.last_key: before the work shard's current cursor",
	contract.CodeCursorOutOfBounds:    "cursor.last_key: outside the work shard's range [start, end)",
	contract.CodeSplitInvalid:         "the split does not fit: children must cover [cursor or start, end) in order without gaps; a split_key must lie after the cursor and inside the range; derived names must be free",
	contract.CodeWorkTableFull:        "the shard's run or work table is full",
	contract.CodeNoneAvailable:        "no claimable work shard now",
	contract.CodeCursorTooLarge:       fmt.Sprintf("cursor: last_key at most %d bytes, token at most %d", contract.MaxWorkKeyLen, contract.MaxCursorTokenLen),
	contract.CodeObjectInUse:          "the run is active (cancel, fail or complete it first) or a work shard is claimed (its claim must end first)",
}

// verbTexts are the verbs' own texts: "" leaves the code's.
var verbTexts = map[contract.Verb]func(c *call) string{
	contract.VerbCompleteRun: onCode(contract.CodeInvalidState, "run.complete: every work shard must be done or split"),
	contract.VerbUnparkWork:  onCode(contract.CodeInvalidState, "the work shard is not parked"),
	contract.VerbDeleteResource: func(c *call) string {
		if c.res.Code != contract.CodeObjectInUse {
			return ""
		}
		switch c.res.Resource.State {
		case kernel.ResourceReserved:
			return "a reserved lease holds the resource: it is released or expires first"
		case kernel.ResourceRevoking:
			return "a revoked lease still holds the resource: lease.reclaim it first"
		}
		return "an active lease holds the resource: it is released, or revoked and reclaimed, first"
	},
	contract.VerbDeletePool:   onCode(contract.CodeObjectInUse, "units of the pool are reserved or active: their leases must end first"),
	contract.VerbDeleteRange:  onCode(contract.CodeObjectInUse, "values of the range are allocated: their leases must end first"),
	contract.VerbReleaseValue: valueText("the lease holding the value is revoking: an operator reclaims it"),
	contract.VerbRevokeValue:  valueText("the lease holding the value is not active: only an active lease is revoked"),
	contract.VerbReclaimValue: valueText("the lease holding the value is not revoking: range.revoke it first"),
	contract.VerbExclude:      intervalText,
	contract.VerbInclude:      intervalText,
	contract.VerbResizeRange: func(c *call) string {
		if c.res.Code != contract.CodeObjectInUse {
			return ""
		}
		if c.res.Lease.LSN == 0 { // a retry's, when nothing outside the new bounds is held any more
			return "a value outside the new bounds was held; none is now: send it again under a new operation_id"
		}
		return fmt.Sprintf("value %d, outside the new bounds, is held by lease %s", c.res.Value, contract.FormatLeaseID(c.op.shard, c.res.Lease.LSN))
	},
	contract.VerbResizePool: onCode(contract.CodeObjectInUse, "reserved, active and consumed units together exceed the new capacity"),
	contract.VerbConsume:    onCode(contract.CodeInvalidState, "only a reserved or active lease of pool units is consumed"),
}

// onCode is a verb's fixed text for one code.
func onCode(code contract.Code, text string) func(*call) string {
	return func(c *call) string {
		if c.res.Code == code {
			return text
		}
		return ""
	}
}

// valueText is a by-value verb's texts: the value and range it named, and its own word
// for a lease in the wrong state.
func valueText(invalidState string) func(*call) string {
	return func(c *call) string {
		r, cmd := c.res, c.op.cmd
		if cmd == nil {
			return ""
		}
		switch r.Code {
		case contract.CodeValueFree:
			return fmt.Sprintf("value %d of range %q is free: no lease holds it", cmd.Value, cmd.ObjectID)
		case contract.CodeValueOutOfRange:
			return fmt.Sprintf("value %d is outside range %q", cmd.Value, cmd.ObjectID)
		case contract.CodeHolderMismatch:
			return fmt.Sprintf("holder_id does not hold value %d of range %q", cmd.Value, cmd.ObjectID)
		case contract.CodeStaleEpoch:
			return "lease_epoch is not the epoch of the lease holding the value"
		case contract.CodeLeaseHasOtherMembers:
			return fmt.Sprintf("the lease holding value %d holds other members too: a hold is never released in part; whole_lease releases the lease", cmd.Value)
		case contract.CodeInvalidState:
			return invalidState
		}
		return ""
	}
}

// intervalText is range.exclude's and range.include's: the interval, the held value.
func intervalText(c *call) string {
	r, cmd := c.res, c.op.cmd
	if cmd == nil {
		return ""
	}
	switch r.Code {
	case contract.CodeValueOutOfRange:
		return fmt.Sprintf("[%d, %d] is not inside range %q", cmd.First, cmd.Last, cmd.ObjectID)
	case contract.CodeValueBusy:
		if r.Lease.LSN == 0 { // a retry's, when nothing holds a value of it any more
			return fmt.Sprintf("a value of [%d, %d] was held; none is now: send it again under a new operation_id", cmd.First, cmd.Last)
		}
		return fmt.Sprintf("value %d is held by lease %s: it is released, or revoked and reclaimed, first", r.Value,
			contract.FormatLeaseID(c.op.shard, r.Lease.LSN))
	case contract.CodeExclusionTableFull:
		return fmt.Sprintf("range %q would have more than %d excluded intervals", cmd.ObjectID, contract.MaxExcluded)
	}
	return ""
}
