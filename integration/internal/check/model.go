package check

import (
	"fmt"
	"hash/fnv"
	"math"
	"sort"
	"strings"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/messages"
)

// The sequential specification of docs/api.md, projected on one partition: one resource,
// one pool, one range, or the leases one holder has on one shard. A partition's state
// is its object (if any) and the leases that touch it. Operations touching several
// partitions (a bundle reserve, a lease verb on a bundle) appear in each of them, each
// copy judged on what that partition can see; since every partition must be
// linearizable on its own, and the copies agree on the operation's outcome, a fault in
// any one object's history is caught.
//
// Where the server may choose, the model accepts any allowed choice and follows the one
// the server reported: the value of an "any free" member of a `random` range, and
// whether an activate/renew of a reserved lease found its deadline passed
// (`lease_expired`; the slot arithmetic is the expiry checker's). `lowest_free` and
// `least_recently_freed` are deterministic and checked exactly. Expiry is an operation
// of its own, taken from the lease.expired events, placed in the window the shard's log
// allows (see expiryWindow).

type pkind int

const (
	pkResource pkind = iota
	pkPool
	pkRange
	pkHolder
)

func (k pkind) String() string {
	return [...]string{"resource", "pool", "range", "holder"}[k]
}

// partKey names a partition.
type partKey struct {
	kind   pkind
	tenant string
	id     string // object id, or holder id
	shard  uint32 // holder partitions: the shard
}

func (k partKey) String() string {
	if k.kind == pkHolder {
		return fmt.Sprintf("holder %s/%s on shard %d", k.tenant, k.id, k.shard)
	}
	return fmt.Sprintf("%s %s/%s", k.kind, k.tenant, k.id)
}

// linOp is one operation as one partition sees it.
type linOp struct {
	op      *Op        // nil for an expiry
	ev      *Event     // the lease.expired event of an expiry
	lease   *LeaseInfo // the lease a lease operation acts on (reserve ok: the new lease)
	members []int      // reserve: the request's members that belong to this partition
	// lease.list, holder partitions: this shard's part of the answer, and whether it is
	// complete (else a prefix: limit cut the list inside this shard).
	part     []*messages.Lease
	complete bool
	call     int64
	ret      int64
	// A lease across shards, seen from a partition whose object is on another shard than
	// the lease's home (remote): a change of the lease moves its record at once and this
	// object's members when the home's mirror reaches them (docs/api.md §2) — a follow
	// step of its own, to the lease's state by then (two changes may arrive as one).
	remote bool
	follow string // a follow step: the state of the change it follows
}

func (o *linOp) verb() string {
	if o.follow != "" {
		return "follow"
	}
	if o.op == nil {
		return "expire"
	}
	return o.op.Verb
}

func (o *linOp) String() string {
	if o.op == nil && o.follow == "" {
		return fmt.Sprintf("[%s–%s expire %s (from %s)]", fmtTime(o.call), fmtTime(o.ret), o.lease.ID, o.ev.String())
	}
	if o.follow != "" {
		return fmt.Sprintf("[%s–%s members of %s follow it to %s]", fmtTime(o.call), fmtTime(o.ret), o.lease.ID, o.follow)
	}
	s := o.op.String()
	if o.op.Verb == VList {
		ids := make([]string, len(o.part))
		for i, l := range o.part {
			ids[i] = fmt.Sprintf("%s:%s/e%d", l.LeaseId, l.State, l.LeaseEpoch)
		}
		c := "complete"
		if !o.complete {
			c = "prefix"
		}
		s += fmt.Sprintf(" (this shard, %s: [%s])", c, strings.Join(ids, " "))
	}
	return s
}

type lrec struct {
	state string
	epoch uint64
	// lag is, in a remote partition, the state this object's members still show while
	// the lease's changes have not reached them ("" once they have).
	lag string
}

// mState is a partition's state. It is never modified once built: steps copy what they
// change.
type mState struct {
	exists   bool
	rstate   string // resource: "" (available), reserved, active, revoking
	rlease   string
	version  uint64
	capacity uint64 // pool
	reserved uint64
	active   uint64
	first    uint64 // range
	last     uint64
	strategy string
	alloc    []uint64 // sorted
	used     []uint64 // least_recently_freed: allocated ∪ remembered freed values, sorted
	freed    []uint64 // least_recently_freed: freed values in freeing order
	leases   map[string]lrec
}

func (s *mState) clone() *mState {
	n := *s
	return &n
}

func (s *mState) withLease(id string, r lrec) {
	m := make(map[string]lrec, len(s.leases)+1)
	for k, v := range s.leases {
		m[k] = v
	}
	m[id] = r
	s.leases = m
}

func (s *mState) equal(o *mState) bool {
	if s.exists != o.exists || s.rstate != o.rstate || s.rlease != o.rlease || s.version != o.version ||
		s.capacity != o.capacity || s.reserved != o.reserved || s.active != o.active || s.first != o.first ||
		s.last != o.last || s.strategy != o.strategy || !eqU64(s.alloc, o.alloc) || !eqU64(s.used, o.used) ||
		!eqU64(s.freed, o.freed) || len(s.leases) != len(o.leases) {
		return false
	}
	for k, v := range s.leases {
		if o.leases[k] != v {
			return false
		}
	}
	return true
}

func (s *mState) hash() uint64 {
	h := fnv.New64a()
	fmt.Fprintf(h, "%t|%s|%s|%d|%d|%d|%d|%d|%d|%s|%v|%v|%v", s.exists, s.rstate, s.rlease, s.version, s.capacity,
		s.reserved, s.active, s.first, s.last, s.strategy, s.alloc, s.used, s.freed)
	x := h.Sum64()
	for k, v := range s.leases {
		g := fnv.New64a()
		fmt.Fprintf(g, "%s|%s|%d|%s", k, v.state, v.epoch, v.lag)
		x ^= g.Sum64()
	}
	return x
}

func (s *mState) describe(kind pkind) string {
	var sb strings.Builder
	switch kind {
	case pkResource:
		st := s.rstate
		if st == "" {
			st = "available"
		}
		fmt.Fprintf(&sb, "exists=%t state=%s lease=%s version=%d", s.exists, st, s.rlease, s.version)
	case pkPool:
		fmt.Fprintf(&sb, "exists=%t capacity=%d reserved=%d active=%d", s.exists, s.capacity, s.reserved, s.active)
	case pkRange:
		fmt.Fprintf(&sb, "exists=%t [%d,%d] %s allocated=%v", s.exists, s.first, s.last, s.strategy, s.alloc)
		if s.strategy == "least_recently_freed" {
			fmt.Fprintf(&sb, " used=%v freed=%v", s.used, s.freed)
		}
	}
	ids := make([]string, 0, len(s.leases))
	for id := range s.leases {
		ids = append(ids, id)
	}
	sortLeaseIDs(ids)
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprintf("%s:%s/e%d", id, s.leases[id].state, s.leases[id].epoch)
		if l := s.leases[id].lag; l != "" {
			parts[i] += " (members " + l + ")"
		}
	}
	fmt.Fprintf(&sb, " leases={%s}", strings.Join(parts, " "))
	return sb.String()
}

func eqU64(a, b []uint64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func sortLeaseIDs(ids []string) {
	sort.Slice(ids, func(i, j int) bool {
		_, a, _ := contract.ParseLeaseID(ids[i])
		_, b, _ := contract.ParseLeaseID(ids[j])
		return a < b
	})
}

func containsU64(s []uint64, v uint64) bool {
	i := sort.Search(len(s), func(i int) bool { return s[i] >= v })
	return i < len(s) && s[i] == v
}

func insertU64(s []uint64, v uint64) []uint64 {
	i := sort.Search(len(s), func(i int) bool { return s[i] >= v })
	out := make([]uint64, 0, len(s)+1)
	out = append(out, s[:i]...)
	out = append(out, v)
	return append(out, s[i:]...)
}

func removeU64(s []uint64, v uint64) []uint64 {
	out := make([]uint64, 0, len(s))
	for _, x := range s {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

func removeFirst(s []uint64, v uint64) ([]uint64, bool) {
	for i, x := range s {
		if x == v {
			out := make([]uint64, 0, len(s)-1)
			out = append(out, s[:i]...)
			return append(out, s[i+1:]...), true
		}
	}
	return s, false
}

// memberOf reports whether member m belongs to partition p.
func memberOf(p partKey, m *messages.Member) bool {
	switch p.kind {
	case pkResource:
		return m.ResourceId == p.id
	case pkPool:
		return m.PoolId == p.id
	case pkRange:
		return m.RangeId == p.id
	}
	return false
}

// freeMoreThan reports whether the range has more than n free values (n small).
func (s *mState) freeMoreThan(n int) bool {
	d := s.last - s.first
	return d >= uint64(n)+uint64(len(s.alloc))
}

// lowestFree is the lowest value of the range in neither set nor picks.
func (s *mState) lowestFree(set, picks []uint64) (uint64, bool) {
	v := s.first
	for {
		if !containsU64(set, v) && !containsU64(sortedCopy(picks), v) {
			return v, true
		}
		if v == s.last {
			return 0, false
		}
		v++
	}
}

func sortedCopy(s []uint64) []uint64 {
	c := append([]uint64(nil), s...)
	sort.Slice(c, func(i, j int) bool { return c[i] < c[j] })
	return c
}

// memberFailure is the code the model expects for member m given the picks made by the
// request's earlier members of this partition ("" when available; "?" when it depends on
// a choice the model cannot see).
func (s *mState) memberFailure(kind pkind, m *messages.Member, picks []uint64, unknownPicks int) string {
	switch kind {
	case pkResource:
		if !s.exists {
			return "resource_not_found"
		}
		if s.rstate != "" {
			return "resource_busy"
		}
	case pkPool:
		if !s.exists {
			return "pool_not_found"
		}
		if s.capacity-s.reserved-s.active < m.Quantity {
			return "insufficient_capacity"
		}
	case pkRange:
		if !s.exists {
			return "range_not_found"
		}
		if m.Value != nil {
			v := *m.Value
			if v < s.first || v > s.last {
				return "value_out_of_range"
			}
			if containsU64(s.alloc, v) || containsU64(sortedCopy(picks), v) {
				return "value_busy"
			}
			if unknownPicks > 0 {
				return "?"
			}
			return ""
		}
		if !s.freeMoreThan(len(picks) + unknownPicks) {
			return "range_exhausted"
		}
	}
	return ""
}

// deterministicPick is the value an "any" member gets under lowest_free and
// least_recently_freed (ok false under random, or when none is free).
func (s *mState) deterministicPick(picks []uint64) (uint64, bool) {
	switch s.strategy {
	case "lowest_free", "":
		return s.lowestFree(s.alloc, picks)
	case "least_recently_freed":
		if v, ok := s.lowestFree(s.used, picks); ok {
			return v, true
		}
		for _, v := range s.freed {
			if !containsU64(sortedCopy(picks), v) {
				return v, true
			}
		}
	}
	return 0, false
}

// allocate marks v taken (s is a private copy).
func (s *mState) allocate(v uint64) {
	s.alloc = insertU64(s.alloc, v)
	if s.strategy == "least_recently_freed" {
		var was bool
		if s.freed, was = removeFirst(s.freed, v); !was {
			s.used = insertU64(s.used, v)
		}
	}
}

// release returns v (s is a private copy).
func (s *mState) release(v uint64) {
	s.alloc = removeU64(s.alloc, v)
	if s.strategy == "least_recently_freed" {
		s.freed = append(append([]uint64(nil), s.freed...), v)
	}
}

func resourceState(lease string) string {
	switch lease {
	case "reserved":
		return "reserved"
	case "active":
		return "active"
	case "revoking":
		return "revoking"
	}
	return ""
}

// step is the specification: can the partition in state s take operation o with the
// outcome it had, and into which state? why says what the model expected when not.
func step(p partKey, s *mState, o *linOp) (bool, *mState, string) {
	switch o.verb() {
	case VResourceCreate, VPoolCreate, VRangeCreate:
		return stepCreate(p, s, o)
	case VReserve:
		if p.kind == pkHolder {
			return stepHolderReserve(s, o)
		}
		return stepReserve(p, s, o)
	case VActivate, VRenew, VRelease, VRevoke, VReclaim, "expire":
		return stepLeaseVerb(p, s, o)
	case "follow":
		return stepFollow(p, s, o)
	case VResourceGet, VPoolGet, VRangeGet:
		return stepGet(p, s, o)
	case VResourceDelete, VPoolDelete, VRangeDelete:
		return stepDelete(p, s, o)
	case VLeaseGet:
		return stepLeaseGet(s, o)
	case VList:
		return stepList(s, o)
	}
	return false, s, "unknown operation " + o.verb()
}

func stepCreate(p partKey, s *mState, o *linOp) (bool, *mState, string) {
	r := o.op.Result
	switch r.Code {
	case messages.CodeOK:
		if s.exists {
			return false, s, "the object exists already: want already_exists"
		}
		n := s.clone()
		n.exists = true
		switch p.kind {
		case pkPool:
			n.capacity = o.op.Req.Capacity
		case pkRange:
			n.first, n.last, n.strategy = o.op.Req.First, o.op.Req.Last, o.op.Req.Strategy
			if n.strategy == "" {
				n.strategy = "lowest_free"
			}
		}
		if o.op.Fresh() {
			if why := viewMismatch(p, n, r); why != "" {
				return false, s, why
			}
		}
		return true, n, ""
	case "already_exists":
		if !s.exists {
			return false, s, "the object does not exist: want ok"
		}
		if o.op.Fresh() {
			if why := viewMismatch(p, s, r); why != "" {
				return false, s, why
			}
		}
		return true, s, ""
	case "resource_table_full", "pool_table_full", "range_table_full":
		if s.exists {
			return false, s, "the object exists already: want already_exists"
		}
		return true, s, ""
	}
	return false, s, "unexpected code " + r.Code
}

// viewMismatch compares an object view with the model.
func viewMismatch(p partKey, s *mState, r *messages.Reply) string {
	switch p.kind {
	case pkResource:
		v := r.Resource
		if v == nil {
			return "no resource view"
		}
		st := s.rstate
		if st == "" {
			st = "available"
		}
		if v.State != st || v.CurrentLeaseId != s.rlease || v.Version != s.version {
			return fmt.Sprintf("view {%s lease=%s v%d}, model {%s lease=%s v%d}", v.State, v.CurrentLeaseId, v.Version, st, s.rlease, s.version)
		}
	case pkPool:
		v := r.Pool
		if v == nil {
			return "no pool view"
		}
		if v.Capacity != s.capacity || v.Reserved != s.reserved || v.Active != s.active || v.Available != s.capacity-s.reserved-s.active {
			return fmt.Sprintf("view cap=%d res=%d act=%d avail=%d, model cap=%d res=%d act=%d", v.Capacity, v.Reserved, v.Active, v.Available, s.capacity, s.reserved, s.active)
		}
	case pkRange:
		v := r.Range
		if v == nil {
			return "no range view"
		}
		free := s.last - s.first - uint64(len(s.alloc)) + 1
		if s.first == 0 && s.last == math.MaxUint64 && len(s.alloc) == 0 {
			free = math.MaxUint64
		}
		if v.First != s.first || v.Last != s.last || v.Strategy != s.strategy || v.Allocated != uint64(len(s.alloc)) || v.Free != free {
			return fmt.Sprintf("view [%d,%d] %s alloc=%d free=%d, model [%d,%d] %s alloc=%d free=%d", v.First, v.Last, v.Strategy, v.Allocated, v.Free,
				s.first, s.last, s.strategy, len(s.alloc), free)
		}
	}
	return ""
}

// stepReserve judges a reserve on one object partition: its members here are checked
// in request order (existence, then availability), and a failure reported at member i
// means every member before it was available and member i failed with exactly that
// code.
func stepReserve(p partKey, s *mState, o *linOp) (bool, *mState, string) {
	op := o.op
	code := op.Result.Code
	ok := code == messages.CodeOK
	mi := -1
	if !ok && isMemberCode(code) {
		mi = memberIndex(op.Result)
	}
	// A failure that names no member (the replies checker reports that on its own; early
	// servers did so for replays): the failing member is one whose kind can give the
	// code, so every member before the first such one was available, and nothing is
	// known from there on.
	unnamed := len(op.Req.Members)
	if !ok && mi < 0 && isMemberCode(code) {
		for i, m := range op.Req.Members {
			if codeFits(code, m) {
				unnamed = i
				break
			}
		}
	}
	var picks []uint64
	unknown := 0
	for _, i := range o.members {
		m := op.Req.Members[i]
		if !ok && mi >= 0 && i > mi {
			break
		}
		if i >= unnamed {
			return true, s, ""
		}
		fail := s.memberFailure(p.kind, m, picks, unknown)
		if !ok && i == mi {
			if fail == code || (fail == "?" && code == "value_busy") {
				return true, s, ""
			}
			if fail == "" || fail == "?" {
				fail = "available"
			}
			return false, s, fmt.Sprintf("member %d: model says %s, server says %s", i, fail, code)
		}
		if fail != "" && fail != "?" {
			if !ok && mi < 0 && fail == code {
				return true, s, "" // the server named no member: this one explains it
			}
			return false, s, fmt.Sprintf("member %d (%s) is %s in the model, yet the server answered %s", i, memberString(m), fail, code)
		}
		if p.kind != pkRange {
			continue
		}
		switch {
		case m.Value != nil:
			picks = append(picks, *m.Value)
		case ok:
			v := *o.lease.Members[i].Value
			if v < s.first || v > s.last || containsU64(s.alloc, v) || containsU64(sortedCopy(picks), v) {
				return false, s, fmt.Sprintf("member %d got value %d, which is not free", i, v)
			}
			if s.strategy != "random" {
				want, _ := s.deterministicPick(picks)
				if v != want {
					return false, s, fmt.Sprintf("member %d got value %d; %s gives %d", i, v, s.strategy, want)
				}
			}
			picks = append(picks, v)
		case s.strategy == "random":
			unknown++
		default:
			v, _ := s.deterministicPick(picks)
			picks = append(picks, v)
		}
	}
	if !ok {
		switch {
		case isMemberCode(code):
			return true, s, "" // the failing member is in another partition (or unnamed)
		case code == "lease_table_full" || code == "lease_member_table_full" || code == "expiration_index_full":
			return true, s, ""
		}
		return false, s, "unexpected code " + code
	}
	n := s.clone()
	st := "reserved"
	if op.Req.Activate {
		st = "active"
	}
	n.withLease(o.lease.ID, lrec{state: st, epoch: 1})
	for _, i := range o.members {
		n.take(p.kind, o.lease, i, st)
	}
	return true, n, ""
}

// take applies member i of lease l to the partition's object (n is a private copy).
func (n *mState) take(kind pkind, l *LeaseInfo, i int, st string) {
	m := l.Members[i]
	switch kind {
	case pkResource:
		n.rstate, n.rlease = resourceState(st), l.ID
		n.version++
	case pkPool:
		if st == "active" {
			n.active += m.Quantity
		} else {
			n.reserved += m.Quantity
		}
	case pkRange:
		n.allocate(*m.Value)
	}
}

func stepHolderReserve(s *mState, o *linOp) (bool, *mState, string) {
	n := s.clone()
	st := "reserved"
	if o.op.Req.Activate {
		st = "active"
	}
	n.withLease(o.lease.ID, lrec{state: st, epoch: 1})
	return true, n, ""
}

// stepLeaseVerb judges activate, renew, release, revoke, reclaim and expiry in the
// contract's check order: existence, holder, epoch, state (then the deadline, which the
// model leaves to the server: lease_expired is allowed whenever the lease is reserved).
func stepLeaseVerb(p partKey, s *mState, o *linOp) (bool, *mState, string) {
	verb := o.verb()
	code := messages.CodeOK
	if o.op != nil {
		code = o.op.Result.Code
	}
	cur, known := s.leases[o.lease.ID]
	if !known {
		if o.op == nil {
			return false, s, "the stream expires a lease not created yet in this order"
		}
		if code == "lease_not_found" {
			return true, s, ""
		}
		return false, s, "the lease does not exist yet in this order: want lease_not_found"
	}
	if ok, n, why, done := retirement(s, o.lease.ID, cur, code); done {
		return ok, n, why
	}
	want := ""
	switch {
	case holderVerb(verb) && o.op.Req.HolderID != o.lease.Holder:
		want = "holder_mismatch"
	case holderVerb(verb) && o.op.Req.Epoch != cur.epoch:
		want = "stale_epoch"
	}
	next := cur
	if want == "" {
		switch verb {
		case VActivate, VRenew:
			if cur.state != "reserved" {
				want = "invalid_state"
			} else if code == "lease_expired" {
				return true, s, ""
			} else if verb == VActivate {
				next.state = "active"
			}
		case VRelease:
			if cur.state != "reserved" && cur.state != "active" {
				want = "invalid_state"
			} else {
				next.state, next.epoch = "released", cur.epoch+1
			}
		case VRevoke:
			if cur.state != "active" {
				want = "invalid_state"
			} else {
				next.state, next.epoch = "revoking", cur.epoch+1
			}
		case VReclaim:
			if cur.state != "revoking" {
				want = "invalid_state"
			} else {
				next.state = "revoked"
			}
		case "expire":
			if cur.state != "reserved" {
				return false, s, fmt.Sprintf("the stream says expired, the model has the lease %s", cur.state)
			}
			next.state, next.epoch = "expired", cur.epoch+1
		}
	}
	if want != "" {
		if code == want {
			return true, s, ""
		}
		return false, s, fmt.Sprintf("lease %s is %s/e%d in the model: want %s, server says %s", o.lease.ID, cur.state, cur.epoch, want, code)
	}
	if code != messages.CodeOK {
		return false, s, fmt.Sprintf("lease %s is %s/e%d in the model: want ok, server says %s", o.lease.ID, cur.state, cur.epoch, code)
	}
	var view *messages.Lease
	if o.op != nil && o.op.Fresh() {
		view = o.op.Result.Lease
	} else if o.op == nil {
		view = o.ev.Ev.Lease
	}
	if view != nil && (view.State != next.state || view.LeaseEpoch != next.epoch) {
		return false, s, fmt.Sprintf("after %s the model has %s/e%d, the reply shows %s/e%d", verb, next.state, next.epoch, view.State, view.LeaseEpoch)
	}
	if next == cur {
		return true, s, ""
	}
	n := s.clone()
	if o.remote {
		if next.lag == "" {
			next.lag = cur.state
		}
		n.withLease(o.lease.ID, next)
		return true, n, ""
	}
	n.withLease(o.lease.ID, next)
	if p.kind != pkHolder {
		n.moveMembers(p, o.lease, cur.state, next.state)
	}
	return true, n, ""
}

// stepFollow: the members of a remote partition catch up with their lease — never before
// the change it follows (the lease's record has reached that state), in one change
// however many the lease made meanwhile.
func stepFollow(p partKey, s *mState, o *linOp) (bool, *mState, string) {
	cur, known := s.leases[o.lease.ID]
	if !known || stateRank(cur.state) < stateRank(o.follow) {
		return false, s, "the members follow a change the lease has not made in this order"
	}
	if cur.lag == "" {
		return true, s, "" // an earlier follow brought them here
	}
	n := s.clone()
	n.moveMembers(p, o.lease, cur.lag, cur.state)
	cur.lag = ""
	n.withLease(o.lease.ID, cur)
	return true, n, ""
}

// stateRank orders a lease's states along its only path: reserved, active, revoking,
// ended.
func stateRank(st string) int {
	switch st {
	case "reserved":
		return 0
	case "active":
		return 1
	case "revoking":
		return 2
	}
	return 3
}

// moveMembers applies to the partition's object (n a private copy) lease l's members
// moving from state from to state to: one change of each resource, however many the
// lease made.
func (n *mState) moveMembers(p partKey, l *LeaseInfo, from, to string) {
	for _, m := range l.Members {
		if !memberOf(p, m) {
			continue
		}
		switch {
		case to == "active" || to == "revoking":
			switch p.kind {
			case pkResource:
				n.rstate = resourceState(to)
				n.version++
			case pkPool:
				if from == "reserved" {
					n.reserved -= m.Quantity
					n.active += m.Quantity
				}
			}
		default:
			switch p.kind {
			case pkResource:
				n.rstate, n.rlease = "", ""
				n.version++
			case pkPool:
				if from == "reserved" {
					n.reserved -= m.Quantity
				} else {
					n.active -= m.Quantity
				}
			case pkRange:
				n.release(*m.Value)
			}
		}
	}
}

// stepDelete: an idle object is deleted (its id free for a new object, which starts from
// nothing: version 0, no remembered freed values); a held one answers object_in_use; a
// missing one *_not_found. Both shown views are the object as it was. The partition's
// lease records stay: its ended leases are still readable.
func stepDelete(p partKey, s *mState, o *linOp) (bool, *mState, string) {
	r := o.op.Result
	inUse := s.rstate != "" || s.reserved+s.active != 0 || len(s.alloc) != 0
	switch r.Code {
	case messages.CodeOK, messages.CodeObjectInUse:
		if !s.exists {
			return false, s, "the object does not exist in this order: want " + map[pkind]string{pkResource: "resource", pkPool: "pool", pkRange: "range"}[p.kind] + "_not_found"
		}
		if inUse != (r.Code == messages.CodeObjectInUse) {
			return false, s, fmt.Sprintf("the object is in use %v in the model, server says %s", inUse, r.Code)
		}
		if o.op.Fresh() {
			if why := viewMismatch(p, s, r); why != "" {
				return false, s, why
			}
		}
		if inUse {
			return true, s, ""
		}
		return true, &mState{leases: s.leases}, ""
	case "resource_not_found", "pool_not_found", "range_not_found":
		if s.exists {
			return false, s, "the object exists: want ok or object_in_use, server says " + r.Code
		}
		return true, s, ""
	}
	return false, s, "unexpected code " + r.Code
}

func stepGet(p partKey, s *mState, o *linOp) (bool, *mState, string) {
	r := o.op.Result
	if r.Code != messages.CodeOK {
		if s.exists {
			return false, s, "the object exists: want ok, server says " + r.Code
		}
		return true, s, ""
	}
	if !s.exists {
		return false, s, "the object does not exist yet in this order"
	}
	if why := viewMismatch(p, s, r); why != "" {
		return false, s, why
	}
	return true, s, ""
}

func stepLeaseGet(s *mState, o *linOp) (bool, *mState, string) {
	r := o.op.Result
	cur, known := s.leases[o.lease.ID]
	if !known {
		if r.Code == "lease_not_found" {
			return true, s, ""
		}
		return false, s, "the lease does not exist yet in this order: want lease_not_found"
	}
	if ok, n, why, done := retirement(s, o.lease.ID, cur, r.Code); done {
		return ok, n, why
	}
	if r.Code != messages.CodeOK {
		return false, s, fmt.Sprintf("lease %s is %s/e%d in the model: want ok, server says %s", o.lease.ID, cur.state, cur.epoch, r.Code)
	}
	if r.Lease.State != cur.state || r.Lease.LeaseEpoch != cur.epoch || r.Lease.HolderId != o.lease.Holder {
		return false, s, fmt.Sprintf("lease %s is %s/e%d in the model, the read shows %s/e%d", o.lease.ID, cur.state, cur.epoch, r.Lease.State, r.Lease.LeaseEpoch)
	}
	return true, s, ""
}

func stepList(s *mState, o *linOp) (bool, *mState, string) {
	var live []string
	for id, l := range s.leases {
		if l.state == "reserved" || l.state == "active" || l.state == "revoking" {
			live = append(live, id)
		}
	}
	sortLeaseIDs(live)
	if o.complete && len(o.part) != len(live) || !o.complete && len(o.part) > len(live) {
		return false, s, fmt.Sprintf("the model's live leases are %v, the list shows %d", live, len(o.part))
	}
	for i, l := range o.part {
		cur := s.leases[live[i]]
		if l.LeaseId != live[i] || l.State != cur.state || l.LeaseEpoch != cur.epoch {
			return false, s, fmt.Sprintf("the model's live leases are %v; position %d shows %s:%s/e%d", live, i, l.LeaseId, l.State, l.LeaseEpoch)
		}
	}
	return true, s, ""
}

// codeFits reports whether member m could fail with a reserve's member code.
func codeFits(code string, m *messages.Member) bool {
	switch code {
	case "resource_not_found", "resource_busy":
		return m.ResourceId != ""
	case "pool_not_found", "insufficient_capacity":
		return m.PoolId != ""
	}
	return m.RangeId != ""
}

func terminal(state string) bool {
	return state == "released" || state == "expired" || state == "revoked"
}

// retirement judges lease_retired. A terminal lease retires once its history window has
// passed (a slot the model does not see), so lease_retired is allowed for any terminal
// lease, and from then on the lease stays retired: every operation on it answers
// lease_retired (docs/api.md §4: "a terminal lease stays readable until its
// retire_after_slot; within a few slots after that, lease.get and every lease verb
// answer lease_retired"). done reports that this decided the step.
func retirement(s *mState, id string, cur lrec, code string) (ok bool, n *mState, why string, done bool) {
	switch {
	case cur.state == "retired":
		if code == "lease_retired" {
			return true, s, "", true
		}
		return false, s, fmt.Sprintf("lease %s answered lease_retired before: want lease_retired, server says %s", id, code), true
	case code == "lease_retired":
		if !terminal(cur.state) {
			return false, s, fmt.Sprintf("lease %s is %s/e%d in the model: a live lease never retires", id, cur.state, cur.epoch), true
		}
		n := s.clone()
		n.withLease(id, lrec{state: "retired", epoch: cur.epoch, lag: cur.lag})
		return true, n, "", true
	}
	return false, nil, "", false
}
