package kernel

import (
	"strconv"

	"github.com/holdfast/holdfast/contract"
)

// Work coordination (docs/api.md Part III): runs, their work shards, and what a claim does
// to them. A work shard is claimed by an ordinary lease whose member is the work shard
// (MemberWork), so one fencing token (lease_id, lease_epoch) guards every work verb.

// RunStatus is the lifecycle of a run; done, failed and cancelled are terminal.
type RunStatus uint8

// Run states.
const (
	RunActive RunStatus = iota + 1
	RunDone
	RunFailed
	RunCancelled
)

var runStatusNames = [...]string{"", contract.RunActive, contract.RunDone, contract.RunFailed, contract.RunCancelled}

func (s RunStatus) String() string {
	return nameOf(runStatusNames[:], s)
}

// Terminal reports whether nothing in the run can change any more.
func (s RunStatus) Terminal() bool { return s >= RunDone }

// WorkStatus is the lifecycle of a work shard: done and split are final, parked waits for
// an operator (work.unpark).
type WorkStatus uint8

// Work states.
const (
	WorkActive WorkStatus = iota + 1
	WorkDone
	WorkSplit
	WorkParked
)

var workStatusNames = [...]string{"", contract.WorkActive, contract.WorkDone, contract.WorkSplit, contract.WorkParked}

func (s WorkStatus) String() string {
	return nameOf(workStatusNames[:], s)
}

type run struct {
	key    string // "tenant\x00run_id"
	status RunStatus
	reason string
	work   []int32 // its work shards, in creation order
	ready  []int32 // heap: active, unclaimed work shards (workqueue.go)
	held   []int32 // heap: claimed work shards, by claim deadline
}

type work struct {
	key      string // "tenant\x00run_id/name"
	run      int32
	name     string
	start    string
	end      string // "": unbounded
	metadata string
	status   WorkStatus
	lease    uint64 // the live lease holding it; 0 when none
	claims   uint64 // claims so far: claim-next prefers the least claimed
	cursor   cursor
	parent   int32 // -1: none
	children []int32
	splits   uint32 // split_residual count, for the residuals' names
	reason   string // why it was parked
	// endedBy is the lsn of the claim that ended the work shard (complete, park,
	// split_replace), 0 when none has: a retry of that verb by that claim, once its retry
	// window has passed, still learns that it happened (workclaim.go's finished).
	endedBy  uint64
	readyPos int32 // position in the run's ready heap, -1 when not in it
	heldPos  int32 // position in the run's held heap, -1 when not in it
}

// cursor is how far the work shard's holder has got: a key inside its range that only
// moves forward, and an opaque token to resume from.
type cursor struct {
	set   bool
	key   string
	token string
}

// RunView is the read form of a run, with its work shards counted by status.
type RunView struct {
	Tenant  string
	ID      string
	Status  RunStatus
	Reason  string
	Work    uint64 // work shards in the run
	Active  uint64
	Done    uint64
	Split   uint64
	Parked  uint64
	Claimed uint64 // active work shards held by a live lease
}

// WorkView is the read form of a work shard. It names its claim by lease id and epoch,
// never by holder.
type WorkView struct {
	Tenant      string
	RunID       string
	Name        string
	Start       string
	End         string
	Metadata    string
	Status      WorkStatus
	LeaseLSN    uint64 // the claim; 0 when unclaimed
	LeaseEpoch  uint64
	Claims      uint64
	HasCursor   bool
	CursorKey   string
	CursorToken string
	Parent      string
	Children    []string
	Reason      string
}

// CapacityView is advisory: how many of the run's work shards could be claimed now, and
// the earliest slot at which a claimed one may free up (0: none claimed).
type CapacityView struct {
	Claimable        uint64
	EarliestDeadline uint64
}

func (k *Kernel) findRun(tenant, id string) (int32, bool) {
	idx, ok := k.runIdx[string(k.tenantKey(tenant, id))]
	return idx, ok
}

func (k *Kernel) findWork(tenant, runID, name string) (int32, bool) {
	k.keyBuf = append(append(append(append(k.keyBuf[:0], tenant...), 0), runID...), '/')
	k.keyBuf = append(k.keyBuf, name...)
	idx, ok := k.workIdx[string(k.keyBuf)]
	return idx, ok
}

// workRoom reports whether n more work shards fit in the table (graves count: their
// slots are not free yet).
func (k *Kernel) workRoom(n int) bool {
	return len(k.works)-len(k.free.works)+n <= k.shape.MaxWork
}

// addWork creates a work shard of run r; the caller has checked the bounds (workRoom) and
// the name.
func (k *Kernel) addWork(r int32, tenant, runID string, spec WorkSpec, parent int32) int32 {
	idx, _ := takeSlot(&k.free.works, len(k.works), k.shape.MaxWork)
	key := tenant + "\x00" + contract.WorkID(runID, spec.Name)
	put(&k.works, idx, work{key: key, run: r, name: spec.Name, start: spec.Start, end: spec.End,
		metadata: spec.Metadata, status: WorkActive, parent: parent, readyPos: -1, heldPos: -1})
	k.workIdx[key] = idx
	k.runs[r].work = append(k.runs[r].work, idx)
	k.enqueue(idx, qReady)
	return idx
}

// createRun inserts a run with its manifest, all work shards active and unclaimed.
func (k *Kernel) createRun(c *Command, out *Output) {
	if idx, ok := k.findRun(c.Tenant, c.ObjectID); ok {
		out.Code = contract.CodeAlreadyExists
		k.viewRun(idx, out)
		return
	}
	if len(k.runs)-len(k.free.runs) >= k.shape.MaxRuns || !k.workRoom(len(c.Work)) {
		out.Code = contract.CodeWorkTableFull
		return
	}
	r, _ := takeSlot(&k.free.runs, len(k.runs), k.shape.MaxRuns)
	key := string(k.tenantKey(c.Tenant, c.ObjectID))
	put(&k.runs, r, run{key: key, status: RunActive})
	k.runIdx[key] = r
	k.ix.objects[objRun].ReplaceOrInsert(objItem{key: key, slot: r})
	for _, spec := range c.Work {
		k.addWork(r, c.Tenant, c.ObjectID, spec, -1)
	}
	out.Event = EventRunCreated
	k.viewRun(r, out)
}

// registerRun adds work shards to an active run.
func (k *Kernel) registerRun(c *Command, out *Output) {
	r, ok := k.findRun(c.Tenant, c.ObjectID)
	switch {
	case !ok:
		out.Code = contract.CodeRunNotFound
		return
	case k.runs[r].status.Terminal():
		out.Code = contract.CodeRunTerminal
		return
	}
	for _, spec := range c.Work {
		if _, exists := k.findWork(c.Tenant, c.ObjectID, spec.Name); exists {
			out.Code = contract.CodeAlreadyExists
			k.viewRun(r, out)
			return
		}
	}
	if !k.workRoom(len(c.Work)) {
		out.Code = contract.CodeWorkTableFull
		return
	}
	for _, spec := range c.Work {
		k.addWork(r, c.Tenant, c.ObjectID, spec, -1)
	}
	out.Event = EventRunRegistered
	k.viewRun(r, out)
}

// endRun moves an active run to done, failed or cancelled. Completing needs every work
// shard done or split; failing or cancelling ends the run whatever its work's state, and
// live claims then answer run_terminal to every work verb until they end.
func (k *Kernel) endRun(c *Command, out *Output) {
	r, ok := k.findRun(c.Tenant, c.ObjectID)
	if !ok {
		out.Code = contract.CodeRunNotFound
		return
	}
	rn := &k.runs[r]
	if rn.status.Terminal() {
		out.Code = contract.CodeRunTerminal
		return
	}
	if k.runHasIntent(r) {
		// A claim across placement keys still undecided would be granted on a run that
		// ended before it: the end waits for the decision, as a reserve of an intent does.
		out.Code, out.Undecided = contract.CodeNoop, true
		return
	}
	end := runEnds[c.Verb]
	if end.status == RunDone {
		for _, w := range rn.work {
			if s := k.works[w].status; s != WorkDone && s != WorkSplit {
				out.Code = contract.CodeInvalidState
				return
			}
		}
	} else {
		rn.reason = c.Reason // fail and cancel say why
	}
	rn.status, out.Event = end.status, end.event
	k.viewRun(r, out)
}

// runEnds is what each run-ending verb makes of the run: complete (every work shard done
// or split), fail, cancel.
var runEnds = map[Verb]struct {
	status RunStatus
	event  EventKind
}{
	contract.VerbCompleteRun: {RunDone, EventRunCompleted},
	contract.VerbFailRun:     {RunFailed, EventRunFailed},
	contract.VerbCancelRun:   {RunCancelled, EventRunCancelled},
}

// unparkWork returns a parked work shard to active (an operator's verb, unfenced).
func (k *Kernel) unparkWork(c *Command, out *Output) {
	r, ok := k.findRun(c.Tenant, c.ObjectID)
	if !ok {
		out.Code = contract.CodeRunNotFound
		return
	}
	w, ok := k.findWork(c.Tenant, c.ObjectID, c.Name)
	switch {
	case !ok:
		out.Code = contract.CodeWorkNotFound
		return
	case k.runs[r].status.Terminal():
		out.Code = contract.CodeRunTerminal
		return
	case k.works[w].status != WorkParked:
		out.Code = contract.CodeInvalidState
		return
	}
	k.works[w].status, k.works[w].reason = WorkActive, ""
	k.enqueue(w, qReady)
	out.Event = EventWorkUnparked
	k.viewWork(w, out)
}

func (k *Kernel) viewRun(idx int32, out *Output) {
	rn := &k.runs[idx]
	t, id := splitKey(rn.key)
	v := RunView{Tenant: t, ID: id, Status: rn.status, Reason: rn.reason, Work: uint64(len(rn.work))}
	for _, w := range rn.work {
		wk := &k.works[w]
		switch wk.status {
		case WorkActive:
			v.Active++
			if wk.lease != 0 {
				v.Claimed++
			}
		case WorkDone:
			v.Done++
		case WorkSplit:
			v.Split++
		case WorkParked:
			v.Parked++
		}
	}
	out.Object = ObjectRun
	out.Run = v
}

// viewWork fills out.Work (and out.HasWork); a reply whose object is the lease keeps its
// Object, so callers that answer with the work set Object themselves.
func (k *Kernel) viewWork(idx int32, out *Output) {
	out.Object = ObjectWork
	out.Work = k.workView(idx, out.Work.Children[:0])
	out.HasWork = true
}

func (k *Kernel) workView(idx int32, children []string) WorkView {
	wk := &k.works[idx]
	t, _ := splitKey(wk.key)
	_, runID := splitKey(k.runs[wk.run].key)
	v := WorkView{Tenant: t, RunID: runID, Name: wk.name, Start: wk.start, End: wk.end, Metadata: wk.metadata,
		Status: wk.status, Claims: wk.claims, HasCursor: wk.cursor.set, CursorKey: wk.cursor.key,
		CursorToken: wk.cursor.token, Reason: wk.reason}
	if wk.lease != 0 {
		if li, ok := k.leaseIdx[wk.lease]; ok {
			v.LeaseLSN, v.LeaseEpoch = wk.lease, k.leases[li].epoch
		}
	}
	if wk.parent >= 0 {
		v.Parent = k.works[wk.parent].name
	}
	for _, ch := range wk.children {
		children = append(children, k.works[ch].name)
	}
	v.Children = children
	return v
}

// GetRun reads a run of tenant: ok or run_not_found.
func (k *Kernel) GetRun(tenant, id string, out *Output) {
	out.reset(k.lastLSN)
	if idx, ok := k.findRun(tenant, id); ok {
		k.viewRun(idx, out)
		return
	}
	out.Code = contract.CodeRunNotFound
}

// GetWork reads a work shard of tenant's run: ok, run_not_found or work_not_found.
func (k *Kernel) GetWork(tenant, runID, name string, out *Output) {
	out.reset(k.lastLSN)
	if _, ok := k.findRun(tenant, runID); !ok {
		out.Code = contract.CodeRunNotFound
		return
	}
	if idx, ok := k.findWork(tenant, runID, name); ok {
		k.viewWork(idx, out)
		return
	}
	out.Code = contract.CodeWorkNotFound
}

// childName is the deterministic name of a split's derived work shard: ":c<i>" for
// split_replace's children, ":r<n>" for split_residual's residuals.
func childName(parent string, kind byte, n uint64) string {
	return parent + ":" + string(kind) + strconv.FormatUint(n, 10)
}
