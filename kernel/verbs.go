package kernel

import (
	"math"

	"github.com/holdfast/holdfast/contract"
)

// kverb is the kernel's row of a verb (contract.VerbInfo is the contract's): the verb's
// own request-shape rules, the admission limits it is held to, how a journaled command of
// it is applied, and what a retry of it remembers and shows. A verb is its contract row,
// this row and the handlers it names; TestEveryVerbIsComplete names a client write whose
// row lacks validate, apply or retried.
type kverb struct {
	// validate checks the verb's own request shape, after what every write shares
	// (Validate).
	validate func(c *Command) *Rejection
	// limits checks the admission limits in force (CheckLimits); nil: none apply.
	limits func(lim *Limits, c *Command) *Rejection
	// apply applies a journaled command (Apply has done what every write shares).
	apply applier
	// ref is what a retry names that the command does not (outcome.ref); nil: nothing.
	ref func(out *Output) uint64
	// retried fills what a retry shows besides code and lsn (viewRetried).
	retried retriedView
	// changes bounds the leases an entry of the verb lists in Output.Changes (EventBound);
	// nil: none.
	changes func(c *Command) int
}

// applier applies one journaled command of its verb: Apply has done what every write
// shares (validation, the retry cache, the room to remember it) before, and remembers
// its outcome after.
type applier func(k *Kernel, e Entry, out *Output)

// retriedView fills a retry's reply from the original outcome.
type retriedView func(k *Kernel, c *Command, op *outcome, slot uint64, out *Output)

// kverbs is the kernel's side of the verb table, the client writes and the internal
// verbs, indexed by verb.
var kverbs = [contract.VerbCount]kverb{
	contract.VerbCreateResource: {validate: objectID("resource_id"), apply: object((*Kernel).createResource), retried: retriedCreate},
	contract.VerbCreatePool:     {validate: validateCreatePool, apply: object((*Kernel).createPool), retried: retriedCreate},
	contract.VerbCreateRange:    {validate: validateCreateRange, apply: object((*Kernel).createRange), retried: retriedCreate},
	contract.VerbDeleteResource: {validate: objectID("resource_id"), apply: object((*Kernel).deleteObject), retried: retriedNothing},
	contract.VerbDeletePool:     {validate: objectID("pool_id"), apply: object((*Kernel).deleteObject), retried: retriedNothing},
	contract.VerbDeleteRange:    {validate: objectID("range_id"), apply: object((*Kernel).deleteObject), retried: retriedNothing},
	contract.VerbDeleteRun:      {validate: runRule(runID), apply: object((*Kernel).deleteObject), retried: retriedNothing},

	contract.VerbReserve: {validate: validateReserveLabels, limits: limitReserve, apply: (*Kernel).reserve,
		ref: refusalDeadline, retried: retriedReserve},
	contract.VerbActivate: {validate: validateHolderVerb, limits: validateKeepAlive, apply: (*Kernel).leaseVerb, retried: retriedNamed},
	contract.VerbRenew:    {validate: validateRenew, limits: validateTTL, apply: (*Kernel).leaseVerb, retried: retriedNamed},
	contract.VerbRelease:  {validate: validateHolderVerb, apply: (*Kernel).leaseVerb, retried: retriedNamed},
	contract.VerbRevoke:   {validate: leaseRequired, apply: (*Kernel).leaseVerb, retried: retriedNamed},
	contract.VerbReclaim:  {validate: leaseRequired, apply: (*Kernel).leaseVerb, retried: retriedNamed},
	contract.VerbConsume:  {validate: validateHolderVerb, apply: (*Kernel).consume, retried: retriedNamed},

	contract.VerbCreateRun:    {validate: runRule(validateManifest), apply: object((*Kernel).createRun), retried: retriedRun},
	contract.VerbRegisterRun:  {validate: runRule(validateManifest), apply: object((*Kernel).registerRun), retried: retriedRun},
	contract.VerbCompleteRun:  {validate: runRule(runID), apply: object((*Kernel).endRun), retried: retriedRun},
	contract.VerbFailRun:      {validate: runRule(runID), apply: object((*Kernel).endRun), retried: retriedRun},
	contract.VerbCancelRun:    {validate: runRule(runID), apply: object((*Kernel).endRun), retried: retriedRun},
	contract.VerbUnparkWork:   {validate: runRule(validateUnpark), apply: object((*Kernel).unparkWork), retried: retriedUnpark},
	contract.VerbCheckpoint:   {validate: fenced(nil), apply: (*Kernel).workVerb, retried: retriedWork},
	contract.VerbCompleteWork: {validate: fenced(nil), apply: (*Kernel).workVerb, retried: retriedWork},
	contract.VerbParkWork:     {validate: fenced(nil), apply: (*Kernel).workVerb, retried: retriedWork},
	contract.VerbSplitReplace: {validate: fenced(validateChildren), apply: (*Kernel).workVerb,
		retried: retriedSplit((*Kernel).replacedBy)},
	contract.VerbSplitResidual: {validate: fenced(validateSplitKey), apply: (*Kernel).workVerb,
		retried: retriedSplit((*Kernel).residualOf)},

	contract.VerbReleaseValue: {validate: validateReleaseValue, apply: (*Kernel).valueVerb, ref: heldValue, retried: retriedValue},
	contract.VerbRevokeValue:  {validate: objectID("range_id"), apply: (*Kernel).valueVerb, ref: heldValue, retried: retriedValue},
	contract.VerbReclaimValue: {validate: objectID("range_id"), apply: (*Kernel).valueVerb, ref: heldValue, retried: retriedValue},
	contract.VerbExclude:      {validate: validateInterval, apply: object((*Kernel).excludeValues), retried: retriedHeld},
	contract.VerbInclude:      {validate: validateInterval, apply: object((*Kernel).excludeValues), retried: retriedReshape},
	contract.VerbResizeRange:  {validate: validateResizeRange, apply: object((*Kernel).resizeRange), retried: retriedHeld},
	contract.VerbResizePool:   {validate: validateCreatePool, apply: object((*Kernel).resizePool), retried: retriedReshape},
	contract.VerbImport: {validate: validateImport, limits: limitImport, apply: (*Kernel).importLeases,
		ref:     importRef,
		retried: (*Kernel).viewRetriedImport,
		changes: func(c *Command) int { return len(c.Imports) }},
	// A lease revoked and reclaimed in one step is listed twice (bulkVerb).
	contract.VerbReleaseAll: {validate: validateBulk, apply: (*Kernel).bulkVerb, ref: bulkRef, retried: retriedBulk,
		changes: func(c *Command) int { return int(c.Limit) }},
	contract.VerbRevokeAll: {validate: validateBulk, apply: (*Kernel).bulkVerb, ref: bulkRef, retried: retriedBulk,
		changes: func(c *Command) int { return 2 * int(c.Limit) }},

	// The internal verbs: journaled by the shard itself, never a client's write.
	contract.VerbExpire: {apply: (*Kernel).expire},
	contract.VerbConfigure: {apply: func(k *Kernel, e Entry, out *Output) {
		k.configure(e.Cmd, !k.fresh, out)
	}},
	contract.VerbSkip:    {apply: (*Kernel).skip},
	contract.VerbPrepare: {apply: (*Kernel).prepare},
	contract.VerbDecide:  {apply: (*Kernel).decide, changes: func(c *Command) int { return int(c.Limit) }}, // a group's leases
	contract.VerbMirror:  {apply: (*Kernel).mirror},
}

// EventBound is the most events an entry of c yields when applied: its one event, and
// one per lease it lists in Changes (as actors.appendEvents derives them). A shard counts
// what its sequenced entries may yield against the events not yet published, so the
// bound must hold for every command, journaled or replayed; the kernel's tests check it
// after every step.
func EventBound(c *Command) int {
	if int(c.Verb) < len(kverbs) {
		if f := kverbs[c.Verb].changes; f != nil {
			return 1 + f(c)
		}
	}
	return 1
}

// The rows' building blocks.

// object adapts a handler that needs only the command.
func object(f func(*Kernel, *Command, *Output)) applier {
	return func(k *Kernel, e Entry, out *Output) { f(k, e.Cmd, out) }
}

// objectID checks the one object id a verb names, as field.
func objectID(field string) func(*Command) *Rejection {
	return func(c *Command) *Rejection { return validObject(field, c.ObjectID) }
}

// runRule is a work coordination verb's rule f, after the bound every one of them shares
// (a reason's length).
func runRule(f func(*Command) *Rejection) func(*Command) *Rejection {
	return func(c *Command) *Rejection {
		if len(c.Reason) > contract.MaxReasonLen {
			return reject(contract.CodeInvalidRequest, "reason: at most %d bytes", contract.MaxReasonLen)
		}
		return f(c)
	}
}

// fenced is a fenced work verb's rule f (nil: none of its own), after the claim's fence.
func fenced(f func(*Command) *Rejection) func(*Command) *Rejection {
	return runRule(func(c *Command) *Rejection {
		if r := validateFencedWork(c); r != nil || f == nil {
			return r
		}
		return f(c)
	})
}

// leaseOf shows, on a retry, the lease that lsn names.
func leaseOf(lsn func(c *Command, op *outcome) uint64) retriedView {
	return func(k *Kernel, c *Command, op *outcome, slot uint64, out *Output) {
		k.retriedLease(c.Tenant, lsn(c, op), op, slot, out)
	}
}

var (
	retriedCreate  = retriedObject(contract.CodeAlreadyExists)
	retriedReshape = retriedObject(contract.CodeObjectInUse)
	// retriedNamed: the lease the command names.
	retriedNamed = leaseOf(func(c *Command, _ *outcome) uint64 { return c.LeaseLSN })
)

// retriedValue shows the lease that held the value (outcome.ref) after ok — and after
// lease_has_other_members, whose first answer showed it too, so that the holder can
// release it whole (docs/api.md V.3).
func retriedValue(k *Kernel, c *Command, op *outcome, slot uint64, out *Output) {
	if op.code == contract.CodeLeaseHasOtherMembers {
		k.showRetriedLease(c.Tenant, op.ref, op, slot, out)
		return
	}
	k.retriedLease(c.Tenant, op.ref, op, slot, out)
}

// retriedHeld shows what retriedReshape shows (the range as it is now, after ok and
// object_in_use) and, after value_busy (range.exclude) or object_in_use (range.resize),
// what holds a value in the way now: the lowest one and its lease, as the first answer
// named them then (none when nothing does any more: the verb may be sent again under a
// new operation_id).
func retriedHeld(k *Kernel, c *Command, op *outcome, slot uint64, out *Output) {
	retriedReshape(k, c, op, slot, out)
	idx, ok := k.findRange(c.Tenant, c.ObjectID)
	switch {
	case !ok:
	case op.code == contract.CodeValueBusy:
		k.heldIn(idx, Interval{c.First, c.Last}, out)
	case op.code == contract.CodeObjectInUse:
		first, last := resizeBounds(&k.ranges[idx], c)
		k.shrinkBlocked(idx, first, last, out)
	}
}

// refusalDeadline is what a refused one-shard reserve's retry must show again and the
// command does not name: its answer's earliest_deadline_slot (resource_busy,
// none_available; 0 for the other codes). A holder waits by it, and 0 says no claim in
// the way ends by itself, so a retry that dropped it would send a worker home early.
func refusalDeadline(out *Output) uint64 {
	if out.Code == contract.CodeOK {
		return 0 // ref of an ok reserve: a bundle committed in parallel (rememberDecision)
	}
	return out.EarliestDeadlineSlot
}

// retriedReserve shows a refusal's earliest_deadline_slot again (refusalDeadline; a
// bundle across shards refused by another shard than its home has none), or the lease
// the reserve created: at the outcome's position, or — a bundle committed in parallel
// (outcome.ref) — at the position before its begin, which is its answer's lsn too.
func retriedReserve(k *Kernel, c *Command, op *outcome, slot uint64, out *Output) {
	if op.code != contract.CodeOK {
		out.EarliestDeadlineSlot = op.ref
		return
	}
	lease := op.lsn
	if op.ref != 0 {
		lease, out.LSN = op.ref, op.ref
	}
	if w := k.retriedLease(c.Tenant, lease, op, slot, out); w >= 0 {
		out.Capacity = k.capacity(k.works[w].run) // a claim's, as it is now (as showClaim gives it)
	}
}

// heldValue is what a by-value verb remembers: the lease that held the value.
func heldValue(out *Output) uint64 {
	if out.Code == contract.CodeOK || out.Code == contract.CodeLeaseHasOtherMembers {
		return out.Lease.LSN
	}
	return 0
}

// importRef is what an import remembers: its failing lease, 1-based (0: none).
func importRef(out *Output) uint64 { return uint64(out.ItemIndex + 1) }

// rowOf is the kernel's row of verb v (the zero row for a verb it does not know).
func rowOf(v Verb) *kverb {
	if v < contract.VerbCount {
		return &kverbs[v]
	}
	return &kverb{}
}

// applierOf is the verb's applier, or one that refuses the command.
func applierOf(v Verb) applier {
	if a := rowOf(v).apply; a != nil {
		return a
	}
	return func(_ *Kernel, _ Entry, out *Output) { out.Code = contract.CodeInvalidRequest }
}

// Complete reports whether the kernel's row of client write v has all it needs: its
// shape rules, its applier and what a retry of it shows.
func Complete(v Verb) bool {
	r := rowOf(v)
	return r.validate != nil && r.apply != nil && r.retried != nil
}

// The request-shape rules of single verbs (Validate runs the common ones first).

func validateCreatePool(c *Command) *Rejection {
	if r := validObject("pool_id", c.ObjectID); r != nil {
		return r
	}
	if c.Capacity == 0 {
		return reject(contract.CodeInvalidRequest, "capacity: must be greater than 0")
	}
	return nil
}

func validateCreateRange(c *Command) *Rejection {
	if r := validObject("range_id", c.ObjectID); r != nil {
		return r
	}
	if c.First > c.Last {
		return reject(contract.CodeInvalidRequest, "first: must not be greater than last")
	}
	if c.Strategy >= strategyCount {
		return reject(contract.CodeInvalidRequest, "strategy: must be lowest_free, random or least_recently_freed")
	}
	return validateRangeShape(c)
}

func validateReserveLabels(c *Command) *Rejection {
	if r := validateReserve(c); r != nil {
		return r
	}
	return validateLabels("labels", c.Labels)
}

func validateReleaseValue(c *Command) *Rejection {
	if r := validObject("range_id", c.ObjectID); r != nil {
		return r
	}
	return validObject("holder_id", c.HolderID)
}

func validateInterval(c *Command) *Rejection {
	if r := validObject("range_id", c.ObjectID); r != nil {
		return r
	}
	if c.First > c.Last {
		return reject(contract.CodeInvalidRequest, "first: must not be greater than last")
	}
	return nil
}

// validateResizeRange: a kept bound is the range's own, known only to the shard
// (resizeRange checks the bounds it ends up with); here it stands for the widest it
// could be.
func validateResizeRange(c *Command) *Rejection {
	if r := validObject("range_id", c.ObjectID); r != nil {
		return r
	}
	given := *c
	if c.KeepFirst {
		given.First = 0
	}
	if c.KeepLast {
		given.Last = math.MaxUint64
	}
	if given.First > given.Last {
		return reject(contract.CodeInvalidRequest, "first: must not be greater than last")
	}
	return validateRangeShape(&given)
}

func validateRenew(c *Command) *Rejection {
	if r := validateHolderVerb(c); r != nil {
		return r
	}
	return validateTTL(nil, c)
}

func leaseRequired(c *Command) *Rejection {
	if c.LeaseLSN == 0 {
		return reject(contract.CodeInvalidRequest, "lease_id: required")
	}
	return nil
}

// bulkRef is what a retried bulk verb answers without executing: its count and more.
func bulkRef(out *Output) uint64 { return uint64(out.Count)<<1 | uint64(boolToUint(out.More)) }
