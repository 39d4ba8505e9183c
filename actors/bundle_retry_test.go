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
