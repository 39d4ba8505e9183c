package bridge

import (
	"fmt"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/messages"
	"github.com/holdfast/holdfast/wire"
)

// The replies of the allocator verbs (docs/api.md Part IV). Every view shown is the
// request's tenant's: shards list only the tenant's objects, and the bridge checks again.

// spanningReply is the reply of a request over every shard: a listing's joined page,
// or a bulk verb's sums, with each shard's position.
func spanningReply(c *call, m *messages.Reply) *messages.Reply {
	r := c.res
	m.NextCursor = sealCursor(c.scope, c.next)
	if c.op.kind == opFan {
		m.Count, m.More, m.FromRetryCache = uint64(r.Count), r.More, r.FromRetryCache
		m.Leases = changedLeases(c, r.Changes)
		m.AppliedLsns = appliedLSNs(c.parts, true)
		return m
	}
	m.AppliedLsns = appliedLSNs(c.parts, false)
	if c.spec.verb == contract.VerbListLeases {
		m.Leases = make([]*messages.Lease, 0, len(r.Leases))
		for i := range r.Leases {
			if r.Leases[i].Tenant == c.tenant {
				m.Leases = append(m.Leases, wire.Lease(&r.Leases[i]))
			}
		}
		m.Truncated = r.Truncated
		return m
	}
	if r.Page != nil {
		pageReply(c, r.Page, m)
	}
	return m
}

// pageReply fills a listing page's items.
func pageReply(c *call, p *kernel.ListPage, m *messages.Reply) {
	for i := range p.Resources {
		if v := &p.Resources[i]; v.Tenant == c.tenant {
			m.Resources = append(m.Resources, wire.Resource(c.b.objectShard(c.tenant, v.ID), v))
		}
	}
	for i := range p.Pools {
		if v := &p.Pools[i]; v.Tenant == c.tenant {
			m.Pools = append(m.Pools, wire.Pool(v))
		}
	}
	for i := range p.Ranges {
		if v := &p.Ranges[i]; v.Tenant == c.tenant {
			m.Ranges = append(m.Ranges, wire.Range(v))
		}
	}
	for i := range p.Runs {
		if v := &p.Runs[i]; v.Tenant == c.tenant {
			m.Runs = append(m.Runs, wire.Run(v))
		}
	}
	for i := range p.Works {
		if v := &p.Works[i]; v.Tenant == c.tenant {
			m.Works = append(m.Works, wire.Work(c.op.shard, v))
		}
	}
	for i := range p.Leases {
		l := &p.Leases[i]
		if l.Tenant != c.tenant {
			continue
		}
		if p.Values != nil {
			m.Allocations = append(m.Allocations, &messages.Allocation{Value: p.Values[i], Lease: wire.Lease(l)})
		} else {
			m.Leases = append(m.Leases, wire.Lease(l))
		}
	}
	for _, iv := range p.Excluded {
		m.Excluded = append(m.Excluded, &messages.Interval{First: iv.First, Last: iv.Last})
	}
	if p.More && c.parts == nil {
		m.NextCursor = sealCursor(c.scope, contract.KeyCursor(strconv.FormatUint(p.Next, 10)))
	}
}

// allocReply adds what the allocator verbs answer besides a view: range.lookup's value
// state, an import's leases (or its failing lease), the held value in a range verb's way.
func allocReply(c *call, m *messages.Reply) {
	r := c.res
	switch c.spec.verb {
	case contract.VerbLookupValue:
		if r.Code == contract.CodeOK {
			m.ValueState = r.ValueState
		}
	case contract.VerbImport:
		if r.Code == contract.CodeOK {
			m.Leases = changedLeases(c, r.Changes)
		} else if r.ItemIndex >= 0 {
			m.Item = proto.Uint32(uint32(r.ItemIndex))
		}
	case contract.VerbExclude, contract.VerbResizeRange:
		if r.Code == contract.CodeValueBusy || (r.Code == contract.CodeObjectInUse && r.Lease.LSN != 0) {
			m.Value = proto.Uint64(r.Value)
		}
	}
}

// changedLeases are the wire views of the leases an import or a bulk verb changed, each
// once, as it is after the call: a lease that revoke_all revoked and reclaimed in one
// step has two changes (and two events) in a row, and shows the last.
func changedLeases(c *call, changes []kernel.LeaseChange) []*messages.Lease {
	var ls []*messages.Lease
	for i := range changes {
		if i+1 < len(changes) && changes[i+1].Lease.LSN == changes[i].Lease.LSN {
			continue
		}
		if l := &changes[i].Lease; l.Tenant == c.tenant {
			ls = append(ls, wire.Lease(l))
		}
	}
	return ls
}

// allocMessage is the human text of the allocator verbs' domain outcomes ("" for the
// ones domainMessage words as for any verb). It names values and lease ids of the
// request's tenant, never a holder.
func allocMessage(c *call) string {
	r, cmd := c.res, c.op.cmd
	if cmd == nil {
		return ""
	}
	switch c.spec.verb {
	case contract.VerbReleaseValue, contract.VerbRevokeValue, contract.VerbReclaimValue:
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
			switch c.spec.verb {
			case contract.VerbRevokeValue:
				return "the lease holding the value is not active: only an active lease is revoked"
			case contract.VerbReclaimValue:
				return "the lease holding the value is not revoking: range.revoke it first"
			}
			return "the lease holding the value is revoking: an operator reclaims it"
		}
	case contract.VerbExclude, contract.VerbInclude:
		switch r.Code {
		case contract.CodeValueOutOfRange:
			return fmt.Sprintf("[%d, %d] is not inside range %q", cmd.First, cmd.Last, cmd.ObjectID)
		case contract.CodeValueBusy:
			return fmt.Sprintf("value %d is held by lease %s: it is released, or revoked and reclaimed, first", r.Value,
				contract.FormatLeaseID(c.op.shard, r.Lease.LSN))
		case contract.CodeExclusionTableFull:
			return fmt.Sprintf("range %q would have more than %d excluded intervals", cmd.ObjectID, contract.MaxExcluded)
		}
	case contract.VerbResizeRange:
		if r.Code == contract.CodeObjectInUse {
			return fmt.Sprintf("value %d, outside the new bounds, is held by lease %s", r.Value, contract.FormatLeaseID(c.op.shard, r.Lease.LSN))
		}
	case contract.VerbResizePool:
		if r.Code == contract.CodeObjectInUse {
			return "reserved, active and consumed units together exceed the new capacity"
		}
	case contract.VerbConsume:
		if r.Code == contract.CodeInvalidState {
			return "only a reserved or active lease of pool units is consumed"
		}
	}
	return ""
}
