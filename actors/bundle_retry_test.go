package actors

import (
	"fmt"
	"testing"
	"time"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// A retry of a bundle lease's release answered from the retry cache waits, as the first
// answer does, until every participant has applied the release: a read of a member
// after the answer sees it free (a client whose first answer was lost retries at once).
func TestRetriedReleaseWaitsForItsParticipants(t *testing.T) {
	sys := startSystem(t, bundleOptions(t.TempDir()))
	defer sys.Stop()
	ids := []string{"s0/x", "s1/y", "s2/z"}
	createOn(t, sys, ids...)
	cached := 0
	for round := range 60 {
		r := do(t, sys, 0, bundle(fmt.Sprintf("b%d", round), "h", ids...))
		wantCode(t, r, contract.CodeOK)
		lease := kernel.TxnRef{Shard: r.Lease.Shard, LSN: r.Lease.LSN}
		op := fmt.Sprintf("r%d", round)
		answers := make(chan *Reply, 256)
		sys.Write(0, release(op, "h", lease.LSN, 1), func(r *Reply) { answers <- r })
		go func() {
			for range 200 { // retries, one every few microseconds, without waiting for answers
				sys.Write(0, release(op, "h", lease.LSN, 1), func(r *Reply) { answers <- r })
				time.Sleep(5 * time.Microsecond)
			}
		}()
		checked := false
		for range 201 {
			a := <-answers
			wantCode(t, a, contract.CodeOK)
			if !a.FromRetryCache || checked {
				continue
			}
			cached, checked = cached+1, true
			for _, id := range ids[1:] {
				if _, l := holderOf(t, sys, id); l == lease {
					t.Fatalf("round %d: a retried release answered ok from the retry cache, and %s is still held by the lease", round, id)
				}
			}
		}
		if l := settled(t, sys, ids...); l != (kernel.TxnRef{}) {
			t.Fatalf("round %d: members held by %v after the release", round, l)
		}
	}
	if cached == 0 {
		t.Fatal("no retry was answered from the retry cache: the test tests nothing")
	}
}

// A retry answered from the retry cache whose view of its object shows an undecided
// bundle's intent waits for the decision, as the first answer would have: the bundle may
// still abort, and the client must not see a lease that never was.
func TestRetriedAnswerShowingAnIntentWaitsForTheDecision(t *testing.T) {
	o := bundleOptions(t.TempDir())
	o.Ownership = owner{} // only shard 0 opens: the participant never votes, the bundle aborts
	o.PrepareBound = 800 * time.Millisecond
	sys := startSystem(t, o)
	defer sys.Stop()
	if err := sys.Open(0); err != nil {
		t.Fatal(err)
	}
	wantCode(t, do(t, sys, 0, createResource("c", "s0/x")), contract.CodeOK)
	begun := make(chan *Reply, 1)
	sys.Write(0, bundle("b", "h", "s0/x", "s1/y"), func(r *Reply) { begun <- r })
	// A read of the resource would wait for the decision; the begin is applied well
	// within this, and the bundle waits PrepareBound for the vote that never comes.
	time.Sleep(200 * time.Millisecond)
	r := do(t, sys, 0, createResource("c", "s0/x")) // the create's retry
	if !r.FromRetryCache {
		t.Fatalf("the retry was not answered from the retry cache: %+v", r)
	}
	if r.Resource.LeaseLSN != 0 {
		t.Fatalf("a retry's answer showed the undecided bundle's intent as the resource's lease: %+v", r.Resource)
	}
	if b := <-begun; b.Code == contract.CodeOK {
		t.Fatalf("the bundle was granted with a participant that never voted")
	}
}
