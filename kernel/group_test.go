package kernel

import (
	"testing"

	"github.com/holdfast/holdfast/contract"
)

// anImport is lease.import across shards 0 and 1: lease 0 over a (home) and b, lease 1
// over c (shard 1 only), lease 2 over d (home only).
func anImport(op string) *Command {
	return &Command{Verb: contract.VerbImport, Tenant: "t", OperationID: op, Priority: 7,
		Imports: []ImportLease{
			{HolderID: "h0", Members: resources("a", "b"), TTLMillis: 30_000},
			{HolderID: "h1", Members: resources("c"), Activate: true},
			{HolderID: "h2", Members: resources("d"), TTLMillis: 30_000, Labels: []Label{{Key: "owner", Value: "x"}}},
		},
		Shards: []uint32{0, 1, 1, 0}}
}

// groupPrepare is the participant's prepare of anImport's group g: its members of each
// lease, none of the others'.
func groupPrepare(g uint64, priority uint64) *Command {
	return &Command{Verb: contract.VerbPrepare, Tenant: "t", Txn: TxnRef{Shard: 0, LSN: g}, Priority: priority, Group: true,
		Imports: []ImportLease{{HolderID: "h0", Members: resources("b")}, {HolderID: "h1", Members: resources("c"), Activate: true},
			{HolderID: "h2"}}}
}

// An import across shards is a group: one begin holds each lease's home members under a
// record at its id, one prepare holds the participant's lease by lease, one decision
// commits them all; after it each lease lives alone — ending one frees none of the
// others' members — and a lease with no member elsewhere is a plain lease.
func TestImportAcrossShardsCommitsAsAGroup(t *testing.T) {
	home, part := newBShard(t, 0), newBShard(t, 1)
	home.create("a", "d")
	part.create("b", "c")
	out := home.apply(anImport("imp"))
	if out.Code != contract.CodeOK || !out.Pending || len(out.Changes) != 0 {
		t.Fatalf("begin: %s pending=%v changes=%d", out.Code, out.Pending, len(out.Changes))
	}
	g := out.Lease.LSN
	if g != out.LSN {
		t.Fatalf("the group is named %d, begun at %d", g, out.LSN)
	}
	if gg, n := home.k.GroupOf(g - 2); gg != g || n != 3 {
		t.Fatalf("GroupOf its first lease: %d of %d", gg, n)
	}
	var got Output
	home.k.GetLease("t", g-5, home.slot, &got)
	if got.Code != contract.CodeOK || !got.Undecided || got.Txn.LSN != g-2 {
		t.Fatalf("lease.get of an undecided import's lease: %s undecided=%v, want it to wait for the decision", got.Code, got.Undecided)
	}
	if again := home.apply(anImport("imp")); !again.Pending || again.Lease.LSN != g {
		t.Fatalf("begin again: pending=%v group %d", again.Pending, again.Lease.LSN)
	}
	prep := part.apply(groupPrepare(g, 7))
	if prep.Code != contract.CodeOK || !prep.Pending || len(prep.Parts) != 3 || len(prep.Parts[2].Members) != 0 || len(prep.Parts[0].Members) != 1 {
		t.Fatalf("prepare: %s pending=%v parts %d", prep.Code, prep.Pending, len(prep.Parts))
	}
	if r := part.resource("b"); r.LeaseShard != 0 || r.LeaseLSN != g-2 {
		t.Fatalf("b names lease %d-%d, want 0-%d (its lease's transaction)", r.LeaseShard, r.LeaseLSN, g-2)
	}
	if r := part.resource("c"); r.LeaseLSN != g-1 {
		t.Fatalf("c names lease %d, want %d", r.LeaseLSN, g-1)
	}
	if again := part.apply(groupPrepare(g, 7)); !again.Pending || len(part.k.pending) != 2 {
		t.Fatalf("prepare again: pending=%v, %d undecided parts", again.Pending, len(part.k.pending))
	}
	var view Output
	if !home.k.GroupView(g, 3, [][]Member{resources("a", "b"), resources("c"), resources("d")}, &view) || len(view.Changes) != 3 {
		t.Fatalf("GroupView: %d leases", len(view.Changes))
	}

	home.slot += 5
	dec := home.apply(&Command{Verb: contract.VerbDecide, Txn: TxnRef{Shard: 0, LSN: g}, Commit: true, Group: true, Limit: 3,
		Imports: []ImportLease{{Members: resources("a", "b")}, {Members: resources("c")}, {Members: resources("d")}}})
	if dec.Code != contract.CodeOK || !dec.Mirror || len(dec.Changes) != 3 || dec.LSN != view.LSN {
		t.Fatalf("commit: %s mirror=%v leases %d lsn %d, the early answer's %d", dec.Code, dec.Mirror, len(dec.Changes), dec.LSN, view.LSN)
	}
	for i, ch := range dec.Changes {
		want := map[int]EventKind{0: EventLeaseReserved, 1: EventLeaseActivated, 2: EventLeaseReserved}[i]
		deadline := map[int]uint64{0: home.slot - 5 + 300, 2: home.slot - 5 + 300}[i] // counted from the begin
		if ch.Lease.LSN != g-5+uint64(i) || ch.Event != want || ch.Lease.DeadlineSlot != deadline {
			t.Fatalf("lease %d: id %d event %s deadline %d, want %d", i, ch.Lease.LSN, ch.Event, ch.Lease.DeadlineSlot, deadline)
		}
		if v := view.Changes[i]; v.Lease.LSN != ch.Lease.LSN || v.Lease.State != ch.Lease.State || v.Lease.DeadlineSlot != ch.Lease.DeadlineSlot ||
			len(v.Lease.Members) != len(ch.Lease.Members) || v.Event != ch.Event {
			t.Fatalf("lease %d: the early answer %+v, the commit %+v", i, v, ch)
		}
	}
	if sh := home.k.BundleShards(g-5, nil); len(sh) != 1 || sh[0] != 1 {
		t.Fatalf("lease 0's participants: %v", sh)
	}
	if home.k.bundles[g-3] != nil || home.k.begins[g] != 0 {
		t.Fatal("a lease with every member at the home is still a bundle's")
	}
	retry := home.apply(anImport("imp"))
	if !retry.FromRetryCache || len(retry.Changes) != 3 || retry.Changes[0].Lease.LSN != g-5 || retry.Changes[2].Lease.LSN != g-3 {
		t.Fatalf("retry: cache=%v leases %d", retry.FromRetryCache, len(retry.Changes))
	}
	for i, state := range []LeaseState{LeaseReserved, LeaseActive} {
		part.apply(&Command{Verb: contract.VerbMirror, Txn: TxnRef{Shard: 0, LSN: g - 2 + uint64(i)}, Priority: 7, State: state,
			LeaseLSN: g - 5 + uint64(i)})
	}
	if r := part.resource("c"); r.State != ResourceActive {
		t.Fatalf("c after its commit: %s", r.State)
	}

	// Lease 0 ends alone: its parts are freed, lease 1's member stays held.
	rel := home.apply(&Command{Verb: contract.VerbRelease, Tenant: "t", OperationID: "rel", HolderID: "h0", LeaseLSN: g - 5, Epoch: 1})
	if rel.Code != contract.CodeOK || !rel.Mirror {
		t.Fatalf("release of lease 0: %s mirror=%v", rel.Code, rel.Mirror)
	}
	endInTwoRounds(t, home, part, TxnRef{Shard: 0, LSN: g - 2}, g-5)
	if r := part.resource("b"); r.State != ResourceAvailable {
		t.Fatalf("b after its lease's end: %s", r.State)
	}
	if r := part.resource("c"); r.State != ResourceActive || r.LeaseLSN != g-4 {
		t.Fatalf("c after another lease's end: %+v", r)
	}
	if r := home.resource("d"); r.State != ResourceReserved || r.LeaseLSN != g-3 {
		t.Fatalf("d after another lease's end: %+v", r)
	}
	// Lease 1 has no member at its home: it ends the short way, its one part freed at once.
	rel1 := home.apply(&Command{Verb: contract.VerbRelease, Tenant: "t", OperationID: "rel1", HolderID: "h1", LeaseLSN: g - 4, Epoch: 1})
	if rel1.Code != contract.CodeOK || !rel1.Mirror || len(rel1.Lease.Members) != 1 || home.k.EndPhase(g-4) != PhaseFree {
		t.Fatalf("release of lease 1: %s mirror=%v members %d phase %d", rel1.Code, rel1.Mirror, len(rel1.Lease.Members), home.k.EndPhase(g-4))
	}
	free := &Command{Verb: contract.VerbMirror, Txn: TxnRef{Shard: 0, LSN: g - 1}, Priority: 7, State: LeaseReleased, LeaseLSN: g - 4, Phase: PhaseFree}
	part.apply(free)
	if r := part.resource("c"); r.State != ResourceAvailable {
		t.Fatalf("c after its lease's end: %s", r.State)
	}
	home.apply(free)
	if home.k.Freeing(g - 4) {
		t.Fatal("lease 1's rounds are not over after its own free")
	}
	home.replayed("a", "d")
	part.replayed("b", "c")
}

// A refusal at a participant aborts the whole import: no lease of it is granted, its
// intents are freed everywhere, and the refusal (naming its lease) is remembered.
func TestImportAcrossShardsAbortsWhole(t *testing.T) {
	home, part := newBShard(t, 0), newBShard(t, 1)
	home.create("a", "d")
	part.create("b", "c")
	g := home.apply(anImport("imp")).Lease.LSN
	part.apply(groupPrepare(g, 7))
	dec := home.apply(&Command{Verb: contract.VerbDecide, Txn: TxnRef{Shard: 0, LSN: g}, Group: true, Limit: 3,
		Refusal: contract.CodeResourceBusy, RefusalMember: 1, Value: 2})
	if dec.Code != contract.CodeOK || len(dec.Changes) != 0 || len(home.k.bundles) != 0 || len(home.k.pending) != 0 {
		t.Fatalf("abort: %s changes %d, %d records left", dec.Code, len(dec.Changes), len(home.k.bundles))
	}
	for _, id := range []string{"a", "d"} {
		if r := home.resource(id); r.State != ResourceAvailable {
			t.Fatalf("%s after the abort: %s", id, r.State)
		}
	}
	for i := range 3 {
		part.apply(&Command{Verb: contract.VerbMirror, Txn: TxnRef{Shard: 0, LSN: g - 2 + uint64(i)}, Priority: 7})
	}
	if r := part.resource("b"); r.State != ResourceAvailable || len(part.k.bundles) != 0 {
		t.Fatalf("b after the abort: %s, %d parts left", r.State, len(part.k.bundles))
	}
	retry := home.apply(anImport("imp"))
	if !retry.FromRetryCache || retry.Code != contract.CodeResourceBusy || retry.ItemIndex != 1 {
		t.Fatalf("retry: cache=%v %s item %d", retry.FromRetryCache, retry.Code, retry.ItemIndex)
	}
}

// Two leases of one import drawing on one pool at a participant are checked together, as
// one shard's import: refused at once when they do not both fit, never made to wait on
// each other; one that fits but for another bundle's intent waits.
func TestImportPrepareCountsThePoolAcrossItsLeases(t *testing.T) {
	part := newBShard(t, 1)
	if o := part.apply(&Command{Verb: contract.VerbCreatePool, Tenant: "t", OperationID: "p", ObjectID: "gpu", Capacity: 8}); o.Code != contract.CodeOK {
		t.Fatal(o.Code)
	}
	pool := func(q uint64) []Member { return []Member{{Kind: MemberPool, ID: "gpu", Quantity: q}} }
	prep := part.apply(&Command{Verb: contract.VerbPrepare, Tenant: "t", Txn: TxnRef{Shard: 0, LSN: 10}, Priority: 9, Group: true,
		Imports: []ImportLease{{HolderID: "h", Members: pool(5)}, {HolderID: "h", Members: pool(5)}}})
	if prep.Code != contract.CodeInsufficientCapacity || prep.Undecided || prep.ItemIndex != 1 || len(part.k.bundles) != 0 {
		t.Fatalf("prepare of 10 units of 8: %s undecided=%v item %d, %d parts", prep.Code, prep.Undecided, prep.ItemIndex, len(part.k.bundles))
	}
	if o := part.apply(&Command{Verb: contract.VerbPrepare, Tenant: "t", Txn: TxnRef{Shard: 2, LSN: 40}, Priority: 3, Group: true,
		Imports: []ImportLease{{HolderID: "x", Members: pool(4)}}}); !o.Pending {
		t.Fatalf("another import's prepare: %s", o.Code)
	}
	prep = part.apply(&Command{Verb: contract.VerbPrepare, Tenant: "t", Txn: TxnRef{Shard: 0, LSN: 20}, Priority: 9, Group: true,
		Imports: []ImportLease{{HolderID: "h", Members: pool(3)}, {HolderID: "h", Members: pool(3)}}})
	if prep.Code != contract.CodeInsufficientCapacity || !prep.Undecided {
		t.Fatalf("6 units of 8 behind another import's 4 undecided: %s undecided=%v", prep.Code, prep.Undecided)
	}
}
