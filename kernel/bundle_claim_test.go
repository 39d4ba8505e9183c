package kernel

import (
	"testing"

	"github.com/holdfast/holdfast/contract"
)

// claimAcross is a claim of the next work shard of run "crawl" (at the home, shard 0)
// that brings resource "b" of another shard along.
func claimAcross(op string) *Command {
	return &Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: op, HolderID: "w", TTLMillis: 30_000,
		Members: []Member{{Kind: MemberWork, ID: "crawl"}, {Kind: MemberResource, ID: "b"}}, Shards: []uint32{0, 1}, Priority: 9}
}

// A work claim across placement keys: while undecided its work shard is an intent — not
// claimable, not shown, counted as no claim — and the run's next claim and its end wait for
// the decision; committed it is a claim like a one-shard one, held queue and reply included;
// aborted it leaves the work shard as it was.
func TestBundleClaimsWorkAcrossShards(t *testing.T) {
	home, part := newBShard(t, 0), newBShard(t, 1)
	home.apply(&Command{Verb: contract.VerbCreateRun, Tenant: "t", OperationID: "run", ObjectID: "crawl",
		Work: []WorkSpec{{Name: "a"}, {Name: "z"}}})
	part.create("b")

	out := home.apply(claimAcross("claim"))
	if out.Code != contract.CodeOK || !out.Pending {
		t.Fatalf("begin of a claim: %s pending=%v", out.Code, out.Pending)
	}
	txn := TxnRef{Shard: 0, LSN: out.Lease.LSN}
	var got Output
	home.k.GetWork("t", "crawl", "a", &got)
	if got.Work.LeaseLSN != txn.LSN || got.Work.Claims != 0 || !home.k.ShowsIntents(&got) {
		t.Fatalf("work under an intent: lease %d claims %d shown=%v", got.Work.LeaseLSN, got.Work.Claims, !home.k.ShowsIntents(&got))
	}
	home.k.GetRun("t", "crawl", &got)
	if !home.k.ShowsIntents(&got) {
		t.Fatal("the run of an undecided claim is shown")
	}
	var page ListPage
	home.k.List(&ListQuery{Verb: contract.VerbListWork, Tenant: "t", ID: "crawl", Limit: 10}, &page)
	if len(page.Works) != 2 || !home.k.PageShowsIntents(&page) {
		t.Fatalf("work.list of an undecided claim's run: %d works, waits=%v", len(page.Works), home.k.PageShowsIntents(&page))
	}
	next := home.apply(&Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: "other", HolderID: "x", TTLMillis: 1000,
		Members: []Member{{Kind: MemberWork, ID: "crawl"}}})
	if !next.Undecided {
		// Were the undecided claim aborted, a would be next, not z.
		t.Fatalf("claim next while a claim is undecided: %s %q, want to wait", next.Code, next.Work.Name)
	}
	named := home.apply(&Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: "named", HolderID: "x", TTLMillis: 1000,
		Members: []Member{{Kind: MemberWork, ID: "crawl", Name: "a"}}})
	if !named.Undecided || named.Txn != txn {
		t.Fatalf("claim of the named work: %s undecided=%v txn=%+v", named.Code, named.Undecided, named.Txn)
	}
	if end := home.apply(&Command{Verb: contract.VerbCancelRun, Tenant: "t", OperationID: "cancel", ObjectID: "crawl"}); !end.Undecided {
		t.Fatalf("run.cancel while a claim is undecided: %s, want to wait", end.Code)
	}
	if _, _, held := home.k.HeldByUndecided("t", []Member{{Kind: MemberWork, ID: "crawl"}}, nil, TxnRef{}); !held {
		t.Fatal("HeldByUndecided: a claim next would not wait")
	}

	part.apply(&Command{Verb: contract.VerbPrepare, Tenant: "t", HolderID: "w", Members: resources("b"), Txn: txn, Priority: 9})
	dec := home.apply(&Command{Verb: contract.VerbDecide, Txn: txn, Commit: true, Members: claimAcross("claim").Members})
	if dec.Code != contract.CodeOK || !dec.HasWork || dec.Work.Name != "a" || dec.Work.LeaseLSN != dec.Lease.LSN || dec.Work.Claims != 1 ||
		!dec.Mirror || len(dec.Lease.Members) != 2 {
		t.Fatalf("commit of a claim: %s work %+v lease %d members %d mirror=%v", dec.Code, dec.Work, dec.Lease.LSN, len(dec.Lease.Members), dec.Mirror)
	}
	lease := dec.Lease.LSN
	home.k.GetWork("t", "crawl", "a", &got)
	if home.k.ShowsIntents(&got) {
		t.Fatal("a committed claim's work waits for a decision")
	}
	// The claim ends by its work verb; the participant learns it by a mirror.
	done := home.apply(&Command{Verb: contract.VerbCompleteWork, Tenant: "t", OperationID: "done", HolderID: "w", LeaseLSN: lease, Epoch: 1})
	if done.Code != contract.CodeOK || !done.Mirror || done.Lease.State != LeaseReleased {
		t.Fatalf("work.complete of a claim across shards: %s mirror=%v %s", done.Code, done.Mirror, done.Lease.State)
	}
	part.apply(&Command{Verb: contract.VerbMirror, Txn: txn, State: LeaseReleased, Priority: 9})
	if r := part.resource("b"); r.State != ResourceAvailable {
		t.Fatalf("the participant's member after the claim's end: %+v", r)
	}
	home.replayed()
	part.replayed("b")
}

// An aborted claim across shards leaves its work shard claimable, its claims count as it was.
func TestBundleClaimAbortedLeavesTheWork(t *testing.T) {
	home := newBShard(t, 0)
	home.apply(&Command{Verb: contract.VerbCreateRun, Tenant: "t", OperationID: "run", ObjectID: "crawl",
		Work: []WorkSpec{{Name: "a"}, {Name: "b"}}})
	out := home.apply(claimAcross("claim"))
	if out.Code != contract.CodeOK || !out.Pending {
		t.Fatalf("begin: %s", out.Code)
	}
	home.apply(&Command{Verb: contract.VerbDecide, Txn: TxnRef{Shard: 0, LSN: out.Lease.LSN}, Refusal: contract.CodeResourceBusy, RefusalMember: 2})
	var got Output
	home.k.GetWork("t", "crawl", "a", &got)
	if got.Work.LeaseLSN != 0 || got.Work.Claims != 0 || got.Work.Status != WorkActive {
		t.Fatalf("work after the claim's abort: %+v", got.Work)
	}
	next := home.apply(&Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: "next", HolderID: "x", TTLMillis: 1000,
		Members: []Member{{Kind: MemberWork, ID: "crawl"}}})
	if next.Code != contract.CodeOK || next.Work.Name != "a" {
		t.Fatalf("claim next after the abort: %s %q, want a (claimed by nobody)", next.Code, next.Work.Name)
	}
	retry := home.apply(claimAcross("claim"))
	if !retry.FromRetryCache || retry.Code != contract.CodeResourceBusy || retry.MemberIndex != 1 {
		t.Fatalf("retry of the refused claim: cache=%v %s member %d", retry.FromRetryCache, retry.Code, retry.MemberIndex)
	}
}

// A claim with members of other placement keys names its work first: the claim's home is
// its first member's shard, where its work verbs are served.
func TestClaimAcrossKeysNamesItsWorkFirst(t *testing.T) {
	c := &Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: "op", HolderID: "w", TTLMillis: 1000,
		Members: []Member{{Kind: MemberResource, ID: "n1/b"}, {Kind: MemberWork, ID: "crawl"}}, Shards: []uint32{1, 0}}
	if r := Validate(c); r == nil || r.Code != contract.CodeCrossShard {
		t.Fatalf("a claim across keys naming its work second: %v", r)
	}
	c.Members[0], c.Members[1], c.Shards = c.Members[1], c.Members[0], []uint32{0, 1}
	if r := Validate(c); r != nil {
		t.Fatalf("a claim across keys naming its work first: %v", r)
	}
}
