package actors

import (
	"testing"
	"time"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// A bundle across shards commits in parallel: its client is answered once the begin and
// every prepare are durable, before the commit is (the home stops at the step answered
// here, its commit not applied). A read of the lease at the home after that answer waits
// for the commit and finds the lease — never lease_not_found — and the members are held
// by it; its id is the position before the begin, its deadline counted from the begin.
func TestBundleAnsweredBeforeItsCommitIsApplied(t *testing.T) {
	o := bundleOptions(t.TempDir())
	answered := make(chan struct{})
	var once bool
	o.BundleStep = func(step string, _ uint32) {
		if step == StepAnswered && !once {
			once = true
			close(answered)
			time.Sleep(300 * time.Millisecond) // the home applies its commit late
		}
	}
	sys := startSystem(t, o)
	defer sys.Stop()
	createOn(t, sys, "s0/x", "s1/y", "s2/z")
	granted := make(chan *Reply, 1)
	go func() { granted <- do(t, sys, 0, bundle("b", "h", "s0/x", "s1/y", "s2/z")) }()
	var r *Reply
	select {
	case r = <-granted:
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
	}
	select {
	case <-answered:
	default:
		t.Fatal("answered without the step answered: not committed in parallel")
	}
	wantCode(t, r, contract.CodeOK)
	if r.Lease.LSN == 0 || r.LSN != r.Lease.LSN || len(r.Lease.Members) != 3 || r.Lease.State != kernel.LeaseReserved {
		t.Fatalf("the answer: %+v", r)
	}
	got := read(t, sys, 0, ReadRequest{Verb: contract.VerbGetLease, Tenant: "t", Lease: r.Lease.LSN})
	if got.Code != contract.CodeOK || got.Lease.LSN != r.Lease.LSN || got.Lease.DeadlineSlot != r.Lease.DeadlineSlot ||
		len(got.Lease.Members) != 3 {
		t.Fatalf("lease.get at the home after the answer: %s %+v, answered %+v", got.Code, got.Lease, r.Lease)
	}
	if l := settled(t, sys, "s0/x", "s1/y", "s2/z"); l.LSN != r.Lease.LSN {
		t.Fatalf("the members are held by %+v, want lease %d", l, r.Lease.LSN)
	}
	again := do(t, sys, 0, bundle("b", "h", "s0/x", "s1/y", "s2/z"))
	if !again.FromRetryCache || again.Lease.LSN != r.Lease.LSN || again.LSN != r.LSN || again.Lease.DeadlineSlot != r.Lease.DeadlineSlot {
		t.Fatalf("the retry: %+v, answered %+v", again, r)
	}
	wantCode(t, do(t, sys, 0, release("rel", "h", r.Lease.LSN, 1)), contract.CodeOK)
	if l := settled(t, sys, "s0/x", "s1/y", "s2/z"); l.LSN != 0 {
		t.Fatalf("after the release, held by %+v", l)
	}
}
