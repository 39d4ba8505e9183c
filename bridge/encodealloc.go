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
	for i := range p.Resources {
		if v := &p.Resources[i]; v.Tenant == c.tenant {
			m.Resources = append(m.Resources, wire.Resource(v))
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
	if r := c.res; r.Code == contract.CodeValueBusy || (r.Code == contract.CodeObjectInUse && r.Lease.LSN != 0) {
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
