package bridge

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/messages"
)

const (
	headerContentType   = messages.HeaderContentType
	contentTypeProtobuf = messages.ContentTypeProtobuf
	contentTypeJSON     = messages.ContentTypeJSON
)

// verb is the verb table's row for v, whose requests prepare turns into a shard
// operation: the request's message type is prepare's.
func verb[R any, P interface {
	*R
	proto.Message
}](v contract.Verb, prepare func(b *Bridge, tenant string, r P, o *op) *kernel.Rejection) *verbSpec {
	return &verbSpec{verb: v, newReq: func() proto.Message { return P(new(R)) },
		prepare: func(b *Bridge, tenant string, m proto.Message, o *op) *kernel.Rejection {
			return prepare(b, tenant, m.(P), o)
		}}
}

// verbSpec is one endpoint: the verb, its subject parts, its request message and the
// function that turns a decoded request into a shard operation.
type verbSpec struct {
	verb    contract.Verb // its object and action are the subject's last tokens
	newReq  func() proto.Message
	prepare func(b *Bridge, tenant string, m proto.Message, o *op) *kernel.Rejection

	subject     string        // <prefix>.v1.*.<object>.<action>
	tenantStart int           // offset of the tenant token in a request subject
	suffixLen   int           // len(".<object>.<action>")
	stats       endpointStats // for $SRV.STATS
	paging      paging        // a listing's cursor and scope fields (cursor.go); zero for others
}

type opKind uint8

const (
	opWrite opKind = iota + 1
	opRead
	opList
	opStatus // cluster.status: answered by the bridge from the cluster's view
	opFan    // lease.release_all, lease.revoke_all: the same command to every shard
)

// op is a validated request, routed: a command or a read of one shard, or a read of
// every shard (lease.list).
type op struct {
	kind   opKind
	shard  uint32
	hasKey bool // cluster.status with a placement_key: shard is the key's
	cmd    *kernel.Command
	read   actors.ReadRequest
}

// bind fixes the spec's subject under prefix, and where a request subject's tenant is.
func (s *verbSpec) bind(prefix string) {
	s.subject = s.verb.Subject(prefix, "*")
	s.tenantStart = len(prefix) + len(".v1.")
	s.suffixLen = len(s.verb.Object()) + len(s.verb.Action()) + 2
	s.paging = pagingOf(s.newReq())
}

// VerbRequest is one verb of the wire with a new message of its request type: the verb
// table's, for what is generated from it (the JSON Schema of docs/schema/).
type VerbRequest struct {
	Verb    string
	Request proto.Message
}

// Requests lists every verb the service answers, in the verb table's order.
func Requests() []VerbRequest {
	var out []VerbRequest
	for _, s := range verbSpecs() {
		out = append(out, VerbRequest{Verb: s.verb.String(), Request: s.newReq()})
	}
	return out
}

func verbSpecs() []*verbSpec {
	return append([]*verbSpec{
		verb(contract.VerbCreateResource, prepCreateResource),
		verb(contract.VerbGetResource, prepGetResource),
		verb(contract.VerbCreatePool, prepCreatePool),
		verb(contract.VerbGetPool, prepGetPool),
		verb(contract.VerbCreateRange, prepCreateRange),
		verb(contract.VerbGetRange, prepGetRange),
		verb(contract.VerbReserve, prepReserve),
		verb(contract.VerbActivate, prepActivate),
		verb(contract.VerbRenew, prepRenew),
		verb(contract.VerbRelease, prepRelease),
		verb(contract.VerbRevoke, prepRevoke),
		verb(contract.VerbReclaim, prepReclaim),
		verb(contract.VerbGetLease, prepGetLease),
		verb(contract.VerbListLeases, prepListLeases),
		verb(contract.VerbClusterStatus, prepClusterStatus),
		verb(contract.VerbDeleteResource, prepDelete((*messages.DeleteResourceRequest).GetResourceId)),
		verb(contract.VerbDeletePool, prepDelete((*messages.DeletePoolRequest).GetPoolId)),
		verb(contract.VerbDeleteRange, prepDelete((*messages.DeleteRangeRequest).GetRangeId)),
	}, append(workSpecs(), allocSpecs()...)...)
}

func invalid(format string, args ...any) *kernel.Rejection {
	return &kernel.Rejection{Code: contract.CodeInvalidRequest, Message: fmt.Sprintf(format, args...)}
}

// prepare turns a request into a routed operation in c.op: tenant, size, decoding,
// field checks, kernel.Validate for writes. A non-nil result is a definite rejection.
func (b *Bridge) prepare(c *call, j *job) *kernel.Rejection {
	s := j.spec
	if len(j.subject) < s.tenantStart+s.suffixLen {
		return invalid("tenant: missing from the subject")
	}
	c.tenant = j.subject[s.tenantStart : len(j.subject)-s.suffixLen]
	if !contract.ValidTenant(c.tenant) {
		return invalid("tenant: must be 1-64 characters of A-Z a-z 0-9 _ -")
	}
	if len(j.data) > b.cfg.MaxRequestBytes {
		return &kernel.Rejection{Code: contract.CodeCommandTooLarge,
			Message: fmt.Sprintf("request of %d bytes exceeds the limit of %d", len(j.data), b.cfg.MaxRequestBytes)}
	}
	m := s.newReq()
	var err error
	switch {
	case j.proto:
		err = messages.UnmarshalProto(j.data, m)
	case len(j.data) == 0:
		// An empty JSON body is the empty request: its missing fields are named below.
	default:
		err = messages.UnmarshalJSON(j.data, m)
	}
	if err != nil {
		var de *messages.DecodeError
		if errors.As(err, &de) {
			return invalid("%s", de.Error())
		}
		return invalid("the request could not be decoded: %v", err)
	}
	if s.paging.cursor != nil {
		c.scope = s.paging.scope(s.verb, m)
		if !s.paging.open(c.scope, m) {
			return invalid("cursor: not a cursor of this listing")
		}
	}
	if r := s.prepare(b, c.tenant, m, &c.op); r != nil {
		return r
	}
	if c.op.kind == opWrite || c.op.kind == opFan {
		c.op.cmd.Verb = s.verb
		c.op.cmd.Tenant = c.tenant
		if r := kernel.Validate(c.op.cmd); r != nil {
			return r
		}
	} else {
		c.op.read.Verb = s.verb
		c.op.read.Tenant = c.tenant
	}
	if b.cfg.Holders.Bound {
		c.caller = b.cfg.Holders.callerOf(j.header)
		return b.cfg.Holders.authorize(c)
	}
	return nil
}

// objectID checks a resource, pool, range or holder id field.
func objectID(field, id string) *kernel.Rejection {
	if id == "" {
		return invalid("%s: required", field)
	}
	if !contract.ValidObjectID(id) {
		return invalid("%s: must be 1-128 characters of A-Z a-z 0-9 _ - : / @ +, starting alphanumeric", field)
	}
	return nil
}

// leaseID parses a lease id field and checks that its shard exists here.
func (b *Bridge) leaseID(s string) (uint32, uint64, *kernel.Rejection) {
	if s == "" {
		return 0, 0, invalid("lease_id: required")
	}
	shard, lsn, ok := contract.ParseLeaseID(s)
	if !ok {
		return 0, 0, invalid("lease_id: not a lease id")
	}
	if shard >= b.cfg.Shards {
		return 0, 0, invalid("lease_id: not a lease id of this deployment")
	}
	return shard, lsn, nil
}

// fence reads min_lsn and wait_ms of a single-object read.
func fence(o *op, minLSN uint64, waitMs *uint32) *kernel.Rejection {
	wait := uint32(messages.DefaultWaitMs)
	if waitMs != nil {
		if *waitMs > messages.MaxWaitMs {
			return invalid("wait_ms: must be between 0 and %d", messages.MaxWaitMs)
		}
		wait = *waitMs
	}
	o.read.MinLSN = minLSN
	o.read.Wait = time.Duration(wait) * time.Millisecond
	return nil
}

func (b *Bridge) objectShard(tenant, id string) uint32 {
	return contract.ShardOf(tenant, contract.PlacementKey(id), b.cfg.Shards)
}

func prepCreateResource(b *Bridge, tenant string, r *messages.CreateResourceRequest, o *op) *kernel.Rejection {
	b.objectWrite(tenant, r.OperationId, r.ResourceId, o)
	return nil
}

// objectWrite routes a write naming an object (a run too) by its id, as its create did.
func (b *Bridge) objectWrite(tenant, opID, id string, o *op) *kernel.Command {
	*o = op{kind: opWrite, shard: b.objectShard(tenant, id), cmd: &kernel.Command{OperationID: opID, ObjectID: id}}
	return o.cmd
}

// deleteRequest is the four deletes' request: each names its object by id.
type deleteRequest interface {
	proto.Message
	GetOperationId() string
}

// prepDelete is a delete of the object id names.
func prepDelete[R deleteRequest](id func(R) string) func(*Bridge, string, R, *op) *kernel.Rejection {
	return func(b *Bridge, tenant string, r R, o *op) *kernel.Rejection {
		b.objectWrite(tenant, r.GetOperationId(), id(r), o)
		return nil
	}
}

func prepCreatePool(b *Bridge, tenant string, r *messages.CreatePoolRequest, o *op) *kernel.Rejection {
	b.objectWrite(tenant, r.OperationId, r.PoolId, o).Capacity = r.Capacity
	return nil
}

func prepCreateRange(b *Bridge, tenant string, r *messages.CreateRangeRequest, o *op) *kernel.Rejection {
	strategy, ok := kernel.ParseStrategy(r.Strategy)
	if !ok {
		return invalid("strategy: must be lowest_free, random or least_recently_freed")
	}
	c := b.objectWrite(tenant, r.OperationId, r.RangeId, o)
	c.First, c.Last, c.Strategy, c.Format = r.First, r.Last, strategy, r.Format
	for i, iv := range r.Excluded {
		if iv == nil {
			return invalid("excluded[%d]: required", i)
		}
		c.Excluded = append(c.Excluded, kernel.Interval{First: iv.First, Last: iv.Last})
	}
	if r.StaticBand != nil {
		c.Band, c.HasBand = kernel.Interval{First: r.StaticBand.First, Last: r.StaticBand.Last}, true
	}
	return nil
}

func prepReserve(b *Bridge, tenant string, r *messages.ReserveRequest, o *op) *kernel.Rejection {
	members, rej := membersOf(r.Members, "members")
	if rej != nil {
		return rej
	}
	shard := uint32(0)
	if len(members) > 0 {
		shard = b.objectShard(tenant, members[0].ID)
	}
	*o = op{kind: opWrite, shard: shard, cmd: &kernel.Command{OperationID: r.OperationId, HolderID: r.HolderId,
		Members: members, TTLMillis: r.TtlMs, Activate: r.Activate, KeepAliveMillis: r.KeepaliveMs, Labels: labelsOf(r.Labels),
		Shards: b.bundleShards(tenant, members)}}
	return nil
}

// bundleShards is each member's shard when the members have more than one placement key
// (a bundle across keys: its home is the first member's shard), else nil.
func (b *Bridge) bundleShards(tenant string, members []kernel.Member) []uint32 {
	for i := range members {
		if contract.PlacementKey(members[i].ID) == contract.PlacementKey(members[0].ID) {
			continue
		}
		shards := make([]uint32, len(members))
		for j := range members {
			shards[j] = b.objectShard(tenant, members[j].ID)
		}
		return shards
	}
	return nil
}

// membersOf turns a request's members (field names them in messages) into the kernel's.
func membersOf(ms []*messages.Member, field string) ([]kernel.Member, *kernel.Rejection) {
	members := make([]kernel.Member, len(ms))
	for i, mm := range ms {
		if mm == nil {
			return nil, invalid("%s[%d]: exactly one of resource_id, pool_id, range_id, work is required", field, i)
		}
		n := 0
		for _, id := range []string{mm.ResourceId, mm.PoolId, mm.RangeId} {
			if id != "" {
				n++
			}
		}
		if mm.Work != nil {
			n++
		}
		if n != 1 {
			return nil, invalid("%s[%d]: exactly one of resource_id, pool_id, range_id, work is required", field, i)
		}
		km := &members[i]
		switch {
		case mm.Work != nil:
			km.Kind, km.ID, km.Name = kernel.MemberWork, mm.Work.RunId, mm.Work.Name
		case mm.ResourceId != "":
			km.Kind, km.ID = kernel.MemberResource, mm.ResourceId
		case mm.PoolId != "":
			km.Kind, km.ID = kernel.MemberPool, mm.PoolId
		default:
			km.Kind, km.ID = kernel.MemberRange, mm.RangeId
		}
		if mm.Value != nil && km.Kind != kernel.MemberRange {
			return nil, invalid("%s[%d].value: only a range member takes a value", field, i)
		}
		if mm.Quantity != 0 && km.Kind != kernel.MemberPool {
			return nil, invalid("%s[%d].quantity: only a pool member takes a quantity", field, i)
		}
		if km.Kind == kernel.MemberPool && mm.Quantity == 0 {
			return nil, invalid("%s[%d].quantity: must be greater than 0", field, i)
		}
		km.Quantity = mm.Quantity
		if mm.Value != nil {
			km.Value, km.HasValue = *mm.Value, true
		}
	}
	return members, nil
}

// fencedRequest is a holder's request on its lease: activate, renew, release, consume
// and the work verbs on a claim.
type fencedRequest interface {
	GetOperationId() string
	GetLeaseId() string
	GetHolderId() string
	GetLeaseEpoch() uint64
}

// fenced prepares a holder's verb: its lease routes it, the holder and the fence go with
// it, and more sets what else the verb carries (nil: nothing).
func fenced[R fencedRequest](more func(r R, c *kernel.Command) *kernel.Rejection) func(*Bridge, string, R, *op) *kernel.Rejection {
	return func(b *Bridge, _ string, r R, o *op) *kernel.Rejection {
		shard, lsn, rej := b.leaseID(r.GetLeaseId())
		if rej != nil {
			return rej
		}
		*o = op{kind: opWrite, shard: shard, cmd: &kernel.Command{OperationID: r.GetOperationId(), LeaseLSN: lsn,
			HolderID: r.GetHolderId(), Epoch: r.GetLeaseEpoch()}}
		if more == nil {
			return nil
		}
		return more(r, o.cmd)
	}
}

var prepActivate = fenced(func(r *messages.ActivateRequest, c *kernel.Command) *kernel.Rejection {
	c.KeepAliveMillis = r.KeepaliveMs
	return nil
})

var prepRelease = fenced[*messages.ReleaseRequest](nil)

var prepRenew = fenced(func(r *messages.RenewRequest, c *kernel.Command) *kernel.Rejection {
	c.TTLMillis = r.TtlMs
	return nil
})

func (b *Bridge) operatorVerb(o *op, opID, leaseID string) *kernel.Rejection {
	shard, lsn, rej := b.leaseID(leaseID)
	if rej != nil {
		return rej
	}
	*o = op{kind: opWrite, shard: shard, cmd: &kernel.Command{OperationID: opID, LeaseLSN: lsn}}
	return nil
}

func prepRevoke(b *Bridge, _ string, r *messages.RevokeRequest, o *op) *kernel.Rejection {
	return b.operatorVerb(o, r.OperationId, r.LeaseId)
}

func prepReclaim(b *Bridge, _ string, r *messages.ReclaimRequest, o *op) *kernel.Rejection {
	return b.operatorVerb(o, r.OperationId, r.LeaseId)
}

func (b *Bridge) objectRead(tenant, field, id string, minLSN uint64, waitMs *uint32, o *op) *kernel.Rejection {
	if r := objectID(field, id); r != nil {
		return r
	}
	*o = op{kind: opRead, shard: b.objectShard(tenant, id), read: actors.ReadRequest{ID: id}}
	return fence(o, minLSN, waitMs)
}

func prepGetResource(b *Bridge, tenant string, r *messages.GetResourceRequest, o *op) *kernel.Rejection {
	return b.objectRead(tenant, "resource_id", r.ResourceId, r.MinLsn, r.WaitMs, o)
}

func prepGetPool(b *Bridge, tenant string, r *messages.GetPoolRequest, o *op) *kernel.Rejection {
	return b.objectRead(tenant, "pool_id", r.PoolId, r.MinLsn, r.WaitMs, o)
}

func prepGetRange(b *Bridge, tenant string, r *messages.GetRangeRequest, o *op) *kernel.Rejection {
	return b.objectRead(tenant, "range_id", r.RangeId, r.MinLsn, r.WaitMs, o)
}

func prepGetLease(b *Bridge, _ string, r *messages.GetLeaseRequest, o *op) *kernel.Rejection {
	shard, lsn, rej := b.leaseID(r.LeaseId)
	if rej != nil {
		return rej
	}
	*o = op{kind: opRead, shard: shard, read: actors.ReadRequest{Lease: lsn}}
	return fence(o, r.MinLsn, r.WaitMs)
}

func prepClusterStatus(b *Bridge, tenant string, r *messages.ClusterStatusRequest, o *op) *kernel.Rejection {
	*o = op{kind: opStatus}
	if r.PlacementKey != "" {
		if rej := objectID("placement_key", r.PlacementKey); rej != nil {
			return rej
		}
		o.hasKey = true
		o.shard = contract.ShardOf(tenant, contract.PlacementKey(r.PlacementKey), b.cfg.Shards)
	}
	return nil
}

// Serves reports whether the bridge has an endpoint for verb v.
func Serves(v contract.Verb) bool {
	for _, s := range verbSpecs() {
		if s.verb == v {
			return true
		}
	}
	return false
}
