package kernel

import (
	"github.com/holdfast/holdfast/contract"
)

// The verbs that change an object in place (docs/api.md Part IV): a range's exclusions,
// a range's bounds and band, a pool's capacity; and lease.consume, which uses a pool
// hold's units up for good.

// findRange resolves tenant's range id.
func (k *Kernel) findRange(tenant, id string) (int32, bool) {
	idx, ok := k.rangeIdx[string(k.tenantKey(tenant, id))]
	return idx, ok
}

// excludeValues runs range.exclude and range.include on [First, Last].
func (k *Kernel) excludeValues(c *Command, out *Output) {
	idx, ok := k.findRange(c.Tenant, c.ObjectID)
	if !ok {
		out.Code = contract.CodeRangeNotFound
		return
	}
	r := &k.ranges[idx]
	iv := Interval{c.First, c.Last}
	if iv.First < r.first || iv.Last > r.last {
		out.Code = contract.CodeValueOutOfRange
		return
	}
	if c.Verb == contract.VerbInclude {
		cut := cutInterval(r.excluded, iv)
		if len(cut) > contract.MaxExcluded {
			out.Code = contract.CodeExclusionTableFull
			return
		}
		r.setExcluded(cut)
		out.Event = EventRangeIncluded
		k.viewRange(idx, out)
		return
	}
	// A held value is never excluded under its lease: its holder releases it, or an
	// operator revokes and reclaims it, first (value_busy names the lowest one).
	if k.heldIn(idx, iv, out) {
		out.Code = contract.CodeValueBusy
		return
	}
	if mergedCount(r.excluded, iv) > contract.MaxExcluded {
		out.Code = contract.CodeExclusionTableFull
		return
	}
	k.excludeInterval(r, iv)
	out.Event = EventRangeExcluded
	k.viewRange(idx, out)
}

// allocatedNone reports whether no value of iv is allocated, given the count of iv's
// values absent from the allocated set.
func (r *valueRange) allocatedNone(iv Interval, absent uint64) bool {
	if iv.First == 0 && iv.Last == ^uint64(0) {
		return r.allocated.Len() == 0
	}
	return absent == iv.Last-iv.First+1
}

// resizeBounds are a range.resize's new bounds: the command's, a kept bound the range's.
func resizeBounds(r *valueRange, c *Command) (first, last uint64) {
	first, last = c.First, c.Last
	if c.KeepFirst {
		first = r.first
	}
	if c.KeepLast {
		last = r.last
	}
	return first, last
}

// shrinkBlocked says whether range idx holds a value outside [first, last], naming the
// first such value and its lease in out (object_in_use's explanation).
func (k *Kernel) shrinkBlocked(idx int32, first, last uint64, out *Output) bool {
	r := &k.ranges[idx]
	return (first > r.first && k.heldIn(idx, Interval{r.first, first - 1}, out)) ||
		(last < r.last && k.heldIn(idx, Interval{last + 1, r.last}, out))
}

// heldIn says whether range idx holds a value in iv, naming the lowest and its lease in
// out: what value_busy and object_in_use explain themselves with (the message names both).
func (k *Kernel) heldIn(idx int32, iv Interval, out *Output) bool {
	r := &k.ranges[idx]
	if absent, _ := r.allocated.AbsentCount(iv.First, iv.Last); r.allocatedNone(iv, absent) {
		return false
	}
	k.ascendValues(idx, iv.First, func(v, lsn uint64) bool {
		out.Lease.LSN, out.Value = lsn, v
		return false
	})
	return true
}

// resizeRange runs range.resize: new bounds (a bound the request omitted keeps its value),
// and a new static band when the command has one (else the band is cut to the new
// bounds). Growing always works; shrinking past an allocated value is object_in_use,
// naming the value and its lease.
func (k *Kernel) resizeRange(c *Command, out *Output) {
	idx, ok := k.findRange(c.Tenant, c.ObjectID)
	if !ok {
		out.Code = contract.CodeRangeNotFound
		return
	}
	r := &k.ranges[idx]
	first, last := resizeBounds(r, c)
	if first > last || (c.HasBand && (c.Band.First < first || c.Band.Last > last)) {
		// Only a kept bound can cross the given one here (Validate checked the rest).
		out.Code = contract.CodeInvalidRequest
		return
	}
	if k.shrinkBlocked(idx, first, last, out) {
		out.Code = contract.CodeObjectInUse
		k.viewRange(idx, out)
		return
	}
	ex := r.excluded
	if first > r.first {
		ex = cutInterval(ex, Interval{r.first, first - 1})
	}
	if last < r.last {
		ex = cutInterval(ex, Interval{last + 1, r.last})
	}
	// Freed values remembered outside the new bounds are forgotten.
	k.forgetFreed(r, func(v uint64) bool { return v < first || v > last })
	r.first, r.last = first, last
	r.setExcluded(ex)
	switch {
	case c.HasBand:
		r.band, r.hasBand = c.Band, true
	case r.hasBand:
		lo, hi := max(r.band.First, r.first), min(r.band.Last, r.last)
		r.band, r.hasBand = Interval{lo, hi}, lo <= hi
		if !r.hasBand {
			r.band = Interval{}
		}
	}
	out.Event = EventRangeResized
	k.viewRange(idx, out)
}

// resizePool runs pool.resize: a new capacity, never below what is reserved, active or
// consumed (object_in_use with the pool's view).
func (k *Kernel) resizePool(c *Command, out *Output) {
	idx, ok := k.poolIdx[string(k.tenantKey(c.Tenant, c.ObjectID))]
	if !ok {
		out.Code = contract.CodePoolNotFound
		return
	}
	p := &k.pools[idx]
	if c.Capacity < p.reserved+p.active+p.consumed {
		out.Code = contract.CodeObjectInUse
		k.viewPool(idx, out)
		return
	}
	p.capacity = c.Capacity
	out.Event = EventPoolResized
	k.viewPool(idx, out)
}

// consume runs lease.consume: a live lease of pool units only, reserved before its
// deadline or active, ends as consumed; its units leave their pools for good (reservation
// engine's ConfirmHold). Fenced as lease.release is.
func (k *Kernel) consume(e Entry, out *Output) {
	c := e.Cmd
	r, ok := k.namedLease(c.Tenant, c.LeaseLSN, e.Slot, out)
	if !ok {
		return
	}
	if out.Code = k.checkFence(r, c); out.Code != contract.CodeOK {
		return
	}
	if r.ended != nil {
		out.Code = contract.CodeInvalidState
		return
	}
	l := &k.leases[r.idx]
	switch {
	case l.state != LeaseReserved && l.state != LeaseActive:
		out.Code = contract.CodeInvalidState
		return
	case l.state == LeaseReserved && e.Slot >= l.deadline:
		out.Code = contract.CodeLeaseExpired
		return
	}
	for _, m := range l.members {
		if m.kind != MemberPool {
			out.Code = contract.CodeInvalidState // only pool units are consumed
			return
		}
	}
	if !k.remoteAll(l.lsn, MemberPool) {
		out.Code = contract.CodeInvalidState // a bundle's members on other shards too
		return
	}
	k.viewEnded(k.end(r.idx, e, LeaseConsumed, true), out)
	out.Event = EventLeaseConsumed
}
