package kernel

import (
	"cmp"
	"flag"
	"fmt"
	"maps"
	"math"
	"math/bits"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel/internal/valueset"
)

// This file checks the kernel against a reference model written from docs/api.md §2–§4: plain
// maps and slices, everything recomputed by scanning, no indexes and no cleverness. A
// random command stream over a small universe (2 tenants, a handful of ids, tiny pools and
// ranges, a small pool of operation ids, short windows, small table bounds) is driven
// through the kernel exactly as the shard runtime drives it and through the model; after
// every step the outputs, every readable object, the invariants and a set of model-free
// cross-checks must agree. (Top-level names of these files start with m, ref or
// Test(Model|Replay): other test files share the package.)
//
//	go test ./kernel -run Model                         # rapid (shrinking) + 10,000 seeded steps
//	go test ./kernel -run ModelSeeded -kernel.steps=1000000
//	go test ./kernel -run ModelSeeded -kernel.seed=S -kernel.steps=N   # replay a reported failure

var (
	flagModelSteps = flag.Int("kernel.steps", 10000, "steps of TestModelSeeded")
	flagModelSeed  = flag.Uint64("kernel.seed", 0, "first seed of TestModelSeeded and the replay tests (0: from the clock)")
)

const mMaxU = math.MaxUint64

// ---------------------------------------------------------------------------------------
// Universe: few names, so that collisions (busy members, retries, conflicts) are common.

type mPoolSpec struct {
	id       string
	capacity uint64
}

type mRangeSpec struct {
	id          string
	first, last uint64
	strategy    Strategy
}

var (
	mTenants   = []string{"t1", "t2"}
	mHolders   = []string{"h1", "h2", "h3"}
	mResources = []string{"n1/a", "n1/b", "n1/c", "n2/a", "n2/b", "solo"}
	// "solo" is also a resource: the namespaces are separate.
	mPools  = []mPoolSpec{{"n1/mem", 4}, {"n1/cpu", 2}, {"n2/mem", 3}, {"solo", 5}}
	mRanges = []mRangeSpec{
		{"n1/vx", 0, 7, StrategyLowestFree},
		{"n1/rnd", mMaxU - 6, mMaxU, StrategyRandom},
		{"n1/lrf", 0, 5, StrategyLeastRecentlyFreed},
		{"n2/lrf", mMaxU - 3, mMaxU, StrategyLeastRecentlyFreed},
		{"n2/any", 0, mMaxU, StrategyRandom}, // 2^64 values: the saturating paths
		{"n2/lo", mMaxU - 4, mMaxU, StrategyLowestFree},
	}
	mKeys = []string{"n1", "n2", "solo"}
	mOps  = []string{"op0", "op1", "op2", "op3", "op4", "op5", "op6", "op7"}
)

// mGenScenario draws a shard configuration: short windows so that retirement happens, and
// half of the time tiny table bounds so that every *_table_full code is reachable. It also
// draws the slot the clock starts at: now and then just below 2^64, where slot_overflow
// and the arithmetic at the top of the slot space come into play.
func mGenScenario(r *rand.Rand) mScenario {
	cfg := DefaultConfig()
	cfg.Shard = uint32(r.IntN(3))
	cfg.SlotMillis = []uint64{1, 7, 100}[r.IntN(3)]
	cfg.MaxTTLMillis = cfg.SlotMillis * uint64(3+r.IntN(30))
	cfg.DedupeWindowSlots = uint64(3 + r.IntN(40))
	cfg.HistoryWindowSlots = uint64(2 + r.IntN(30))
	cfg.MaxBundle = 3 + r.IntN(3)
	cfg.MaxRangeValues = 1 << 20 // bounded forgetting never triggers
	if r.IntN(2) == 0 {
		cfg.MaxResources = 6 + r.IntN(8)
		cfg.MaxPools = 4 + r.IntN(5)
		cfg.MaxRanges = 6 + r.IntN(8)
		cfg.MaxLeases = 4 + r.IntN(8)
		cfg.MaxMembers = 6 + r.IntN(10)
		cfg.MaxOperations = 8 + r.IntN(16)
		cfg.MaxExpirations = 1 + r.IntN(4)
	} else {
		cfg.MaxResources, cfg.MaxPools, cfg.MaxRanges = 1000, 1000, 1000
		cfg.MaxLeases, cfg.MaxMembers, cfg.MaxOperations, cfg.MaxExpirations = 1000, 4000, 1000, 1000
	}
	sc := mScenario{cfg: cfg, tickPct: 24}
	switch r.IntN(10) {
	case 0:
		sc.start = mMaxU - uint64(50+r.IntN(300))
	case 1:
		sc.start = uint64(r.IntN(1000))
	}
	if r.IntN(3) == 0 {
		sc.tickPct = 2 + r.IntN(6) // expiry comes late
	}
	return sc
}

// mScenario is what a run draws before its steps.
type mScenario struct {
	cfg     Config
	start   uint64 // the clock's first slot
	tickPct int    // how often a step commits the due expirations
}

// ---------------------------------------------------------------------------------------
// The reference model.

type mLease struct {
	lsn         uint64
	tenant      string
	holder      string
	state       LeaseState
	epoch       uint64
	deadline    uint64
	releasedLSN uint64
	retireAfter uint64
	members     []MemberView // as granted, range members with their value
	labels      []Label      // as given, sorted by key (Validate)
	created     uint64       // the slot it was granted at
}

type mRange struct {
	first, last uint64
	strategy    Strategy
	used        map[uint64]bool // least_recently_freed: values handed out at some point
	freed       []uint64        // least_recently_freed: freed values, least recently freed first
}

type mOp struct {
	cmd   *Command // as sent, TTLSlots cleared
	code  Code
	lsn   uint64
	slot  uint64
	epoch uint64 // the lease_epoch of the reply, when it showed a lease
	ref   uint64 // range.release/revoke/reclaim with ok or lease_has_other_members: the lease that held the value
	until uint64 // a refused reserve: the earliest_deadline_slot it answered, answered again
	// retireAfter is the last slot it answers retries: its slot plus the dedupe window in
	// force when it was remembered, but never before an earlier outcome of its kind (ok, or
	// a failure) — a lowered window keeps them in order, late, never early.
	retireAfter uint64
}

type mIssued struct {
	lsn    uint64
	tenant string
}

type refModel struct {
	cfg       Config
	lastLSN   uint64
	lastSlot  uint64
	watermark uint64 // highest lsn of a lease dropped from the table

	resources map[string]uint64 // "tenant\x00id" → version; state is derived from the leases
	pools     map[string]uint64 // → capacity; use is derived from the leases
	consumed  map[string]uint64 // → units consumed for good (lease.consume)
	ranges    map[string]*mRange
	leases    map[uint64]*mLease // live leases and terminal ones not dropped yet
	ended     []uint64           // terminal leases in the order they ended (dropped from the front)
	ops       []mOp              // remembered outcomes in commit order
	issued    []mIssued          // every lease ever granted (for the generator)
	// Deleted objects hold their table slot until every lease that ended before the delete
	// has retired: graves in delete order, and how many leases have ever ended and retired.
	graves               []mGrave
	endedN, endedRetired uint64
}

type mGrave struct {
	verb      Verb   // the create verb of the table it holds a slot in
	freeAfter uint64 // endedN at the delete
}

func newRefModel(cfg Config) *refModel {
	return &refModel{cfg: cfg, resources: map[string]uint64{}, pools: map[string]uint64{}, consumed: map[string]uint64{},
		ranges: map[string]*mRange{}, leases: map[uint64]*mLease{}}
}

func mKey(tenant, id string) string { return tenant + "\x00" + id }

func mLive(s LeaseState) bool { return s == LeaseReserved || s == LeaseActive || s == LeaseRevoking }
func mTerminal(s LeaseState) bool {
	return s == LeaseReleased || s == LeaseExpired || s == LeaseRevoked || s == LeaseConsumed
}

func mResourceState(s LeaseState) ResourceState {
	switch s {
	case LeaseReserved:
		return ResourceReserved
	case LeaseActive:
		return ResourceActive
	case LeaseRevoking:
		return ResourceRevoking
	}
	return ResourceAvailable
}

// liveLeases lists the live leases in lsn order.
func (m *refModel) liveLeases() []*mLease {
	var ls []*mLease
	for _, l := range m.leases {
		if mLive(l.state) {
			ls = append(ls, l)
		}
	}
	slices.SortFunc(ls, func(a, b *mLease) int { return cmp.Compare(a.lsn, b.lsn) })
	return ls
}

func (m *refModel) resourceLease(tenant, id string) *mLease {
	for _, l := range m.leases {
		if !mLive(l.state) || l.tenant != tenant {
			continue
		}
		for _, mv := range l.members {
			if mv.Kind == MemberResource && mv.ID == id {
				return l
			}
		}
	}
	return nil
}

func (m *refModel) poolUse(tenant, id string) (reserved, active uint64) {
	for _, l := range m.leases {
		if !mLive(l.state) || l.tenant != tenant {
			continue
		}
		for _, mv := range l.members {
			if mv.Kind == MemberPool && mv.ID == id {
				if l.state == LeaseReserved {
					reserved += mv.Quantity
				} else {
					active += mv.Quantity
				}
			}
		}
	}
	return reserved, active
}

// rangeValues lists the values of a range held by live leases, ascending.
func (m *refModel) rangeValues(tenant, id string) []uint64 {
	var vs []uint64
	for _, l := range m.leases {
		if !mLive(l.state) || l.tenant != tenant {
			continue
		}
		for _, mv := range l.members {
			if mv.Kind == MemberRange && mv.ID == id {
				vs = append(vs, mv.Value)
			}
		}
	}
	slices.Sort(vs)
	return vs
}

func (m *refModel) memberCount() int {
	n := 0
	for _, l := range m.leases {
		n += len(l.members)
	}
	return n
}

func (m *refModel) reservedCount() int {
	n := 0
	for _, l := range m.leases {
		if l.state == LeaseReserved {
			n++
		}
	}
	return n
}

func (m *refModel) resourceView(tenant, id string) ResourceView {
	v := ResourceView{Tenant: tenant, ID: id, Version: m.resources[mKey(tenant, id)]}
	if l := m.resourceLease(tenant, id); l != nil {
		v.State, v.LeaseLSN, v.LeaseShard = mResourceState(l.state), l.lsn, m.cfg.Shard
	}
	return v
}

func (m *refModel) poolView(tenant, id string) PoolView {
	c, u := m.pools[mKey(tenant, id)], m.consumed[mKey(tenant, id)]
	r, a := m.poolUse(tenant, id)
	return PoolView{Tenant: tenant, ID: id, Capacity: c, Reserved: r, Active: a, Consumed: u, Available: c - r - a - u}
}

func (m *refModel) rangeView(tenant, id string) RangeView {
	rg := m.ranges[mKey(tenant, id)]
	n := uint64(len(m.rangeValues(tenant, id)))
	span := rg.last - rg.first // the range holds span+1 values
	free := uint64(mMaxU)      // 2^64 free values saturate
	if !(span == mMaxU && n == 0) {
		free = span - n + 1
	}
	return RangeView{Tenant: tenant, ID: id, First: rg.first, Last: rg.last, Strategy: rg.strategy,
		Allocated: n, Free: free}
}

func (m *refModel) leaseView(l *mLease) LeaseView {
	return LeaseView{Shard: m.cfg.Shard, LSN: l.lsn, Tenant: l.tenant, HolderID: l.holder, State: l.state,
		Epoch: l.epoch, CreatedLSN: l.lsn, DeadlineSlot: l.deadline, ReleasedLSN: l.releasedLSN,
		RetireAfterSlot: l.retireAfter, Members: append([]MemberView(nil), l.members...), Labels: slices.Clone(l.labels),
		AllocatedAtMillis: m.allocatedAt(l.created)}
}

// allocatedAt is a lease's allocated_at in Unix ms: its slot times the slot length, 0
// for slot 0 and for a time no clock shows (past 2^63 ms).
func (m *refModel) allocatedAt(slot uint64) uint64 {
	if hi, lo := bits.Mul64(slot, m.cfg.SlotMillis); hi != 0 || lo > math.MaxInt64 {
		return 0
	}
	return slot * m.cfg.SlotMillis
}

// find resolves a lease id for tenant at slot (docs/api.md §4 "Reads", retired watermark).
func (m *refModel) find(tenant string, lsn, slot uint64) (*mLease, Code) {
	if l, ok := m.leases[lsn]; ok && l.tenant == tenant {
		if mTerminal(l.state) && l.retireAfter < slot {
			return nil, contract.CodeLeaseRetired // its history window has passed
		}
		return l, contract.CodeOK
	}
	if lsn <= m.watermark {
		return nil, contract.CodeLeaseRetired
	}
	return nil, contract.CodeLeaseNotFound
}

// retireOne drops the lease that ended first if its history window has passed. When the
// kernel does this (up to retireBudget per entry, and when a reserve needs room) is its
// choice; only the watermark, which other tenants' and never-issued ids read, shows it.
func (m *refModel) retireOne(slot uint64) bool {
	if len(m.ended) == 0 {
		return false
	}
	l := m.leases[m.ended[0]]
	if l.retireAfter >= slot {
		return false
	}
	m.ended = m.ended[1:]
	m.endedRetired++
	delete(m.leases, l.lsn)
	m.watermark = max(m.watermark, l.lsn)
	return true
}

// ---- validation (docs/api.md §2, §4: checks that need only the request and the config)

func mAlnum(c rune) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' }

func mValidTenant(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !mAlnum(c) && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

func mValidID(s string, maxLen int) bool {
	if len(s) < 1 || len(s) > maxLen {
		return false
	}
	for i, c := range s {
		if !mAlnum(c) && (i == 0 || !strings.ContainsRune("_-:/@+", c)) {
			return false
		}
	}
	return true
}

func mPlacement(id string) string {
	key, _, _ := strings.Cut(id, "/")
	return key
}

func (m *refModel) ttlSlots(ms uint64) uint64 {
	return (ms + m.cfg.SlotMillis - 1) / m.cfg.SlotMillis
}

// cmdTTLSlots is the ttl in slots a command carries once validated: reserve (unless it
// activates) and renew.
func (m *refModel) cmdTTLSlots(c *Command) uint64 {
	if (c.Verb == contract.VerbReserve && !c.Activate) || c.Verb == contract.VerbRenew {
		return m.ttlSlots(c.TTLMillis)
	}
	return 0
}

func (m *refModel) validate(c *Command) Code {
	modelled := (c.Verb >= contract.VerbCreateResource && c.Verb <= contract.VerbReclaim) ||
		(c.Verb >= contract.VerbDeleteResource && c.Verb <= contract.VerbDeleteRange) || mAllocVerbs[c.Verb]
	if !mValidTenant(c.Tenant) || !modelled || !mValidID(c.OperationID, 64) {
		return contract.CodeInvalidRequest
	}
	ttlOK := c.TTLMillis >= 1 // the form; the bound is an admission limit (limits)
	switch c.Verb {
	case contract.VerbCreateResource, contract.VerbDeleteResource, contract.VerbDeletePool, contract.VerbDeleteRange:
		if !mValidID(c.ObjectID, 128) {
			return contract.CodeInvalidRequest
		}
	case contract.VerbCreatePool:
		if !mValidID(c.ObjectID, 128) || c.Capacity == 0 {
			return contract.CodeInvalidRequest
		}
	case contract.VerbCreateRange:
		if !mValidID(c.ObjectID, 128) || c.First > c.Last || c.Strategy > StrategyLeastRecentlyFreed {
			return contract.CodeInvalidRequest
		}
	case contract.VerbReserve:
		if !mValidID(c.HolderID, 128) || len(c.Members) == 0 {
			return contract.CodeInvalidRequest
		}
		for i, mb := range c.Members {
			switch mb.Kind {
			case MemberResource:
				if mb.Quantity != 0 || mb.HasValue {
					return contract.CodeInvalidRequest
				}
			case MemberPool:
				if mb.Quantity == 0 || mb.HasValue {
					return contract.CodeInvalidRequest
				}
			case MemberRange:
				if mb.Quantity != 0 {
					return contract.CodeInvalidRequest
				}
			default:
				return contract.CodeInvalidRequest
			}
			if !mValidID(mb.ID, 128) {
				return contract.CodeInvalidRequest
			}
			if mPlacement(mb.ID) != mPlacement(c.Members[0].ID) {
				return contract.CodeCrossShard
			}
			for _, o := range c.Members[:i] {
				if o.Kind == mb.Kind && o.ID == mb.ID &&
					(mb.Kind != MemberRange || mb.HasValue && o.HasValue && mb.Value == o.Value) {
					return contract.CodeDuplicateMember
				}
			}
		}
		if !c.Activate && !ttlOK {
			return contract.CodeTTLOutOfRange
		}
		if !mValidLabels(c.Labels) {
			return contract.CodeInvalidRequest
		}
	case contract.VerbReleaseValue, contract.VerbRevokeValue, contract.VerbReclaimValue, contract.VerbResizePool:
		return m.validateAlloc(c)
	case contract.VerbActivate, contract.VerbRelease, contract.VerbRenew, contract.VerbConsume:
		if c.LeaseLSN == 0 || !mValidID(c.HolderID, 128) || c.Epoch == 0 {
			return contract.CodeInvalidRequest
		}
		if c.Verb == contract.VerbRenew && !ttlOK {
			return contract.CodeTTLOutOfRange
		}
	case contract.VerbRevoke, contract.VerbReclaim:
		if c.LeaseLSN == 0 {
			return contract.CodeInvalidRequest
		}
	}
	return contract.CodeOK
}

// limits checks a valid write against the admission limits (docs/api.md §6: they judge
// requests when they are admitted, after the retry cache, never at replay).
func (m *refModel) limits(c *Command) Code {
	ttlOK := c.TTLMillis <= m.cfg.MaxTTLMillis
	switch c.Verb {
	case contract.VerbReserve:
		if len(c.Members) > m.cfg.MaxBundle {
			return contract.CodeBundleTooLarge
		}
		if !c.Activate && !ttlOK {
			return contract.CodeTTLOutOfRange
		}
	case contract.VerbRenew:
		if !ttlOK {
			return contract.CodeTTLOutOfRange
		}
	}
	return contract.CodeOK
}

// slotsOK: every slot the command derives (deadline, retirement of the lease and of the
// operation) must fit a u64.
func (m *refModel) slotsOK(c *Command, slot uint64) bool {
	if slot > mMaxU-m.cfg.DedupeWindowSlots || slot > mMaxU-m.cfg.HistoryWindowSlots {
		return false
	}
	ttl := m.cmdTTLSlots(c)
	return ttl == 0 || slot <= mMaxU-ttl && slot+ttl <= mMaxU-m.cfg.HistoryWindowSlots
}

// ---- idempotency

func mStripCmd(c *Command) *Command {
	d := mCloneCmd(c)
	d.TTLSlots = 0
	if d.Verb == contract.VerbReserve && d.Activate {
		d.TTLMillis = 0 // ignored by an activating reserve (docs/api.md §4): not part of the command
	}
	return d
}

// lookupOp is the newest remembered outcome of (tenant, operation id) still inside the
// dedupe window at slot.
func (m *refModel) lookupOp(tenant, op string, slot uint64) *mOp {
	for i := len(m.ops) - 1; i >= 0; i-- {
		o := &m.ops[i]
		if o.cmd.Tenant == tenant && o.cmd.OperationID == op {
			if o.retireAfter >= slot {
				return o
			}
			return nil
		}
	}
	return nil
}

func (m *refModel) opsInWindow(slot uint64) int {
	n := 0
	for i := range m.ops {
		if m.ops[i].retireAfter >= slot {
			n++
		}
	}
	return n
}

// keptInWindow counts the outcomes that changed state still inside the window: only they
// can make the table full (docs/api.md §4 "Room for remembering").
func (m *refModel) keptInWindow(slot uint64) int {
	n := 0
	for i := range m.ops {
		if m.ops[i].code == contract.CodeOK && m.ops[i].retireAfter >= slot {
			n++
		}
	}
	return n
}

// forgetOldestFailure drops the oldest remembered outcome that changed nothing.
func (m *refModel) forgetOldestFailure() {
	for i := range m.ops {
		if m.ops[i].code != contract.CodeOK {
			m.ops = append(m.ops[:i], m.ops[i+1:]...)
			return
		}
	}
}

// forgetOps drops outcomes that left the window: they can neither answer nor count.
func (m *refModel) forgetOps(slot uint64) {
	m.ops = slices.DeleteFunc(m.ops, func(o mOp) bool { return o.retireAfter < slot })
}

// opRetireAfter is the retirement slot of an outcome with code remembered at slot.
func (m *refModel) opRetireAfter(code Code, slot uint64) uint64 {
	due := slot + m.cfg.DedupeWindowSlots
	if due < slot {
		due = mMaxU
	}
	for i := len(m.ops) - 1; i >= 0; i-- {
		if (m.ops[i].code == contract.CodeOK) == (code == contract.CodeOK) {
			return max(due, m.ops[i].retireAfter)
		}
	}
	return due
}

// retry builds the reply to a retried operation: the original code and lsn, from the
// retry cache, and — when the original reply showed an object — that object's current
// view, if the caller can still read it. A failed lease verb showed no lease (and must
// not: another tenant's lease does not exist for the caller, and holder_mismatch reveals
// no holder), so its retry shows none either.
func (m *refModel) retry(op *mOp, c *Command, slot uint64) Output {
	want := Output{Code: op.code, LSN: op.lsn, FromRetryCache: true, MemberIndex: -1}
	switch op.cmd.Verb {
	case contract.VerbCreateResource, contract.VerbCreatePool, contract.VerbCreateRange:
		if (op.code == contract.CodeOK || op.code == contract.CodeAlreadyExists) && m.exists(op.cmd.Verb, mKey(c.Tenant, op.cmd.ObjectID)) {
			m.fillObject(&want, op.cmd.Verb, c.Tenant, op.cmd.ObjectID) // as it is now, unless deleted since
		}
	case contract.VerbDeleteResource, contract.VerbDeletePool, contract.VerbDeleteRange:
		// the object is gone: a retry shows the code and lsn only
	case contract.VerbResizePool:
		if (op.code == contract.CodeOK || op.code == contract.CodeObjectInUse) && m.exists(contract.VerbCreatePool, mKey(c.Tenant, op.cmd.ObjectID)) {
			m.fillObject(&want, contract.VerbCreatePool, c.Tenant, op.cmd.ObjectID)
		}
	default:
		lsn := c.LeaseLSN // the lease a lease verb named
		if op.cmd.Verb == contract.VerbReserve {
			lsn = op.lsn // the lease the reserve granted
			if op.code != contract.CodeOK {
				want.EarliestDeadlineSlot = op.until // a refusal's hint, as first answered
			}
		}
		if mValueVerb(op.cmd.Verb) {
			lsn = op.ref // the lease that held the value
		}
		// The reply's lease id and epoch, with the lease's current view while it is
		// readable and nothing more once it has retired (docs/api.md §4 "Idempotency");
		// range.release's lease_has_other_members showed the lease too (V.3).
		if op.code == contract.CodeOK || (op.code == contract.CodeLeaseHasOtherMembers && mValueVerb(op.cmd.Verb)) {
			want.Object = ObjectLease
			if l, code := m.find(c.Tenant, lsn, slot); code == contract.CodeOK {
				want.Lease = m.leaseView(l)
			} else {
				want.Lease = LeaseView{Shard: m.cfg.Shard, LSN: lsn, Tenant: c.Tenant}
			}
			want.Lease.Epoch = op.epoch
		}
	}
	return want
}

// exists reports whether the object of a create verb's kind is there (not deleted).
func (m *refModel) exists(create Verb, key string) bool {
	var ok bool
	switch create {
	case contract.VerbCreateResource:
		_, ok = m.resources[key]
	case contract.VerbCreatePool:
		_, ok = m.pools[key]
	case contract.VerbCreateRange:
		_, ok = m.ranges[key]
	}
	return ok
}

func (m *refModel) fillObject(out *Output, v Verb, tenant, id string) {
	switch v {
	case contract.VerbCreateResource:
		out.Object, out.Resource = ObjectResource, m.resourceView(tenant, id)
	case contract.VerbCreatePool:
		out.Object, out.Pool = ObjectPool, m.poolView(tenant, id)
	case contract.VerbCreateRange:
		out.Object, out.Range = ObjectRange, m.rangeView(tenant, id)
	}
}

// ---- writes

// write answers one client write the way the shard runtime does (validate, dedupe
// lookup, slot check, operation room, apply) and reports which step answered.
func (m *refModel) write(slot uint64, c *Command) (want Output, path string) {
	m.forgetOps(slot)
	want = Output{MemberIndex: -1}
	if code := m.validate(c); code != contract.CodeOK {
		want.Code = code
		return want, "validate"
	}
	if op := m.lookupOp(c.Tenant, c.OperationID, slot); op != nil {
		if !reflect.DeepEqual(op.cmd, mStripCmd(c)) {
			want.Code, want.LSN = contract.CodeOperationConflict, m.lastLSN
			return want, "lookup"
		}
		return m.retry(op, c, slot), "lookup"
	}
	if code := m.limits(c); code != contract.CodeOK {
		want.Code = code
		return want, "limits"
	}
	if !m.slotsOK(c, slot) {
		want.Code = contract.CodeSlotOverflow
		return want, "slots"
	}
	if m.keptInWindow(slot) >= m.cfg.MaxOperations {
		want.Code = contract.CodeOperationTableFull
		return want, "room"
	}
	return m.apply(slot, c), "apply"
}

func (m *refModel) resourceStates() map[string]ResourceView {
	s := make(map[string]ResourceView, len(m.resources))
	for key := range m.resources {
		t, id, _ := strings.Cut(key, "\x00")
		s[key] = m.resourceView(t, id)
	}
	return s
}

// apply commits one entry (a client write that passed the runtime's checks, or an
// expire) at the next lsn.
func (m *refModel) apply(slot uint64, c *Command) Output {
	m.lastLSN++
	m.lastSlot = slot
	lsn := m.lastLSN
	for i := 0; i < retireBudget && m.retireOne(slot); i++ {
	}
	for i := 0; i < retireBudget && len(m.graves) > 0 && m.graves[0].freeAfter <= m.endedRetired; i++ {
		m.graves = m.graves[1:]
	}
	out := Output{LSN: lsn, MemberIndex: -1}
	before := m.resourceStates()
	switch c.Verb {
	case contract.VerbExpire:
		m.expire(slot, lsn, c, &out)
	case contract.VerbConfigure:
		m.configure(c, &out)
		return out
	case contract.VerbCreateResource, contract.VerbCreatePool, contract.VerbCreateRange:
		m.create(c, &out)
	case contract.VerbDeleteResource, contract.VerbDeletePool, contract.VerbDeleteRange:
		m.delete(c, &out)
	case contract.VerbReserve:
		m.reserve(slot, lsn, c, &out)
	case contract.VerbConsume:
		m.consume(slot, lsn, c, &out)
	case contract.VerbReleaseValue, contract.VerbRevokeValue, contract.VerbReclaimValue:
		m.valueVerb(slot, lsn, c, &out)
	case contract.VerbResizePool:
		m.resizePool(c, &out)
	default:
		m.leaseVerb(slot, lsn, c, &out)
	}
	// A resource's version bumps on every change of its state.
	for key, v := range m.resourceStates() {
		if b := before[key]; b.State != v.State || b.LeaseLSN != v.LeaseLSN {
			m.resources[key]++
		}
	}
	if c.Verb != contract.VerbExpire {
		if m.opsInWindow(slot) >= m.cfg.MaxOperations {
			m.forgetOldestFailure() // the write was admitted, so there is one
		}
		var epoch, ref uint64
		if out.Object == ObjectLease {
			epoch = out.Lease.Epoch
		}
		if (out.Code == contract.CodeOK || out.Code == contract.CodeLeaseHasOtherMembers) && mValueVerb(c.Verb) {
			ref = out.Lease.LSN // the lease its reply showed
		}
		m.ops = append(m.ops, mOp{cmd: mStripCmd(c), code: out.Code, lsn: lsn, slot: slot, epoch: epoch, ref: ref,
			until: out.EarliestDeadlineSlot, retireAfter: m.opRetireAfter(out.Code, slot)})
	}
	return out
}

// configure applies a configure entry: its shape is in force from now on (docs/api.md §6
// "Settings"). A shape with a window or a bound out of range, or another slot length, is
// refused and changes nothing.
func (m *refModel) configure(c *Command, out *Output) {
	s := c.Settings
	ok := s.SlotMillis == m.cfg.SlotMillis && s.DedupeWindowSlots >= 1 && s.HistoryWindowSlots >= 1
	for _, b := range []int{s.MaxResources, s.MaxPools, s.MaxRanges, s.MaxLeases, s.MaxMembers, s.MaxOperations,
		s.MaxExpirations, s.MaxRangeValues, s.MaxRuns, s.MaxWork} {
		ok = ok && b >= 1 && b <= 1<<30
	}
	if !ok {
		out.Code = contract.CodeInvalidRequest
		return
	}
	m.cfg.Shape = s
}

func (m *refModel) create(c *Command, out *Output) {
	key := mKey(c.Tenant, c.ObjectID)
	var exists bool
	var count, bound int
	var full Code
	switch c.Verb {
	case contract.VerbCreateResource:
		_, exists = m.resources[key]
		count, bound, full = len(m.resources), m.cfg.MaxResources, contract.CodeResourceTableFull
	case contract.VerbCreatePool:
		_, exists = m.pools[key]
		count, bound, full = len(m.pools), m.cfg.MaxPools, contract.CodePoolTableFull
	case contract.VerbCreateRange:
		_, exists = m.ranges[key]
		count, bound, full = len(m.ranges), m.cfg.MaxRanges, contract.CodeRangeTableFull
	}
	for _, g := range m.graves {
		if g.verb == c.Verb {
			count++
		}
	}
	switch {
	case exists:
		out.Code = contract.CodeAlreadyExists
		m.fillObject(out, c.Verb, c.Tenant, c.ObjectID)
		return
	case count >= bound:
		out.Code = full
		return
	}
	switch c.Verb {
	case contract.VerbCreateResource:
		m.resources[key] = 0
		out.Event = EventResourceCreated
	case contract.VerbCreatePool:
		m.pools[key] = c.Capacity
		out.Event = EventPoolCreated
	case contract.VerbCreateRange:
		m.ranges[key] = &mRange{first: c.First, last: c.Last, strategy: c.Strategy, used: map[uint64]bool{}}
		out.Event = EventRangeCreated
	}
	m.fillObject(out, c.Verb, c.Tenant, c.ObjectID)
}

// delete removes an idle object; its slot is a grave until the leases that ended before
// have retired.
func (m *refModel) delete(c *Command, out *Output) {
	key := mKey(c.Tenant, c.ObjectID)
	var create Verb
	var exists, inUse bool
	var notFound Code
	switch c.Verb {
	case contract.VerbDeleteResource:
		create, notFound = contract.VerbCreateResource, contract.CodeResourceNotFound
		_, exists = m.resources[key]
		inUse = exists && m.resourceLease(c.Tenant, c.ObjectID) != nil
	case contract.VerbDeletePool:
		create, notFound = contract.VerbCreatePool, contract.CodePoolNotFound
		_, exists = m.pools[key]
		r, a := m.poolUse(c.Tenant, c.ObjectID)
		inUse = r+a != 0
	case contract.VerbDeleteRange:
		create, notFound = contract.VerbCreateRange, contract.CodeRangeNotFound
		_, exists = m.ranges[key]
		inUse = exists && len(m.rangeValues(c.Tenant, c.ObjectID)) != 0
	}
	if !exists {
		out.Code = notFound
		return
	}
	m.fillObject(out, create, c.Tenant, c.ObjectID)
	if inUse {
		out.Code = contract.CodeObjectInUse
		return
	}
	switch c.Verb {
	case contract.VerbDeleteResource:
		delete(m.resources, key)
		out.Event = EventResourceDeleted
	case contract.VerbDeletePool:
		delete(m.pools, key)
		delete(m.consumed, key)
		out.Event = EventPoolDeleted
	case contract.VerbDeleteRange:
		delete(m.ranges, key)
		out.Event = EventRangeDeleted
	}
	m.graves = append(m.graves, mGrave{verb: create, freeAfter: m.endedN})
}

// mNthFree is the n-th (0-based, ascending) value of [first, last] not in excl (sorted,
// within the range).
func mNthFree(first uint64, excl []uint64, n uint64) uint64 {
	v := first + n
	for _, e := range excl {
		if e > v {
			break
		}
		v++
	}
	return v
}

// choose picks the value of an "any" range member: taken are the values allocated now,
// picked those earlier members of this reserve took from the same range.
func (m *refModel) choose(rg *mRange, taken, picked []uint64, lsn uint64, member int) (uint64, bool) {
	excluded := func(v uint64) bool { return slices.Contains(taken, v) || slices.Contains(picked, v) }
	switch rg.strategy {
	case StrategyRandom:
		excl := slices.Sorted(slices.Values(append(slices.Clone(taken), picked...)))
		span := rg.last - rg.first
		rng := valueset.NewRand(lsn*0x9E3779B97F4A7C15 ^ uint64(member))
		var n uint64
		if span == mMaxU && len(excl) == 0 {
			n = rng.Uint64() // 2^64 candidates: every u64 is a draw
		} else {
			left := span - uint64(len(excl)) + 1
			if left == 0 {
				return 0, false
			}
			n = rng.Below(left)
		}
		return mNthFree(rg.first, excl, n), true
	case StrategyLeastRecentlyFreed:
		for v := rg.first; ; v++ { // never used, ascending
			if !rg.used[v] && !excluded(v) {
				return v, true
			}
			if v == rg.last {
				break
			}
		}
		for _, v := range rg.freed { // then freed, least recently first
			if !excluded(v) {
				return v, true
			}
		}
		return 0, false
	default:
		for v := rg.first; ; v++ {
			if !excluded(v) {
				return v, true
			}
			if v == rg.last {
				return 0, false
			}
		}
	}
}

func (m *refModel) reserve(slot, lsn uint64, c *Command, out *Output) {
	var picks []MemberView
	for i, mb := range c.Members {
		key := mKey(c.Tenant, mb.ID)
		code := contract.CodeOK
		pick := MemberView{Kind: mb.Kind, ID: mb.ID}
		switch mb.Kind {
		case MemberResource:
			if _, ok := m.resources[key]; !ok {
				code = contract.CodeResourceNotFound
			} else if l := m.resourceLease(c.Tenant, mb.ID); l != nil {
				code = contract.CodeResourceBusy
				if l.state == LeaseReserved {
					out.EarliestDeadlineSlot = l.deadline // until when, never by whom
				}
			}
		case MemberPool:
			if capacity, ok := m.pools[key]; !ok {
				code = contract.CodePoolNotFound
			} else if r, a := m.poolUse(c.Tenant, mb.ID); mb.Quantity > capacity-r-a-m.consumed[key] {
				code = contract.CodeInsufficientCapacity
			}
			pick.Quantity = mb.Quantity
		case MemberRange:
			rg := m.ranges[key]
			if rg == nil {
				code = contract.CodeRangeNotFound
				break
			}
			taken := m.rangeValues(c.Tenant, mb.ID)
			var picked []uint64
			for _, p := range picks {
				if p.Kind == MemberRange && p.ID == mb.ID {
					picked = append(picked, p.Value)
				}
			}
			switch {
			case mb.HasValue && (mb.Value < rg.first || mb.Value > rg.last):
				code = contract.CodeValueOutOfRange
			case mb.HasValue && (slices.Contains(taken, mb.Value) || slices.Contains(picked, mb.Value)):
				code = contract.CodeValueBusy
			case mb.HasValue:
				pick.Value = mb.Value
			default:
				v, ok := m.choose(rg, taken, picked, lsn, i)
				if !ok {
					code = contract.CodeRangeExhausted
				}
				pick.Value = v
			}
		}
		if code != contract.CodeOK {
			out.Code, out.MemberIndex = code, i
			return
		}
		picks = append(picks, pick)
	}
	// Then the table bounds; retirable history is dropped first to make room.
	for len(m.leases) >= m.cfg.MaxLeases && m.retireOne(slot) {
	}
	if len(m.leases) >= m.cfg.MaxLeases {
		out.Code = contract.CodeLeaseTableFull
		return
	}
	for m.memberCount()+len(picks) > m.cfg.MaxMembers && m.retireOne(slot) {
	}
	if m.memberCount()+len(picks) > m.cfg.MaxMembers {
		out.Code = contract.CodeLeaseMemberTableFull
		return
	}
	if !c.Activate && m.reservedCount() >= m.cfg.MaxExpirations {
		out.Code = contract.CodeExpirationIndexFull
		return
	}
	l := &mLease{lsn: lsn, tenant: c.Tenant, holder: c.HolderID, state: LeaseReserved, epoch: 1, members: picks,
		labels: slices.Clone(c.Labels), created: slot}
	if c.Activate {
		l.state = LeaseActive
		out.Event = EventLeaseActivated
	} else {
		l.deadline = slot + m.ttlSlots(c.TTLMillis)
		out.Event = EventLeaseReserved
	}
	for _, p := range picks {
		if rg := m.ranges[mKey(c.Tenant, p.ID)]; p.Kind == MemberRange && rg.strategy == StrategyLeastRecentlyFreed {
			rg.used[p.Value] = true
			if i := slices.Index(rg.freed, p.Value); i >= 0 {
				rg.freed = slices.Delete(rg.freed, i, i+1)
			}
		}
	}
	m.leases[lsn] = l
	m.issued = append(m.issued, mIssued{lsn, c.Tenant})
	out.Object, out.Lease = ObjectLease, m.leaseView(l)
}

// end moves a live lease to a terminal state; its members become free.
func (m *refModel) end(l *mLease, lsn, slot uint64, to LeaseState, bumpEpoch bool) {
	for _, mv := range l.members {
		rg := m.ranges[mKey(l.tenant, mv.ID)]
		if mv.Kind != MemberRange || rg.strategy != StrategyLeastRecentlyFreed {
			continue
		}
		rg.freed = append(rg.freed, mv.Value)
		total := 0
		for _, r := range m.ranges {
			total += len(r.freed)
		}
		if total > m.cfg.MaxRangeValues { // bounded memory: forget this range's oldest
			delete(rg.used, rg.freed[0])
			rg.freed = rg.freed[1:]
		}
	}
	if bumpEpoch {
		l.epoch++
	}
	l.state, l.releasedLSN, l.retireAfter = to, lsn, slot+m.cfg.HistoryWindowSlots
	if l.retireAfter < slot { // past the last slot: never (an expire may come that late)
		l.retireAfter = mMaxU
	}
	if n := len(m.ended); n > 0 { // never before the lease that ended before it
		l.retireAfter = max(l.retireAfter, m.leases[m.ended[n-1]].retireAfter)
	}
	m.ended = append(m.ended, l.lsn)
	m.endedN++
}

func (m *refModel) leaseVerb(slot, lsn uint64, c *Command, out *Output) {
	l, code := m.find(c.Tenant, c.LeaseLSN, slot)
	if code != contract.CodeOK {
		out.Code = code
		return
	}
	holderVerb := c.Verb == contract.VerbActivate || c.Verb == contract.VerbRenew || c.Verb == contract.VerbRelease
	switch {
	case holderVerb && l.holder != c.HolderID:
		out.Code = contract.CodeHolderMismatch
	case holderVerb && l.epoch != c.Epoch:
		out.Code = contract.CodeStaleEpoch
	case (c.Verb == contract.VerbActivate || c.Verb == contract.VerbRenew) && l.state != LeaseReserved:
		out.Code = contract.CodeInvalidState
	case (c.Verb == contract.VerbActivate || c.Verb == contract.VerbRenew) && slot >= l.deadline:
		out.Code = contract.CodeLeaseExpired
	case c.Verb == contract.VerbActivate:
		l.state, l.deadline = LeaseActive, 0
		out.Event = EventLeaseActivated
	case c.Verb == contract.VerbRenew:
		l.deadline = slot + m.ttlSlots(c.TTLMillis)
		out.Event = EventLeaseRenewed
	case c.Verb == contract.VerbRelease && l.state != LeaseReserved && l.state != LeaseActive:
		out.Code = contract.CodeInvalidState
	case c.Verb == contract.VerbRelease:
		m.end(l, lsn, slot, LeaseReleased, true)
		out.Event = EventLeaseReleased
	case c.Verb == contract.VerbRevoke && l.state != LeaseActive:
		out.Code = contract.CodeInvalidState
	case c.Verb == contract.VerbRevoke:
		l.state = LeaseRevoking
		l.epoch++
		out.Event = EventLeaseRevoking
	case c.Verb == contract.VerbReclaim && l.state != LeaseRevoking:
		out.Code = contract.CodeInvalidState
	case c.Verb == contract.VerbReclaim:
		m.end(l, lsn, slot, LeaseRevoked, false)
		out.Event = EventLeaseRevoked
	}
	if out.Code == contract.CodeOK {
		out.Object, out.Lease = ObjectLease, m.leaseView(l)
	}
}

func (m *refModel) expire(slot, lsn uint64, c *Command, out *Output) {
	l, ok := m.leases[c.LeaseLSN]
	if !ok || l.state != LeaseReserved || l.deadline != c.Deadline || slot < l.deadline {
		out.Code = contract.CodeNoop
		return
	}
	m.end(l, lsn, slot, LeaseExpired, true)
	out.Event = EventLeaseExpired
	out.Object, out.Lease = ObjectLease, m.leaseView(l)
}

// ---- reads

func (m *refModel) due(slot uint64, limit int) []Due {
	var ds []Due
	for _, l := range m.leases {
		if l.state == LeaseReserved && l.deadline <= slot {
			ds = append(ds, Due{Tenant: l.tenant, LeaseLSN: l.lsn, Deadline: l.deadline})
		}
	}
	slices.SortFunc(ds, func(a, b Due) int {
		return cmp.Or(cmp.Compare(a.Deadline, b.Deadline), cmp.Compare(a.LeaseLSN, b.LeaseLSN))
	})
	if len(ds) > max(limit, 0) {
		ds = ds[:max(limit, 0)]
	}
	return ds
}

func (m *refModel) nextDeadline() (uint64, bool) {
	d, ok := uint64(0), false
	for _, l := range m.leases {
		if l.state == LeaseReserved && (!ok || l.deadline < d) {
			d, ok = l.deadline, true
		}
	}
	return d, ok
}

func (m *refModel) list(tenant, holder string, limit int) ([]LeaseView, bool) {
	var vs []LeaseView
	for _, l := range m.liveLeases() {
		if l.tenant == tenant && l.holder == holder {
			vs = append(vs, m.leaseView(l))
		}
	}
	if len(vs) > limit {
		return vs[:limit], true
	}
	return vs, false
}

func (m *refModel) read(r mRead, slot uint64) Output {
	out := Output{LSN: m.lastLSN, MemberIndex: -1}
	key := mKey(r.tenant, r.id)
	switch r.verb {
	case contract.VerbGetResource:
		if _, ok := m.resources[key]; !ok {
			out.Code = contract.CodeResourceNotFound
		} else {
			out.Object, out.Resource = ObjectResource, m.resourceView(r.tenant, r.id)
		}
	case contract.VerbGetPool:
		if _, ok := m.pools[key]; !ok {
			out.Code = contract.CodePoolNotFound
		} else {
			out.Object, out.Pool = ObjectPool, m.poolView(r.tenant, r.id)
		}
	case contract.VerbGetRange:
		if _, ok := m.ranges[key]; !ok {
			out.Code = contract.CodeRangeNotFound
		} else {
			out.Object, out.Range = ObjectRange, m.rangeView(r.tenant, r.id)
		}
	case contract.VerbGetLease:
		l, code := m.find(r.tenant, r.lsn, slot)
		out.Code = code
		if code == contract.CodeOK {
			out.Object, out.Lease = ObjectLease, m.leaseView(l)
		}
	case contract.VerbLookupValue:
		m.lookup(r, &out)
	}
	return out
}

// ---------------------------------------------------------------------------------------
// The command generator. It reads the model (never the kernel) to aim at leases that
// exist, in the states a verb needs, with the right holder and epoch most of the time.

type mStepKind uint8

const (
	mStepNoop   mStepKind = iota
	mStepWrite            // a client write through the runtime's checks
	mStepTick             // commit the expirations due, at most tickMax of them
	mStepExpire           // a stray expire entry (stale, early or for nothing): must be a no-op unless due
	mStepRead             // one read with arbitrary arguments
	// mStepConfigure journals a configure entry (cmd) and takes new admission limits
	// (lim) with it, as a shard does at a start with other flags; the first step of every
	// run is one, with the run's own settings, as a new journal's first entry is.
	mStepConfigure
)

type mRead struct {
	verb   Verb // a read verb
	tenant string
	id     string
	lsn    uint64
	holder string
	limit  int
	value  uint64 // range.lookup
}

type mStep struct {
	advance uint64 // slots the clock moves before the step
	kind    mStepKind
	cmd     *Command
	tickMax int
	read    mRead
	lim     Limits // mStepConfigure: the admission limits from this step on
}

type mGen struct {
	r          *rand.Rand
	m          *refModel
	tickPct    int
	sent       []*Command // recent client writes, to retry
	fresh      int
	configured bool // the run's first configure step is out
}

func (g *mGen) pct(p int) bool { return g.r.IntN(100) < p }

func mPick[T any](g *mGen, xs []T) T { return xs[g.r.IntN(len(xs))] }

func (g *mGen) next() mStep {
	if !g.configured {
		g.configured = true
		return mStep{kind: mStepConfigure, cmd: &Command{Verb: contract.VerbConfigure, Settings: g.m.cfg.Shape}, lim: g.m.cfg.Limits}
	}
	s := mStep{advance: g.advance()}
	if g.pct(1) {
		s.kind = mStepConfigure
		s.cmd, s.lim = g.reconfigure()
		return s
	}
	switch x := g.r.IntN(100); {
	case x < g.tickPct:
		s.kind, s.tickMax = mStepTick, 1+g.r.IntN(4)
	case x < 91:
		s.kind, s.cmd = mStepWrite, g.write()
	case x < 94:
		s.kind, s.cmd = mStepExpire, g.strayExpire()
	default:
		s.kind, s.read = mStepRead, g.read()
	}
	return s
}

// reconfigure draws other settings, as a restart with other flags brings: admission
// limits and the shape, with bounds often lowered below what the tables hold, and now
// and then a shape the kernel must refuse (another slot length, a zero bound).
func (g *mGen) reconfigure() (*Command, Limits) {
	s, l := g.m.cfg.Shape, g.m.cfg.Limits
	s.Version++
	if g.pct(50) {
		l.MaxTTLMillis = s.SlotMillis * uint64(1+g.r.IntN(40))
	}
	if g.pct(40) {
		l.MaxBundle = 1 + g.r.IntN(5)
	}
	if g.pct(40) {
		s.DedupeWindowSlots = uint64(1 + g.r.IntN(45))
	}
	if g.pct(40) {
		s.HistoryWindowSlots = uint64(1 + g.r.IntN(35))
	}
	for _, b := range []*int{&s.MaxResources, &s.MaxPools, &s.MaxRanges, &s.MaxLeases, &s.MaxMembers,
		&s.MaxOperations, &s.MaxExpirations, &s.MaxRangeValues} {
		switch x := g.r.IntN(100); {
		case x < 20:
			*b = 1 + g.r.IntN(12)
		case x < 30:
			*b = 1000
		}
	}
	switch x := g.r.IntN(100); {
	case x < 2:
		s.SlotMillis++
	case x < 4:
		s.MaxPools = 0
	}
	return &Command{Verb: contract.VerbConfigure, Settings: s}, l
}

func (g *mGen) advance() uint64 {
	switch x := g.r.IntN(100); {
	case x < 50:
		return 0
	case x < 78:
		return 1
	case x < 95:
		return uint64(2 + g.r.IntN(4))
	default:
		return uint64(6 + g.r.IntN(40))
	}
}

func (g *mGen) tenant() string {
	if g.pct(2) {
		return mPick(g, []string{"", "bad tenant", strings.Repeat("t", 65)})
	}
	return mPick(g, mTenants)
}

func (g *mGen) opID() string {
	switch x := g.r.IntN(100); {
	case x < 35:
		return mPick(g, mOps)
	case x < 98:
		g.fresh++
		return fmt.Sprintf("u%d", g.fresh)
	default:
		return mPick(g, []string{"", "-op", strings.Repeat("o", 65), "op 1"})
	}
}

func (g *mGen) holder() string {
	if g.pct(2) {
		return mPick(g, []string{"", "/h", "h\x00"})
	}
	return mPick(g, mHolders)
}

func (g *mGen) objID(ids []string) string {
	switch x := g.r.IntN(100); {
	case x < 96:
		return mPick(g, ids)
	case x < 98:
		return mPick(g, []string{"n1/zz", "n2/zz", "zz"}) // valid, outside the universe
	default:
		return mPick(g, []string{"", "/a", strings.Repeat("a", 129), "a b", "é"})
	}
}

func (g *mGen) ttl() uint64 {
	cfg := &g.m.cfg
	switch x := g.r.IntN(100); {
	case x < 80:
		return 1 + g.r.Uint64N(cfg.MaxTTLMillis)
	case x < 90:
		return 1 + g.r.Uint64N(2*cfg.SlotMillis)
	case x < 94:
		return cfg.MaxTTLMillis
	case x < 97:
		return 0
	default:
		return cfg.MaxTTLMillis + 1
	}
}

func (g *mGen) write() *Command {
	if len(g.sent) > 0 && g.pct(14) { // a retry, now and then a conflicting one
		c := mCloneCmd(g.sent[len(g.sent)-1-g.r.IntN(min(len(g.sent), 24))])
		if g.pct(20) {
			g.mutate(c)
		}
		return c
	}
	c := &Command{Tenant: g.tenant(), OperationID: g.opID()}
	x := g.r.IntN(100)
	if g.objects(c.Tenant) < 8 && g.pct(50) {
		x = g.r.IntN(17) // populate the universe first
	}
	switch {
	case x < 8:
		c.Verb, c.ObjectID = contract.VerbCreateResource, g.objID(mResources)
	case x < 12:
		p := mPick(g, mPools)
		c.Verb, c.ObjectID, c.Capacity = contract.VerbCreatePool, g.objID([]string{p.id}), p.capacity
		if g.pct(30) {
			c.Capacity = g.r.Uint64N(7) // 0 is invalid
		}
	case x < 17:
		s := mPick(g, mRanges)
		c.Verb, c.ObjectID, c.First, c.Last, c.Strategy = contract.VerbCreateRange, g.objID([]string{s.id}), s.first, s.last, s.strategy
		if g.pct(20) {
			c.First = mPick(g, []uint64{0, 3, mMaxU - 10})
			c.Last = c.First + g.r.Uint64N(8)
			c.Strategy = Strategy(g.r.IntN(3))
			if g.pct(10) {
				c.First, c.Last = c.Last+1, c.First // first > last
			}
			if g.pct(5) {
				c.Strategy = 3
			}
		}
	case x < 20:
		ids := mResources
		c.Verb = mPick(g, []Verb{contract.VerbDeleteResource, contract.VerbDeletePool, contract.VerbDeleteRange})
		switch c.Verb {
		case contract.VerbDeletePool:
			ids = []string{mPick(g, mPools).id}
		case contract.VerbDeleteRange:
			ids = []string{mPick(g, mRanges).id}
		}
		c.ObjectID = g.objID(ids)
	case x < 50:
		g.reserve(c)
	case x < 90:
		g.leaseVerb(c, 50+(x-50)*48/40)
	case x < 98:
		g.allocVerb(c)
	default:
		c.Verb = mPick(g, []Verb{contract.VerbInvalid, contract.VerbExpire, contract.VerbGetLease, Verb(99)})
		c.LeaseLSN = 1
	}
	g.sent = append(g.sent, mCloneCmd(c))
	if len(g.sent) > 64 {
		g.sent = g.sent[32:]
	}
	return c
}

func (g *mGen) objects(tenant string) int {
	n := 0
	prefix := tenant + "\x00"
	for key := range g.m.resources {
		if strings.HasPrefix(key, prefix) {
			n++
		}
	}
	for key := range g.m.pools {
		if strings.HasPrefix(key, prefix) {
			n++
		}
	}
	for key := range g.m.ranges {
		if strings.HasPrefix(key, prefix) {
			n++
		}
	}
	return n
}

func (g *mGen) mutate(c *Command) {
	switch c.Verb {
	case contract.VerbCreateResource, contract.VerbDeleteResource, contract.VerbDeletePool, contract.VerbDeleteRange:
		c.ObjectID += "x"
	case contract.VerbCreatePool:
		c.Capacity++
	case contract.VerbCreateRange:
		c.Strategy = (c.Strategy + 1) % 3
	case contract.VerbReserve:
		if g.pct(50) {
			c.Activate = !c.Activate
		} else {
			c.TTLMillis++
		}
	case contract.VerbRenew:
		c.TTLMillis++
	case contract.VerbResizePool:
		c.Capacity++
	case contract.VerbRevokeValue, contract.VerbReclaimValue:
		c.Value++
	default:
		c.Epoch++
	}
}

func (g *mGen) member(key string) Member {
	var kinds []MemberKind
	for _, id := range mResources {
		if mPlacement(id) == key {
			kinds = append(kinds, MemberResource)
			break
		}
	}
	for _, p := range mPools {
		if mPlacement(p.id) == key {
			kinds = append(kinds, MemberPool)
			break
		}
	}
	for _, s := range mRanges {
		if mPlacement(s.id) == key {
			kinds = append(kinds, MemberRange, MemberRange)
			break
		}
	}
	mb := Member{Kind: mPick(g, kinds)}
	switch mb.Kind {
	case MemberResource:
		var ids []string
		for _, id := range mResources {
			if mPlacement(id) == key {
				ids = append(ids, id)
			}
		}
		mb.ID = mPick(g, ids)
	case MemberPool:
		var ids []string
		for _, p := range mPools {
			if mPlacement(p.id) == key {
				ids = append(ids, p.id)
			}
		}
		mb.ID, mb.Quantity = mPick(g, ids), 1+g.r.Uint64N(3)
	case MemberRange:
		var specs []mRangeSpec
		for _, s := range mRanges {
			if mPlacement(s.id) == key {
				specs = append(specs, s)
			}
		}
		s := mPick(g, specs)
		mb.ID = s.id
		if g.pct(45) {
			mb.HasValue, mb.Value = true, g.value(s)
		}
	}
	switch x := g.r.IntN(100); {
	case x < 2:
		mb.ID = key + "/zz" // valid, never created
	case x < 3:
		mb.Quantity, mb.HasValue = 0, !mb.HasValue // wrong shape for a pool or resource
	case x < 4:
		mb.Kind = MemberKind(g.r.IntN(2) * 7)
	}
	return mb
}

// value picks a specific value for a range member: near the ends, one in use, one freed,
// or one just outside.
func (g *mGen) value(s mRangeSpec) uint64 {
	first, last := s.first, s.last
	var inUse []uint64
	for _, t := range mTenants {
		if rg := g.m.ranges[mKey(t, s.id)]; rg != nil {
			first, last = rg.first, rg.last
			inUse = append(inUse, g.m.rangeValues(t, s.id)...)
			inUse = append(inUse, rg.freed...)
		}
	}
	switch x := g.r.IntN(100); {
	case x < 10 && first > 0:
		return first - 1
	case x < 20 && last < mMaxU:
		return last + 1
	case x < 55 && len(inUse) > 0:
		return mPick(g, inUse)
	case x < 78:
		return first + min(g.r.Uint64N(4), last-first)
	default:
		return last - min(g.r.Uint64N(4), last-first)
	}
}

func (g *mGen) reserve(c *Command) {
	c.Verb, c.HolderID = contract.VerbReserve, g.holder()
	key := mKeys[min(g.r.IntN(7)/3, 2)] // n1 and n2 mostly
	n := 1 + g.r.IntN(3)
	switch x := g.r.IntN(100); {
	case x < 3:
		n = g.m.cfg.MaxBundle + 1
	case x < 4:
		n = 0
	}
	for range n {
		c.Members = append(c.Members, g.member(key))
	}
	if n > 1 && g.pct(4) {
		c.Members[n-1] = g.member(mPick(g, mKeys)) // perhaps another placement key
	}
	if n > 1 && g.pct(4) {
		c.Members[n-1] = c.Members[g.r.IntN(n-1)] // perhaps a duplicate
	}
	c.Activate = g.pct(25)
	c.TTLMillis = g.ttl()
	c.Labels = g.labels()
}

// lease picks a lease id for tenant: mostly a recent lease of that tenant, preferably in
// one of the wanted states; sometimes another tenant's, a random or a never-issued one.
func (g *mGen) lease(tenant string, want ...LeaseState) (uint64, *mLease) {
	m := g.m
	var lsn uint64
	switch x := g.r.IntN(100); {
	case x < 80 && len(m.issued) > 0:
		var cands []uint64
		if g.pct(80) {
			for _, l := range m.liveLeases() {
				if l.tenant == tenant && slices.Contains(want, l.state) {
					cands = append(cands, l.lsn)
				}
			}
		}
		if len(cands) == 0 && g.pct(50) {
			for _, l := range m.leases {
				if l.tenant == tenant {
					cands = append(cands, l.lsn)
				}
			}
			slices.Sort(cands)
		}
		if len(cands) == 0 {
			own := !g.pct(15)
			for i := len(m.issued) - 1; i >= 0 && len(cands) < 16; i-- {
				if !own || m.issued[i].tenant == tenant {
					cands = append(cands, m.issued[i].lsn)
				}
			}
		}
		if len(cands) == 0 {
			cands = []uint64{m.issued[len(m.issued)-1].lsn}
		}
		lsn = cands[min(g.r.IntN(len(cands)), g.r.IntN(len(cands)))]
	case x < 94:
		lsn = 1 + g.r.Uint64N(m.lastLSN+3)
	case x < 98:
		lsn = mMaxU - g.r.Uint64N(3)
	default:
		lsn = 0
	}
	return lsn, m.leases[lsn]
}

func (g *mGen) leaseVerb(c *Command, x int) {
	var want []LeaseState
	switch {
	case x < 62:
		c.Verb, want = contract.VerbActivate, []LeaseState{LeaseReserved}
	case x < 72:
		c.Verb, want = contract.VerbRenew, []LeaseState{LeaseReserved}
	case x < 82:
		c.Verb, want = contract.VerbRelease, []LeaseState{LeaseReserved, LeaseActive}
	case x < 90:
		c.Verb, want = contract.VerbRevoke, []LeaseState{LeaseActive}
	default:
		c.Verb, want = contract.VerbReclaim, []LeaseState{LeaseRevoking}
	}
	var l *mLease
	c.LeaseLSN, l = g.lease(c.Tenant, want...)
	if c.Verb == contract.VerbRevoke || c.Verb == contract.VerbReclaim {
		return
	}
	c.HolderID, c.Epoch = g.holder(), 1+g.r.Uint64N(3)
	if l != nil && g.pct(85) {
		c.HolderID = l.holder
	}
	if l != nil && g.pct(80) {
		c.Epoch = l.epoch
	}
	if g.pct(1) {
		c.Epoch = 0
	}
	if c.Verb == contract.VerbRenew {
		c.TTLMillis = g.ttl()
	}
}

// strayExpire is an expire entry the runtime would not send now: early, for a changed
// deadline, or for a lease that is not reserved. The kernel must treat it as a no-op
// unless it happens to be due.
func (g *mGen) strayExpire() *Command {
	c := &Command{Verb: contract.VerbExpire, Tenant: mPick(g, mTenants)}
	var reserved []*mLease
	for _, l := range g.m.liveLeases() {
		if l.state == LeaseReserved {
			reserved = append(reserved, l)
		}
	}
	if len(reserved) > 0 && g.pct(60) {
		l := mPick(g, reserved)
		c.Tenant, c.LeaseLSN, c.Deadline = l.tenant, l.lsn, l.deadline
		if g.pct(40) {
			c.Deadline += uint64(g.r.IntN(3)) - 1
		}
		return c
	}
	c.LeaseLSN, _ = g.lease(c.Tenant)
	base, off := g.m.lastSlot, g.r.Uint64N(6)
	c.Deadline = base - min(base, off) // at or before the last slot, or a little after
	if g.pct(30) {
		c.Deadline = base + min(off, mMaxU-base)
	}
	return c
}

func (g *mGen) read() mRead {
	r := mRead{tenant: mPick(g, mTenants), limit: 1 + g.r.IntN(4)}
	if g.pct(3) {
		r.tenant = "t3"
	}
	r.verb = mPick(g, []Verb{contract.VerbGetResource, contract.VerbGetPool, contract.VerbGetRange, contract.VerbGetLease,
		contract.VerbGetLease, contract.VerbListLeases, contract.VerbLookupValue, contract.VerbLookupValue})
	ids := []string{"n1/a", "n1/mem", "n1/vx", "solo", "nope", "n2/any"}
	r.id = mPick(g, ids)
	r.lsn, _ = g.lease(r.tenant)
	r.holder = mPick(g, mHolders)
	if r.verb == contract.VerbLookupValue {
		s := mPick(g, mRanges)
		r.id, r.value = s.id, g.value(s)
	}
	return r
}

// ---------------------------------------------------------------------------------------
// The harness: drives kernel and model with the same steps, like the shard runtime.

type mTB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// mDriveWrite runs one client write the way the shard runtime does and reports which step
// answered it: "validate", "lookup", "limits", "slots", "room" (definite rejections or retries, no
// lsn) or "apply".
func mDriveWrite(k *Kernel, lim Limits, slot uint64, c *Command, out *Output) string {
	lim.MaxCommandBytes = math.MaxInt
	a := k.Admit(c, slot, &lim, k.LastLSN()+1, NoneInFlight{}, out)
	switch {
	case a.Stage == StageRetry:
		return "lookup" // out holds the remembered answer, or operation_conflict
	case a.Rejection != nil:
		*out = Output{Code: a.Rejection.Code, MemberIndex: -1}
		return map[Stage]string{StageValidate: "validate", StageLimits: "limits", StageSlots: "slots", StageRoom: "room"}[a.Stage]
	}
	k.Apply(Entry{LSN: k.LastLSN() + 1, Slot: slot, Cmd: c}, out)
	return "apply"
}

type mHarness struct {
	t       mTB
	cfg     Config
	k       *Kernel
	m       *refModel
	g       *mGen
	slot    uint64
	compare bool   // compare with the model (off when only recording a script)
	cross   bool   // model-free cross-checks
	repro   string // how to reproduce, for failure messages
	log     []string
	nstep   int
	script  []mScriptStep // when recording
	record  bool

	// Model-free observations, from the kernel's own replies.
	owner    map[uint64]string    // lease lsn → tenant, from reserve replies
	gone     map[uint64]bool      // leases their own tenant read as lease_retired
	terminal map[uint64]bool      // leases seen terminal
	lastView map[uint64]LeaseView // latest view seen of each lease
	out      Output
	// consumedSeen is each model pool's consumed units after the last step.
	consumedSeen map[string]uint64

	stats map[string]int // "verb code [retry]" → count, logged with -v
}

// mScriptStep is a step as executed, with its absolute slot: replay_test.go runs it again.
type mScriptStep struct {
	slot    uint64
	kind    mStepKind
	cmd     *Command
	tickMax int
	read    mRead
	lim     Limits
}

func newMHarness(t mTB, sc mScenario, r *rand.Rand) *mHarness {
	t.Helper()
	cfg := sc.cfg
	k, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	m := newRefModel(cfg)
	return &mHarness{t: t, cfg: cfg, k: k, m: m, g: &mGen{r: r, m: m, tickPct: sc.tickPct}, slot: sc.start, compare: true, cross: true,
		owner: map[uint64]string{}, gone: map[uint64]bool{}, terminal: map[uint64]bool{},
		lastView: map[uint64]LeaseView{}, stats: map[string]int{}, consumedSeen: map[string]uint64{}}
}

func (h *mHarness) count(v Verb, out *Output) {
	key := v.String() + " " + out.Code.String()
	if out.FromRetryCache {
		key += " (retry)"
	}
	h.stats[key]++
}

// mLogStats prints how often each verb returned each code: what the run covered.
func mLogStats(t *testing.T, stats map[string]int) {
	if !testing.Verbose() {
		return
	}
	var b strings.Builder
	for _, key := range slices.Sorted(maps.Keys(stats)) {
		fmt.Fprintf(&b, "\n  %-44s %d", key, stats[key])
	}
	t.Logf("outcomes:%s", b.String())
}

func (h *mHarness) fail(format string, args ...any) {
	h.t.Helper()
	lines := h.log
	if len(lines) > 120 {
		lines = append([]string{fmt.Sprintf("... %d earlier steps", len(lines)-120)}, lines[len(lines)-120:]...)
	}
	h.t.Fatalf("step %d at slot %d: %s\nconfig: %+v\n%s\nsteps:\n%s", h.nstep, h.slot, fmt.Sprintf(format, args...),
		h.cfg, h.repro, strings.Join(lines, "\n"))
}

func (h *mHarness) logf(format string, args ...any) {
	h.log = append(h.log, fmt.Sprintf("#%d slot=%d ", h.nstep, h.slot)+fmt.Sprintf(format, args...))
}

// expect compares a kernel output with the model's.
func (h *mHarness) expect(what string, got Output, want Output) {
	h.t.Helper()
	g := mNormOut(got)
	if want.FromRetryCache {
		g.MemberIndex = want.MemberIndex // which member failed is not part of a retry's reply
	}
	if !reflect.DeepEqual(g, mNormOut(want)) {
		h.fail("%s:\n  got  %s\n  want %s", what, mFmtOut(&g), mFmtOut(&want))
	}
}

func (h *mHarness) allowed(v Verb, c Code) {
	h.t.Helper()
	if !Allowed(v, c) {
		h.fail("%s returned %s, which the contract does not list for it", v, c)
	}
}

// run executes one step on both sides and checks everything after it.
func (h *mHarness) run(s mStep) {
	h.t.Helper()
	h.nstep++
	if s.kind == mStepNoop {
		return
	}
	h.slot += min(s.advance, mMaxU-h.slot) // the clock stops at the last slot
	if h.record {
		ss := mScriptStep{slot: h.slot, kind: s.kind, tickMax: s.tickMax, read: s.read, lim: s.lim}
		if s.cmd != nil {
			ss.cmd = mCloneCmd(s.cmd)
		}
		h.script = append(h.script, ss)
	}
	switch s.kind {
	case mStepWrite:
		h.write(s.cmd)
	case mStepTick:
		h.tick(s.tickMax)
	case mStepExpire:
		h.expire(s.cmd)
	case mStepRead:
		h.read(s.read)
	case mStepConfigure:
		h.configure(s.cmd, s.lim)
	}
	h.after()
}

func (h *mHarness) write(c *Command) {
	h.t.Helper()
	kc, mc := mCloneCmd(c), mCloneCmd(c)
	var got Output
	path := mDriveWrite(h.k, h.cfg.Limits, h.slot, kc, &got)
	want, mpath := h.m.write(h.slot, mc)
	h.logf("%s -> %s (%s)", mFmtCmd(c), mFmtOut(&got), path)
	if msg := eventBoundBroken(c, &got); msg != "" {
		h.fail("%s", msg)
	}
	h.count(c.Verb, &got)
	h.allowed(c.Verb, got.Code)
	if path == "apply" {
		h.echo(kc, &got)
	}
	if h.compare {
		if path != mpath {
			h.fail("answered at %q, the model answers at %q", path, mpath)
		}
		h.expect("write", got, want)
	}
	h.observe(c.Verb, &got)
}

// echo asks the retry cache at once for the write just applied: it must answer the
// first reply again (echoDiff).
func (h *mHarness) echo(c *Command, first *Output) {
	if d := echoDiff(h.k, c, h.slot, first); d != "" {
		h.fail("%s: a retry at once answers otherwise than the first reply: %s", c.Verb, d)
	}
}

// configure journals a configure entry on both sides; when the shape is taken, the new
// admission limits judge the writes from now on (a refused shape keeps the old settings).
func (h *mHarness) configure(c *Command, lim Limits) {
	h.t.Helper()
	var got Output
	h.k.Apply(Entry{LSN: h.k.LastLSN() + 1, Slot: h.slot, Cmd: mCloneCmd(c)}, &got)
	want := h.m.apply(h.slot, mCloneCmd(c))
	h.logf("%s limits %+v -> %s", mFmtCmd(c), lim, mFmtOut(&got))
	h.count(contract.VerbConfigure, &got)
	h.allowed(contract.VerbConfigure, got.Code)
	if h.compare {
		h.expect("configure", got, want)
	}
	if got.Code == contract.CodeOK {
		h.cfg.Shape, h.cfg.Limits, h.m.cfg.Limits = c.Settings, lim, lim
	}
}

func (h *mHarness) applyExpire(c *Command) {
	h.t.Helper()
	var got Output
	h.k.Apply(Entry{LSN: h.k.LastLSN() + 1, Slot: h.slot, Cmd: mCloneCmd(c)}, &got)
	want := h.m.apply(h.slot, mCloneCmd(c))
	h.logf("%s -> %s", mFmtCmd(c), mFmtOut(&got))
	if msg := eventBoundBroken(c, &got); msg != "" {
		h.fail("%s", msg)
	}
	h.count(contract.VerbExpire, &got)
	h.allowed(contract.VerbExpire, got.Code)
	if h.compare {
		h.expect("expire", got, want)
	}
	h.observe(contract.VerbExpire, &got)
}

func (h *mHarness) tick(limit int) {
	h.t.Helper()
	dues := h.k.DueExpirations(h.slot, limit, nil)
	if h.compare {
		if want := h.m.due(h.slot, limit); !slices.Equal(dues, want) {
			h.fail("DueExpirations(%d, %d) = %+v, want %+v", h.slot, limit, dues, want)
		}
	}
	for _, d := range dues {
		h.applyExpire(&Command{Verb: contract.VerbExpire, Tenant: d.Tenant, LeaseLSN: d.LeaseLSN, Deadline: d.Deadline})
	}
	if len(dues) == 0 {
		h.logf("tick(%d): nothing due", limit)
	}
}

func (h *mHarness) expire(c *Command) {
	h.t.Helper()
	h.applyExpire(c)
}

func (h *mHarness) read(r mRead) {
	h.t.Helper()
	if r.verb == contract.VerbListLeases {
		got, gt := h.k.ListLeases(r.tenant, r.holder, r.limit, nil)
		h.logf("list %s/%s limit %d -> %d leases truncated=%v", r.tenant, r.holder, r.limit, len(got), gt)
		if h.compare {
			want, wt := h.m.list(r.tenant, r.holder, r.limit)
			h.expectList(r.tenant, r.holder, got, gt, want, wt)
		}
		return
	}
	got := h.kernelRead(r)
	h.logf("%s %s/%s lsn=%d -> %s", r.verb, r.tenant, r.id, r.lsn, mFmtOut(&got))
	h.count(r.verb, &got)
	h.allowed(r.verb, got.Code)
	if h.compare {
		h.expect(fmt.Sprintf("%s %s/%q lsn %d", r.verb, r.tenant, r.id, r.lsn), got, h.m.read(r, h.slot))
	}
}

func (h *mHarness) kernelRead(r mRead) Output {
	out := &h.out
	switch r.verb {
	case contract.VerbGetResource:
		h.k.GetResource(r.tenant, r.id, out)
	case contract.VerbGetPool:
		h.k.GetPool(r.tenant, r.id, out)
	case contract.VerbGetRange:
		h.k.GetRange(r.tenant, r.id, out)
	case contract.VerbGetLease:
		h.k.GetLease(r.tenant, r.lsn, h.slot, out)
	case contract.VerbLookupValue:
		state := h.k.LookupValue(r.tenant, r.id, r.value, out)
		if want := h.m.lookupState(r.tenant, r.id, r.value); h.compare && state != want {
			h.fail("range.lookup %s/%s %d: %q, the model says %q", r.tenant, r.id, r.value, state, want)
		}
	}
	return mNormOut(*out)
}

func (h *mHarness) expectList(tenant, holder string, got []LeaseView, gt bool, want []LeaseView, wt bool) {
	h.t.Helper()
	if gt != wt || len(got) != len(want) || (len(got) > 0 && !reflect.DeepEqual(got, want)) {
		var b strings.Builder
		for i := range got {
			b.WriteString("\n  got  " + mFmtLease(&got[i]))
		}
		for i := range want {
			b.WriteString("\n  want " + mFmtLease(&want[i]))
		}
		h.fail("ListLeases(%s, %s): truncated %v want %v%s", tenant, holder, gt, wt, b.String())
	}
}

// after checks the invariants, every readable object against the model, and the
// model-free cross-checks.
func (h *mHarness) after() {
	h.t.Helper()
	if err := h.k.CheckInvariants(); err != nil {
		h.fail("CheckInvariants: %v", err)
	}
	if h.compare {
		if h.k.LastLSN() != h.m.lastLSN || h.k.LastSlot() != h.m.lastSlot {
			h.fail("kernel at lsn %d slot %d, model at lsn %d slot %d", h.k.LastLSN(), h.k.LastSlot(), h.m.lastLSN, h.m.lastSlot)
		}
		h.sweep()
		h.mCheckConsumed()
	}
	if h.cross {
		h.crossCheck()
	}
}

// sweep reads every object of the universe, every lease the model knows plus the ids
// around the watermark and past the last lsn, every holder's list and the due list.
func (h *mHarness) sweep() {
	h.t.Helper()
	m := h.m
	lsns := []uint64{1, m.watermark, m.watermark + 1, m.lastLSN, m.lastLSN + 1, m.lastLSN + 2}
	for lsn := range m.leases {
		lsns = append(lsns, lsn)
	}
	for _, t := range mTenants {
		for _, id := range append(slices.Clone(mResources), "nope", "n1/mem") {
			r := mRead{verb: contract.VerbGetResource, tenant: t, id: id}
			h.expect("resource.get "+t+"/"+id, h.kernelRead(r), m.read(r, h.slot))
		}
		for _, p := range append(slices.Clone(mPools), mPoolSpec{id: "n1/a"}) {
			r := mRead{verb: contract.VerbGetPool, tenant: t, id: p.id}
			h.expect("pool.get "+t+"/"+p.id, h.kernelRead(r), m.read(r, h.slot))
		}
		for _, s := range append(slices.Clone(mRanges), mRangeSpec{id: "nope"}) {
			r := mRead{verb: contract.VerbGetRange, tenant: t, id: s.id}
			h.expect("range.get "+t+"/"+s.id, h.kernelRead(r), m.read(r, h.slot))
		}
		for _, lsn := range lsns {
			if lsn == 0 {
				continue
			}
			r := mRead{verb: contract.VerbGetLease, tenant: t, lsn: lsn}
			h.expect(fmt.Sprintf("lease.get %s/%d", t, lsn), h.kernelRead(r), m.read(r, h.slot))
		}
		for _, hd := range mHolders {
			for _, limit := range []int{2, 1 << 20} {
				got, gt := h.k.ListLeases(t, hd, limit, nil)
				want, wt := m.list(t, hd, limit)
				h.expectList(t, hd, got, gt, want, wt)
			}
		}
	}
	for _, limit := range []int{1, 64} { // not huge: TestModelBugDueExpirationsHugeMax
		if got, want := h.k.DueExpirations(h.slot, limit, nil), m.due(h.slot, limit); !slices.Equal(got, want) {
			h.fail("DueExpirations(%d, %d) = %+v, want %+v", h.slot, limit, got, want)
		}
	}
	gd, gok := h.k.NextDeadline()
	wd, wok := m.nextDeadline()
	if gd != wd || gok != wok {
		h.fail("NextDeadline = %d,%v want %d,%v", gd, gok, wd, wok)
	}
}

// observe records what a write or expire reply shows about a lease and checks the rules
// that need no model: terminal is final, nothing expires early, activate and renew only
// before the deadline.
func (h *mHarness) observe(v Verb, out *Output) {
	h.t.Helper()
	if out.Object != ObjectLease {
		return
	}
	l := out.Lease
	if out.FromRetryCache && l.State == 0 {
		// A retry of a lease retired since: only the id and the reply's epoch remain.
		if l.CreatedLSN != 0 || len(l.Members) != 0 || l.HolderID != "" || (l.Epoch != 1 && l.Epoch != 2) {
			h.fail("retry after retirement shows %s", mFmtLease(&l))
		}
		return
	}
	prev, seen := h.lastView[l.LSN]
	if v == contract.VerbReserve && out.Code == contract.CodeOK && !out.FromRetryCache {
		if l.LSN != out.LSN || l.CreatedLSN != out.LSN || l.Epoch != 1 || seen {
			h.fail("reserve granted %s at lsn %d", mFmtLease(&l), out.LSN)
		}
		h.owner[l.LSN] = l.Tenant
	}
	if !out.FromRetryCache && out.Code == contract.CodeOK {
		switch out.Event {
		case EventLeaseExpired:
			if !seen || prev.State != LeaseReserved || l.DeadlineSlot != prev.DeadlineSlot || h.slot < l.DeadlineSlot {
				h.fail("lease expired at slot %d: %s, before it was %s", h.slot, mFmtLease(&l), mFmtLease(&prev))
			}
		case EventLeaseActivated, EventLeaseRenewed:
			if v != contract.VerbReserve && (!seen || prev.State != LeaseReserved || h.slot >= prev.DeadlineSlot) {
				h.fail("%s at slot %d of %s", out.Event, h.slot, mFmtLease(&prev))
			}
		}
	}
	h.see(l)
}

func (h *mHarness) see(l LeaseView) {
	h.t.Helper()
	if mTerminal(l.State) {
		h.terminal[l.LSN] = true
	} else if h.terminal[l.LSN] {
		h.fail("lease %d is %s again after it ended", l.LSN, l.State)
	}
	l.Members = slices.Clone(l.Members)
	h.lastView[l.LSN] = l
}

// crossCheck reads the kernel alone: every lease it granted reads ok or lease_retired in
// its own tenant; no resource or range value is in two live leases; pools, resources,
// ranges, holder lists and the due list agree with the live leases.
func (h *mHarness) crossCheck() {
	h.t.Helper()
	type objKey struct{ tenant, id string }
	type valKey struct {
		tenant, id string
		v          uint64
	}
	resOwner := map[objKey]uint64{}
	valOwner := map[valKey]uint64{}
	poolUse := map[objKey][2]uint64{}
	rangeUse := map[objKey]uint64{}
	live := map[objKey][]LeaseView{} // (tenant, holder) → live leases in lsn order
	var reservedDue []Due
	for _, lsn := range slices.Sorted(maps.Keys(h.owner)) {
		if h.gone[lsn] {
			continue
		}
		tenant := h.owner[lsn]
		h.k.GetLease(tenant, lsn, h.slot, &h.out)
		prev := h.lastView[lsn]
		switch h.out.Code {
		case contract.CodeLeaseRetired:
			if !mTerminal(prev.State) || prev.RetireAfterSlot >= h.slot {
				h.fail("lease %d reads lease_retired at slot %d; last seen %s", lsn, h.slot, mFmtLease(&prev))
			}
			h.gone[lsn] = true
			continue
		case contract.CodeOK:
		default:
			h.fail("lease %d granted to %s reads %s", lsn, tenant, h.out.Code)
		}
		l := mNormOut(h.out).Lease
		if l.LSN != lsn || l.Tenant != tenant || l.Shard != h.cfg.Shard {
			h.fail("lease.get %s/%d = %s", tenant, lsn, mFmtLease(&l))
		}
		h.see(l)
		if mTerminal(l.State) {
			if l.RetireAfterSlot < h.slot || l.ReleasedLSN == 0 || l.Epoch != 2 {
				h.fail("terminal lease readable: %s at slot %d", mFmtLease(&l), h.slot)
			}
			continue
		}
		live[objKey{tenant, l.HolderID}] = append(live[objKey{tenant, l.HolderID}], l)
		if l.State == LeaseReserved && l.DeadlineSlot <= h.slot {
			reservedDue = append(reservedDue, Due{Tenant: tenant, LeaseLSN: lsn, Deadline: l.DeadlineSlot})
		}
		for _, mv := range l.Members {
			switch mv.Kind {
			case MemberResource:
				if o, dup := resOwner[objKey{tenant, mv.ID}]; dup {
					h.fail("resource %s/%s in live leases %d and %d", tenant, mv.ID, o, lsn)
				}
				resOwner[objKey{tenant, mv.ID}] = lsn
			case MemberRange:
				if o, dup := valOwner[valKey{tenant, mv.ID, mv.Value}]; dup {
					h.fail("value %d of %s/%s in live leases %d and %d", mv.Value, tenant, mv.ID, o, lsn)
				}
				valOwner[valKey{tenant, mv.ID, mv.Value}] = lsn
				rangeUse[objKey{tenant, mv.ID}]++
			case MemberPool:
				u := poolUse[objKey{tenant, mv.ID}]
				if l.State == LeaseReserved {
					u[0] += mv.Quantity
				} else {
					u[1] += mv.Quantity
				}
				poolUse[objKey{tenant, mv.ID}] = u
			}
		}
	}
	for _, t := range mTenants {
		for _, id := range mResources {
			h.k.GetResource(t, id, &h.out)
			r, owner := h.out.Resource, resOwner[objKey{t, id}]
			switch {
			case h.out.Code != contract.CodeOK:
				if owner != 0 {
					h.fail("resource %s/%s not found but held by lease %d", t, id, owner)
				}
			case r.LeaseLSN != owner || (r.State == ResourceAvailable) != (owner == 0):
				h.fail("resource %s/%s is %s/%d, live leases hold it in %d", t, id, r.State, r.LeaseLSN, owner)
			case owner != 0 && r.State != mResourceState(h.lastView[owner].State):
				h.fail("resource %s/%s is %s, its lease %d is %s", t, id, r.State, owner, h.lastView[owner].State)
			}
		}
		for _, p := range mPools {
			h.k.GetPool(t, p.id, &h.out)
			u, v := poolUse[objKey{t, p.id}], h.out.Pool
			if h.out.Code != contract.CodeOK {
				if u != [2]uint64{} {
					h.fail("pool %s/%s not found but leased", t, p.id)
				}
				continue
			}
			if v.Reserved != u[0] || v.Active != u[1] || v.Reserved+v.Active+v.Consumed > v.Capacity ||
				v.Available != v.Capacity-v.Reserved-v.Active-v.Consumed {
				h.fail("pool %+v, live leases hold reserved %d active %d", v, u[0], u[1])
			}
		}
		for _, s := range mRanges {
			h.k.GetRange(t, s.id, &h.out)
			if n := rangeUse[objKey{t, s.id}]; h.out.Code == contract.CodeOK && h.out.Range.Allocated != n {
				h.fail("range %+v, live leases hold %d values", h.out.Range, n)
			} else if h.out.Code != contract.CodeOK && n != 0 {
				h.fail("range %s/%s not found but leased", t, s.id)
			}
		}
		for _, hd := range mHolders {
			got, trunc := h.k.ListLeases(t, hd, 1<<20, nil)
			if want := live[objKey{t, hd}]; trunc || len(got) != len(want) || (len(got) > 0 && !reflect.DeepEqual(got, want)) {
				h.fail("ListLeases(%s, %s) has %d leases, %d are live", t, hd, len(got), len(want))
			}
		}
	}
	slices.SortFunc(reservedDue, func(a, b Due) int {
		return cmp.Or(cmp.Compare(a.Deadline, b.Deadline), cmp.Compare(a.LeaseLSN, b.LeaseLSN))
	})
	if got := h.k.DueExpirations(h.slot, len(reservedDue)+1, nil); !slices.Equal(got, reservedDue) {
		h.fail("DueExpirations = %+v, reserved leases past their deadline: %+v", got, reservedDue)
	}
}

// ---------------------------------------------------------------------------------------
// The tests.

// TestModel lets rapid draw the configuration and the steps (one seed per step, expanded by
// the generator; a zero seed is a no-op, so shrinking quiets the steps that do not matter).
func TestModel(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		sc := mGenScenario(rand.New(rand.NewPCG(rapid.Uint64().Draw(rt, "config"), 1)))
		n := rapid.IntRange(1, 250).Draw(rt, "steps")
		pcg := rand.NewPCG(0, 0)
		h := newMHarness(rt, sc, rand.New(pcg))
		h.repro = "(rapid prints how to replay this case)"
		for range n {
			seed := rapid.Uint64().Draw(rt, "step")
			if seed == 0 {
				h.run(mStep{kind: mStepNoop})
				continue
			}
			pcg.Seed(seed, seed^0x9E3779B97F4A7C15) // a step depends on its seed alone
			h.run(h.g.next())
		}
		mRapidSteps += n
	})
	t.Logf("%d steps", mRapidSteps)
}

var mRapidSteps int

// TestModelSeeded runs -kernel.steps steps (default 10,000) in sequences of up to 1,500
// from consecutive seeds; a failure names the seed that reproduces it.
func TestModelSeeded(t *testing.T) {
	base := *flagModelSeed
	if base == 0 {
		base = uint64(time.Now().UnixNano())
	}
	stats := map[string]int{}
	for run, done := uint64(0), 0; done < *flagModelSteps; run++ {
		n := min(*flagModelSteps-done, 1500)
		h := runModelSeeded(t, base+run, n)
		for key, c := range h.stats {
			stats[key] += c
		}
		done += n
	}
	mLogStats(t, stats)
}

func runModelSeeded(t *testing.T, seed uint64, n int) *mHarness {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 0x5EED))
	h := newMHarness(t, mGenScenario(r), r)
	h.repro = fmt.Sprintf("reproduce: go test ./kernel -run 'TestModelSeeded$' -kernel.seed=%d -kernel.steps=%d", seed, n)
	for range n {
		h.run(h.g.next())
	}
	return h
}

// ---------------------------------------------------------------------------------------
// Kernel bugs this model found, each pinned by a minimal test; all five have since been
// fixed in the kernel and the tests stay as regression tests.

// mBugShard is a default shard where tenant t1 has created resource "r" and holder h1
// holds it with a reserved lease (lsn 2).
func mBugShard(t *testing.T, cfg Config, slot uint64) (*Kernel, func(*Command) Output) {
	t.Helper()
	k, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := func(c *Command) Output {
		t.Helper()
		var out Output
		mDriveWrite(k, cfg.Limits, slot, c, &out)
		return mNormOut(out)
	}
	if o := w(&Command{Verb: contract.VerbCreateResource, Tenant: "t1", OperationID: "c1", ObjectID: "r"}); o.Code != contract.CodeOK {
		t.Fatalf("create: %s", mFmtOut(&o))
	}
	o := w(&Command{Verb: contract.VerbReserve, Tenant: "t1", OperationID: "c2", HolderID: "h1",
		Members: []Member{{Kind: MemberResource, ID: "r"}}, TTLMillis: cfg.SlotMillis})
	if o.Code != contract.CodeOK || o.LSN != 2 {
		t.Fatalf("reserve: %s", mFmtOut(&o))
	}
	return k, w
}

// A retried lease verb shows the lease its command named without checking the tenant:
// tenant t2 learns tenant t1's lease (holder, members, state) by sending a lease verb for
// its id and retrying it. docs/api.md §1: an object of another tenant behaves exactly as if it
// did not exist. (retention.go, viewRef: the default branch views leaseIdx[ref] for
// whatever tenant owns it; the same holds for activate, renew, release and reclaim.)
func TestModelBugRetryLeaksOtherTenantLease(t *testing.T) {
	_, w := mBugShard(t, DefaultConfig(), 0)
	probe := &Command{Verb: contract.VerbRevoke, Tenant: "t2", OperationID: "p1", LeaseLSN: 2}
	if o := w(probe); o.Code != contract.CodeLeaseNotFound || o.Object != ObjectNone {
		t.Fatalf("first attempt: %s, want lease_not_found without a lease", mFmtOut(&o))
	}
	o := w(mCloneCmd(probe))
	if o.Code != contract.CodeLeaseNotFound || !o.FromRetryCache {
		t.Fatalf("retry: %s, want lease_not_found from the retry cache", mFmtOut(&o))
	}
	if o.Object != ObjectNone || o.Lease.Tenant != "" || o.Lease.HolderID != "" {
		t.Errorf("tenant t2's retry shows tenant t1's lease: %s", mFmtOut(&o))
	}
}

// A retried holder_mismatch shows the lease, and with it the holder's id, to the holder
// that was refused. docs/api.md §4: replies never reveal another holder's id (holder_mismatch
// carries no holder). (retention.go, replay → viewRef views the lease whatever the code.)
func TestModelBugRetryRevealsHolderOnHolderMismatch(t *testing.T) {
	_, w := mBugShard(t, DefaultConfig(), 0)
	probe := &Command{Verb: contract.VerbActivate, Tenant: "t1", OperationID: "p1", HolderID: "h2", LeaseLSN: 2, Epoch: 1}
	if o := w(probe); o.Code != contract.CodeHolderMismatch || o.Object != ObjectNone {
		t.Fatalf("first attempt: %s, want holder_mismatch without a lease", mFmtOut(&o))
	}
	o := w(mCloneCmd(probe))
	if o.Code != contract.CodeHolderMismatch || !o.FromRetryCache {
		t.Fatalf("retry: %s, want holder_mismatch from the retry cache", mFmtOut(&o))
	}
	if o.Lease.HolderID == "h1" {
		t.Errorf("holder h2's retried holder_mismatch reveals holder h1: %s", mFmtOut(&o))
	}
}

// reserve with activate:true takes a resource from available to active in one entry (one
// state change, one event) but bumps its version twice, once for a "reserved" state no
// reader can ever see. docs/api.md §4: version bumps on every state change. (reserve.go,
// reserve: version++ while marking the resource reserved, then setMembersState(Active)
// bumps it again.)
func TestModelBugReserveActivateBumpsVersionTwice(t *testing.T) {
	k, w := mBugShard(t, DefaultConfig(), 0)
	w(&Command{Verb: contract.VerbCreateResource, Tenant: "t1", OperationID: "c3", ObjectID: "s"})
	o := w(&Command{Verb: contract.VerbReserve, Tenant: "t1", OperationID: "c4", HolderID: "h1",
		Members: []Member{{Kind: MemberResource, ID: "s"}}, Activate: true})
	if o.Code != contract.CodeOK || o.Event != EventLeaseActivated {
		t.Fatalf("reserve: %s", mFmtOut(&o))
	}
	var out Output
	k.GetResource("t1", "s", &out)
	if out.Resource.State != ResourceActive || out.Resource.Version != 1 {
		t.Errorf("after one change (available → active) the resource reads %+v, want version 1", out.Resource)
	}
}

// An expire committed in the last HistoryWindowSlots slots of the slot space computes
// retire_after_slot = slot + window, which wraps: the expired lease reads lease_retired at
// once, and its retire_after_slot lies before the slot it ended in. Client writes are
// guarded by CheckSlots, the internal expire is not (expiry may come late, so it can be
// due there). (lease.go, end: l.retireAfter = e.Slot + k.cfg.HistoryWindowSlots.)
func TestModelBugExpireNearSlotLimit(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DedupeWindowSlots, cfg.HistoryWindowSlots = 10, 10
	start := uint64(mMaxU - 100)
	k, _ := mBugShard(t, cfg, start) // lease 2 reserved for one slot
	late := uint64(mMaxU - 5)
	dues := k.DueExpirations(late, 10, nil)
	if len(dues) != 1 {
		t.Fatalf("due at %d: %+v", late, dues)
	}
	var out Output
	k.Apply(Entry{LSN: 3, Slot: late, Cmd: &Command{Verb: contract.VerbExpire, Tenant: dues[0].Tenant,
		LeaseLSN: dues[0].LeaseLSN, Deadline: dues[0].Deadline}}, &out)
	if out.Code != contract.CodeOK || out.Lease.State != LeaseExpired {
		t.Fatalf("expire: %s", mFmtOut(&out))
	}
	if out.Lease.RetireAfterSlot < late {
		t.Errorf("lease expired at slot %d has retire_after_slot %d", late, out.Lease.RetireAfterSlot)
	}
	k.GetLease("t1", 2, late, &out)
	if out.Code != contract.CodeOK {
		t.Errorf("lease.get right after the expiry: %s, want the expired lease", mFmtOut(&out))
	}
}

// DueExpirations sizes its frontier as make([]int, 0, 2*max+1): for max = math.MaxInt the
// capacity overflows and it panics (makeslice: cap out of range); for any large max it
// allocates 16·max bytes however few leases are due. (expiry.go, DueExpirations.)
func TestModelBugDueExpirationsHugeMax(t *testing.T) {
	k, _ := mBugShard(t, DefaultConfig(), 0) // lease 2 due at slot 1
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("DueExpirations(1, math.MaxInt) panicked: %v", r)
		}
	}()
	if dues := k.DueExpirations(1, math.MaxInt, nil); len(dues) != 1 || dues[0].LeaseLSN != 2 {
		t.Errorf("DueExpirations(1, math.MaxInt) = %+v, want lease 2", dues)
	}
}
