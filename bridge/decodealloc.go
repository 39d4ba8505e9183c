package bridge

import (
	"slices"
	"strconv"

	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/messages"
)

// The allocator endpoints (docs/api.md Part IV). Object verbs route by the object's id,
// lease.consume by its lease id, lease.import by its first member; the listings of
// objects and leases and the bulk verbs go to every shard and the bridge joins the
// parts (merge.go). kernel.Validate checks the shapes of the writes.

func allocSpecs() []*verbSpec {
	listObjects := func() proto.Message { return new(messages.ListObjectsRequest) }
	value := func() proto.Message { return new(messages.ValueRequest) }
	exclude := func() proto.Message { return new(messages.ExcludeRequest) }
	bulk := func() proto.Message { return new(messages.BulkRequest) }
	return []*verbSpec{
		{verb: contract.VerbListResources, newReq: listObjects, prepare: prepListObjects},
		{verb: contract.VerbListPools, newReq: listObjects, prepare: prepListObjects},
		{verb: contract.VerbListRanges, newReq: listObjects, prepare: prepListObjects},
		{verb: contract.VerbListRuns, newReq: listObjects, prepare: prepListObjects},
		verb(contract.VerbLookupValue, prepLookup),
		verb(contract.VerbListAllocations, prepAllocations),
		verb(contract.VerbListHoldings, prepHoldings),
		verb(contract.VerbListWork, prepListWork),
		{verb: contract.VerbReleaseValue, newReq: value, prepare: prepValue},
		{verb: contract.VerbRevokeValue, newReq: value, prepare: prepValue},
		{verb: contract.VerbReclaimValue, newReq: value, prepare: prepValue},
		{verb: contract.VerbExclude, newReq: exclude, prepare: prepExclude},
		{verb: contract.VerbInclude, newReq: exclude, prepare: prepExclude},
		verb(contract.VerbResizeRange, prepResizeRange),
		verb(contract.VerbResizePool, prepResizePool),
		verb(contract.VerbConsume, prepRelease),
		verb(contract.VerbImport, prepImport),
		{verb: contract.VerbReleaseAll, newReq: bulk, prepare: prepBulk},
		{verb: contract.VerbRevokeAll, newReq: bulk, prepare: prepBulk},
	}
}

// labelsOf turns a request's label map into the kernel's form: sorted by key.
func labelsOf(m map[string]string) []kernel.Label {
	if len(m) == 0 {
		return nil
	}
	ls := make([]kernel.Label, 0, len(m))
	for k, v := range m {
		ls = append(ls, kernel.Label{Key: k, Value: v})
	}
	slices.SortFunc(ls, func(a, b kernel.Label) int {
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	return ls
}

// pageLimit reads a listing's limit: 1–max, def when absent.
func pageLimit(limit *uint32, def, maxLimit int) (int, *kernel.Rejection) {
	if limit == nil {
		return def, nil
	}
	if *limit < 1 || int(*limit) > maxLimit {
		return 0, invalid("limit: must be between 1 and %d", maxLimit)
	}
	return int(*limit), nil
}

// positionCursor reads the cursor of a listing of one shard: a position to go on at.
func positionCursor(cursor string) (uint64, *kernel.Rejection) {
	key, found, ok := contract.ParseKeyCursor(cursor)
	if !ok {
		return 0, invalid("cursor: not a cursor of this listing")
	}
	if !found {
		return 0, nil
	}
	n, err := strconv.ParseUint(key, 10, 64)
	if err != nil {
		return 0, invalid("cursor: not a cursor of this listing")
	}
	return n, nil
}

func prepListObjects(_ *Bridge, _ string, m proto.Message, o *op) *kernel.Rejection {
	r := m.(*messages.ListObjectsRequest)
	if r.Prefix != "" && !contract.ValidObjectIDPrefix(r.Prefix) {
		return invalid("prefix: characters of an id: A-Z a-z 0-9 _ - : / @ +, at most 128")
	}
	limit, rej := pageLimit(r.Limit, contract.DefaultPageLimit, contract.MaxPageLimit)
	if rej != nil {
		return rej
	}
	after, found, ok := contract.ParseKeyCursor(r.Cursor)
	if !ok {
		return invalid("cursor: not a cursor of this listing")
	}
	*o = op{kind: opList, read: actors.ReadRequest{Limit: limit,
		List: &kernel.ListQuery{Prefix: r.Prefix, After: after, HasAfter: found, Limit: limit}}}
	return nil
}

// prepListLeases is lease.list: by holder or label (the state and, with a holder, the
// label filtering), in pages over every shard, ordered by shard then lsn.
func prepListLeases(_ *Bridge, _ string, r *messages.ListLeasesRequest, o *op) *kernel.Rejection {
	q := &kernel.ListQuery{ID: r.HolderId, State: r.State}
	if r.HolderId != "" {
		if rej := objectID("holder_id", r.HolderId); rej != nil {
			return rej
		}
	}
	if r.Label != "" {
		k, v, ok := contract.ParseLabel(r.Label)
		if !ok {
			return invalid("label: key=value, a valid label")
		}
		q.Label, q.HasLabel = kernel.Label{Key: k, Value: v}, true
	}
	switch r.State {
	case "", contract.StateReserved, contract.StateActive, contract.StateRevoking:
	default:
		return invalid("state: reserved, active or revoking")
	}
	if r.HolderId == "" && !q.HasLabel {
		return invalid("holder_id: required (or label)")
	}
	limit, rej := pageLimit(r.Limit, messages.DefaultListLimit, messages.MaxListLimit)
	if rej != nil {
		return rej
	}
	shard, pos, ok := contract.ParseShardCursor(r.Cursor)
	if !ok {
		return invalid("cursor: not a cursor of this listing")
	}
	q.Limit, q.From = limit, pos
	*o = op{kind: opList, shard: shard, read: actors.ReadRequest{ID: r.HolderId, Limit: limit, List: q}}
	return nil
}

func prepLookup(b *Bridge, tenant string, r *messages.LookupValueRequest, o *op) *kernel.Rejection {
	if rej := b.objectRead(tenant, "range_id", r.RangeId, r.MinLsn, r.WaitMs, o); rej != nil {
		return rej
	}
	o.read.Value = r.Value
	return nil
}

// pagedRead is a listing of one object's shard: range.allocations, pool.holdings,
// work.list.
func (b *Bridge) pagedRead(tenant, field, id, cursor string, limit *uint32, minLSN uint64, waitMs *uint32, o *op) (*kernel.ListQuery, *kernel.Rejection) {
	if rej := b.objectRead(tenant, field, id, minLSN, waitMs, o); rej != nil {
		return nil, rej
	}
	n, rej := pageLimit(limit, contract.DefaultPageLimit, contract.MaxPageLimit)
	if rej != nil {
		return nil, rej
	}
	from, rej := positionCursor(cursor)
	if rej != nil {
		return nil, rej
	}
	o.read.List = &kernel.ListQuery{ID: id, From: from, Limit: n}
	return o.read.List, nil
}

func prepAllocations(b *Bridge, tenant string, r *messages.ListAllocationsRequest, o *op) *kernel.Rejection {
	q, rej := b.pagedRead(tenant, "range_id", r.RangeId, r.Cursor, r.Limit, r.MinLsn, r.WaitMs, o)
	if rej != nil {
		return rej
	}
	q.Excluded = r.Excluded
	return nil
}

func prepHoldings(b *Bridge, tenant string, r *messages.ListHoldingsRequest, o *op) *kernel.Rejection {
	_, rej := b.pagedRead(tenant, "pool_id", r.PoolId, r.Cursor, r.Limit, r.MinLsn, r.WaitMs, o)
	return rej
}

func prepListWork(b *Bridge, tenant string, r *messages.ListWorkRequest, o *op) *kernel.Rejection {
	switch r.Status {
	case "", contract.WorkActive, contract.WorkClaimed, contract.WorkDone, contract.WorkSplit, contract.WorkParked:
	default:
		return invalid("status: active, claimed, done, split or parked")
	}
	q, rej := b.pagedRead(tenant, "run_id", r.RunId, r.Cursor, r.Limit, r.MinLsn, r.WaitMs, o)
	if rej != nil {
		return rej
	}
	q.State = r.Status
	return nil
}

func prepValue(b *Bridge, tenant string, m proto.Message, o *op) *kernel.Rejection {
	r := m.(*messages.ValueRequest)
	c := b.objectWrite(tenant, r.OperationId, r.RangeId, o)
	c.Value, c.HolderID, c.Epoch, c.WholeLease = r.Value, r.HolderId, r.LeaseEpoch, r.WholeLease
	if r.LeaseId == "" {
		if r.LeaseEpoch != 0 {
			// Every lease starts at epoch 1: a late release of a value's earlier lease
			// would free the next one of the same holder.
			return invalid("lease_id: required with lease_epoch (an epoch alone cannot tell two leases of one value apart)")
		}
		return nil
	}
	shard, lsn, rej := b.leaseID(r.LeaseId)
	if rej != nil {
		return rej
	}
	if shard != o.shard {
		return invalid("lease_id: a lease of shard %d cannot hold a value of range %q (shard %d)", shard, r.RangeId, o.shard)
	}
	c.LeaseLSN = lsn
	return nil
}

func prepExclude(b *Bridge, tenant string, m proto.Message, o *op) *kernel.Rejection {
	r := m.(*messages.ExcludeRequest)
	c := b.objectWrite(tenant, r.OperationId, r.RangeId, o)
	c.First, c.Last = r.First, r.Last
	return nil
}

func prepResizeRange(b *Bridge, tenant string, r *messages.ResizeRangeRequest, o *op) *kernel.Rejection {
	c := b.objectWrite(tenant, r.OperationId, r.RangeId, o)
	if r.First == nil && r.Last == nil && r.StaticBand == nil {
		return invalid("first: required when neither last nor static_band is given (an omitted bound keeps its value)")
	}
	c.First, c.Last = r.GetFirst(), r.GetLast()
	c.KeepFirst, c.KeepLast = r.First == nil, r.Last == nil
	if r.StaticBand != nil {
		c.Band, c.HasBand = kernel.Interval{First: r.StaticBand.First, Last: r.StaticBand.Last}, true
	}
	return nil
}

func prepResizePool(b *Bridge, tenant string, r *messages.ResizePoolRequest, o *op) *kernel.Rejection {
	b.objectWrite(tenant, r.OperationId, r.PoolId, o).Capacity = r.Capacity
	return nil
}

func prepImport(b *Bridge, tenant string, r *messages.ImportRequest, o *op) *kernel.Rejection {
	if len(r.Leases) == 0 || len(r.Leases) > contract.MaxImportLeases {
		return invalid("leases: between 1 and %d", contract.MaxImportLeases)
	}
	imports := make([]kernel.ImportLease, len(r.Leases))
	for i, l := range r.Leases {
		if l == nil {
			return invalid("leases[%d]: required", i)
		}
		members, rej := membersOf(l.Members, "leases["+strconv.Itoa(i)+"].members")
		if rej != nil {
			return rej
		}
		imports[i] = kernel.ImportLease{HolderID: l.HolderId, Members: members, Activate: l.Activate, TTLMillis: l.TtlMs,
			KeepAliveMillis: l.KeepaliveMs, Labels: labelsOf(l.Labels)}
	}
	shard := uint32(0)
	if len(imports[0].Members) > 0 {
		shard = b.objectShard(tenant, imports[0].Members[0].ID)
	}
	// Members of several placement keys: an import across keys (a group of bundle
	// leases), its home the first lease's first member's shard.
	var flat []kernel.Member
	for i := range imports {
		flat = append(flat, imports[i].Members...)
	}
	*o = op{kind: opWrite, shard: shard, cmd: &kernel.Command{OperationID: r.OperationId, Imports: imports,
		Shards: b.bundleShards(tenant, flat)}}
	return nil
}

// prepBulk is lease.release_all and lease.revoke_all: the same command to every shard.
func prepBulk(_ *Bridge, _ string, m proto.Message, o *op) *kernel.Rejection {
	r := m.(*messages.BulkRequest)
	k, v, ok := contract.ParseLabel(r.Label)
	if !ok {
		return invalid("label: key=value, a valid label")
	}
	limit, rej := pageLimit(r.Limit, contract.DefaultPageLimit, contract.MaxBulkLimit)
	if rej != nil {
		return rej
	}
	*o = op{kind: opFan, cmd: &kernel.Command{OperationID: r.OperationId, HolderID: r.HolderId,
		Label: kernel.Label{Key: k, Value: v}, Limit: uint32(limit), Reclaim: r.Reclaim}}
	return nil
}
