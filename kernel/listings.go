package kernel

import "github.com/holdfast/holdfast/contract"

// The listings of docs/api.md Part IV, one shard's page each. A page is a seek in the
// ordered index and an ascent: O(log n) plus the entries it looks at, and it looks at a
// bounded number (ListScan), so no page walks a whole table. A listing whose filter
// skips entries may end a page short of Limit; More and Next say where the next one
// starts.

// ListQuery asks one shard for a page of a listing.
type ListQuery struct {
	Verb   Verb // the listing verb: resource/pool/range/run.list, lease.list, range.allocations, pool.holdings, work.list
	Tenant string
	// ID is the listed object's id (range.allocations, pool.holdings, work.list), or
	// lease.list's holder_id ("" for any holder).
	ID string
	// Prefix selects object ids (resource/pool/range/run.list).
	Prefix string
	// After resumes an object listing after this id (HasAfter); From resumes a positional
	// listing at this position (a value, a lease lsn, a work shard's index) or later.
	After    string
	HasAfter bool
	From     uint64
	// Label selects leases (lease.list: with ID, or alone), State filters them; State also
	// selects work shards by status (work.list: active, claimed, done, split, parked).
	Label    Label
	HasLabel bool
	State    string
	// Excluded lists a range's excluded intervals instead of its allocations.
	Excluded bool
	Limit    int
}

// ListPage is one shard's page: the items of the listed kind, in the listing's order.
type ListPage struct {
	Code      Code
	Resources []ResourceView
	Pools     []PoolView
	Ranges    []RangeView
	Runs      []RunView
	Works     []WorkView
	// Leases are lease.list's and pool.holdings' leases, and range.allocations' leases
	// beside Values (Leases[i] holds Values[i]).
	Leases   []LeaseView
	Values   []uint64
	Excluded []Interval
	// More says the listing goes on past this page: at NextKey (after that id) for
	// object listings, at Next (that position or later) for the others.
	More    bool
	NextKey string
	Next    uint64
}

// ListScan bounds the index entries one page looks at, given its limit.
func ListScan(limit int) int { return 4*limit + 64 }

// List answers one shard's page of a listing.
func (k *Kernel) List(q *ListQuery, p *ListPage) {
	*p = ListPage{}
	if q.Limit <= 0 {
		p.Code = contract.CodeInvalidRequest
		return
	}
	if f, ok := listers[q.Verb]; ok {
		f(k, q, p)
		return
	}
	p.Code = contract.CodeInvalidRequest
}

// listers are the listings by verb.
var listers = map[Verb]func(*Kernel, *ListQuery, *ListPage){
	contract.VerbListResources:   (*Kernel).listObjects,
	contract.VerbListPools:       (*Kernel).listObjects,
	contract.VerbListRanges:      (*Kernel).listObjects,
	contract.VerbListRuns:        (*Kernel).listObjects,
	contract.VerbListLeases:      (*Kernel).listLeases,
	contract.VerbListAllocations: (*Kernel).listAllocations,
	contract.VerbListHoldings:    (*Kernel).listHoldings,
	contract.VerbListWork:        (*Kernel).listWork,
}

// listedKind is the object table each object listing walks.
var listedKind = map[Verb]objKind{contract.VerbListResources: objResource, contract.VerbListPools: objPool,
	contract.VerbListRanges: objRange, contract.VerbListRuns: objRun}

// listObjects lists tenant's objects of one kind whose ids start with Prefix, by id.
func (k *Kernel) listObjects(q *ListQuery, p *ListPage) {
	kind := listedKind[q.Verb]
	base := q.Tenant + "\x00"
	from := base
	if q.HasAfter {
		from = base + q.After
	}
	n := 0
	var out Output
	k.ix.ascendObjects(kind, base+q.Prefix, from, q.HasAfter, func(it objItem) bool {
		if n == q.Limit {
			p.More = true
			return false
		}
		n++
		switch kind {
		case objResource:
			k.viewResource(it.slot, &out)
			p.Resources = append(p.Resources, out.Resource)
		case objPool:
			k.viewPool(it.slot, &out)
			p.Pools = append(p.Pools, out.Pool)
		case objRange:
			k.viewRange(it.slot, &out)
			p.Ranges = append(p.Ranges, out.Range)
		case objRun:
			k.viewRun(it.slot, &out)
			p.Runs = append(p.Runs, out.Run)
		}
		_, p.NextKey = splitKey(it.key)
		return true
	})
}

// listLeases lists tenant's live leases of a holder or under a label (at least one), in
// lsn order: the holder's leads when given, and the label and the state filter.
func (k *Kernel) listLeases(q *ListQuery, p *ListPage) {
	var state LeaseState
	if q.State != "" {
		if state = leaseStateByName(q.State); !state.Live() {
			p.Code = contract.CodeInvalidRequest
			return
		}
	}
	scanned := 0
	visit := func(lsn uint64) bool {
		if len(p.Leases) == q.Limit || scanned == ListScan(q.Limit) {
			p.More, p.Next = true, lsn
			return false
		}
		scanned++
		idx := k.leaseIdx[lsn]
		l := &k.leases[idx]
		if state != 0 && l.state != state {
			return true
		}
		if q.HasLabel && q.ID != "" && !k.hasLabel(l.labels, q.Label) {
			return true
		}
		p.Leases = append(p.Leases, k.leaseView(idx))
		return true
	}
	switch {
	case q.ID != "":
		if h, ok := k.holderIdx[string(k.tenantKey(q.Tenant, q.ID))]; ok {
			ascendPairs(k.ix.holders, uint64(h), q.From, visit)
		}
	case q.HasLabel && state != 0:
		// By label and state: the bulk verbs' tree holds exactly these, nothing to skip.
		ascendLabelPair(k.ix.labelStates, q.Tenant+"\x00"+q.Label.Key+"="+q.Label.Value, uint64(state), q.From, visit)
	case q.HasLabel:
		k.ix.ascendLabel(q.Tenant+"\x00"+q.Label.Key+"="+q.Label.Value, q.From, visit)
	default:
		p.Code = contract.CodeInvalidRequest
	}
}

// listAllocations lists a range's allocated values, by value, each with the lease that
// holds it; with Excluded, its excluded intervals instead, by first value.
func (k *Kernel) listAllocations(q *ListQuery, p *ListPage) {
	idx, ok := k.findRange(q.Tenant, q.ID)
	if !ok {
		p.Code = contract.CodeRangeNotFound
		return
	}
	if q.Excluded {
		ex := k.ranges[idx].excluded
		i := firstIntervalFrom(ex, q.From)
		for ; i < len(ex) && len(p.Excluded) < q.Limit; i++ {
			p.Excluded = append(p.Excluded, ex[i])
		}
		if i < len(ex) {
			p.More, p.Next = true, ex[i].First
		}
		return
	}
	k.ascendValues(idx, q.From, func(v, lsn uint64) bool {
		if len(p.Values) == q.Limit {
			p.More, p.Next = true, v
			return false
		}
		p.Values = append(p.Values, v)
		p.Leases = append(p.Leases, k.leaseView(k.leaseIdx[lsn]))
		return true
	})
}

// firstIntervalFrom is the index of the first interval of ivs (sorted, disjoint) that
// ends at or after v.
func firstIntervalFrom(ivs []Interval, v uint64) int {
	lo, hi := 0, len(ivs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ivs[m].Last < v {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// listHoldings lists the live leases holding units of a pool, in lsn order.
func (k *Kernel) listHoldings(q *ListQuery, p *ListPage) {
	idx, ok := k.poolIdx[string(k.tenantKey(q.Tenant, q.ID))]
	if !ok {
		p.Code = contract.CodePoolNotFound
		return
	}
	ascendPairs(k.ix.holdings, uint64(idx), q.From, func(lsn uint64) bool {
		if len(p.Leases) == q.Limit {
			p.More, p.Next = true, lsn
			return false
		}
		p.Leases = append(p.Leases, k.leaseView(k.leaseIdx[lsn]))
		return true
	})
}

// listWork lists a run's work shards in creation order, those of one status when State
// names one ("claimed": active and held by a lease).
func (k *Kernel) listWork(q *ListQuery, p *ListPage) {
	ri, ok := k.findRun(q.Tenant, q.ID)
	if !ok {
		p.Code = contract.CodeRunNotFound
		return
	}
	var status WorkStatus
	claimed := q.State == contract.WorkClaimed
	if q.State != "" && !claimed {
		if status = workStatusByName(q.State); status == 0 {
			p.Code = contract.CodeInvalidRequest
			return
		}
	}
	ws := k.runs[ri].work
	scanned := 0
	for i := q.From; i < uint64(len(ws)); i++ {
		if len(p.Works) == q.Limit || scanned == ListScan(q.Limit) {
			p.More, p.Next = true, i
			return
		}
		scanned++
		w := &k.works[ws[i]]
		switch {
		case claimed && (w.status != WorkActive || w.lease == 0):
			continue
		case status != 0 && w.status != status:
			continue
		}
		p.Works = append(p.Works, k.workView(ws[i], nil))
	}
}

// leaseView is the view of a live lease as a value of its own.
func (k *Kernel) leaseView(idx int32) LeaseView {
	var out Output
	k.viewLease(idx, &out)
	return out.Lease
}

// hasLabel reports whether label set ref carries l.
func (k *Kernel) hasLabel(ref int32, l Label) bool {
	for _, x := range k.labelsOf(ref) {
		if x == l {
			return true
		}
	}
	return false
}

func leaseStateByName(s string) LeaseState {
	for i, n := range leaseStateNames {
		if i > 0 && n == s {
			return LeaseState(i)
		}
	}
	return 0
}

func workStatusByName(s string) WorkStatus {
	for i, n := range workStatusNames {
		if i > 0 && n == s {
			return WorkStatus(i)
		}
	}
	return 0
}
