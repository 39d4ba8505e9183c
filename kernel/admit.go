package kernel

import (
	"math"

	"github.com/holdfast/holdfast/contract"
)

// InFlight is what admission needs to know of the writes a shard has sequenced and not
// yet applied (they wait for the journal): the runtime keeps them, the kernel decides.
type InFlight interface {
	// Payload is the journal encoding of the in-flight write with key (tenant\x00operation_id).
	Payload(key string) ([]byte, bool)
	// Len is how many writes are in flight.
	Len() int
}

// Stage names the step of admission that decided a write.
type Stage uint8

// Admission's steps, in the order they run.
const (
	StageValidate Stage = iota // a request-shape rule: rejected
	StageRetry                 // a remembered outcome (or operation_conflict): answered from the retry cache
	StageInFlight              // the same operation is in flight: join it (or operation_conflict)
	StageLimits                // past an admission limit (ttl, bundle): rejected
	StageSize                  // the command's encoding is over the bound: rejected
	StageSlots                 // a derived slot would pass the largest: rejected
	StageRoom                  // no room to remember one more outcome: rejected
	StageLSN                   // no log position left: rejected
	StageSequence              // sequence it as the next entry
)

var stageNames = [...]string{"validate", "retry", "inflight", "limits", "size", "slots", "room", "lsn", "sequence"}

func (s Stage) String() string { return stageNames[s] }

// Admission is the decision for one client write.
type Admission struct {
	Stage Stage
	// Rejection is set when the write is refused (definite, never journaled). With
	// StageRetry and no Rejection, the Output given to Admit holds the remembered answer.
	Rejection *Rejection
	// Key is the write's in-flight key; Payload its journal encoding (StageInFlight, StageSequence).
	Key     string
	Payload []byte
}

// Join reports whether the write shares the result of the same command in flight.
func (a *Admission) Join() bool { return a.Stage == StageInFlight && a.Rejection == nil }

// Sequence reports whether the write is to be journaled as the next entry.
func (a *Admission) Sequence() bool { return a.Stage == StageSequence }

// Admit decides what happens to a client write arriving at slot, before anything is
// journaled: the contract's order of checks in one place, as etcd-raft decides a
// proposal's fate inside its core. Request shape first (whatever the operation id), then
// the retry cache before every check that needs state or a setting (a retry succeeds
// even after its lease ended, and after the limits changed: it was admitted once), then
// a duplicate in flight, the admission limits in force now (lim: ttl, bundle, command
// size; a replay never sees them), the derived slots, the room to remember its outcome —
// counting every write in flight as one that may change state, so Apply always finds the
// room — and a log position. It normalizes c (Normalize) on the way. The runtime keeps
// only the mailbox, the in-flight set, the writer and the clock.
func (k *Kernel) Admit(c *Command, slot uint64, lim *Limits, nextLSN uint64, inflight InFlight, out *Output) Admission {
	if r := Validate(c); r != nil {
		return Admission{Stage: StageValidate, Rejection: r}
	}
	Normalize(&k.shape, c)
	if k.LookupOperation(c, slot, out) {
		a := Admission{Stage: StageRetry}
		if out.Code == contract.CodeOperationConflict {
			a.Rejection = conflict()
		}
		return a
	}
	payload := c.AppendBinary(nil)
	key := InFlightKey(c.Tenant, c.OperationID)
	if dup, ok := inflight.Payload(key); ok {
		a := Admission{Stage: StageInFlight, Key: key, Payload: payload}
		if string(dup) != string(payload) {
			a.Rejection = conflict()
		}
		return a
	}
	if r := CheckLimits(lim, c); r != nil {
		return Admission{Stage: StageLimits, Rejection: r}
	}
	if len(payload) > lim.MaxCommandBytes {
		return Admission{Stage: StageSize, Rejection: reject(contract.CodeCommandTooLarge,
			"command of %d bytes exceeds %d", len(payload), lim.MaxCommandBytes)}
	}
	if r := CheckSlots(&k.shape, c, slot); r != nil {
		return Admission{Stage: StageSlots, Rejection: r}
	}
	if k.OperationRoom(slot)-inflight.Len() < 1 {
		return Admission{Stage: StageRoom, Rejection: reject(contract.CodeOperationTableFull,
			"no room to remember a new operation until older ones leave the dedupe window")}
	}
	if nextLSN == math.MaxUint64 || uint64(SkipsBefore(c)) >= math.MaxUint64-nextLSN {
		return Admission{Stage: StageLSN, Rejection: reject(contract.CodeLSNExhausted, "the shard has used every log position")}
	}
	return Admission{Stage: StageSequence, Key: key, Payload: payload}
}

// InFlightKey is the key of operation (tenant, id) among the writes in flight (Admission.Key).
func InFlightKey(tenant, id string) string { return tenant + "\x00" + id }

func conflict() *Rejection {
	return &Rejection{Code: contract.CodeOperationConflict, Message: "operation_id was used for a different command"}
}

// NoneInFlight is an empty in-flight set: a driver that applies each write before the next.
type NoneInFlight struct{}

func (NoneInFlight) Payload(string) ([]byte, bool) { return nil, false }
func (NoneInFlight) Len() int                      { return 0 }

// SkipsBefore is how many skip entries (VerbSkip) the runtime sequences right before c:
// a lease.import of n leases takes the lsns of n-1 skips and its own as its leases' ids,
// and a bundle that commits in parallel the skip's as its lease's. An import across shards
// takes 2n-1 skips' (n ids, then n transactions, the last its own position, which names
// the group), and a participant's prepare of one a position for each lease it holds
// members of, the last its own.
func SkipsBefore(c *Command) int {
	switch {
	case c.Group && c.Verb == contract.VerbImport:
		return 2*len(c.Imports) - 1
	case c.Group && c.Verb == contract.VerbPrepare:
		return max(groupParts(c)-1, 0)
	case c.Verb == contract.VerbImport && len(c.Imports) > 1:
		return len(c.Imports) - 1
	case c.Parallel:
		return 1
	}
	return 0
}
