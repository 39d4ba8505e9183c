package client

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/messages"
)

// The allocator calls (docs/api.md Part IV): lookups and listings, release, revoke and
// reclaim by value, exclusions, resizes, consumed capacity, imports and the bulk verbs.

// Interval is the values First..Last of a range, both included.
type Interval struct{ First, Last uint64 }

func (iv *Interval) wire() *messages.Interval {
	if iv == nil {
		return nil
	}
	return &messages.Interval{First: iv.First, Last: iv.Last}
}

// RangeSpec is a range.create with everything it may carry.
type RangeSpec struct {
	ID          string
	First, Last uint64
	// Strategy is lowest_free (default), random or least_recently_freed.
	Strategy string
	// Excluded values are never handed out; a request naming one is value_excluded.
	Excluded []Interval
	// StaticBand is taken by "any" only when no other value is free.
	StaticBand *Interval
	// Format says how clients show the values: RangeFormatPort, RangeFormatIPv4,
	// RangeFormatMAC or "" (FormatValue, ParseValue).
	Format string
}

// CreateRangeSpec creates a range with exclusions, a static band or a format. Domain
// codes: already_exists, range_table_full.
func (c *Client) CreateRangeSpec(ctx context.Context, s RangeSpec, opts ...WriteOption) (*RangeResult, error) {
	o := writeOpts(opts)
	req := &messages.CreateRangeRequest{OperationId: o.opID, RangeId: s.ID, First: s.First, Last: s.Last,
		Strategy: s.Strategy, StaticBand: s.StaticBand.wire(), Format: s.Format}
	for i := range s.Excluded {
		req.Excluded = append(req.Excluded, s.Excluded[i].wire())
	}
	return c.rangeCall(ctx, contract.VerbCreateRange, req, o.opID)
}

func (c *Client) rangeCall(ctx context.Context, v contract.Verb, req proto.Message, opID string) (*RangeResult, error) {
	return callAs(ctx, c, v, req, opID, 0, rangeResult)
}

// Page asks for one page of a listing: where to go on (the NextCursor of the page
// before; "" for the first) and how many items at most (0: the server's default).
type Page struct {
	Cursor string
	Limit  int
}

func (p Page) limit() *uint32 {
	if p.Limit == 0 {
		return nil
	}
	l := uint32(min(max(p.Limit, 0), 1<<32-1)) // out of bounds: the server names it
	return &l
}

// ObjectsResult is a page of resource.list, pool.list, range.list or run.list.
type ObjectsResult struct {
	Result
	Resources []*messages.Resource
	Pools     []*messages.Pool
	Ranges    []*messages.Range
	Runs      []*messages.Run
	// NextCursor continues the listing; "" on the last page.
	NextCursor  string
	AppliedLSNs []*messages.ShardLsn
}

func (c *Client) listObjects(ctx context.Context, v contract.Verb, prefix string, p Page) (*ObjectsResult, error) {
	r, err := c.call(ctx, v, &messages.ListObjectsRequest{Prefix: prefix, Cursor: p.Cursor, Limit: p.limit()}, "", 0)
	if err != nil {
		return nil, err
	}
	m := r.Reply
	return &ObjectsResult{Result: *r, Resources: m.Resources, Pools: m.Pools, Ranges: m.Ranges, Runs: m.Runs,
		NextCursor: m.NextCursor, AppliedLSNs: m.AppliedLsns}, nil
}

// ListResources lists the tenant's resources whose ids start with prefix, in id order.
func (c *Client) ListResources(ctx context.Context, prefix string, p Page) (*ObjectsResult, error) {
	return c.listObjects(ctx, contract.VerbListResources, prefix, p)
}

// ListPools lists the tenant's pools whose ids start with prefix, in id order.
func (c *Client) ListPools(ctx context.Context, prefix string, p Page) (*ObjectsResult, error) {
	return c.listObjects(ctx, contract.VerbListPools, prefix, p)
}

// ListRanges lists the tenant's ranges whose ids start with prefix, in id order.
func (c *Client) ListRanges(ctx context.Context, prefix string, p Page) (*ObjectsResult, error) {
	return c.listObjects(ctx, contract.VerbListRanges, prefix, p)
}

// ListRuns lists the tenant's runs whose ids start with prefix, in id order.
func (c *Client) ListRuns(ctx context.Context, prefix string, p Page) (*ObjectsResult, error) {
	return c.listObjects(ctx, contract.VerbListRuns, prefix, p)
}

// LeaseQuery selects leases for ListLeasesPage: by holder or label ("key=value"), at
// least one; State (reserved, active, revoking) filters them.
type LeaseQuery struct {
	Holder, Label, State string
	Page
}

// LeasesResult is a page of leases: lease.list's, pool.holdings'.
type LeasesResult struct {
	Result
	Leases []Lease
	// Truncated is true when more leases follow (lease.list: the limit cut the list).
	Truncated   bool
	NextCursor  string
	AppliedLSNs []*messages.ShardLsn
}

func leasesOf(ls []*messages.Lease) []Lease {
	out := make([]Lease, len(ls))
	for i, l := range ls {
		out[i] = Lease{l}
	}
	return out
}

// ListLeasesPage lists live leases by holder, label or state, a page at a time, ordered
// by shard then by issue.
func (c *Client) ListLeasesPage(ctx context.Context, q LeaseQuery) (*LeasesResult, error) {
	req := &messages.ListLeasesRequest{HolderId: q.Holder, Label: q.Label, State: q.State, Cursor: q.Cursor, Limit: q.limit()}
	r, err := c.call(ctx, contract.VerbListLeases, req, "", 0)
	if err != nil {
		return nil, err
	}
	return &LeasesResult{Result: *r, Leases: leasesOf(r.Reply.Leases), Truncated: r.Reply.Truncated, NextCursor: r.Reply.NextCursor,
		AppliedLSNs: r.Reply.AppliedLsns}, nil
}

// LookupResult is range.lookup's answer: State is ValueFree, ValueHeld (Lease holds
// it) or ValueExcluded.
type LookupResult struct {
	Result
	State string
	Lease Lease
}

// Value states of LookupValue.
const (
	ValueFree     = contract.ValueFree
	ValueHeld     = contract.ValueHeld
	ValueExcluded = contract.ValueExcluded
)

// LookupValue says what value v of a range is, and which lease holds it. Codes: ok,
// range_not_found, value_out_of_range.
func (c *Client) LookupValue(ctx context.Context, rangeID string, v uint64, opts ...ReadOption) (*LookupResult, error) {
	minLSN, waitMs, extra := readOpts(opts)
	return callAs(ctx, c, contract.VerbLookupValue, &messages.LookupValueRequest{RangeId: rangeID, Value: v, MinLsn: minLSN, WaitMs: waitMs}, "", extra, func(r *Result) *LookupResult {
		return &LookupResult{Result: *r, State: r.Reply.ValueState, Lease: Lease{r.Reply.Lease}}
	})
}

// AllocationsResult is a page of range.allocations: values with their leases, or the
// excluded intervals.
type AllocationsResult struct {
	Result
	Allocations []*messages.Allocation
	Excluded    []*messages.Interval
	NextCursor  string
}

// ListAllocations lists a range's allocated values in value order, each with its lease.
// Codes: ok, range_not_found.
func (c *Client) ListAllocations(ctx context.Context, rangeID string, p Page) (*AllocationsResult, error) {
	return c.allocations(ctx, rangeID, p, false)
}

// ListExcluded lists a range's excluded intervals in value order. Codes: ok,
// range_not_found.
func (c *Client) ListExcluded(ctx context.Context, rangeID string, p Page) (*AllocationsResult, error) {
	return c.allocations(ctx, rangeID, p, true)
}

func (c *Client) allocations(ctx context.Context, rangeID string, p Page, excluded bool) (*AllocationsResult, error) {
	req := &messages.ListAllocationsRequest{RangeId: rangeID, Cursor: p.Cursor, Limit: p.limit(), Excluded: excluded}
	return callAs(ctx, c, contract.VerbListAllocations, req, "", 0, func(r *Result) *AllocationsResult {
		return &AllocationsResult{Result: *r, Allocations: r.Reply.Allocations, Excluded: r.Reply.Excluded, NextCursor: r.Reply.NextCursor}
	})
}

// ListHoldings lists the live leases holding units of a pool, in issue order. Codes: ok,
// pool_not_found.
func (c *Client) ListHoldings(ctx context.Context, poolID string, p Page) (*LeasesResult, error) {
	return callAs(ctx, c, contract.VerbListHoldings, &messages.ListHoldingsRequest{PoolId: poolID, Cursor: p.Cursor, Limit: p.limit()}, "", 0, func(r *Result) *LeasesResult {
		return &LeasesResult{Result: *r, Leases: leasesOf(r.Reply.Leases), NextCursor: r.Reply.NextCursor}
	})
}

// WorksResult is a page of work.list.
type WorksResult struct {
	Result
	Works      []*messages.Work
	NextCursor string
}

// ListWork lists a run's work shards in creation order, of one status when given
// (active, claimed, done, split, parked). Codes: ok, run_not_found.
func (c *Client) ListWork(ctx context.Context, runID, status string, p Page) (*WorksResult, error) {
	req := &messages.ListWorkRequest{RunId: runID, Status: status, Cursor: p.Cursor, Limit: p.limit()}
	return callAs(ctx, c, contract.VerbListWork, req, "", 0, func(r *Result) *WorksResult {
		return &WorksResult{Result: *r, Works: r.Reply.Works, NextCursor: r.Reply.NextCursor}
	})
}

// ReleaseValue frees value v of a range that holder holds: the lease holding it is
// released. With WithLease the lease must be that one, and with epoch (non-zero, which
// needs WithLease) at that epoch: the fence of ReleaseValueFenced. With wholeLease a
// lease holding more than the value is released whole (else lease_has_other_members).
// Domain codes: range_not_found, value_out_of_range, value_free, holder_mismatch,
// stale_epoch, invalid_state, lease_has_other_members.
func (c *Client) ReleaseValue(ctx context.Context, holder, rangeID string, v, epoch uint64, wholeLease bool, opts ...WriteOption) (*LeaseResult, error) {
	o := writeOpts(opts)
	req := &messages.ValueRequest{OperationId: o.opID, RangeId: rangeID, Value: v, HolderId: holder, LeaseEpoch: epoch,
		WholeLease: wholeLease, LeaseId: o.leaseID}
	return c.leaseCall(ctx, contract.VerbReleaseValue, req, o.opID)
}

// ReleaseValueFenced is ReleaseValue fenced by the lease's token f: it frees v only while
// lease f.LeaseID at epoch f.Epoch holds it (stale_epoch otherwise), so a late call never
// frees a later lease of the same value.
func (c *Client) ReleaseValueFenced(ctx context.Context, holder, rangeID string, v uint64, f Fence, wholeLease bool, opts ...WriteOption) (*LeaseResult, error) {
	return c.ReleaseValue(ctx, holder, rangeID, v, f.Epoch, wholeLease, append(opts, WithLease(f.LeaseID))...)
}

// RevokeValue revokes the active lease holding value v, whoever holds it (an operator's
// call; ReclaimValue then frees it); with WithLease only while that lease holds it.
// Domain codes: range_not_found, value_out_of_range, value_free, stale_epoch,
// invalid_state.
func (c *Client) RevokeValue(ctx context.Context, rangeID string, v uint64, opts ...WriteOption) (*LeaseResult, error) {
	o := writeOpts(opts)
	return c.leaseCall(ctx, contract.VerbRevokeValue, &messages.ValueRequest{OperationId: o.opID, RangeId: rangeID, Value: v, LeaseId: o.leaseID}, o.opID)
}

// ReclaimValue reclaims the revoking lease holding value v: its members are free again;
// with WithLease only while that lease holds it. Domain codes: as RevokeValue's.
func (c *Client) ReclaimValue(ctx context.Context, rangeID string, v uint64, opts ...WriteOption) (*LeaseResult, error) {
	o := writeOpts(opts)
	return c.leaseCall(ctx, contract.VerbReclaimValue, &messages.ValueRequest{OperationId: o.opID, RangeId: rangeID, Value: v, LeaseId: o.leaseID}, o.opID)
}

// Exclude stops values first..last of a range being handed out. Domain codes:
// range_not_found, value_out_of_range, value_busy, exclusion_table_full.
func (c *Client) Exclude(ctx context.Context, rangeID string, first, last uint64, opts ...WriteOption) (*RangeResult, error) {
	o := writeOpts(opts)
	return c.rangeCall(ctx, contract.VerbExclude, &messages.ExcludeRequest{OperationId: o.opID, RangeId: rangeID, First: first, Last: last}, o.opID)
}

// Include hands values first..last of a range out again. Domain codes: range_not_found,
// value_out_of_range, exclusion_table_full.
func (c *Client) Include(ctx context.Context, rangeID string, first, last uint64, opts ...WriteOption) (*RangeResult, error) {
	o := writeOpts(opts)
	return c.rangeCall(ctx, contract.VerbInclude, &messages.ExcludeRequest{OperationId: o.opID, RangeId: rangeID, First: first, Last: last}, o.opID)
}

// ResizeRange gives a range new bounds in place, and a new static band when band is not
// nil. Domain codes: range_not_found, object_in_use (a held value outside the bounds).
func (c *Client) ResizeRange(ctx context.Context, rangeID string, first, last uint64, band *Interval, opts ...WriteOption) (*RangeResult, error) {
	return c.ResizeRangeBounds(ctx, rangeID, &first, &last, band, opts...)
}

// ResizeRangeBounds is ResizeRange where a nil bound keeps its value: moving only the end
// of a range never moves its start.
func (c *Client) ResizeRangeBounds(ctx context.Context, rangeID string, first, last *uint64, band *Interval, opts ...WriteOption) (*RangeResult, error) {
	o := writeOpts(opts)
	req := &messages.ResizeRangeRequest{OperationId: o.opID, RangeId: rangeID, First: first, Last: last, StaticBand: band.wire()}
	return c.rangeCall(ctx, contract.VerbResizeRange, req, o.opID)
}

// ResizePool gives a pool a new capacity. Domain codes: pool_not_found, object_in_use
// (reserved + active + consumed is more).
func (c *Client) ResizePool(ctx context.Context, poolID string, capacity uint64, opts ...WriteOption) (*PoolResult, error) {
	o := writeOpts(opts)
	return callAs(ctx, c, contract.VerbResizePool, &messages.ResizePoolRequest{OperationId: o.opID, PoolId: poolID, Capacity: capacity}, o.opID, 0, poolResult)
}

// Consume confirms a hold of pool units as used up for good: the lease ends consumed and
// its units leave their pools. Domain codes: lease_not_found, lease_retired,
// holder_mismatch, stale_epoch, invalid_state, lease_expired.
func (c *Client) Consume(ctx context.Context, holder string, f Fence, opts ...WriteOption) (*LeaseResult, error) {
	o := writeOpts(opts)
	req := &messages.ReleaseRequest{OperationId: o.opID, LeaseId: f.LeaseID, HolderId: holder, LeaseEpoch: f.Epoch}
	return c.leaseCall(ctx, contract.VerbConsume, req, o.opID)
}

// ImportLease is one lease of an Import: a reserve's fields, the same type.
type ImportLease = ReserveRequest

// ImportResult is lease.import's answer: the leases granted, in order; on a domain
// failure Item names the failing lease.
type ImportResult struct {
	Result
	Leases []Lease
	Item   *uint32
}

// Import grants up to 1000 leases at once, all or nothing, as a migration moves existing
// allocations over. Domain codes: lease.reserve's for resources, pools and ranges.
func (c *Client) Import(ctx context.Context, leases []ImportLease, opts ...WriteOption) (*ImportResult, error) {
	o := writeOpts(opts)
	req := &messages.ImportRequest{OperationId: o.opID}
	for _, l := range leases {
		req.Leases = append(req.Leases, &messages.ImportLease{HolderId: l.Holder, Members: l.Members, TtlMs: durationMs(l.TTL),
			Activate: l.Activate, KeepaliveMs: durationMs(l.KeepAlive), Labels: l.Labels})
	}
	return callAs(ctx, c, contract.VerbImport, req, o.opID, 0, func(r *Result) *ImportResult {
		return &ImportResult{Result: *r, Leases: leasesOf(r.Reply.Leases), Item: r.Reply.Item}
	})
}

// BulkResult is the answer of lease.release_all and lease.revoke_all: how many leases
// ended or moved, whether more carry the label, and those leases.
type BulkResult struct {
	Result
	Count  uint64
	More   bool
	Leases []Lease
}

func (c *Client) bulk(ctx context.Context, v contract.Verb, req *messages.BulkRequest) (*BulkResult, error) {
	return callAs(ctx, c, v, req, req.OperationId, 0, func(r *Result) *BulkResult {
		return &BulkResult{Result: *r, Count: r.Reply.Count, More: r.Reply.More, Leases: leasesOf(r.Reply.Leases)}
	})
}

// ReleaseAll releases the holder's reserved and active leases carrying label
// ("key=value"), at most limit per shard (0: the server's default); call again while
// More.
func (c *Client) ReleaseAll(ctx context.Context, holder, label string, limit int, opts ...WriteOption) (*BulkResult, error) {
	o := writeOpts(opts)
	req := &messages.BulkRequest{OperationId: o.opID, HolderId: holder, Label: label, Limit: Page{Limit: limit}.limit()}
	return c.bulk(ctx, contract.VerbReleaseAll, req)
}

// RevokeAll revokes every active lease carrying label, whoever holds it; with reclaim
// also reclaims them (and revoking ones), so their members are free at once. At most
// limit per shard; call again while More.
func (c *Client) RevokeAll(ctx context.Context, label string, limit int, reclaim bool, opts ...WriteOption) (*BulkResult, error) {
	o := writeOpts(opts)
	req := &messages.BulkRequest{OperationId: o.opID, Label: label, Limit: Page{Limit: limit}.limit(), Reclaim: reclaim}
	return c.bulk(ctx, contract.VerbRevokeAll, req)
}
