package contract

// Verb names an operation of the contract: an object and an action, the last two tokens
// of its subject <prefix>.v1.<tenant>.<object>.<action>. Writes are journaled commands;
// reads are answered from applied state. The numbers are internal (journal payloads store
// them: append only).
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
	// No client sends it.
	VerbExpire
	VerbGetResource
	VerbGetPool
	VerbGetRange
	VerbGetLease
	VerbListLeases
	// VerbClusterStatus answers who serves which shard (API §7); no shard answers it.
	VerbClusterStatus
	// Work coordination (docs/api.md Part III). Journaled numbers: append only.
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
	// Deleting idle objects (docs/api.md §4 "Deleting objects"). Journaled: append only.
	VerbDeleteResource
	VerbDeletePool
	VerbDeleteRange
	VerbDeleteRun
	// VerbConfigure is internal: a shard journals the settings that shape its state
	// (kernel.Shape) at the lsn they take effect, so a replay never depends on flags.
	VerbConfigure
	// VerbCount is how many verbs there are: one past the last.
	VerbCount
)

// verbParts are the object and action of each verb.
var verbParts = [VerbCount][2]string{
	VerbInvalid:        {"invalid", ""},
	VerbCreateResource: {"resource", "create"},
	VerbCreatePool:     {"pool", "create"},
	VerbCreateRange:    {"range", "create"},
	VerbReserve:        {"lease", "reserve"},
	VerbActivate:       {"lease", "activate"},
	VerbRenew:          {"lease", "renew"},
	VerbRelease:        {"lease", "release"},
	VerbRevoke:         {"lease", "revoke"},
	VerbReclaim:        {"lease", "reclaim"},
	VerbExpire:         {"lease", "expire"},
	VerbGetResource:    {"resource", "get"},
	VerbGetPool:        {"pool", "get"},
	VerbGetRange:       {"range", "get"},
	VerbGetLease:       {"lease", "get"},
	VerbListLeases:     {"lease", "list"},
	VerbClusterStatus:  {"cluster", "status"},
	VerbCreateRun:      {"run", "create"},
	VerbRegisterRun:    {"run", "register"},
	VerbCompleteRun:    {"run", "complete"},
	VerbFailRun:        {"run", "fail"},
	VerbCancelRun:      {"run", "cancel"},
	VerbCheckpoint:     {"work", "checkpoint"},
	VerbCompleteWork:   {"work", "complete"},
	VerbParkWork:       {"work", "park"},
	VerbUnparkWork:     {"work", "unpark"},
	VerbSplitReplace:   {"work", "split_replace"},
	VerbSplitResidual:  {"work", "split_residual"},
	VerbGetRun:         {"run", "get"},
	VerbGetWork:        {"work", "get"},
	VerbDeleteResource: {"resource", "delete"},
	VerbDeletePool:     {"pool", "delete"},
	VerbDeleteRange:    {"range", "delete"},
	VerbDeleteRun:      {"run", "delete"},
	VerbConfigure:      {"shard", "configure"},
}

// Object is the verb's object: "resource", "pool", "range", "lease" or "cluster".
func (v Verb) Object() string { return v.parts()[0] }

// Action is the verb's action: "create", "get", "reserve", ...
func (v Verb) Action() string { return v.parts()[1] }

func (v Verb) parts() [2]string {
	if v < VerbCount {
		return verbParts[v]
	}
	return [2]string{"unknown", ""}
}

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
func (v Verb) IsRead() bool {
	return v >= VerbGetResource && v <= VerbClusterStatus || v == VerbGetRun || v == VerbGetWork
}

// IsWrite reports whether the verb is a journaled command a client may send.
func (v Verb) IsWrite() bool {
	return v >= VerbCreateResource && v <= VerbReclaim || v >= VerbCreateRun && v <= VerbSplitResidual || v.IsDelete()
}

// IsDelete reports whether the verb deletes an idle object by its id.
func (v Verb) IsDelete() bool { return v >= VerbDeleteResource && v <= VerbDeleteRun }

// IsWorkVerb reports whether the verb acts on the work shard a lease holds, fenced by the
// lease (docs/api.md Part III).
func (v Verb) IsWorkVerb() bool {
	return v >= VerbCheckpoint && v <= VerbParkWork || v == VerbSplitReplace || v == VerbSplitResidual
}

// Served reports whether the service answers the verb on its subject: every verb but the
// internal ones (expire, configure).
func (v Verb) Served() bool { return v > VerbInvalid && v < VerbCount && !v.IsInternal() }

// IsInternal reports whether the verb is journaled by a shard itself, never sent by a
// client: expire and configure.
func (v Verb) IsInternal() bool { return v == VerbExpire || v == VerbConfigure }

// IsLeaseVerb reports whether the verb addresses an existing lease by id.
func (v Verb) IsLeaseVerb() bool { return v >= VerbActivate && v <= VerbExpire }

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
