package bridge

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// The requests that span every shard (docs/api.md Part IV): the listings of objects and
// leases, and lease.release_all / lease.revoke_all. Each shard answers its part — on this
// node, or on its owner's (remotePart) — and the bridge joins the parts here.

// servePart asks shard k for its part of the request.
func (o *op) servePart(sys shardSystem, k uint32, done func(*actors.Reply)) {
	if o.kind == opFan {
		c := *o.cmd // each shard admits (and normalizes) its own copy
		sys.Write(k, &c, done)
		return
	}
	sys.Read(k, o.partRead(k), done)
}

// partRead is shard k's read of a listing. lease.list pages by shard then lsn: shards
// before the cursor's have nothing left to give, the cursor's goes on at its position,
// later ones start at their beginning.
func (o *op) partRead(k uint32) actors.ReadRequest {
	q := o.read
	if q.List == nil || q.Verb != contract.VerbListLeases {
		return q
	}
	l := *q.List
	switch {
	case k < o.shard:
		l.From = math.MaxUint64
	case k > o.shard:
		l.From = 0
	}
	q.List = &l
	return q
}

// merge joins the parts: the first rejection makes the whole answer that rejection
// (naming its shard); else the listing's page and its next cursor, or the bulk verb's
// sums.
func (o *op) merge(v contract.Verb, parts []*actors.Reply) (*actors.Reply, string) {
	for i, p := range parts {
		if p.Code != contract.CodeOK {
			return &actors.Reply{Code: p.Code, Message: fmt.Sprintf("shard %d: %s", i, p.Message), MemberIndex: -1, ItemIndex: -1}, ""
		}
	}
	switch {
	case o.kind == opFan:
		return mergeFan(parts), ""
	case v == contract.VerbListLeases:
		return mergeLeases(parts, o.shard, o.read.Limit)
	}
	return mergeObjects(parts, o.read.Limit)
}

// mergeFan sums a bulk verb's parts: the leases each shard ended or moved, and whether
// any shard has more.
func mergeFan(parts []*actors.Reply) *actors.Reply {
	out := &actors.Reply{Code: contract.CodeOK, MemberIndex: -1, ItemIndex: -1, FromRetryCache: true}
	for _, p := range parts {
		out.Count += p.Count
		out.More = out.More || p.More
		out.Changes = append(out.Changes, p.Changes...)
		out.FromRetryCache = out.FromRetryCache && p.FromRetryCache
	}
	return out
}

// mergeLeases joins lease.list's pages in shard order, from the cursor's shard on. A
// shard whose page has more ends the joined page there (its remaining leases come
// before any later shard's); the page is cut at limit.
func mergeLeases(parts []*actors.Reply, from uint32, limit int) (*actors.Reply, string) {
	out := &actors.Reply{Code: contract.CodeOK, MemberIndex: -1, ItemIndex: -1}
	for k := int(from); k < len(parts); k++ {
		p := parts[k].Page
		if p == nil {
			continue
		}
		for _, l := range p.Leases {
			if len(out.Leases) == limit {
				out.Truncated = true
				return out, contract.ShardCursor(uint32(k), l.LSN)
			}
			out.Leases = append(out.Leases, l)
		}
		if p.More {
			out.Truncated = true
			return out, contract.ShardCursor(uint32(k), p.Next)
		}
	}
	return out, ""
}

// mergeObjects joins the object listings' pages in id order (each id lives on one
// shard): the first limit ids of the union; the cursor is the last id shown when any
// shard had more.
func mergeObjects(parts []*actors.Reply, limit int) (*actors.Reply, string) {
	type item struct {
		id    string
		shard uint32
		part  *kernel.ListPage
		i     int
	}
	var items []item
	more := false
	for k, p := range parts {
		pg := p.Page
		if pg == nil {
			continue
		}
		more = more || pg.More
		for i := range max(len(pg.Resources), len(pg.Pools), len(pg.Ranges), len(pg.Runs)) {
			var id string
			switch {
			case len(pg.Resources) > 0:
				id = pg.Resources[i].ID
			case len(pg.Pools) > 0:
				id = pg.Pools[i].ID
			case len(pg.Ranges) > 0:
				id = pg.Ranges[i].ID
			default:
				id = pg.Runs[i].ID
			}
			items = append(items, item{id: id, shard: uint32(k), part: pg, i: i})
		}
	}
	slices.SortFunc(items, func(a, b item) int { return strings.Compare(a.id, b.id) })
	if len(items) > limit {
		items, more = items[:limit], true
	}
	page := &kernel.ListPage{}
	out := &actors.Reply{Code: contract.CodeOK, MemberIndex: -1, ItemIndex: -1, Page: page}
	for _, it := range items {
		switch pg := it.part; {
		case len(pg.Resources) > 0:
			page.Resources = append(page.Resources, pg.Resources[it.i])
		case len(pg.Pools) > 0:
			page.Pools = append(page.Pools, pg.Pools[it.i])
		case len(pg.Ranges) > 0:
			page.Ranges = append(page.Ranges, pg.Ranges[it.i])
		default:
			page.Runs = append(page.Runs, pg.Runs[it.i])
		}
	}
	if more && len(items) > 0 {
		return out, contract.KeyCursor(items[len(items)-1].id)
	}
	return out, ""
}
