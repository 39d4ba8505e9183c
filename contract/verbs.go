package contract

// Verb names an operation of the contract: an object and an action, the last two tokens
// of its subject. The numbers are internal (journals store them): append only.
type Verb uint8

// The verbs, in a fixed order.
const (
	VerbInvalid Verb = iota
	VerbCreateResource
	VerbCreatePool
	VerbCreateRange
	VerbReserve
	VerbActivate
	VerbRenew
	VerbRelease
	VerbRevoke
	VerbReclaim
	// VerbExpire is internal: a shard commits it when a lease's deadline slot has come.
	// It is journaled like a client write but never sent by a client.
	VerbExpire
	VerbGetResource
	VerbGetPool
	VerbGetRange
	VerbGetLease
	VerbListLeases
	// VerbClusterStatus answers who serves which shard (API §7); no shard answers it.
	VerbClusterStatus
	// Work coordination (docs/api.md Part III).
	VerbCreateRun
	VerbRegisterRun
	VerbCompleteRun
	VerbFailRun
	VerbCancelRun
	VerbCheckpoint
	VerbCompleteWork
	VerbParkWork
	VerbUnparkWork
	VerbSplitReplace
	VerbSplitResidual
	VerbGetRun
	VerbGetWork
	// Deleting idle objects (docs/api.md §4).
	VerbDeleteResource
	VerbDeletePool
	VerbDeleteRange
	VerbDeleteRun
	// VerbConfigure is internal: a shard journals the settings that shape its state
	// (kernel.Shape) at the lsn they take effect, so a replay never depends on flags.
	VerbConfigure
	// Allocators (docs/api.md Part IV).
	VerbListResources
	VerbListPools
	VerbListRanges
	VerbListRuns
	VerbLookupValue
	VerbListAllocations
	VerbReleaseValue
	VerbRevokeValue
	VerbReclaimValue
	VerbExclude
	VerbInclude
	VerbResizeRange
	VerbResizePool
	VerbConsume
	VerbImport
	VerbReleaseAll
	VerbRevokeAll
	VerbListHoldings
	VerbListWork
	// VerbSkip is internal: an empty entry whose lsn a lease.import's lease takes as its
	// id (an import of n leases follows n-1 of them).
	VerbSkip
	// VerbPrepare is internal: a participant shard of a bundle across shards holds its
	// members for the transaction as intents (docs/design.md "Bundles across shards").
	VerbPrepare
	// VerbDecide is internal: a bundle's home shard records its transaction's outcome,
	// commit or abort; the one place that outcome is decided.
	VerbDecide
	// VerbMirror is internal: a participant shard learns its part of a bundle's new state
	// from the home (granted, activated, revoking, ended; aborted frees the intents).
	VerbMirror
	// VerbCount is how many verbs there are: one past the last.
	VerbCount
)

// Kind is what a verb does to a shard's state.
type Kind uint8

// The kinds of verbs.
const (
	KindRead     Kind = iota + 1 // answered from applied state, journals nothing
	KindWrite                    // a client's command: admitted, journaled, answered once durable
	KindInternal                 // journaled by a shard itself, never sent by a client
)

// Target is what a request names, which decides the shard it goes to.
type Target uint8

// The targets of verbs.
const (
	TargetObject  Target = iota + 1 // an object (resource, pool, range, run) by id: its placement key's shard
	TargetLease                     // a lease by id: the shard in the id
	TargetMembers                   // lease.reserve: its first member's placement key
	TargetAll                       // every shard: the bridge gathers the parts
	TargetNone                      // no shard: the bridge answers (cluster.status)
)

// VerbInfo is one verb of the contract as data: every property the layers ask of a verb
// is a field of its row, not a range of numbers or a switch somewhere.
type VerbInfo struct {
	Object, Action string
	Kind           Kind
	Target         Target
	// Fenced verbs are authorized by the lease's fencing token: lease_id, holder_id and
	// lease_epoch (the holder's lease verbs and the work verbs).
	Fenced bool
	// Work verbs act on the work shard the lease of their fence holds (Part III).
	Work bool
	// Deletes removes an idle object by its id.
	Deletes bool
	// Codes are the domain codes the verb may answer besides ok (docs/api.md §4); the
	// rejection codes of its kind come on top (Allowed).
	Codes []Code
	// Method is the Go client's method for the verb.
	Method string
}

var leaseHolderCodes = []Code{CodeLeaseNotFound, CodeLeaseRetired, CodeHolderMismatch, CodeStaleEpoch, CodeInvalidState}

// workFenceCodes are what a work verb's fence and target may answer (docs/api.md Part III).
var workFenceCodes = []Code{CodeLeaseNotFound, CodeLeaseRetired, CodeHolderMismatch, CodeStaleEpoch,
	CodeLeaseExpired, CodeWorkNotFound, CodeRunTerminal, CodeWorkTerminal}

func codes(base []Code, more ...Code) []Code { return append(append([]Code{}, base...), more...) }

// verbs is the verb table: one row per verb.
var verbs = [VerbCount]VerbInfo{
	VerbInvalid: {Object: "invalid"},

	VerbCreateResource: {Object: "resource", Action: "create", Kind: KindWrite, Target: TargetObject, Method: "CreateResource",
		Codes: []Code{CodeAlreadyExists, CodeResourceTableFull}},
	VerbCreatePool: {Object: "pool", Action: "create", Kind: KindWrite, Target: TargetObject, Method: "CreatePool",
		Codes: []Code{CodeAlreadyExists, CodePoolTableFull}},
	VerbCreateRange: {Object: "range", Action: "create", Kind: KindWrite, Target: TargetObject, Method: "CreateRange",
		Codes: []Code{CodeAlreadyExists, CodeRangeTableFull}},
	VerbReserve: {Object: "lease", Action: "reserve", Kind: KindWrite, Target: TargetMembers, Method: "Reserve",
		Codes: []Code{CodeResourceNotFound, CodePoolNotFound, CodeRangeNotFound, CodeResourceBusy,
			CodeInsufficientCapacity, CodeValueBusy, CodeValueOutOfRange, CodeValueExcluded, CodeRangeExhausted,
			CodeLeaseTableFull, CodeLeaseMemberTableFull, CodeExpirationIndexFull,
			CodeRunNotFound, CodeRunTerminal, CodeWorkNotFound, CodeWorkTerminal, CodeNoneAvailable}},
	VerbActivate: {Object: "lease", Action: "activate", Kind: KindWrite, Target: TargetLease, Fenced: true, Method: "Activate",
		Codes: codes(leaseHolderCodes, CodeLeaseExpired)},
	VerbRenew: {Object: "lease", Action: "renew", Kind: KindWrite, Target: TargetLease, Fenced: true, Method: "Renew",
		Codes: codes(leaseHolderCodes, CodeLeaseExpired)},
	VerbRelease: {Object: "lease", Action: "release", Kind: KindWrite, Target: TargetLease, Fenced: true, Method: "Release",
		Codes: codes(leaseHolderCodes)},
	VerbRevoke: {Object: "lease", Action: "revoke", Kind: KindWrite, Target: TargetLease, Method: "Revoke",
		Codes: []Code{CodeLeaseNotFound, CodeLeaseRetired, CodeInvalidState}},
	VerbReclaim: {Object: "lease", Action: "reclaim", Kind: KindWrite, Target: TargetLease, Method: "Reclaim",
		Codes: []Code{CodeLeaseNotFound, CodeLeaseRetired, CodeInvalidState}},
	VerbExpire: {Object: "lease", Action: "expire", Kind: KindInternal, Target: TargetLease,
		Codes: []Code{CodeNoop}},

	VerbGetResource: {Object: "resource", Action: "get", Kind: KindRead, Target: TargetObject, Method: "GetResource",
		Codes: []Code{CodeResourceNotFound}},
	VerbGetPool: {Object: "pool", Action: "get", Kind: KindRead, Target: TargetObject, Method: "GetPool",
		Codes: []Code{CodePoolNotFound}},
	VerbGetRange: {Object: "range", Action: "get", Kind: KindRead, Target: TargetObject, Method: "GetRange",
		Codes: []Code{CodeRangeNotFound}},
	VerbGetLease: {Object: "lease", Action: "get", Kind: KindRead, Target: TargetLease, Method: "GetLease",
		Codes: []Code{CodeLeaseNotFound, CodeLeaseRetired}},
	VerbListLeases:    {Object: "lease", Action: "list", Kind: KindRead, Target: TargetAll, Method: "ListLeases"},
	VerbClusterStatus: {Object: "cluster", Action: "status", Kind: KindRead, Target: TargetNone, Method: "ClusterStatus"},

	VerbCreateRun: {Object: "run", Action: "create", Kind: KindWrite, Target: TargetObject, Method: "CreateRun",
		Codes: []Code{CodeAlreadyExists, CodeWorkTableFull}},
	VerbRegisterRun: {Object: "run", Action: "register", Kind: KindWrite, Target: TargetObject, Method: "RegisterRun",
		Codes: []Code{CodeRunNotFound, CodeRunTerminal, CodeAlreadyExists, CodeWorkTableFull}},
	VerbCompleteRun: {Object: "run", Action: "complete", Kind: KindWrite, Target: TargetObject, Method: "CompleteRun",
		Codes: []Code{CodeRunNotFound, CodeRunTerminal, CodeInvalidState}},
	VerbFailRun: {Object: "run", Action: "fail", Kind: KindWrite, Target: TargetObject, Method: "FailRun",
		Codes: []Code{CodeRunNotFound, CodeRunTerminal}},
	VerbCancelRun: {Object: "run", Action: "cancel", Kind: KindWrite, Target: TargetObject, Method: "CancelRun",
		Codes: []Code{CodeRunNotFound, CodeRunTerminal}},
	VerbCheckpoint: {Object: "work", Action: "checkpoint", Kind: KindWrite, Target: TargetLease, Fenced: true, Work: true, Method: "Checkpoint",
		Codes: codes(workFenceCodes, CodeCursorMissingKey, CodeCursorTooLarge, CodeCursorRegression, CodeCursorOutOfBounds)},
	VerbCompleteWork: {Object: "work", Action: "complete", Kind: KindWrite, Target: TargetLease, Fenced: true, Work: true, Method: "CompleteWork",
		Codes: codes(workFenceCodes, CodeCursorTooLarge, CodeCursorRegression, CodeCursorOutOfBounds)},
	VerbParkWork: {Object: "work", Action: "park", Kind: KindWrite, Target: TargetLease, Fenced: true, Work: true, Method: "Park",
		Codes: codes(workFenceCodes)},
	VerbUnparkWork: {Object: "work", Action: "unpark", Kind: KindWrite, Target: TargetObject, Method: "Unpark",
		Codes: []Code{CodeRunNotFound, CodeWorkNotFound, CodeRunTerminal, CodeInvalidState}},
	VerbSplitReplace: {Object: "work", Action: "split_replace", Kind: KindWrite, Target: TargetLease, Fenced: true, Work: true, Method: "SplitReplace",
		Codes: codes(workFenceCodes, CodeSplitInvalid, CodeWorkTableFull)},
	VerbSplitResidual: {Object: "work", Action: "split_residual", Kind: KindWrite, Target: TargetLease, Fenced: true, Work: true, Method: "SplitResidual",
		Codes: codes(workFenceCodes, CodeSplitInvalid, CodeWorkTableFull)},
	VerbGetRun: {Object: "run", Action: "get", Kind: KindRead, Target: TargetObject, Method: "GetRun",
		Codes: []Code{CodeRunNotFound}},
	VerbGetWork: {Object: "work", Action: "get", Kind: KindRead, Target: TargetObject, Method: "GetWork",
		Codes: []Code{CodeRunNotFound, CodeWorkNotFound}},

	VerbDeleteResource: {Object: "resource", Action: "delete", Kind: KindWrite, Target: TargetObject, Deletes: true, Method: "DeleteResource",
		Codes: []Code{CodeResourceNotFound, CodeObjectInUse}},
	VerbDeletePool: {Object: "pool", Action: "delete", Kind: KindWrite, Target: TargetObject, Deletes: true, Method: "DeletePool",
		Codes: []Code{CodePoolNotFound, CodeObjectInUse}},
	VerbDeleteRange: {Object: "range", Action: "delete", Kind: KindWrite, Target: TargetObject, Deletes: true, Method: "DeleteRange",
		Codes: []Code{CodeRangeNotFound, CodeObjectInUse}},
	VerbDeleteRun: {Object: "run", Action: "delete", Kind: KindWrite, Target: TargetObject, Deletes: true, Method: "DeleteRun",
		Codes: []Code{CodeRunNotFound, CodeObjectInUse}},

	VerbConfigure: {Object: "shard", Action: "configure", Kind: KindInternal},

	VerbListResources: {Object: "resource", Action: "list", Kind: KindRead, Target: TargetAll, Method: "ListResources"},
	VerbListPools:     {Object: "pool", Action: "list", Kind: KindRead, Target: TargetAll, Method: "ListPools"},
	VerbListRanges:    {Object: "range", Action: "list", Kind: KindRead, Target: TargetAll, Method: "ListRanges"},
	VerbListRuns:      {Object: "run", Action: "list", Kind: KindRead, Target: TargetAll, Method: "ListRuns"},
	VerbLookupValue: {Object: "range", Action: "lookup", Kind: KindRead, Target: TargetObject, Method: "LookupValue",
		Codes: []Code{CodeRangeNotFound, CodeValueOutOfRange}},
	VerbListAllocations: {Object: "range", Action: "allocations", Kind: KindRead, Target: TargetObject, Method: "ListAllocations",
		Codes: []Code{CodeRangeNotFound}},
	VerbReleaseValue: {Object: "range", Action: "release", Kind: KindWrite, Target: TargetObject, Method: "ReleaseValue",
		Codes: []Code{CodeRangeNotFound, CodeValueOutOfRange, CodeValueFree, CodeHolderMismatch, CodeStaleEpoch,
			CodeInvalidState, CodeLeaseHasOtherMembers}},
	VerbRevokeValue: {Object: "range", Action: "revoke", Kind: KindWrite, Target: TargetObject, Method: "RevokeValue",
		Codes: []Code{CodeRangeNotFound, CodeValueOutOfRange, CodeValueFree, CodeStaleEpoch, CodeInvalidState}},
	VerbReclaimValue: {Object: "range", Action: "reclaim", Kind: KindWrite, Target: TargetObject, Method: "ReclaimValue",
		Codes: []Code{CodeRangeNotFound, CodeValueOutOfRange, CodeValueFree, CodeStaleEpoch, CodeInvalidState}},
	VerbExclude: {Object: "range", Action: "exclude", Kind: KindWrite, Target: TargetObject, Method: "Exclude",
		Codes: []Code{CodeRangeNotFound, CodeValueOutOfRange, CodeValueBusy, CodeExclusionTableFull}},
	VerbInclude: {Object: "range", Action: "include", Kind: KindWrite, Target: TargetObject, Method: "Include",
		Codes: []Code{CodeRangeNotFound, CodeValueOutOfRange, CodeExclusionTableFull}},
	VerbResizeRange: {Object: "range", Action: "resize", Kind: KindWrite, Target: TargetObject, Method: "ResizeRange",
		Codes: []Code{CodeRangeNotFound, CodeObjectInUse}},
	VerbResizePool: {Object: "pool", Action: "resize", Kind: KindWrite, Target: TargetObject, Method: "ResizePool",
		Codes: []Code{CodePoolNotFound, CodeObjectInUse}},
	VerbConsume: {Object: "lease", Action: "consume", Kind: KindWrite, Target: TargetLease, Fenced: true, Method: "Consume",
		Codes: codes(leaseHolderCodes, CodeLeaseExpired)},
	VerbImport: {Object: "lease", Action: "import", Kind: KindWrite, Target: TargetMembers, Method: "Import",
		Codes: memberCodes()},
	VerbReleaseAll: {Object: "lease", Action: "release_all", Kind: KindWrite, Target: TargetAll, Method: "ReleaseAll"},
	VerbRevokeAll:  {Object: "lease", Action: "revoke_all", Kind: KindWrite, Target: TargetAll, Method: "RevokeAll"},
	VerbListHoldings: {Object: "pool", Action: "holdings", Kind: KindRead, Target: TargetObject, Method: "ListHoldings",
		Codes: []Code{CodePoolNotFound}},
	VerbListWork: {Object: "work", Action: "list", Kind: KindRead, Target: TargetObject, Method: "ListWork",
		Codes: []Code{CodeRunNotFound}},
	VerbSkip: {Object: "lease", Action: "skip", Kind: KindInternal, Codes: []Code{CodeNoop}},
	VerbPrepare: {Object: "bundle", Action: "prepare", Kind: KindInternal,
		Codes: codes(memberCodes(), CodeRunNotFound, CodeNoneAvailable, CodeOverloaded, CodeNoop)},
	VerbDecide: {Object: "bundle", Action: "decide", Kind: KindInternal, Codes: []Code{CodeNoop}},
	VerbMirror: {Object: "bundle", Action: "mirror", Kind: KindInternal, Codes: []Code{CodeNoop}},
}

// memberCodes are what a lease's members of resources, pools and ranges can be refused
// with — lease.reserve's codes for them plus value_excluded: lease.import's codes (its
// leases hold no work), and the base of a bundle prepare's.
func memberCodes() []Code {
	return []Code{CodeResourceNotFound, CodePoolNotFound, CodeRangeNotFound, CodeResourceBusy,
		CodeInsufficientCapacity, CodeValueBusy, CodeValueOutOfRange, CodeValueExcluded, CodeRangeExhausted,
		CodeLeaseTableFull, CodeLeaseMemberTableFull, CodeExpirationIndexFull}
}

// Info is the verb's row of the table (the invalid row for an unknown verb).
func (v Verb) Info() *VerbInfo {
	if v < VerbCount {
		return &verbs[v]
	}
	return &verbs[VerbInvalid]
}

// Object is the verb's object: "resource", "pool", "range", "lease", ...
func (v Verb) Object() string {
	if v >= VerbCount {
		return "unknown"
	}
	return verbs[v].Object
}

// Action is the verb's action: "create", "get", "reserve", ...
func (v Verb) Action() string { return v.Info().Action }

// String is "<object>.<action>", the verb's name in the contract ("lease.reserve").
func (v Verb) String() string {
	if v == VerbInvalid || v >= VerbCount {
		return v.Object()
	}
	return v.Object() + "." + v.Action()
}

// Subject is the verb's subject for tenant under prefix.
func (v Verb) Subject(prefix, tenant string) string {
	return Subject(prefix, tenant, v.Object(), v.Action())
}

// IsRead reports whether the verb only reads state.
func (v Verb) IsRead() bool { return v.Info().Kind == KindRead }

// IsWrite reports whether the verb is a journaled command a client may send.
func (v Verb) IsWrite() bool { return v.Info().Kind == KindWrite }

// IsInternal reports whether the verb is journaled by a shard itself, never sent by a
// client: expire and configure.
func (v Verb) IsInternal() bool { return v.Info().Kind == KindInternal }

// IsDelete reports whether the verb deletes an idle object by its id.
func (v Verb) IsDelete() bool { return v.Info().Deletes }

// IsWorkVerb reports whether the verb acts on the work shard a lease holds, fenced by the
// lease (docs/api.md Part III).
func (v Verb) IsWorkVerb() bool { return v.Info().Work }

// Served reports whether the service answers the verb on its subject: every verb a
// client may send.
func (v Verb) Served() bool { k := v.Info().Kind; return k == KindRead || k == KindWrite }

// IsLeaseVerb reports whether the verb addresses an existing lease by id for the lease
// itself (not the work it holds).
func (v Verb) IsLeaseVerb() bool {
	i := v.Info()
	return i.Target == TargetLease && !i.Work && i.Kind != KindRead
}

// Verbs are the verbs a client may send, in the contract's order: every endpoint.
func Verbs() []Verb {
	var vs []Verb
	for v := VerbCreateResource; v < VerbCount; v++ {
		if v.Served() {
			vs = append(vs, v)
		}
	}
	return vs
}

// rejectionCodesOfWrites are the rejection codes any write may return (docs/api.md §4).
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

// Allowed reports whether verb may return code under the contract: ok, its row's domain
// codes, or a rejection code of its kind. Tests check it after every step.
func Allowed(v Verb, c Code) bool {
	if c == CodeOK {
		return true
	}
	for _, d := range v.Info().Codes {
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
