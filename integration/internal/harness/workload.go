//go:build unix

package harness

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/integration/internal/history"
	"github.com/holdfast/holdfast/messages"
)

// Layout is the objects of a round, the same in each of its tenants. Key n<i> is a
// placement key: its resources, pool and range share a shard and can be leased together.
type Layout struct {
	Keys     []string
	Res      map[string][]string // by key
	Late     map[string]string   // a resource created only after a third of the round
	Pool     map[string]string
	PoolCap  uint64
	Range    map[string]string
	Strategy map[string]string
	First    uint64
	Last     uint64
	Big      string // a [0, 2^64-1] random range under Keys[0]
}

var strategies = []string{"lowest_free", "random", "least_recently_freed"}

// NewLayout lays out keys placement keys.
func NewLayout(keys int) *Layout {
	l := &Layout{Res: map[string][]string{}, Late: map[string]string{}, Pool: map[string]string{}, Range: map[string]string{},
		Strategy: map[string]string{}, PoolCap: 5, First: 100, Last: 104}
	for i := 0; i < keys; i++ {
		k := fmt.Sprintf("n%d", i)
		l.Keys = append(l.Keys, k)
		l.Res[k] = []string{k + "/r0", k + "/r1", k + "/r2"}
		l.Late[k] = k + "/late"
		l.Pool[k] = k + "/mem"
		l.Range[k] = k + "/vx"
		l.Strategy[k] = strategies[i%len(strategies)]
	}
	l.Big = l.Keys[0] + "/big"
	return l
}

// creates are the create requests of the objects present from the start.
func (l *Layout) creates() []func(op string) (string, proto.Message) {
	var out []func(string) (string, proto.Message)
	for _, k := range l.Keys {
		for _, r := range l.Res[k] {
			out = append(out, func(op string) (string, proto.Message) {
				return "resource.create", &messages.CreateResourceRequest{OperationId: op, ResourceId: r}
			})
		}
		out = append(out, func(op string) (string, proto.Message) {
			return "pool.create", &messages.CreatePoolRequest{OperationId: op, PoolId: l.Pool[k], Capacity: l.PoolCap}
		})
		out = append(out, func(op string) (string, proto.Message) {
			return "range.create", &messages.CreateRangeRequest{OperationId: op, RangeId: l.Range[k], First: l.First, Last: l.Last, Strategy: l.Strategy[k]}
		})
	}
	out = append(out, func(op string) (string, proto.Message) {
		return "range.create", &messages.CreateRangeRequest{OperationId: op, RangeId: l.Big, First: 0, Last: math.MaxUint64, Strategy: "random"}
	})
	return out
}

// Round is one round's shared state: its tenants, layout, recorder, the server, and the
// registry of leases every client knows of (operators revoke and reclaim any of them).
type Round struct {
	ID      int
	Prefix  string
	Tenants []string
	Shards  uint32
	Layout  *Layout
	Rec     *history.Recorder
	Srv     Target
	Proto   float64
	Dur     time.Duration
	Think   time.Duration
	// MaxWait bounds the retries of one write.
	MaxWait time.Duration

	started time.Time
	stop    chan struct{} // closed: no new operations
	hard    context.Context

	mu       sync.Mutex
	registry []*known // bounded, most recent last

	ops atomic.Int64
}

type known struct {
	id     string
	tenant string
	state  string
}

func (r *Round) remember(id, tenant, state string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range r.registry {
		if k.id == id {
			k.state = state
			return
		}
	}
	r.registry = append(r.registry, &known{id: id, tenant: tenant, state: state})
	if len(r.registry) > 300 {
		r.registry = r.registry[len(r.registry)-300:]
	}
}

func (r *Round) pick(rng *rand.Rand, tenant, state string, sameTenant bool) *known {
	r.mu.Lock()
	defer r.mu.Unlock()
	var c []*known
	for _, k := range r.registry {
		if (k.tenant == tenant) == sameTenant && (state == "" || k.state == state) {
			c = append(c, k)
		}
	}
	if len(c) == 0 {
		return nil
	}
	k := *c[rng.IntN(len(c))]
	return &k
}

// AllLeases lists the registry's leases seen so far (bounded).
// Client is one simulated user: its own connection, its own holder id, its own leases.
type Client struct {
	ID     int
	Tenant string
	Holder string
	Conn   *Conn

	r      *Round
	caller *Caller
	rng    *rand.Rand
	seq    int
	own    map[string]*ownLease
	last   map[uint32]uint64
	leases []string // every lease id this client ever got (for the final reads)
}

type ownLease struct {
	id    string
	shard uint32
	epoch uint64
	state string
}

func newClient(r *Round, id int, tenant string, seed int64) *Client {
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(id)*7919+1))
	c := &Client{ID: id, Tenant: tenant, Holder: fmt.Sprintf("h%d", id), r: r, rng: rng,
		own: map[string]*ownLease{}, last: map[uint32]uint64{}}
	c.Conn = newConn(fmt.Sprintf("round%d-client%d", r.ID, id), r.Srv)
	c.Conn.side = id
	c.caller = &Caller{Rec: r.Rec, Round: r.ID, Client: id, Prefix: r.Prefix, Conn: c.Conn, Proto: r.Proto, Rng: rng}
	return c
}

func (c *Client) opID() string {
	c.seq++
	return fmt.Sprintf("r%d-c%d-%d", c.r.ID, c.ID, c.seq)
}

func (c *Client) shardOf(id string) uint32 {
	return contract.ShardOf(c.Tenant, contract.PlacementKey(id), c.r.Shards)
}

// write runs a write to its resolution and learns from the reply.
func (c *Client) write(verb string, m proto.Message, key, intent, tenant string) *messages.Reply {
	c.r.ops.Add(1)
	call := &Call{Verb: verb, Tenant: tenant, Key: key, Intent: intent, Msg: m, Timeout: 2 * time.Second}
	r := c.caller.Write(c.r.hard, call, c.r.MaxWait)
	if r != nil && r.Outcome == messages.OutcomeCommitted && intent == "" {
		c.learnWrite(verb, m, r)
	}
	return r
}

func (c *Client) read(verb string, m proto.Message, intent, tenant string, wait time.Duration) *messages.Reply {
	c.r.ops.Add(1)
	c.seq++
	call := &Call{Verb: verb, Tenant: tenant, Key: fmt.Sprintf("r%d-c%d-read%d", c.r.ID, c.ID, c.seq), Intent: intent, Msg: m,
		Timeout: 2*time.Second + wait}
	r := c.caller.Send(call, 1)
	if r != nil && r.Outcome == messages.OutcomeCommitted && intent == "" {
		c.learnRead(verb, m, r)
	}
	return r
}

func (c *Client) learnWrite(verb string, m proto.Message, r *messages.Reply) {
	var shard uint32
	switch q := m.(type) {
	case *messages.CreateResourceRequest:
		shard = c.shardOf(q.ResourceId)
	case *messages.CreatePoolRequest:
		shard = c.shardOf(q.PoolId)
	case *messages.CreateRangeRequest:
		shard = c.shardOf(q.RangeId)
	case *messages.DeleteResourceRequest:
		shard = c.shardOf(q.ResourceId)
	case *messages.DeletePoolRequest:
		shard = c.shardOf(q.PoolId)
	case *messages.DeleteRangeRequest:
		shard = c.shardOf(q.RangeId)
	case *messages.ReserveRequest:
		shard = c.shardOf(q.Members[0].ResourceId + q.Members[0].PoolId + q.Members[0].RangeId)
		if r.Code == messages.CodeOK {
			id := contract.FormatLeaseID(shard, r.Lsn)
			st := "reserved"
			if q.Activate {
				st = "active"
			}
			if r.Lease != nil {
				st = r.Lease.State
			}
			ol := &ownLease{id: id, shard: shard, epoch: 1, state: st}
			if r.Lease != nil {
				ol.epoch = r.Lease.LeaseEpoch
			}
			if live(st) {
				c.own[id] = ol
			}
			c.leases = append(c.leases, id)
			c.r.remember(id, c.Tenant, st)
		}
	default:
		id := leaseIDOfReq(m)
		sh, _, _ := contract.ParseLeaseID(id)
		shard = sh
		if r.Lease != nil && r.Code == messages.CodeOK {
			c.noteLease(r.Lease)
		} else if ol := c.own[id]; ol != nil && r.Code != messages.CodeOK {
			switch r.Code {
			case "stale_epoch", "invalid_state", "lease_expired", "lease_not_found", "lease_retired":
				c.refresh(ol)
			}
		}
	}
	c.last[shard] = max(c.last[shard], r.Lsn)
}

func (c *Client) learnRead(verb string, m proto.Message, r *messages.Reply) {
	switch q := m.(type) {
	case *messages.GetLeaseRequest:
		sh, _, _ := contract.ParseLeaseID(q.LeaseId)
		c.last[sh] = max(c.last[sh], r.AppliedLsn)
		if r.Lease != nil {
			c.noteLease(r.Lease)
		} else if r.Code == "lease_not_found" || r.Code == "lease_retired" {
			delete(c.own, q.LeaseId)
		}
	case *messages.GetResourceRequest:
		c.last[c.shardOf(q.ResourceId)] = max(c.last[c.shardOf(q.ResourceId)], r.AppliedLsn)
	case *messages.GetPoolRequest:
		c.last[c.shardOf(q.PoolId)] = max(c.last[c.shardOf(q.PoolId)], r.AppliedLsn)
	case *messages.GetRangeRequest:
		c.last[c.shardOf(q.RangeId)] = max(c.last[c.shardOf(q.RangeId)], r.AppliedLsn)
	case *messages.ListLeasesRequest:
		for _, p := range r.AppliedLsns {
			c.last[p.Shard] = max(c.last[p.Shard], p.Lsn)
		}
		for _, l := range r.Leases {
			if _, mine := c.own[l.LeaseId]; mine {
				c.noteLease(l)
			}
		}
	}
}

func live(state string) bool { return state == "reserved" || state == "active" || state == "revoking" }

func (c *Client) noteLease(l *messages.Lease) {
	c.r.remember(l.LeaseId, c.Tenant, l.State)
	if l.HolderId != c.Holder {
		return
	}
	if !live(l.State) || l.State == "revoking" {
		delete(c.own, l.LeaseId)
		return
	}
	sh, _, _ := contract.ParseLeaseID(l.LeaseId)
	c.own[l.LeaseId] = &ownLease{id: l.LeaseId, shard: sh, epoch: l.LeaseEpoch, state: l.State}
}

func (c *Client) refresh(ol *ownLease) {
	c.read("lease.get", &messages.GetLeaseRequest{LeaseId: ol.id, WaitMs: proto.Uint32(200)}, "", c.Tenant, 200*time.Millisecond)
}

func leaseIDOfReq(m proto.Message) string {
	switch q := m.(type) {
	case *messages.ActivateRequest:
		return q.LeaseId
	case *messages.RenewRequest:
		return q.LeaseId
	case *messages.ReleaseRequest:
		return q.LeaseId
	case *messages.RevokeRequest:
		return q.LeaseId
	case *messages.ReclaimRequest:
		return q.LeaseId
	}
	return ""
}

func (c *Client) stopped() bool {
	select {
	case <-c.r.stop:
		return true
	default:
		return false
	}
}

// Run performs the client's share of the creates, then random operations until the round
// stops.
func (c *Client) Run(creates []func(string) (string, proto.Message)) {
	for _, mk := range creates {
		if c.stopped() {
			return
		}
		op := c.opID()
		verb, m := mk(op)
		c.write(verb, m, op, "", c.Tenant)
	}
	think := c.r.Think
	if think <= 0 {
		think = 5 * time.Millisecond
	}
	for !c.stopped() {
		c.step()
		time.Sleep(time.Duration(c.rng.Int64N(int64(2 * think))))
	}
}

func (c *Client) ownPick(states ...string) *ownLease {
	var ids []string
	for id, ol := range c.own {
		for _, s := range states {
			if ol.state == s {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 {
		return nil
	}
	sort.Strings(ids)
	return c.own[ids[c.rng.IntN(len(ids))]]
}

// step performs one random operation.
func (c *Client) step() {
	w := c.rng.IntN(100)
	if len(c.own) > 6 && w < 40 {
		w = 55 // too many live leases: give some up
	}
	switch {
	case w < 30:
		c.reserve()
	case w < 38:
		c.holderOp("lease.activate", c.ownPick("reserved"))
	case w < 45:
		c.holderOp("lease.renew", c.ownPick("reserved"))
	case w < 57:
		c.holderOp("lease.release", c.ownPick("reserved", "active"))
	case w < 60:
		c.staleProbe()
	case w < 64:
		c.operator("lease.revoke", "active")
	case w < 68:
		c.operator("lease.reclaim", "revoking")
	case w < 88:
		c.readObject()
	case w < 92:
		c.list()
	case w < 94:
		c.create()
	case w < 97:
		c.probe()
	default:
		c.leaseRead()
	}
}

func (c *Client) member(key string, taken map[string]bool) *messages.Member {
	l := c.r.Layout
	for tries := 0; tries < 8; tries++ {
		var m *messages.Member
		switch x := c.rng.IntN(12); {
		case x < 5:
			res := l.Res[key]
			m = &messages.Member{ResourceId: res[c.rng.IntN(len(res))]}
		case x < 6:
			m = &messages.Member{ResourceId: l.Late[key]}
		case x < 8:
			m = &messages.Member{PoolId: l.Pool[key], Quantity: 1 + c.rng.Uint64N(3)}
		case x < 10:
			m = &messages.Member{RangeId: l.Range[key]}
		case x < 11:
			m = &messages.Member{RangeId: l.Range[key], Value: proto.Uint64(l.First - 1 + c.rng.Uint64N(l.Last-l.First+3))}
		default:
			if key != l.Keys[0] {
				continue
			}
			m = &messages.Member{RangeId: l.Big}
			if c.rng.IntN(3) == 0 {
				m.Value = proto.Uint64(math.MaxUint64 - c.rng.Uint64N(4))
			}
		}
		k := m.ResourceId + "|" + m.PoolId
		if m.RangeId != "" {
			k = m.RangeId + "|any"
			if m.Value != nil {
				k = fmt.Sprintf("%s|%d", m.RangeId, *m.Value)
			}
			if m.Value == nil && taken[k] && c.rng.IntN(2) == 0 {
				return m // two "any" members of one range
			}
		}
		if taken[k] {
			continue
		}
		taken[k] = true
		return m
	}
	return nil
}

func (c *Client) reserve() {
	l := c.r.Layout
	key := l.Keys[c.rng.IntN(len(l.Keys))]
	taken := map[string]bool{}
	var members []*messages.Member
	for n := 1 + c.rng.IntN(3); len(members) < n; {
		m := c.member(key, taken)
		if m == nil {
			break
		}
		members = append(members, m)
	}
	if len(members) == 0 {
		return
	}
	switch x := c.rng.IntN(100); {
	case x < 3 && len(l.Keys) > 1: // another placement key: a bundle across shards
		other := l.Keys[(indexOf(l.Keys, key)+1)%len(l.Keys)]
		members = append(members, &messages.Member{ResourceId: l.Res[other][0]})
	case x < 5 && members[0].ResourceId != "": // the same resource twice: duplicate_member
		members = append(members, &messages.Member{ResourceId: members[0].ResourceId})
	}
	req := &messages.ReserveRequest{OperationId: c.opID(), HolderId: c.Holder, Members: members}
	switch x := c.rng.IntN(100); {
	case x < 40:
		req.TtlMs = 20 + c.rng.Uint64N(60)
	case x < 75:
		req.TtlMs = 300 + c.rng.Uint64N(2700)
	default:
		req.Activate = true
		req.TtlMs = c.rng.Uint64N(2) * 1000
	}
	c.write("lease.reserve", req, req.OperationId, "", c.Tenant)
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return 0
}

func (c *Client) holderOp(verb string, ol *ownLease) {
	if ol == nil {
		c.reserve()
		return
	}
	op := c.opID()
	var m proto.Message
	switch verb {
	case "lease.activate":
		m = &messages.ActivateRequest{OperationId: op, LeaseId: ol.id, HolderId: c.Holder, LeaseEpoch: ol.epoch}
	case "lease.renew":
		m = &messages.RenewRequest{OperationId: op, LeaseId: ol.id, HolderId: c.Holder, LeaseEpoch: ol.epoch, TtlMs: 20 + c.rng.Uint64N(2000)}
	case "lease.release":
		m = &messages.ReleaseRequest{OperationId: op, LeaseId: ol.id, HolderId: c.Holder, LeaseEpoch: ol.epoch}
	}
	c.write(verb, m, op, "", c.Tenant)
}

// staleProbe presents a wrong epoch or a wrong holder: the answer must be stale_epoch or
// holder_mismatch, never ok (checked against the log, not expected here).
func (c *Client) staleProbe() {
	ol := c.ownPick("reserved", "active")
	if ol == nil {
		return
	}
	epoch := ol.epoch + 1
	if ol.epoch > 1 && c.rng.IntN(2) == 0 {
		epoch = ol.epoch - 1
	}
	holder := c.Holder
	if c.rng.IntN(4) == 0 {
		holder, epoch = c.Holder+"x", ol.epoch
	}
	op := c.opID()
	var m proto.Message
	verb := []string{"lease.activate", "lease.renew", "lease.release"}[c.rng.IntN(3)]
	switch verb {
	case "lease.activate":
		m = &messages.ActivateRequest{OperationId: op, LeaseId: ol.id, HolderId: holder, LeaseEpoch: epoch}
	case "lease.renew":
		m = &messages.RenewRequest{OperationId: op, LeaseId: ol.id, HolderId: holder, LeaseEpoch: epoch, TtlMs: 500}
	default:
		m = &messages.ReleaseRequest{OperationId: op, LeaseId: ol.id, HolderId: holder, LeaseEpoch: epoch}
	}
	c.write(verb, m, op, "", c.Tenant)
}

func (c *Client) operator(verb, state string) {
	k := c.r.pick(c.rng, c.Tenant, state, true)
	if k == nil {
		k = c.r.pick(c.rng, c.Tenant, "", true)
	}
	if k == nil {
		return
	}
	op := c.opID()
	var m proto.Message = &messages.RevokeRequest{OperationId: op, LeaseId: k.id}
	if verb == "lease.reclaim" {
		m = &messages.ReclaimRequest{OperationId: op, LeaseId: k.id}
	}
	c.write(verb, m, op, "", c.Tenant)
}

func (c *Client) fence(shard uint32) (uint64, *uint32, time.Duration) {
	switch x := c.rng.IntN(10); {
	case x < 4:
		return 0, nil, 0
	case x < 9:
		return c.last[shard], proto.Uint32(1000), time.Second
	default: // a position the shard has not reached: fence_not_applied
		w := uint32(c.rng.IntN(30))
		return c.last[shard] + 100000, proto.Uint32(w), time.Duration(w) * time.Millisecond
	}
}

func (c *Client) readObject() {
	l := c.r.Layout
	key := l.Keys[c.rng.IntN(len(l.Keys))]
	switch c.rng.IntN(5) {
	case 0, 1:
		id := l.Res[key][c.rng.IntN(len(l.Res[key]))]
		if c.rng.IntN(6) == 0 {
			id = l.Late[key]
		}
		min, wait, d := c.fence(c.shardOf(id))
		c.read("resource.get", &messages.GetResourceRequest{ResourceId: id, MinLsn: min, WaitMs: wait}, "", c.Tenant, d)
	case 2:
		min, wait, d := c.fence(c.shardOf(l.Pool[key]))
		c.read("pool.get", &messages.GetPoolRequest{PoolId: l.Pool[key], MinLsn: min, WaitMs: wait}, "", c.Tenant, d)
	case 3:
		id := l.Range[key]
		if c.rng.IntN(4) == 0 {
			id = l.Big
		}
		min, wait, d := c.fence(c.shardOf(id))
		c.read("range.get", &messages.GetRangeRequest{RangeId: id, MinLsn: min, WaitMs: wait}, "", c.Tenant, d)
	default:
		c.leaseRead()
	}
}

func (c *Client) leaseRead() {
	var id string
	if ol := c.ownPick("reserved", "active"); ol != nil && c.rng.IntN(2) == 0 {
		id = ol.id
	} else if k := c.r.pick(c.rng, c.Tenant, "", true); k != nil {
		id = k.id
	} else {
		return
	}
	sh, _, _ := contract.ParseLeaseID(id)
	min, wait, d := c.fence(sh)
	c.read("lease.get", &messages.GetLeaseRequest{LeaseId: id, MinLsn: min, WaitMs: wait}, "", c.Tenant, d)
}

func (c *Client) list() {
	req := &messages.ListLeasesRequest{HolderId: c.Holder}
	if c.rng.IntN(3) == 0 {
		req.Limit = proto.Uint32(1 + uint32(c.rng.IntN(3)))
	}
	c.read("lease.list", req, "", c.Tenant, 0)
}

// create re-creates an existing object (already_exists) or, after a third of the round,
// a late resource; now and then it deletes one: the late resource (often held), a pool or
// a range (mostly in use: object_in_use; when idle, gone until a create makes it again,
// with other bounds).
func (c *Client) create() {
	l := c.r.Layout
	key := l.Keys[c.rng.IntN(len(l.Keys))]
	op := c.opID()
	late := time.Since(c.r.started) > c.r.Dur/3
	if late && c.rng.IntN(4) == 0 {
		switch c.rng.IntN(4) {
		case 0, 1:
			c.write("resource.delete", &messages.DeleteResourceRequest{OperationId: op, ResourceId: l.Late[key]}, op, "", c.Tenant)
		case 2:
			c.write("pool.delete", &messages.DeletePoolRequest{OperationId: op, PoolId: l.Pool[key]}, op, "", c.Tenant)
		default:
			c.write("range.delete", &messages.DeleteRangeRequest{OperationId: op, RangeId: l.Range[key]}, op, "", c.Tenant)
		}
		return
	}
	if late && c.rng.IntN(2) == 0 {
		c.write("resource.create", &messages.CreateResourceRequest{OperationId: op, ResourceId: l.Late[key]}, op, "", c.Tenant)
		return
	}
	switch c.rng.IntN(3) {
	case 0:
		c.write("resource.create", &messages.CreateResourceRequest{OperationId: op, ResourceId: l.Res[key][0]}, op, "", c.Tenant)
	case 1:
		c.write("pool.create", &messages.CreatePoolRequest{OperationId: op, PoolId: l.Pool[key], Capacity: 1 + c.rng.Uint64N(9)}, op, "", c.Tenant)
	default:
		c.write("range.create", &messages.CreateRangeRequest{OperationId: op, RangeId: l.Range[key], First: 0, Last: 9}, op, "", c.Tenant)
	}
}

// probe sends another tenant's lease id in this client's tenant, or a lease id the shard
// never issued: either must behave exactly as if the lease did not exist.
func (c *Client) probe() {
	var id, intent string
	if k := c.r.pick(c.rng, c.Tenant, "", false); k != nil && c.rng.IntN(3) > 0 {
		id, intent = k.id, history.IntentWrongTenant
	} else {
		id, intent = contract.FormatLeaseID(uint32(c.rng.IntN(int(c.r.Shards))), 1<<40+c.rng.Uint64N(1000)), history.IntentUnknownID
	}
	op := c.opID()
	switch c.rng.IntN(5) {
	case 0:
		c.read("lease.get", &messages.GetLeaseRequest{LeaseId: id}, intent, c.Tenant, 0)
	case 1:
		c.write("lease.release", &messages.ReleaseRequest{OperationId: op, LeaseId: id, HolderId: c.Holder, LeaseEpoch: 1}, op, intent, c.Tenant)
	case 2:
		c.write("lease.revoke", &messages.RevokeRequest{OperationId: op, LeaseId: id}, op, intent, c.Tenant)
	case 3:
		c.write("lease.activate", &messages.ActivateRequest{OperationId: op, LeaseId: id, HolderId: c.Holder, LeaseEpoch: 1}, op, intent, c.Tenant)
	default:
		// A holder of the other tenant (clients 4, 8, ... work there): it holds nothing here.
		other := "h4"
		if c.ID%4 == 0 {
			other = "h1"
		}
		c.read("lease.list", &messages.ListLeasesRequest{HolderId: other}, history.IntentWrongTenant, c.Tenant, 0)
	}
}
