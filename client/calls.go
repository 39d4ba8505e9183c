package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/messages"
)

// Resource is a lease member taking the named resource exclusively.
func Resource(id string) *messages.Member { return &messages.Member{ResourceId: id} }

// PoolUnits is a lease member taking n units of a capacity pool.
func PoolUnits(id string, n uint64) *messages.Member {
	return &messages.Member{PoolId: id, Quantity: n}
}

// RangeAny is a lease member taking any free value of a range, chosen by the
// range's strategy.
func RangeAny(id string) *messages.Member { return &messages.Member{RangeId: id} }

// RangeValue is a lease member taking one specific value of a range.
func RangeValue(id string, v uint64) *messages.Member {
	return &messages.Member{RangeId: id, Value: &v}
}

type writeOptions struct {
	opID    string
	leaseID string
}

// WriteOption configures one write call.
type WriteOption func(*writeOptions)

// WithOperationID sets the operation id of a write (1–64 chars of
// A-Z a-z 0-9 _ - : / @ +, first alphanumeric, unique per tenant within the
// dedupe window). Without it the client generates one. Give the id of an
// earlier call to resolve its unknown outcome.
func WithOperationID(id string) WriteOption { return func(o *writeOptions) { o.opID = id } }

// WithLease names the lease a by-value verb (ReleaseValue, RevokeValue, ReclaimValue)
// means: it acts only while that lease holds the value, and answers stale_epoch once
// another lease does — a late call meant for a value's earlier lease never ends the next
// one (every lease starts at epoch 1, so an epoch alone cannot tell them apart).
// ReleaseValue with an epoch needs it.
func WithLease(leaseID string) WriteOption { return func(o *writeOptions) { o.leaseID = leaseID } }

func writeOpts(opts []WriteOption) writeOptions {
	var o writeOptions
	for _, f := range opts {
		f(&o)
	}
	if o.opID == "" {
		o.opID = NewOperationID()
	}
	return o
}

type readOptions struct {
	minLSN uint64
	wait   *time.Duration
}

// ReadOption configures one single-object read.
type ReadOption func(*readOptions)

// MinLSN makes the read wait until the shard has applied lsn (typically the
// LSN of an earlier write), then answer; if the wait passes first, the read is
// rejected with fence_not_applied (a *DefiniteError).
func MinLSN(lsn uint64) ReadOption { return func(o *readOptions) { o.minLSN = lsn } }

// Wait sets how long a MinLSN read may wait (0–10s; the server's default is
// 1s). It is sent as wait_ms, rounded up to whole milliseconds.
func Wait(d time.Duration) ReadOption { return func(o *readOptions) { o.wait = &d } }

func readOpts(opts []ReadOption) (minLSN uint64, waitMs *uint32, extra time.Duration) {
	var o readOptions
	for _, f := range opts {
		f(&o)
	}
	wait := time.Duration(messages.DefaultWaitMs) * time.Millisecond
	if o.wait != nil {
		ms := durationMs(*o.wait)
		if ms > 1<<32-1 {
			ms = 1<<32 - 1
		}
		w := uint32(ms)
		waitMs = &w
		wait = *o.wait
	}
	if o.minLSN > 0 {
		extra = wait + time.Second
	}
	return o.minLSN, waitMs, extra
}

// durationMs converts d to milliseconds, rounding up; negative is 0.
func durationMs(d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	return uint64((d + time.Millisecond - 1) / time.Millisecond)
}

// CreateResource creates a named resource. Domain codes: already_exists,
// resource_table_full.
func (c *Client) CreateResource(ctx context.Context, resourceID string, opts ...WriteOption) (*ResourceResult, error) {
	o := writeOpts(opts)
	req := &messages.CreateResourceRequest{OperationId: o.opID, ResourceId: resourceID}
	return callAs(ctx, c, contract.VerbCreateResource, req, o.opID, 0, resourceResult)
}

// CreatePool creates a capacity pool of capacity units. Domain codes:
// already_exists, pool_table_full.
func (c *Client) CreatePool(ctx context.Context, poolID string, capacity uint64, opts ...WriteOption) (*PoolResult, error) {
	o := writeOpts(opts)
	req := &messages.CreatePoolRequest{OperationId: o.opID, PoolId: poolID, Capacity: capacity}
	return callAs(ctx, c, contract.VerbCreatePool, req, o.opID, 0, poolResult)
}

// CreateRange creates the value range [first, last]. strategy is one of
// messages.StrategyLowestFree (also ""), StrategyRandom and
// StrategyLeastRecentlyFreed. Domain codes: already_exists, range_table_full.
func (c *Client) CreateRange(ctx context.Context, rangeID string, first, last uint64, strategy string, opts ...WriteOption) (*RangeResult, error) {
	o := writeOpts(opts)
	req := &messages.CreateRangeRequest{OperationId: o.opID, RangeId: rangeID, First: first, Last: last, Strategy: strategy}
	return callAs(ctx, c, contract.VerbCreateRange, req, o.opID, 0, rangeResult)
}

// DeleteResource deletes a resource no lease holds; the result shows it as it was. Its id
// is free for a new resource at once. Domain codes: resource_not_found, object_in_use
// (held: release, revoke or wait for expiry first).
func (c *Client) DeleteResource(ctx context.Context, resourceID string, opts ...WriteOption) (*ResourceResult, error) {
	o := writeOpts(opts)
	return callAs(ctx, c, contract.VerbDeleteResource, &messages.DeleteResourceRequest{OperationId: o.opID, ResourceId: resourceID}, o.opID, 0, resourceResult)
}

// DeletePool deletes a pool with no units reserved or active. Domain codes:
// pool_not_found, object_in_use.
func (c *Client) DeletePool(ctx context.Context, poolID string, opts ...WriteOption) (*PoolResult, error) {
	o := writeOpts(opts)
	return callAs(ctx, c, contract.VerbDeletePool, &messages.DeletePoolRequest{OperationId: o.opID, PoolId: poolID}, o.opID, 0, poolResult)
}

// DeleteRange deletes a range with no value allocated (and forgets its freed values).
// Domain codes: range_not_found, object_in_use.
func (c *Client) DeleteRange(ctx context.Context, rangeID string, opts ...WriteOption) (*RangeResult, error) {
	o := writeOpts(opts)
	return callAs(ctx, c, contract.VerbDeleteRange, &messages.DeleteRangeRequest{OperationId: o.opID, RangeId: rangeID}, o.opID, 0, rangeResult)
}

// ReserveRequest describes a lease.reserve.
type ReserveRequest struct {
	// Holder is the holder id claiming the members.
	Holder string
	// Members, built with Resource, PoolUnits, RangeAny and RangeValue, of
	// any placement keys (the lease lives on the first one's shard), taken in
	// order, all or nothing.
	Members []*messages.Member
	// TTL of the reserved lease, sent as ttl_ms rounded up (ignored by the
	// server when Activate is set).
	TTL time.Duration
	// Activate creates the lease active instead of reserved.
	Activate bool
	// KeepAlive, with Activate, makes the active lease expire to revoking unless it is
	// renewed within this long (0: it never expires).
	KeepAlive time.Duration
	// Labels are the lease's key/value pairs (at most 8), e.g. owner_type and
	// owner_uuid: selectable in ListLeasesPage, ReleaseAll and RevokeAll.
	Labels map[string]string
}

// Reserve claims the members for the holder as one lease. Domain codes:
// resource_not_found, pool_not_found, range_not_found, resource_busy,
// insufficient_capacity, value_busy, value_out_of_range, range_exhausted,
// lease_table_full, lease_member_table_full, expiration_index_full.
func (c *Client) Reserve(ctx context.Context, r ReserveRequest, opts ...WriteOption) (*LeaseResult, error) {
	o := writeOpts(opts)
	req := &messages.ReserveRequest{
		OperationId: o.opID,
		HolderId:    r.Holder,
		Members:     r.Members,
		TtlMs:       durationMs(r.TTL),
		Activate:    r.Activate,
		KeepaliveMs: durationMs(r.KeepAlive),
		Labels:      r.Labels,
	}
	return c.leaseCall(ctx, contract.VerbReserve, req, o.opID)
}

// Activate moves a reserved lease, whose deadline is still ahead, to active.
// Domain codes: lease_not_found, lease_retired, holder_mismatch, stale_epoch,
// invalid_state, lease_expired.
func (c *Client) Activate(ctx context.Context, holder string, f Fence, opts ...WriteOption) (*LeaseResult, error) {
	return c.ActivateKeepAlive(ctx, holder, f, 0, opts...)
}

// ActivateKeepAlive activates a reserved lease with a keep-alive: it must then be
// renewed (Renew, or KeepAlive) within keepAlive, else it moves to revoking. Domain
// codes: as for Activate.
func (c *Client) ActivateKeepAlive(ctx context.Context, holder string, f Fence, keepAlive time.Duration, opts ...WriteOption) (*LeaseResult, error) {
	o := writeOpts(opts)
	req := &messages.ActivateRequest{OperationId: o.opID, LeaseId: f.LeaseID, HolderId: holder, LeaseEpoch: f.Epoch,
		KeepaliveMs: durationMs(keepAlive)}
	return c.leaseCall(ctx, contract.VerbActivate, req, o.opID)
}

// Renew sets a reserved lease's deadline to now + ttl (never earlier for a work claim),
// or moves an active lease's keep-alive deadline to now + ttl (never earlier). Domain
// codes: as for Activate.
func (c *Client) Renew(ctx context.Context, holder string, f Fence, ttl time.Duration, opts ...WriteOption) (*LeaseResult, error) {
	o := writeOpts(opts)
	req := &messages.RenewRequest{OperationId: o.opID, LeaseId: f.LeaseID, HolderId: holder, LeaseEpoch: f.Epoch, TtlMs: durationMs(ttl)}
	return c.leaseCall(ctx, contract.VerbRenew, req, o.opID)
}

// Release gives the lease up. Domain codes: lease_not_found, lease_retired,
// holder_mismatch, stale_epoch, invalid_state.
func (c *Client) Release(ctx context.Context, holder string, f Fence, opts ...WriteOption) (*LeaseResult, error) {
	o := writeOpts(opts)
	req := &messages.ReleaseRequest{OperationId: o.opID, LeaseId: f.LeaseID, HolderId: holder, LeaseEpoch: f.Epoch}
	return c.leaseCall(ctx, contract.VerbRelease, req, o.opID)
}

// Revoke moves an active lease to revoking and bumps its epoch (an operator
// verb: no holder). The members stay unavailable until Reclaim. Domain codes:
// lease_not_found, lease_retired, invalid_state.
func (c *Client) Revoke(ctx context.Context, leaseID string, opts ...WriteOption) (*LeaseResult, error) {
	o := writeOpts(opts)
	req := &messages.RevokeRequest{OperationId: o.opID, LeaseId: leaseID}
	return c.leaseCall(ctx, contract.VerbRevoke, req, o.opID)
}

// Reclaim moves a revoking lease to revoked and returns its members. Domain
// codes: lease_not_found, lease_retired, invalid_state.
func (c *Client) Reclaim(ctx context.Context, leaseID string, opts ...WriteOption) (*LeaseResult, error) {
	o := writeOpts(opts)
	req := &messages.ReclaimRequest{OperationId: o.opID, LeaseId: leaseID}
	return c.leaseCall(ctx, contract.VerbReclaim, req, o.opID)
}

func (c *Client) leaseCall(ctx context.Context, v contract.Verb, req proto.Message, opID string) (*LeaseResult, error) {
	return callAs(ctx, c, v, req, opID, 0, leaseResult)
}

// GetResource reads a resource. Codes: ok, resource_not_found.
func (c *Client) GetResource(ctx context.Context, resourceID string, opts ...ReadOption) (*ResourceResult, error) {
	minLSN, waitMs, extra := readOpts(opts)
	req := &messages.GetResourceRequest{ResourceId: resourceID, MinLsn: minLSN, WaitMs: waitMs}
	return callAs(ctx, c, contract.VerbGetResource, req, "", extra, resourceResult)
}

// GetPool reads a pool. Codes: ok, pool_not_found.
func (c *Client) GetPool(ctx context.Context, poolID string, opts ...ReadOption) (*PoolResult, error) {
	minLSN, waitMs, extra := readOpts(opts)
	req := &messages.GetPoolRequest{PoolId: poolID, MinLsn: minLSN, WaitMs: waitMs}
	return callAs(ctx, c, contract.VerbGetPool, req, "", extra, poolResult)
}

// GetRange reads a range. Codes: ok, range_not_found.
func (c *Client) GetRange(ctx context.Context, rangeID string, opts ...ReadOption) (*RangeResult, error) {
	minLSN, waitMs, extra := readOpts(opts)
	req := &messages.GetRangeRequest{RangeId: rangeID, MinLsn: minLSN, WaitMs: waitMs}
	return callAs(ctx, c, contract.VerbGetRange, req, "", extra, rangeResult)
}

// GetLease reads a lease. Codes: ok, lease_not_found, lease_retired.
func (c *Client) GetLease(ctx context.Context, leaseID string, opts ...ReadOption) (*LeaseResult, error) {
	minLSN, waitMs, extra := readOpts(opts)
	req := &messages.GetLeaseRequest{LeaseId: leaseID, MinLsn: minLSN, WaitMs: waitMs}
	return callAs(ctx, c, contract.VerbGetLease, req, "", extra, leaseResult)
}

// ListLeases lists the holder's live leases (reserved, active, revoking)
// across all shards. limit is 1–10000, or 0 for the server's default (1000).
func (c *Client) ListLeases(ctx context.Context, holder string, limit int) (*ListResult, error) {
	req := &messages.ListLeasesRequest{HolderId: holder}
	if limit != 0 {
		// Out of bounds (negative, above 10000) is sent as is or as 0, and
		// the server answers invalid_request.
		l := uint32(min(max(limit, 0), 1<<32-1))
		req.Limit = &l
	}
	r, err := c.call(ctx, contract.VerbListLeases, req, "", 0)
	if err != nil {
		return nil, err
	}
	res := &ListResult{Result: *r, Truncated: r.Reply.Truncated, AppliedLSNs: r.Reply.AppliedLsns}
	res.Leases = make([]Lease, len(r.Reply.Leases))
	for i, l := range r.Reply.Leases {
		res.Leases[i] = Lease{l}
	}
	return res, nil
}

// ClusterStatus reads who serves which shard (API §7): the live nodes with their
// shards, every shard's owner and applied position, and, given a placement key, the
// shard it maps to in the client's tenant.
func (c *Client) ClusterStatus(ctx context.Context, placementKey string) (*ClusterResult, error) {
	r, err := c.call(ctx, contract.VerbClusterStatus, &messages.ClusterStatusRequest{PlacementKey: placementKey}, "", 0)
	if err != nil {
		return nil, err
	}
	return &ClusterResult{Result: *r, Nodes: r.Reply.Nodes, Shards: r.Reply.Shards, Shard: r.Reply.Shard,
		Slot: time.Duration(r.Reply.SlotMs) * time.Millisecond}, nil
}

// SlotLength asks the service how long a slot is, so that slots (`deadline_slot`,
// `retire_after_slot`) can be shown as times: slot s starts at s × length after the Unix
// epoch. It asks $SRV.INFO (the micro metadata `slot_ms`), and when a service of another
// prefix answers that first, this prefix's own service through cluster.status. It is asked
// once and remembered.
func (c *Client) SlotLength(ctx context.Context) (time.Duration, error) {
	if d := time.Duration(c.slotLen.Load()); d > 0 {
		return d, nil
	}
	d, err := c.infoSlotLength(ctx)
	if errors.Is(err, errOtherPrefix) {
		var st *ClusterResult
		if st, err = c.ClusterStatus(ctx, ""); err == nil {
			if d = st.Slot; !st.OK() || d <= 0 {
				err = fmt.Errorf("cluster.status gave no slot length (code %s)", st.Code)
			}
		}
	}
	if err != nil {
		return 0, err
	}
	c.slotLen.Store(int64(d))
	return d, nil
}

// errOtherPrefix: the service that answered $SRV.INFO serves another prefix.
var errOtherPrefix = errors.New("a service of another prefix answered")

// infoSlotLength is the slot length in the micro metadata of the first service that
// answers $SRV.INFO.
func (c *Client) infoSlotLength(ctx context.Context) (time.Duration, error) {
	rctx, cancel := context.WithTimeout(ctx, c.cfg.timeout)
	defer cancel()
	m, err := c.nc.RequestWithContext(rctx, "$SRV.INFO."+serviceName, nil)
	if err != nil {
		return 0, err
	}
	var info struct {
		Metadata map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal(m.Data, &info); err != nil {
		return 0, err
	}
	if info.Metadata["prefix"] != c.cfg.prefix {
		return 0, errOtherPrefix
	}
	ms, err := strconv.ParseUint(info.Metadata["slot_ms"], 10, 32)
	if err != nil || ms == 0 {
		return 0, fmt.Errorf("the service does not advertise its slot length (slot_ms %q)", info.Metadata["slot_ms"])
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// SlotTime is the time slot s starts at, for a slot length.
func SlotTime(s uint64, length time.Duration) time.Time {
	return time.Unix(0, int64(s)*int64(length))
}

// serviceName is the micro service every Holdfast process registers.
const serviceName = "holdfast"
