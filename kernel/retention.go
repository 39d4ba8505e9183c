package kernel

import "github.com/holdfast/holdfast/contract"

// retireBudget bounds the retirement work one entry does, so no entry's latency depends
// on how much history happens to fall due at once. Each entry adds at most one operation
// and ends at most one lease, so a budget above one per kind drains any backlog.
const retireBudget = 8

// retire drops at most budget operations and budget terminal leases whose windows ended
// before slot, then frees at most budget graves no ended lease names any more.
func (k *Kernel) retire(slot uint64, budget int) {
	for i := 0; i < budget && k.ops.retireFront(slot); i++ {
	}
	for i := 0; i < budget && k.retireLease(slot); i++ {
	}
	k.freeGraves(budget)
}

// retireLease drops the lease that ended first, if its history window has passed, and
// raises the retired watermark: from then on its id answers lease_retired at no cost.
func (k *Kernel) retireLease(slot uint64) bool {
	if k.ended.len() == 0 {
		return false
	}
	e := k.ended.q.front()
	if e.retireAfter >= slot || k.Freeing(e.lsn) {
		return false
	}
	if e.lsn > k.retired {
		k.retired = e.lsn
	}
	k.members -= int(e.members)
	k.releaseHolder(e.holder)
	if ref, ok := k.endedLabels[e.lsn]; ok {
		k.releaseLabels(ref)
		delete(k.endedLabels, e.lsn)
	}
	if b := k.bundles[e.lsn]; b != nil {
		delete(k.begins, b.txn.LSN)
		delete(k.bundles, e.lsn)
	}
	k.ended.popFront()
	return true
}

// opRoom makes room for one more remembered outcome: retired records (as many as it
// takes to get below the bound: more than one only when more fell due at once than
// retire's budget, or after a configure entry lowered the bound), else the oldest
// forgettable one, so a failure inside its window is forgotten only while the records
// inside their windows fill the table. It reports whether the new outcome can be
// remembered.
func (k *Kernel) opRoom(slot uint64) bool {
	for k.ops.len() >= k.shape.MaxOperations && k.ops.retireFront(slot) {
	}
	return k.ops.len() < k.shape.MaxOperations || k.ops.forgetOldest()
}

// OperationRoom is how many new operations the cache can take at slot without forgetting
// an outcome that changed state while it is inside its window: the shard checks it before
// sequencing (counting each write in flight as one that may change state), so that
// operation_table_full is a definite rejection and Apply always finds the room.
func (k *Kernel) OperationRoom(slot uint64) int {
	return k.ops.keptRoom(slot, k.shape.MaxOperations)
}

// answerRetry answers a retried operation from the retry cache. It reports whether it
// answered (a remembered outcome, or operation_conflict for a different command).
func (k *Kernel) answerRetry(c *Command, key opKey, hash uint64, slot uint64, out *Output) bool {
	op := k.ops.get(key, slot)
	if op == nil {
		return false
	}
	if op.hash != hash {
		out.Code = contract.CodeOperationConflict
		return true
	}
	out.Code = op.code
	out.LSN = op.lsn
	if op.code == contract.CodeNoop { // a verb by value the lease's home answered (Apply)
		out.Elsewhere, out.Txn = true, TxnRef{Shard: uint32(op.member), LSN: op.ref}
		return true
	}
	out.MemberIndex = int(op.member)
	out.FromRetryCache = true
	k.viewRetried(c, op, slot, out)
	return true
}

// LookupOperation answers a retry of a remembered operation without a new entry: Admit
// calls it before the command is sequenced. It reports false when the operation is unknown (or
// past its window), in which case the command must be sequenced.
func (k *Kernel) LookupOperation(c *Command, slot uint64, out *Output) bool {
	if c.Verb == contract.VerbExpire {
		return false
	}
	out.reset(k.lastLSN)
	var hash uint64
	hash, k.hashBuf = commandHash(c, k.hashBuf)
	return k.answerRetry(c, makeOpKey(c.Tenant, c.OperationID), hash, slot, out)
}

// viewRetried fills what a retry shows besides code and lsn: the verb's row says what
// (kverb.retried). The retried command is the original one (same hash), so it names the
// object again: a create shows that object's current view (with ok or already_exists); a
// lease verb or reserve that succeeded shows the lease id and epoch its reply carried,
// with the lease's current view while it is readable and nothing else once it has retired.
// A failed lease verb shows no lease, a delete no object.
func (k *Kernel) viewRetried(c *Command, op *outcome, slot uint64, out *Output) {
	if f := rowOf(c.Verb).retried; f != nil {
		f(k, c, op, slot, out)
	}
}

// retriedObject shows an object verb's object as it is now, after ok or the code also
// given (a create's already_exists, a reshape's object_in_use).
func retriedObject(also Code) retriedView {
	return func(k *Kernel, c *Command, op *outcome, _ uint64, out *Output) {
		if op.code == contract.CodeOK || op.code == also {
			k.viewObject(c.Verb, c.Tenant, c.ObjectID, out)
		}
	}
}

// retriedNothing: a delete's object is gone; its view was in the original reply.
func retriedNothing(*Kernel, *Command, *outcome, uint64, *Output) {}

// retriedRun shows a run verb's run as it is now.
func retriedRun(k *Kernel, c *Command, op *outcome, _ uint64, out *Output) {
	if op.code == contract.CodeOK || op.code == contract.CodeAlreadyExists {
		if idx, ok := k.findRun(c.Tenant, c.ObjectID); ok {
			k.viewRun(idx, out)
		}
	}
}

func retriedUnpark(k *Kernel, c *Command, op *outcome, _ uint64, out *Output) {
	if op.code == contract.CodeOK {
		if idx, ok := k.findWork(c.Tenant, c.ObjectID, c.Name); ok {
			k.viewWork(idx, out)
		}
	}
}

// retriedBulk answers a bulk verb's count and more; the leases were in the original reply.
func retriedBulk(_ *Kernel, _ *Command, op *outcome, _ uint64, out *Output) {
	out.Count, out.More = int(op.ref>>1), op.ref&1 == 1
}

// retriedWork: a verb that ended the claim (complete, park, split_replace) shows the lease
// as every lease verb that ends one does — the id and the epoch its reply carried, with
// the lease's view while it is readable — then the work shard the lease held, as it is
// now (while the lease is readable).
func retriedWork(k *Kernel, c *Command, op *outcome, slot uint64, out *Output) {
	k.retriedWorkShard(c, op, slot, out)
}

// retriedSplit is retriedWork for a split, which also lists, as they are now, the new
// work shards its reply listed (children).
func retriedSplit(children func(k *Kernel, c *Command, w int32, out *Output)) retriedView {
	return func(k *Kernel, c *Command, op *outcome, slot uint64, out *Output) {
		if w := k.retriedWorkShard(c, op, slot, out); w >= 0 {
			children(k, c, w, out)
		}
	}
}

// retriedWorkShard is retriedWork's, and says which work shard it showed (-1: none).
func (k *Kernel) retriedWorkShard(c *Command, op *outcome, slot uint64, out *Output) int32 {
	if op.code != contract.CodeOK {
		return -1
	}
	r, code := k.findLease(c.Tenant, c.LeaseLSN, slot)
	if endsClaim(c.Verb) {
		if code == contract.CodeOK {
			k.view(r, out)
		} else {
			out.Object = ObjectLease
			out.Lease = LeaseView{Shard: k.shard, LSN: c.LeaseLSN, Tenant: c.Tenant, Members: out.Lease.Members[:0]}
		}
		out.Lease.Epoch = uint64(op.epoch)
	}
	if code != contract.CodeOK {
		return -1
	}
	w := k.leaseWork(r)
	if w >= 0 {
		k.viewWork(w, out)
	}
	return w
}

// replacedBy lists a split_replace's children of w as they are now: its last len(c.Work)
// children (a split work shard gets no more, though residuals split off before may
// precede them).
func (k *Kernel) replacedBy(c *Command, w int32, out *Output) {
	kids := k.works[w].children
	for _, ch := range kids[max(len(kids)-len(c.Work), 0):] {
		out.Children = append(out.Children, k.workView(ch, nil))
	}
}

// residualOf lists a split_residual's child of w as it is now: the one that starts at its
// split key (each residual of w starts below the one before).
func (k *Kernel) residualOf(c *Command, w int32, out *Output) {
	for _, ch := range k.works[w].children {
		if k.works[ch].start == c.SplitKey {
			out.Children = append(out.Children, k.workView(ch, nil))
		}
	}
}

// retriedLease shows tenant's lease lsn after a lease verb that succeeded: the epoch its
// reply carried, with its view (and the work shard it holds) while it is readable.
// It says which work shard it showed (-1: none).
func (k *Kernel) retriedLease(tenant string, lsn uint64, op *outcome, slot uint64, out *Output) int32 {
	if op.code != contract.CodeOK {
		return -1
	}
	return k.showRetriedLease(tenant, lsn, op, slot, out)
}

// showRetriedLease shows tenant's lease lsn as a retry shows the lease its first answer
// showed: the epoch that answer carried, with the lease's view while it is readable. It
// says which work shard it showed (-1: none).
func (k *Kernel) showRetriedLease(tenant string, lsn uint64, op *outcome, slot uint64, out *Output) int32 {
	w := int32(-1)
	if r, code := k.findLease(tenant, lsn, slot); code == contract.CodeOK {
		k.view(r, out)
		if w = k.leaseWork(r); w >= 0 {
			out.Work, out.HasWork = k.workView(w, nil), true
		}
	} else {
		out.Object = ObjectLease
		out.Lease = LeaseView{Shard: k.shard, LSN: lsn, Tenant: tenant, Members: out.Lease.Members[:0]}
	}
	out.Lease.Epoch = uint64(op.epoch)
	return w
}

// viewRetriedImport shows a retried lease.import as a retried reserve is shown: each
// lease's id and first epoch with its current view while it is readable; a failure names
// the failing lease and member again.
func (k *Kernel) viewRetriedImport(c *Command, op *outcome, slot uint64, out *Output) {
	if op.code != contract.CodeOK {
		out.ItemIndex = int(op.ref) - 1
		return
	}
	last := op.lsn
	if c.Group { // an import across shards: remembered at its decision, naming its last lease
		last, out.LSN = op.ref, op.ref
	}
	first := last - uint64(len(c.Imports)) + 1
	for i := range c.Imports {
		lsn := first + uint64(i)
		ch := LeaseChange{Event: EventLeaseReserved, Lease: LeaseView{Shard: k.shard, LSN: lsn, Tenant: c.Tenant}}
		if c.Imports[i].Activate {
			ch.Event = EventLeaseActivated
		}
		if r, code := k.findLease(c.Tenant, lsn, slot); code == contract.CodeOK {
			var v Output
			k.view(r, &v)
			ch.Lease = v.Lease
		}
		ch.Lease.Epoch = 1
		out.Changes = append(out.Changes, ch)
	}
}

// viewObject fills the view of tenant's object id of a create verb's kind.
func (k *Kernel) viewObject(v Verb, tenant, id string, out *Output) {
	switch v {
	case contract.VerbCreateResource:
		if idx, ok := k.resIdx[string(k.tenantKey(tenant, id))]; ok {
			k.viewResource(idx, out)
		}
	case contract.VerbCreatePool, contract.VerbResizePool:
		if idx, ok := k.poolIdx[string(k.tenantKey(tenant, id))]; ok {
			k.viewPool(idx, out)
		}
	case contract.VerbCreateRange, contract.VerbExclude, contract.VerbInclude, contract.VerbResizeRange:
		if idx, ok := k.rangeIdx[string(k.tenantKey(tenant, id))]; ok {
			k.viewRange(idx, out)
		}
	}
}
