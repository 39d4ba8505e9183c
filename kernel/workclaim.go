package kernel

import "github.com/holdfast/holdfast/contract"

// checkWork resolves a reserve's work member: the named work shard, or the next claimable
// one of the run — the active, unclaimed work shard with the fewest claims so far, then
// the lowest name (the top of the run's ready heap): fair, and a function of the state
// alone, so replay picks the same.
// When none can be claimed now, blocked is the earliest deadline among the claims in the
// way (0: none of them will end by itself).
func (k *Kernel) checkWork(tenant string, m *Member) (p pick, code Code, blocked uint64) {
	r, ok := k.findRun(tenant, m.ID)
	if !ok {
		return pick{}, contract.CodeRunNotFound, 0
	}
	rn := &k.runs[r]
	if rn.status.Terminal() {
		return pick{}, contract.CodeRunTerminal, 0
	}
	if m.Name != "" {
		w, ok := k.findWork(tenant, m.ID, m.Name)
		if !ok {
			return pick{}, contract.CodeWorkNotFound, 0
		}
		wk := &k.works[w]
		if wk.status != WorkActive {
			return pick{}, contract.CodeWorkTerminal, 0
		}
		if wk.lease != 0 {
			return pick{}, contract.CodeResourceBusy, k.claimDeadline(wk.lease)
		}
		return pick{kind: MemberWork, obj: w}, contract.CodeOK, 0
	}
	if k.runHasIntent(r) {
		// Which work shard is next depends on whether an undecided claim's becomes
		// claimable again: the claim waits for the decision (noteIntent: Undecided), as a
		// range's "any" value does.
		return pick{}, contract.CodeNoneAvailable, 0
	}
	if len(rn.ready) == 0 {
		if len(rn.held) > 0 {
			blocked = k.claimDeadline(k.works[rn.held[0]].lease)
		}
		return pick{}, contract.CodeNoneAvailable, blocked
	}
	return pick{kind: MemberWork, obj: rn.ready[0]}, contract.CodeOK, 0
}

// claimDeadline is the deadline of the live lease lsn (0 when it has none).
func (k *Kernel) claimDeadline(lsn uint64) uint64 {
	if idx, ok := k.leaseIdx[lsn]; ok && k.leases[idx].state == LeaseReserved {
		return k.leases[idx].deadline
	}
	return 0
}

// capacity is the advisory hint of a claim on run r: work shards claimable now, and the
// earliest deadline of those claimed.
func (k *Kernel) capacity(r int32) CapacityView {
	rn := &k.runs[r]
	c := CapacityView{Claimable: uint64(len(rn.ready))}
	if len(rn.held) > 0 {
		c.EarliestDeadline = k.claimDeadline(k.works[rn.held[0]].lease)
	}
	return c
}

// leaseWork is the work shard a lease holds (live or ended), -1 when none.
func (k *Kernel) leaseWork(r leaseRef) int32 {
	if r.ended != nil {
		for i := 0; i < int(r.ended.members); i++ {
			if m := k.ended.member(r.ended, i); m.kind == MemberWork {
				return m.obj
			}
		}
		return -1
	}
	for _, m := range k.leases[r.idx].members {
		if m.kind == MemberWork {
			return m.obj
		}
	}
	return -1
}

// workVerb runs checkpoint, complete, park, split_replace and split_residual, fenced by the
// claim, in the order: existence (tenant-scoped), holder, epoch, liveness, deadline, run,
// work shard; then the verb's own checks.
func (k *Kernel) workVerb(e Entry, out *Output) {
	c := e.Cmd
	r, ok := k.namedLease(c.Tenant, c.LeaseLSN, e.Slot, out)
	if !ok {
		return
	}
	if k.finished(r, c, out) {
		return
	}
	if out.Code = k.checkFence(r, c); out.Code != contract.CodeOK {
		return
	}
	w := k.leaseWork(r)
	if w < 0 {
		out.Code = contract.CodeWorkNotFound // a lease of resources, pools or ranges
		return
	}
	wk := &k.works[w]
	if out.Code = k.claimLive(r, wk, e.Slot); out.Code != contract.CodeOK {
		return
	}
	switch c.Verb {
	case contract.VerbCheckpoint:
		if !c.HasCursor {
			out.Code = contract.CodeCursorMissingKey
			return
		}
		if out.Code = k.checkCursor(wk, c); out.Code != contract.CodeOK {
			return
		}
		wk.cursor = cursor{set: true, key: c.CursorKey, token: c.CursorToken}
		out.Event = EventWorkCheckpointed
		k.viewWork(w, out)
	case contract.VerbCompleteWork, contract.VerbParkWork:
		if c.Verb == contract.VerbCompleteWork && c.HasCursor {
			if out.Code = k.checkCursor(wk, c); out.Code != contract.CodeOK {
				return
			}
			wk.cursor = cursor{set: true, key: c.CursorKey, token: c.CursorToken}
		}
		if c.Verb == contract.VerbCompleteWork {
			wk.status = WorkDone
			out.Event = EventWorkCompleted
		} else {
			wk.status, wk.reason = WorkParked, c.Reason
			out.Event = EventWorkParked
		}
		wk.endedBy = c.LeaseLSN
		k.endClaim(r.idx, e, out)
		k.viewWork(w, out)
	case contract.VerbSplitReplace:
		k.splitReplace(w, e, r.idx, out)
	case contract.VerbSplitResidual:
		k.splitResidual(w, c, out)
	}
}

// claimLive is the fence's answer after holder and epoch: a claim that ended with its
// work shard (complete, park, split_replace) or was released is over — work_terminal,
// whatever became of the work shard since (an unparked one is active again, for a new
// claim); only one that ran out (its expiry committed, or about to be) is lease_expired;
// then the run's and the work shard's own state.
func (k *Kernel) claimLive(r leaseRef, wk *work, slot uint64) Code {
	switch {
	case r.ended != nil && r.ended.state != LeaseExpired:
		return contract.CodeWorkTerminal
	case r.ended != nil || slot >= k.leases[r.idx].deadline:
		return contract.CodeLeaseExpired
	case k.runs[wk.run].status.Terminal():
		return contract.CodeRunTerminal
	case wk.status != WorkActive:
		return contract.CodeWorkTerminal
	}
	return contract.CodeOK
}

// finished answers a work verb that ended its claim and comes again from that claim once
// its retry window has passed (a worker whose complete's reply was lost): the claim ended
// with this verb, the work shard still shows it, and the fence is the one the claim had
// then (its epoch before the end bumped it). It answers ok with the work shard and the
// lease as they are, changing nothing — the outcome the worker missed — where the fence
// alone would say stale_epoch. Anything else is left to the fence.
func (k *Kernel) finished(r leaseRef, c *Command, out *Output) bool {
	if r.ended == nil || r.ended.state != LeaseReleased || !endsClaim(c.Verb) {
		return false
	}
	w := k.leaseWork(r)
	if w < 0 || !k.liveRun(k.works[w].run) || k.works[w].endedBy != r.ended.lsn || uint64(r.ended.epoch) != c.Epoch+1 {
		return false
	}
	if _, h := splitKey(k.holders[r.ended.holder].key); h != c.HolderID {
		return false
	}
	wk := &k.works[w]
	if wk.status != endedAs(c.Verb) {
		return false
	}
	k.viewEnded(r.ended, out)
	k.viewWork(w, out)
	if c.Verb == contract.VerbSplitReplace {
		k.replacedBy(c, w, out)
	}
	return true
}

// endedAs is the status a verb that ends its claim leaves the work shard in.
func endedAs(v Verb) WorkStatus {
	switch v {
	case contract.VerbCompleteWork:
		return WorkDone
	case contract.VerbParkWork:
		return WorkParked
	}
	return WorkSplit
}

// endsClaim reports whether a work verb ends the claim it is fenced by: its reply (and
// a retry's) carries the lease as it ended.
func endsClaim(v Verb) bool {
	return v == contract.VerbCompleteWork || v == contract.VerbParkWork || v == contract.VerbSplitReplace
}

// endClaim releases the claim of a work verb that ends it; the reply carries the lease as
// it ended beside the work shard.
func (k *Kernel) endClaim(idx int32, e Entry, out *Output) {
	var lv Output
	lv.Lease.Members = out.Lease.Members[:0]
	k.viewEnded(k.end(idx, e, LeaseReleased, true), &lv)
	out.Lease = lv.Lease
}

// checkCursor checks a new cursor against the work shard: bounded sizes, inside
// [start, end), never before the cursor it replaces.
func (k *Kernel) checkCursor(wk *work, c *Command) Code {
	switch {
	case len(c.CursorKey) > contract.MaxWorkKeyLen || len(c.CursorToken) > contract.MaxCursorTokenLen:
		return contract.CodeCursorTooLarge
	case c.CursorKey < wk.start || (wk.end != "" && c.CursorKey >= wk.end):
		return contract.CodeCursorOutOfBounds
	case wk.cursor.set && c.CursorKey < wk.cursor.key:
		return contract.CodeCursorRegression
	}
	return contract.CodeOK
}

// resumeKey is where the work shard's unfinished part starts: its cursor's key, or its
// start when it has none. (The key under the cursor is part of it: a holder resumes at it
// and skips what its token says was done.)
func (wk *work) resumeKey() string {
	if wk.cursor.set {
		return wk.cursor.key
	}
	return wk.start
}

// splitReplace retires the claimed parent for children that cover exactly its unfinished
// part [resume, end), in order, without gaps or overlap; the children are active and
// unclaimed, named <name>:c<i>, and the parent's claim ends.
func (k *Kernel) splitReplace(w int32, e Entry, leaseIdx int32, out *Output) {
	c := e.Cmd
	wk := &k.works[w]
	from, name, metadata, run := wk.resumeKey(), wk.name, wk.metadata, wk.run
	if c.Work[0].Start != from || c.Work[len(c.Work)-1].End != wk.end {
		out.Code = contract.CodeSplitInvalid
		return
	}
	for i := 1; i < len(c.Work); i++ {
		if c.Work[i].Start != c.Work[i-1].End {
			out.Code = contract.CodeSplitInvalid // a gap, an overlap, or an unbounded child before the last
			return
		}
	}
	tenant, _ := splitKey(wk.key)
	_, runID := splitKey(k.runs[run].key)
	for i := range c.Work {
		if _, exists := k.findWork(tenant, runID, childName(name, 'c', uint64(i))); exists {
			out.Code = contract.CodeSplitInvalid
			return
		}
	}
	if !k.workRoom(len(c.Work)) {
		out.Code = contract.CodeWorkTableFull
		return
	}
	first := len(k.works[w].children)
	for i := range c.Work {
		spec := WorkSpec{Name: childName(name, 'c', uint64(i)), Start: c.Work[i].Start, End: c.Work[i].End, Metadata: metadata}
		ch := k.addWork(run, tenant, runID, spec, w)
		k.works[w].children = append(k.works[w].children, ch)
	}
	k.works[w].status, k.works[w].endedBy = WorkSplit, c.LeaseLSN
	out.Event = EventWorkSplit
	k.endClaim(leaseIdx, e, out)
	k.viewWork(w, out)
	for _, ch := range k.works[w].children[first:] { // this split's children, not earlier residuals
		out.Children = append(out.Children, k.workView(ch, nil))
	}
}

// splitResidual gives the part [split_key, end) of the claimed work shard to a new active,
// unclaimed residual <name>:r<n>; the parent keeps [start, split_key) and its claim.
func (k *Kernel) splitResidual(w int32, c *Command, out *Output) {
	wk := &k.works[w]
	if c.SplitKey <= wk.resumeKey() || c.SplitKey <= wk.start || (wk.end != "" && c.SplitKey >= wk.end) {
		out.Code = contract.CodeSplitInvalid
		return
	}
	tenant, _ := splitKey(wk.key)
	_, runID := splitKey(k.runs[wk.run].key)
	name := childName(wk.name, 'r', uint64(wk.splits))
	if _, exists := k.findWork(tenant, runID, name); exists {
		out.Code = contract.CodeSplitInvalid
		return
	}
	if !k.workRoom(1) {
		out.Code = contract.CodeWorkTableFull
		return
	}
	ch := k.addWork(wk.run, tenant, runID, WorkSpec{Name: name, Start: c.SplitKey, End: wk.end, Metadata: wk.metadata}, w)
	wk = &k.works[w] // addWork may have moved the table
	wk.end = c.SplitKey
	wk.splits++
	wk.children = append(wk.children, ch)
	out.Event = EventWorkSplit
	k.viewWork(w, out)
	out.Children = append(out.Children, k.workView(ch, nil))
}
