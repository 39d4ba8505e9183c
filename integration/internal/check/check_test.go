package check

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/integration/internal/history"
	"github.com/holdfast/holdfast/messages"
)

// Every checker must be able to fail: each test below takes a small history that obeys
// the contract (every checker passes), doctors it the way a broken server would, and
// expects the checker responsible to say so.

type hb struct {
	t    *testing.T
	recs []history.Record
	now  int64
	seq  uint64
}

func newHB(t *testing.T) *hb {
	b := &hb{t: t}
	b.recs = append(b.recs, history.Record{Kind: history.KindMeta, Round: 1,
		Meta: &history.Meta{Round: 1, Tenants: []string{"t", "u"}, Shards: 1, SlotMs: 10, Prefix: "holdfast"}})
	return b
}

func js(t *testing.T, m proto.Message) []byte {
	b, err := messages.MarshalJSON(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// call records one attempt, taking 5 units of time, 10 after the previous one.
func (b *hb) call(client int, tenant, verb, key string, req proto.Message, reply *messages.Reply) *history.Record {
	b.now += 10
	r := history.Record{Kind: history.KindCall, Round: 1, Client: client, Op: key, Attempt: 1, Verb: verb, Tenant: tenant,
		Request: js(b.t, req), Invoke: b.now, Return: b.now + 5}
	if reply != nil {
		r.Reply = js(b.t, reply)
	} else {
		r.Err = history.ErrTimeout
	}
	for _, x := range b.recs {
		if x.Kind == history.KindCall && x.Op == key && x.Tenant == tenant {
			r.Attempt++
		}
	}
	b.recs = append(b.recs, r)
	return &b.recs[len(b.recs)-1]
}

func (b *hb) event(ev *messages.Event) {
	b.seq++
	b.recs = append(b.recs, history.Record{Kind: history.KindEvent, Round: 1, Seq: b.seq,
		MsgID: fmt.Sprintf("%d-%d-0", ev.Shard, ev.Lsn), Subject: "holdfast.v1." + ev.Tenant + ".events." + ev.Event, Event: js(b.t, ev)})
}

func ok(lsn uint64) *messages.Reply {
	return &messages.Reply{Outcome: "committed", Code: "ok", Lsn: lsn}
}

func domain(code string, lsn uint64, msg string) *messages.Reply {
	return &messages.Reply{Outcome: "committed", Code: code, Lsn: lsn, Message: msg}
}

func lease(id, holder, state string, epoch, created, deadline uint64, members ...*messages.Member) *messages.Lease {
	return &messages.Lease{LeaseId: id, HolderId: holder, State: state, LeaseEpoch: epoch, CreatedLsn: created, DeadlineSlot: deadline, Members: members}
}

func u64(v uint64) *uint64 { return &v }

var (
	mR  = &messages.Member{ResourceId: "n/r"}
	mP  = &messages.Member{PoolId: "n/p", Quantity: 2}
	mV  = &messages.Member{RangeId: "n/v"}
	mV1 = &messages.Member{RangeId: "n/v", Value: u64(1)}
)

// base is a history that keeps every promise. doctor, when not nil, may change any
// reply or event before it is recorded (by step name).
func base(t *testing.T, doctor func(step string, r *messages.Reply, e *messages.Event) bool) []history.Record {
	b := newHB(t)
	d := func(step string, r *messages.Reply, e *messages.Event) bool {
		if doctor == nil {
			return true
		}
		return doctor(step, r, e)
	}
	ev := func(step string, e *messages.Event) {
		if d(step+"/event", nil, e) {
			b.event(e)
		}
	}
	rp := func(step string, r *messages.Reply) *messages.Reply {
		d(step, r, nil)
		return r
	}
	// Objects.
	r := ok(1)
	r.Resource = &messages.Resource{ResourceId: "n/r", State: "available"}
	b.call(1, "t", VResourceCreate, "o1", &messages.CreateResourceRequest{OperationId: "o1", ResourceId: "n/r"}, rp("create-r", r))
	ev("create-r", &messages.Event{Event: "resource.created", Tenant: "t", Lsn: 1, Slot: 100, Resource: r.Resource})
	r = ok(2)
	r.Pool = &messages.Pool{PoolId: "n/p", Capacity: 3, Available: 3}
	b.call(1, "t", VPoolCreate, "o2", &messages.CreatePoolRequest{OperationId: "o2", PoolId: "n/p", Capacity: 3}, rp("create-p", r))
	ev("create-p", &messages.Event{Event: "pool.created", Tenant: "t", Lsn: 2, Slot: 100, Pool: r.Pool})
	r = ok(3)
	r.Range = &messages.Range{RangeId: "n/v", First: 1, Last: 3, Strategy: "lowest_free", Free: 3}
	b.call(1, "t", VRangeCreate, "o3", &messages.CreateRangeRequest{OperationId: "o3", RangeId: "n/v", First: 1, Last: 3, Strategy: "lowest_free"}, rp("create-v", r))
	ev("create-v", &messages.Event{Event: "range.created", Tenant: "t", Lsn: 3, Slot: 100, Range: r.Range})
	// Lease 0-4: reserve, activate, revoke, reclaim; stale epochs refused.
	r = ok(4)
	r.Lease = lease("0-4", "h1", "reserved", 1, 4, 110, mR, mP, mV1)
	b.call(1, "t", VReserve, "o4", &messages.ReserveRequest{OperationId: "o4", HolderId: "h1", TtlMs: 100, Members: []*messages.Member{mR, mP, mV}}, rp("reserve1", r))
	ev("reserve1", &messages.Event{Event: "lease.reserved", Tenant: "t", Lsn: 4, Slot: 100, Lease: r.Lease})
	b.call(2, "t", VReserve, "o5", &messages.ReserveRequest{OperationId: "o5", HolderId: "h2", TtlMs: 100, Members: []*messages.Member{mR}},
		rp("busy", domain("resource_busy", 5, `members[0]: resource "n/r" is held by another lease`)))
	r = ok(6)
	r.Lease = lease("0-4", "h1", "active", 1, 4, 0, mR, mP, mV1)
	b.call(1, "t", VActivate, "o6", &messages.ActivateRequest{OperationId: "o6", LeaseId: "0-4", HolderId: "h1", LeaseEpoch: 1}, rp("activate", r))
	ev("activate", &messages.Event{Event: "lease.activated", Tenant: "t", Lsn: 6, Slot: 101, Lease: r.Lease})
	r = &messages.Reply{Outcome: "committed", Code: "ok", AppliedLsn: 6, Resource: &messages.Resource{ResourceId: "n/r", State: "active", CurrentLeaseId: "0-4", Version: 2}}
	b.call(2, "t", VResourceGet, "g1", &messages.GetResourceRequest{ResourceId: "n/r", MinLsn: 6}, rp("get-r", r))
	b.call(1, "t", VRenew, "o7", &messages.RenewRequest{OperationId: "o7", LeaseId: "0-4", HolderId: "h1", LeaseEpoch: 2, TtlMs: 100},
		rp("stale-renew", domain("stale_epoch", 7, "lease_epoch is not the lease's current epoch")))
	r = ok(8)
	r.Lease = lease("0-4", "h1", "revoking", 2, 4, 0, mR, mP, mV1)
	b.call(3, "t", VRevoke, "o8", &messages.RevokeRequest{OperationId: "o8", LeaseId: "0-4"}, rp("revoke", r))
	ev("revoke", &messages.Event{Event: "lease.revoking", Tenant: "t", Lsn: 8, Slot: 101, Lease: r.Lease})
	b.call(1, "t", VRelease, "o9", &messages.ReleaseRequest{OperationId: "o9", LeaseId: "0-4", HolderId: "h1", LeaseEpoch: 1},
		rp("stale-release", domain("stale_epoch", 9, "lease_epoch is not the lease's current epoch")))
	r = ok(10)
	r.Lease = lease("0-4", "h1", "revoked", 2, 4, 0, mR, mP, mV1)
	r.Lease.ReleasedLsn, r.Lease.RetireAfterSlot = 10, 102+360000
	b.call(3, "t", VReclaim, "o10", &messages.ReclaimRequest{OperationId: "o10", LeaseId: "0-4"}, rp("reclaim", r))
	ev("reclaim", &messages.Event{Event: "lease.revoked", Tenant: "t", Lsn: 10, Slot: 102, Lease: r.Lease})
	// Lease 0-11 expires; the holder's late activate is stale.
	r = ok(11)
	r.Lease = lease("0-11", "h2", "reserved", 1, 11, 107, mR, mV1)
	b.call(2, "t", VReserve, "o11", &messages.ReserveRequest{OperationId: "o11", HolderId: "h2", TtlMs: 50, Members: []*messages.Member{mR, mV}}, rp("reserve2", r))
	ev("reserve2", &messages.Event{Event: "lease.reserved", Tenant: "t", Lsn: 11, Slot: 102, Lease: r.Lease})
	exp := lease("0-11", "h2", "expired", 2, 11, 107, mR, mV1)
	exp.ReleasedLsn, exp.RetireAfterSlot = 12, 107+360000
	ev("expire", &messages.Event{Event: "lease.expired", Tenant: "t", Lsn: 12, Slot: 107, Lease: exp})
	b.call(2, "t", VActivate, "o12", &messages.ActivateRequest{OperationId: "o12", LeaseId: "0-11", HolderId: "h2", LeaseEpoch: 1},
		rp("late-activate", domain("stale_epoch", 13, "lease_epoch is not the lease's current epoch")))
	// Reads of the end state.
	r = &messages.Reply{Outcome: "committed", Code: "ok", AppliedLsn: 13, Pool: &messages.Pool{PoolId: "n/p", Capacity: 3, Available: 3}}
	b.call(1, "t", VPoolGet, "g2", &messages.GetPoolRequest{PoolId: "n/p"}, rp("get-p", r))
	r = &messages.Reply{Outcome: "committed", Code: "ok", AppliedLsn: 13, Range: &messages.Range{RangeId: "n/v", First: 1, Last: 3, Strategy: "lowest_free", Free: 3}}
	b.call(1, "t", VRangeGet, "g3", &messages.GetRangeRequest{RangeId: "n/v", MinLsn: 10}, rp("get-v", r))
	r = &messages.Reply{Outcome: "committed", Code: "ok", AppliedLsns: []*messages.ShardLsn{{Lsn: 13}}}
	b.call(2, "t", VList, "g4", &messages.ListLeasesRequest{HolderId: "h2"}, rp("list", r))
	r = &messages.Reply{Outcome: "committed", Code: "ok", AppliedLsn: 13, Lease: exp}
	b.call(1, "t", VLeaseGet, "g5", &messages.GetLeaseRequest{LeaseId: "0-11"}, rp("get-lease", r))
	// An ambiguous create, resolved by its retry.
	b.call(1, "t", VResourceCreate, "o14", &messages.CreateResourceRequest{OperationId: "o14", ResourceId: "n/s"}, nil)
	r = ok(14)
	r.FromRetryCache = true
	r.Resource = &messages.Resource{ResourceId: "n/s", State: "available"}
	b.call(1, "t", VResourceCreate, "o14", &messages.CreateResourceRequest{OperationId: "o14", ResourceId: "n/s"}, rp("retry", r))
	ev("retry", &messages.Event{Event: "resource.created", Tenant: "t", Lsn: 14, Slot: 108, Resource: r.Resource})
	// Another tenant cannot see lease 0-4.
	rec := b.call(3, "u", VLeaseGet, "g6", &messages.GetLeaseRequest{LeaseId: "0-4"}, rp("probe", &messages.Reply{Outcome: "committed", Code: "lease_not_found", AppliedLsn: 14}))
	rec.Intent = history.IntentWrongTenant
	// A delete of a held resource is refused, with the resource as it is; an idle pool's
	// goes through.
	r = ok(15)
	r.Lease = lease("0-15", "h3", "reserved", 1, 15, 208, mR)
	b.call(3, "t", VReserve, "o15", &messages.ReserveRequest{OperationId: "o15", HolderId: "h3", TtlMs: 1000, Members: []*messages.Member{mR}}, rp("reserve3", r))
	ev("reserve3", &messages.Event{Event: "lease.reserved", Tenant: "t", Lsn: 15, Slot: 108, Lease: r.Lease})
	r = domain("object_in_use", 16, "a reserved lease holds the resource: it is released or expires first")
	r.Resource = &messages.Resource{ResourceId: "n/r", State: "reserved", CurrentLeaseId: "0-15", Version: 7}
	b.call(1, "t", VResourceDelete, "o16", &messages.DeleteResourceRequest{OperationId: "o16", ResourceId: "n/r"}, rp("delete-held", r))
	r = ok(17)
	r.Pool = &messages.Pool{PoolId: "n/p", Capacity: 3, Available: 3}
	b.call(1, "t", VPoolDelete, "o17", &messages.DeletePoolRequest{OperationId: "o17", PoolId: "n/p"}, rp("delete-p", r))
	ev("delete-p", &messages.Event{Event: "pool.deleted", Tenant: "t", Lsn: 17, Slot: 108, Pool: r.Pool})
	return b.recs
}

// lastReturn is the latest response time in recs: where a builder carrying on goes from.
func lastReturn(recs []history.Record) int64 {
	var t int64
	for _, r := range recs {
		t = max(t, r.Return)
	}
	return t
}

func report(t *testing.T, recs []history.Record) *Report {
	t.Helper()
	return Round(recs, Options{})
}

func TestBaseHistoryPasses(t *testing.T) {
	rep := report(t, base(t, nil))
	if !rep.OK() {
		t.Fatalf("the base history should keep every promise:\n%s", rep)
	}
	for _, c := range AllCheckers {
		if rep.Checked[c] == 0 {
			t.Errorf("checker %s looked at nothing in the base history", c)
		}
	}
}

// expectViolation doctors the base history and expects checker to fail.
func expectViolation(t *testing.T, checker string, doctor func(step string, r *messages.Reply, e *messages.Event) bool) *Report {
	t.Helper()
	rep := report(t, base(t, doctor))
	if !rep.Has(checker) {
		t.Fatalf("%s did not catch the doctored history:\n%s", checker, rep)
	}
	for _, v := range rep.Violations {
		if v.Checker == checker && len(v.Excerpt) == 0 {
			t.Errorf("%s violation without an excerpt: %s", checker, v)
		}
	}
	t.Logf("caught:\n%s", rep)
	return rep
}

func TestRepliesCatchesADisallowedCode(t *testing.T) {
	expectViolation(t, CReplies, func(step string, r *messages.Reply, _ *messages.Event) bool {
		if step == "busy" {
			r.Code = "lease_expired" // not a code lease.reserve may answer
		}
		return true
	})
}

func TestRepliesCatchesAFailureWithoutItsMember(t *testing.T) {
	expectViolation(t, CReplies, func(step string, r *messages.Reply, _ *messages.Event) bool {
		if step == "busy" {
			r.Message = "busy"
		}
		return true
	})
}

func TestDedupeCatchesTwoResults(t *testing.T) {
	recs := base(t, nil)
	// The retry of o14 reports another lsn than the original.
	var first *history.Record
	for i := range recs {
		if recs[i].Op == "o14" {
			if first == nil {
				first = &recs[i]
				first.Err = ""
				first.Reply = js(t, &messages.Reply{Outcome: "committed", Code: "ok", Lsn: 15, Resource: &messages.Resource{ResourceId: "n/s", State: "available"}})
			}
		}
	}
	rep := report(t, recs)
	if !rep.Has(CDedupe) {
		t.Fatalf("two results for one operation id not caught:\n%s", rep)
	}
}

// A retry answered from the retry cache without the earliest_deadline_slot its first
// answer carried (what a worker read as "none will free up", docs/reliability.md bug 5).
func TestDedupeCatchesARetryWithoutItsHint(t *testing.T) {
	recs := base(t, func(step string, r *messages.Reply, _ *messages.Event) bool {
		if step == "busy" {
			r.EarliestDeadlineSlot = 110
		}
		return true
	})
	for i := range recs {
		if recs[i].Op == "o5" {
			again := recs[i]
			again.Attempt++
			again.Reply = js(t, &messages.Reply{Outcome: "committed", Code: "resource_busy", Lsn: 5, FromRetryCache: true,
				Message: `members[0]: resource "n/r" is held by another lease`})
			recs = append(recs, again)
			break
		}
	}
	rep := report(t, recs)
	if !rep.Has(CDedupe) {
		t.Fatalf("a retry without its first answer's earliest_deadline_slot not caught:\n%s", rep)
	}
}

func TestDedupeCatchesTwoOperationsAtOneLSN(t *testing.T) {
	expectViolation(t, CDedupe, func(step string, r *messages.Reply, _ *messages.Event) bool {
		if step == "stale-release" {
			r.Lsn = 7 // the lsn of o7
		}
		return true
	})
}

func TestDedupeCatchesAFirstSendFromTheCache(t *testing.T) {
	expectViolation(t, CDedupe, func(step string, r *messages.Reply, _ *messages.Event) bool {
		if step == "busy" {
			r.FromRetryCache = true
		}
		return true
	})
}

func TestAmbiguityCatchesAnUnresolvedOperation(t *testing.T) {
	recs := base(t, nil)
	out := recs[:0]
	for _, r := range recs {
		if r.Op == "o14" && r.Attempt == 2 {
			continue // the retry never happened
		}
		if r.Kind == history.KindEvent && strings.HasPrefix(r.MsgID, "0-14-") {
			continue
		}
		out = append(out, r)
	}
	rep := report(t, out)
	if !rep.Has(CAmbiguity) {
		t.Fatalf("unresolved timeout not caught:\n%s", rep)
	}
}

func TestRealtimeCatchesAReadGoingBack(t *testing.T) {
	expectViolation(t, CRealtime, func(step string, r *messages.Reply, _ *messages.Event) bool {
		if step == "get-p" {
			r.AppliedLsn = 5 // after o12 (lsn 13) returned
		}
		return true
	})
}

func TestRealtimeCatchesAnLSNGoingBack(t *testing.T) {
	expectViolation(t, CRealtime, func(step string, r *messages.Reply, _ *messages.Event) bool {
		if step == "late-activate" {
			r.Lsn = 3 // below the lsn of writes that returned before it was sent
		}
		return true
	})
}

func TestFenceCatchesAReadBeforeItsMinLSN(t *testing.T) {
	expectViolation(t, CFence, func(step string, r *messages.Reply, _ *messages.Event) bool {
		if step == "get-v" {
			r.AppliedLsn = 9 // min_lsn 10
		}
		return true
	})
}

func TestEventsCatchesAMissingEvent(t *testing.T) {
	expectViolation(t, CEvents, func(step string, _ *messages.Reply, e *messages.Event) bool {
		return step != "activate/event"
	})
}

func TestEventsCatchesADuplicate(t *testing.T) {
	recs := base(t, nil)
	for _, r := range recs {
		if r.Kind == history.KindEvent && r.MsgID == "0-6-0" {
			r.Seq = 99
			recs = append(recs, r)
			break
		}
	}
	rep := report(t, recs)
	if !rep.Has(CEvents) {
		t.Fatalf("duplicate event not caught:\n%s", rep)
	}
}

func TestEventsCatchesAnEventWithoutAChange(t *testing.T) {
	expectViolation(t, CEvents, func(step string, r *messages.Reply, e *messages.Event) bool {
		if step == "reclaim/event" {
			e.Lsn, e.Event = 9, "lease.released" // at the lsn of the refused release
		}
		return true
	})
}

func TestEventsCatchesOutOfOrder(t *testing.T) {
	recs := base(t, nil)
	var evs []int
	for i, r := range recs {
		if r.Kind == history.KindEvent {
			evs = append(evs, i)
		}
	}
	recs[evs[3]].Seq, recs[evs[4]].Seq = recs[evs[4]].Seq, recs[evs[3]].Seq
	rep := report(t, recs)
	if !rep.Has(CEvents) {
		t.Fatalf("events out of order not caught:\n%s", rep)
	}
}

func TestDoubleGrantCatchesAResourceGrantedTwice(t *testing.T) {
	rep := expectViolation(t, CDoubleGrant, func(step string, r *messages.Reply, e *messages.Event) bool {
		switch step {
		case "reclaim/event":
			return false // 0-4 never gives n/r back, yet 0-11 gets it
		case "reclaim":
			r.Code, r.Lease, r.Message = "invalid_state", nil, "the lease's state does not allow lease.reclaim"
		}
		return true
	})
	if !rep.Has(CLinear) {
		t.Errorf("linearizability should fail too")
	}
}

// A delete answered ok while a lease holds the resource: the model refuses it, and the
// shard's log shows the resource deleted under its holder.
func TestLinearizabilityCatchesADeleteOfAHeldResource(t *testing.T) {
	rep := expectViolation(t, CLinear, func(step string, r *messages.Reply, e *messages.Event) bool {
		if step == "delete-held" {
			r.Code, r.Message = "ok", ""
		}
		return true
	})
	if !rep.Has(CDoubleGrant) {
		t.Errorf("no-double-grant should see the resource deleted while held")
	}
}

func TestDoubleGrantCatchesAnOverfullPool(t *testing.T) {
	expectViolation(t, CDoubleGrant, func(step string, r *messages.Reply, e *messages.Event) bool {
		if step == "reserve1/event" {
			e.Lease.Members[1] = &messages.Member{PoolId: "n/p", Quantity: 4}
		}
		return true
	})
}

func TestExpiryCatchesAnEarlyExpiry(t *testing.T) {
	expectViolation(t, CExpiry, func(step string, _ *messages.Reply, e *messages.Event) bool {
		if step == "expire/event" {
			e.Slot = 105 // deadline 107
		}
		return true
	})
}

func TestExpiryCatchesLeaseExpiredBeforeTheDeadline(t *testing.T) {
	recs := base(t, nil)
	// Between the reserve of 0-11 (slot 102, deadline 107) and its expiry, an activate
	// answered lease_expired at lsn 12 while the next entry is at slot 104.
	var out []history.Record
	for _, r := range recs {
		if r.Kind == history.KindEvent && r.MsgID == "0-12-0" {
			ev := &messages.Event{}
			if err := messages.UnmarshalJSONTolerant(r.Event, ev); err != nil {
				t.Fatal(err)
			}
			ev.Lsn, ev.Slot = 15, 107
			r.MsgID = "0-15-0"
			r.Event = js(t, ev)
		}
		if r.Op == "o12" {
			r.Reply = js(t, domain("lease_expired", 12, "the lease's deadline has passed"))
		}
		out = append(out, r)
	}
	b := &hb{t: t, recs: out, now: out[len(out)-1].Return, seq: 100}
	r := ok(13)
	r.Resource = &messages.Resource{ResourceId: "n/q", State: "available"}
	b.call(4, "t", VResourceCreate, "o13", &messages.CreateResourceRequest{OperationId: "o13", ResourceId: "n/q"}, r)
	b.event(&messages.Event{Event: "resource.created", Tenant: "t", Lsn: 13, Slot: 104, Resource: r.Resource})
	rep := report(t, b.recs)
	if !rep.Has(CExpiry) {
		t.Fatalf("lease_expired before the deadline not caught:\n%s", rep)
	}
}

func TestFencingCatchesAStaleEpochAccepted(t *testing.T) {
	expectViolation(t, CFencing, func(step string, r *messages.Reply, _ *messages.Event) bool {
		if step == "stale-release" {
			r.Code, r.Message = "ok", ""
		}
		return true
	})
}

func TestIsolationCatchesAnotherTenantsLease(t *testing.T) {
	expectViolation(t, CIsolation, func(step string, r *messages.Reply, _ *messages.Event) bool {
		if step == "probe" {
			r.Code = "ok"
			r.Lease = lease("0-4", "h1", "revoked", 2, 4, 0)
		}
		return true
	})
}

func TestLinearizabilityCatchesAStaleRead(t *testing.T) {
	rep := expectViolation(t, CLinear, func(step string, r *messages.Reply, _ *messages.Event) bool {
		if step == "get-r" {
			r.Resource.State = "reserved" // it was activated before the read began
			r.Resource.Version = 1
		}
		return true
	})
	if len(rep.Violations) != 1 {
		t.Errorf("only linearizability should fail:\n%s", rep)
	}
}

func TestLinearizabilityCatchesAWrongLowestFreeValue(t *testing.T) {
	expectViolation(t, CLinear, func(step string, r *messages.Reply, e *messages.Event) bool {
		if step == "reserve2" || step == "reserve2/event" || step == "expire/event" {
			l := r.GetLease()
			if e != nil {
				l = e.Lease
			}
			l.Members[1] = &messages.Member{RangeId: "n/v", Value: u64(2)} // lowest_free gives 1
		}
		return true
	})
}

func TestLinearizabilityCatchesAWrongPoolCount(t *testing.T) {
	expectViolation(t, CLinear, func(step string, r *messages.Reply, _ *messages.Event) bool {
		if step == "get-p" {
			r.Pool.Active, r.Pool.Available = 2, 1 // 0-4 was reclaimed
		}
		return true
	})
}

func TestLinearizabilityCatchesAFalseBusy(t *testing.T) {
	expectViolation(t, CLinear, func(step string, r *messages.Reply, _ *messages.Event) bool {
		if step == "busy" {
			r.Message = `members[0]: resource "n/r" is held by another lease`
			r.Code = "resource_not_found" // it exists
		}
		return true
	})
}

func TestLinearizabilityCatchesAListMissingALease(t *testing.T) {
	recs := base(t, nil)
	b := &hb{t: t, recs: recs, now: lastReturn(recs), seq: 100}
	// h1's list, after 0-4 was revoked and reclaimed, still shows it.
	b.call(1, "t", VList, "g9", &messages.ListLeasesRequest{HolderId: "h1"}, &messages.Reply{Outcome: "committed", Code: "ok",
		Leases: []*messages.Lease{lease("0-4", "h1", "revoking", 2, 4, 0)}, AppliedLsns: []*messages.ShardLsn{{Lsn: 14}}})
	rep := report(t, b.recs)
	if !rep.Has(CLinear) {
		t.Fatalf("a stale list not caught:\n%s", rep)
	}
}

func TestHistoryRoundTripsThroughAFile(t *testing.T) {
	recs := base(t, nil)
	path := t.TempDir() + "/h.jsonl"
	rec, err := history.NewRecorder(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		rec.Add(r)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	reps, err := File(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 || !reps[0].OK() {
		t.Fatalf("re-check of the file: %v", reps)
	}
}

// A one-shard grant whose event comes after its deadline is caught (a grant at its own
// entry starts its life there).
func TestEventsCatchesAGrantPastItsDeadline(t *testing.T) {
	expectViolation(t, CEvents, func(step string, _ *messages.Reply, e *messages.Event) bool {
		if step == "reserve1/event" {
			e.Lease.DeadlineSlot = e.Slot
		}
		return true
	})
}

func TestEventsCatchesAWrongReleasedLSN(t *testing.T) {
	expectViolation(t, CEvents, func(step string, _ *messages.Reply, e *messages.Event) bool {
		if step == "reclaim/event" {
			e.Lease.ReleasedLsn = 8
		}
		return true
	})
}

func TestRepliesCatchesAnUnorderedList(t *testing.T) {
	recs := base(t, nil)
	b := &hb{t: t, recs: recs, now: lastReturn(recs), seq: 100}
	b.call(2, "t", VList, "g9", &messages.ListLeasesRequest{HolderId: "h2"}, &messages.Reply{Outcome: "committed", Code: "ok",
		Leases:      []*messages.Lease{lease("0-11", "h2", "reserved", 1, 11, 107), lease("0-4", "h2", "active", 1, 4, 0)},
		AppliedLsns: []*messages.ShardLsn{{Lsn: 14}}})
	rep := report(t, b.recs)
	if !rep.Has(CReplies) {
		t.Fatalf("an unordered list not caught:\n%s", rep)
	}
}

func TestLinearizabilityCatchesAnUnretiredLease(t *testing.T) {
	recs := base(t, nil)
	b := &hb{t: t, recs: recs, now: lastReturn(recs), seq: 100}
	retired := &messages.Reply{Outcome: "committed", Code: "lease_retired", AppliedLsn: 17}
	b.call(1, "t", VLeaseGet, "g10", &messages.GetLeaseRequest{LeaseId: "0-4"}, retired)
	if rep := report(t, b.recs); !rep.OK() {
		t.Fatalf("a terminal lease may retire:\n%s", rep)
	}
	exp := lease("0-4", "h1", "revoked", 2, 4, 0)
	b.call(1, "t", VLeaseGet, "g11", &messages.GetLeaseRequest{LeaseId: "0-4"}, &messages.Reply{Outcome: "committed", Code: "ok", AppliedLsn: 17, Lease: exp})
	rep := report(t, b.recs)
	if !rep.Has(CLinear) {
		t.Fatalf("a lease readable again after lease_retired not caught:\n%s", rep)
	}
	b = &hb{t: t, recs: base(t, nil), seq: 100}
	b.now = lastReturn(b.recs)
	b.call(1, "t", VLeaseGet, "g12", &messages.GetLeaseRequest{LeaseId: "0-11"}, retired)
	b.call(2, "t", VRelease, "o30", &messages.ReleaseRequest{OperationId: "o30", LeaseId: "0-11", HolderId: "h2", LeaseEpoch: 2},
		domain("invalid_state", 18, "the lease's state does not allow lease.release"))
	if rep := report(t, b.recs); !rep.Has(CLinear) {
		t.Fatalf("a verb on a retired lease answering invalid_state not caught:\n%s", rep)
	}
}

func TestEventsCatchesAWrongDeadline(t *testing.T) {
	expectViolation(t, CEvents, func(step string, _ *messages.Reply, e *messages.Event) bool {
		if step == "reserve2/event" {
			e.Slot = 103 // ttl 50ms = 5 slots: the deadline 107 says slot 102
		}
		return true
	})
}

// twoKeyBundle records the resources a/x and b/y created (lsn 1, 2) and lease 0-3 of
// holder h reserving both for ttlMs (its deadline 100 + ttlMs/10 at 10 ms slots), and
// returns the reserve's index in b.recs (a pointer would not survive later appends).
func twoKeyBundle(b *hb, ttlMs uint64) int {
	x, y := &messages.Member{ResourceId: "a/x"}, &messages.Member{ResourceId: "b/y"}
	for i, id := range []string{"a/x", "b/y"} {
		r := ok(uint64(i + 1))
		r.Resource = &messages.Resource{ResourceId: id, State: "available"}
		op := fmt.Sprintf("c%d", i)
		b.call(1, "t", VResourceCreate, op, &messages.CreateResourceRequest{OperationId: op, ResourceId: id}, r)
		b.event(&messages.Event{Event: "resource.created", Tenant: "t", Lsn: uint64(i + 1), Slot: 100, Resource: r.Resource})
	}
	r := ok(3)
	r.Lease = lease("0-3", "h", "reserved", 1, 3, 100+ttlMs/10, x, y)
	b.call(1, "t", VReserve, "b1", &messages.ReserveRequest{OperationId: "b1", HolderId: "h", TtlMs: ttlMs, Members: []*messages.Member{x, y}}, r)
	res := len(b.recs) - 1
	b.event(&messages.Event{Event: "lease.reserved", Tenant: "t", Lsn: 3, Slot: 100, Lease: r.Lease})
	return res
}

// A bundle across keys seen held at one member and, by a later read, not yet at another:
// each object's history is linearizable on its own (the bundle before the first read,
// after the second), but no one order of the whole is. The pair partition says so.
func TestLinearizabilityCatchesAHalfSeenBundle(t *testing.T) {
	b := newHB(t)
	res := twoKeyBundle(b, 10000)
	seen := &messages.Reply{Outcome: "committed", Code: "ok", AppliedLsn: 3,
		Resource: &messages.Resource{ResourceId: "a/x", State: "reserved", CurrentLeaseId: "0-3", Version: 1}}
	b.call(2, "t", VResourceGet, "g1", &messages.GetResourceRequest{ResourceId: "a/x"}, seen)
	free := &messages.Reply{Outcome: "committed", Code: "ok", AppliedLsn: 2,
		Resource: &messages.Resource{ResourceId: "b/y", State: "available"}}
	b.call(3, "t", VResourceGet, "g2", &messages.GetResourceRequest{ResourceId: "b/y"}, free)
	b.recs[res].Return = b.now + 20 // the bundle's answer comes after both reads
	rep := report(t, b.recs)
	found := false
	for _, v := range rep.Violations {
		if v.Checker == CLinear {
			if !strings.Contains(v.String(), "the pair") {
				t.Errorf("an object's own history was found not linearizable: %s", v)
			}
			found = true
		}
	}
	if !found {
		t.Fatalf("the half-seen bundle passed:\n%s", rep)
	}
	t.Logf("caught:\n%s", rep)
}

// An expiry of a bundle across shards is one step to readers (the end's two rounds): a
// member read free after it at the home and the other member still held a moment later,
// on its shard, is a violation; the other member free then is the contract.
func TestExpiryIsOneStepAcrossShards(t *testing.T) {
	build := func(free bool) []history.Record {
		b := newHB(t)
		b.recs[0].Meta.Shards = 2 // keys "a" on shard 0, "b" on shard 1
		twoKeyBundle(b, 50)
		x, y := &messages.Member{ResourceId: "a/x"}, &messages.Member{ResourceId: "b/y"}
		exp := lease("0-3", "h", "expired", 2, 3, 105, x, y)
		exp.ReleasedLsn, exp.RetireAfterSlot = 4, 105+360000
		b.event(&messages.Event{Event: "lease.expired", Tenant: "t", Lsn: 4, Slot: 105, Lease: exp})
		got := &messages.Reply{Outcome: "committed", Code: "ok", AppliedLsn: 4, Resource: &messages.Resource{ResourceId: "a/x", State: "available", Version: 2}}
		b.call(2, "t", VResourceGet, "g1", &messages.GetResourceRequest{ResourceId: "a/x", MinLsn: 4}, got)
		reply := domain("resource_busy", 2, `members[0]: resource "b/y" is held by another lease`)
		if free {
			reply = ok(2)
			reply.Lease = lease("1-2", "o", "reserved", 1, 2, 200, y)
		}
		b.call(3, "t", VReserve, "r2", &messages.ReserveRequest{OperationId: "r2", HolderId: "o", TtlMs: 1000, Members: []*messages.Member{y}}, reply)
		if free {
			b.event(&messages.Event{Event: "lease.reserved", Tenant: "t", Lsn: 2, Slot: 106, Lease: reply.Lease})
		}
		return b.recs
	}
	if rep := report(t, build(true)); rep.Has(CLinear) {
		t.Fatalf("both members free after the expiry:\n%s", rep)
	}
	if rep := report(t, build(false)); !rep.Has(CLinear) {
		t.Fatalf("a member read free after the expiry, the other then still held, passed:\n%s", rep)
	}
}

// A lease verb on a bundle across shards answers once the other shards applied it, unless
// its answer took past the bound of that wait: then they follow later, and may apply two
// changes as one (one version). A member read stale after a prompt answer is a violation;
// after a slow one it is the contract, and so is the one version step of a late catch-up.
func TestParticipantFollowsItsLease(t *testing.T) {
	build := func(slow bool, after *messages.Resource) []history.Record {
		b := newHB(t)
		b.recs[0].Meta.Shards = 2 // keys "a" on shard 0, "b" on shard 1
		twoKeyBundle(b, 10000)
		x, y := &messages.Member{ResourceId: "a/x"}, &messages.Member{ResourceId: "b/y"}
		for i, v := range []struct{ verb, state string }{{VActivate, "active"}, {VRelease, "released"}} {
			r := ok(uint64(4 + i))
			epoch := uint64(1 + i)
			r.Lease = lease("0-3", "h", v.state, epoch, 3, 1100, x, y)
			op := fmt.Sprintf("v%d", i)
			var req proto.Message = &messages.ActivateRequest{OperationId: op, LeaseId: "0-3", HolderId: "h", LeaseEpoch: 1}
			if v.verb == VRelease {
				req = &messages.ReleaseRequest{OperationId: op, LeaseId: "0-3", HolderId: "h", LeaseEpoch: 1}
			}
			rec := b.call(1, "t", v.verb, op, req, r)
			if slow {
				rec.Return += int64(2 * followWait)
				b.now = rec.Return
			}
		}
		got := &messages.Reply{Outcome: "committed", Code: "ok", AppliedLsn: 0, Resource: after}
		b.call(2, "t", VResourceGet, "g1", &messages.GetResourceRequest{ResourceId: "b/y"}, got)
		return b.recs
	}
	stale := &messages.Resource{ResourceId: "b/y", State: "reserved", CurrentLeaseId: "0-3", Version: 1}
	caught := &messages.Resource{ResourceId: "b/y", State: "available", Version: 2} // reserve, then one catch-up
	each := &messages.Resource{ResourceId: "b/y", State: "available", Version: 3}   // reserve, activate, release
	for _, c := range []struct {
		slow bool
		view *messages.Resource
		ok   bool
	}{{false, each, true}, {false, stale, false}, {false, caught, false}, {true, stale, true}, {true, caught, true}, {true, each, true}} {
		rep := report(t, build(c.slow, c.view))
		if rep.Has(CLinear) == c.ok {
			t.Errorf("slow=%v, participant shows %s v%d: linearizable=%v, want %v\n%s", c.slow, c.view.State, c.view.Version, !rep.Has(CLinear), c.ok, rep)
		}
	}
}

// A lease across shards frees its home's own members in the end's second round, after it
// has ended: a revoke then answers invalid_state while a least_recently_freed value of it
// is not yet queued, and a value freed meanwhile is reused first. The model follows the
// home's members too (lin.go endsInRounds); before, it freed them at the release and
// called the server's choice a violation.
func TestHomeMembersFollowTheEndOfALeaseAcrossShards(t *testing.T) {
	build := func(pick uint64) []history.Record {
		b := newHB(t)
		b.recs[0].Meta.Shards = 2 // keys "a" on shard 0, "b" on shard 1
		rg := &messages.Range{RangeId: "a/v", First: 1, Last: 2, Strategy: "least_recently_freed", Free: 2}
		r := ok(1)
		r.Range = rg
		b.call(1, "t", VRangeCreate, "c1", &messages.CreateRangeRequest{OperationId: "c1", RangeId: "a/v", First: 1, Last: 2, Strategy: "least_recently_freed"}, r)
		b.event(&messages.Event{Event: "range.created", Tenant: "t", Lsn: 1, Slot: 100, Range: rg})
		r = ok(1)
		r.Resource = &messages.Resource{ResourceId: "b/y", State: "available"}
		b.call(1, "t", VResourceCreate, "c2", &messages.CreateResourceRequest{OperationId: "c2", ResourceId: "b/y"}, r)
		b.event(&messages.Event{Event: "resource.created", Tenant: "t", Lsn: 1, Slot: 100, Resource: r.Resource})
		any, y := &messages.Member{RangeId: "a/v"}, &messages.Member{ResourceId: "b/y"}
		v := func(n uint64) *messages.Member { return &messages.Member{RangeId: "a/v", Value: proto.Uint64(n)} }
		// The bundle 0-2 holds value 1 and b/y; lease 0-3 holds value 2.
		r = ok(2)
		r.Lease = lease("0-2", "h1", "reserved", 1, 2, 1100, v(1), y)
		b.call(1, "t", VReserve, "r1", &messages.ReserveRequest{OperationId: "r1", HolderId: "h1", TtlMs: 100000, Members: []*messages.Member{any, y}}, r)
		b.event(&messages.Event{Event: "lease.reserved", Tenant: "t", Lsn: 2, Slot: 100, Lease: r.Lease})
		r = ok(3)
		r.Lease = lease("0-3", "h2", "reserved", 1, 3, 1100, v(2))
		b.call(2, "t", VReserve, "r2", &messages.ReserveRequest{OperationId: "r2", HolderId: "h2", TtlMs: 100000, Members: []*messages.Member{any}}, r)
		b.event(&messages.Event{Event: "lease.reserved", Tenant: "t", Lsn: 3, Slot: 100, Lease: r.Lease})
		// 0-2 is released (its value 1 is freed in the second round, later); a revoke
		// finds it ended; then 0-3 is released and its value 2 freed at once.
		r = ok(4)
		r.Lease = lease("0-2", "h1", "released", 2, 2, 1100, v(1), y)
		r.Lease.ReleasedLsn = 4
		b.call(1, "t", VRelease, "x1", &messages.ReleaseRequest{OperationId: "x1", LeaseId: "0-2", HolderId: "h1", LeaseEpoch: 1}, r)
		b.event(&messages.Event{Event: "lease.released", Tenant: "t", Lsn: 4, Slot: 101, Lease: r.Lease})
		b.call(3, "t", VRevoke, "x2", &messages.RevokeRequest{OperationId: "x2", LeaseId: "0-2"}, domain("invalid_state", 5, "lease 0-2 is released"))
		r = ok(6)
		r.Lease = lease("0-3", "h2", "released", 2, 3, 1100, v(2))
		r.Lease.ReleasedLsn = 6
		b.call(2, "t", VRelease, "x3", &messages.ReleaseRequest{OperationId: "x3", LeaseId: "0-3", HolderId: "h2", LeaseEpoch: 1}, r)
		b.event(&messages.Event{Event: "lease.released", Tenant: "t", Lsn: 6, Slot: 102, Lease: r.Lease})
		// The next "any" takes the least recently freed value.
		r = ok(8)
		r.Lease = lease("0-8", "h3", "reserved", 1, 8, 1100, v(pick))
		b.call(3, "t", VReserve, "r3", &messages.ReserveRequest{OperationId: "r3", HolderId: "h3", TtlMs: 100000, Members: []*messages.Member{any}}, r)
		b.event(&messages.Event{Event: "lease.reserved", Tenant: "t", Lsn: 8, Slot: 103, Lease: r.Lease})
		return b.recs
	}
	for _, pick := range []uint64{1, 2} { // which was freed first is not bounded by any answer
		if rep := report(t, build(pick)); rep.Has(CLinear) {
			t.Fatalf("value %d reused after the bundle's end and a release:\n%s", pick, rep)
		}
	}
}
