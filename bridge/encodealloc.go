package bridge

import (
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
	m.Resources = owned(m.Resources, p.Resources, c.tenant, func(v *kernel.ResourceView) string { return v.Tenant }, wire.Resource)
	m.Pools = owned(m.Pools, p.Pools, c.tenant, func(v *kernel.PoolView) string { return v.Tenant }, wire.Pool)
	m.Ranges = owned(m.Ranges, p.Ranges, c.tenant, func(v *kernel.RangeView) string { return v.Tenant }, wire.Range)
	m.Runs = owned(m.Runs, p.Runs, c.tenant, func(v *kernel.RunView) string { return v.Tenant }, wire.Run)
	m.Works = owned(m.Works, p.Works, c.tenant, func(v *kernel.WorkView) string { return v.Tenant },
		func(v *kernel.WorkView) *messages.Work { return wire.Work(c.op.shard, v) })
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

// owned appends to dst the wire form of each view of src that tenant owns (of says whose
// a view is): a page read across shards shows a tenant only its own.
func owned[V, W any](dst []W, src []V, tenant string, of func(*V) string, wire func(*V) W) []W {
	for i := range src {
		if v := &src[i]; of(v) == tenant {
			dst = append(dst, wire(v))
		}
	}
	return dst
}

// allocReply adds what the allocator verbs answer besides a view: range.lookup's value
// state, an import's leases (or its failing lease), the held value in a range verb's way.
func allocReply(c *call, m *messages.Reply) {
	if f := allocReplies[c.spec.verb]; f != nil {
		f(c, m)
	}
}

// allocReplies are the allocator verbs' reply fields beside a view, by verb.
var allocReplies = map[contract.Verb]func(c *call, m *messages.Reply){
	contract.VerbLookupValue: func(c *call, m *messages.Reply) {
		if c.res.Code == contract.CodeOK {
			m.ValueState = c.res.ValueState
		}
	},
	contract.VerbImport: func(c *call, m *messages.Reply) {
		if r := c.res; r.Code == contract.CodeOK {
			m.Leases = changedLeases(c, r.Changes)
		} else if r.ItemIndex >= 0 {
			m.Item = proto.Uint32(uint32(r.ItemIndex))
		}
	},
	contract.VerbExclude:     heldValueField,
	contract.VerbResizeRange: heldValueField,
}

// heldValueField is the held value that refused an exclude or a shrinking resize.
func heldValueField(c *call, m *messages.Reply) {
	if r := c.res; (r.Code == contract.CodeValueBusy || r.Code == contract.CodeObjectInUse) && r.Lease.LSN != 0 {
		m.Value = proto.Uint64(r.Value)
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
