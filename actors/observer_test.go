package actors

import (
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast/contract"
)

// expiries records what the shard reports to its Observer.
type expiries struct {
	mu   sync.Mutex
	late []time.Duration
}

func (e *expiries) Batch(uint32, int, time.Duration) {}

func (e *expiries) Expired(_ uint32, late time.Duration) {
	e.mu.Lock()
	e.late = append(e.late, late)
	e.mu.Unlock()
}

// A lease that runs out is reported to the Observer once, with how late its expiry
// was committed after the deadline (never negative), for the lateness histogram; a lease
// released in time is not.
func TestObserverSeesExpiriesAndTheirLateness(t *testing.T) {
	o := testOptions(t.TempDir())
	var obs expiries
	o.Observer = &obs
	sys := startSystem(t, o)
	defer sys.Stop()
	wantCode(t, do(t, sys, 0, createResource("c1", "a")), contract.CodeOK)
	wantCode(t, do(t, sys, 0, createResource("c2", "b")), contract.CodeOK)
	wantCode(t, do(t, sys, 0, reserve("r1", "h", "a", 30)), contract.CodeOK)
	kept := do(t, sys, 0, reserve("r2", "h", "b", 30))
	wantCode(t, do(t, sys, 0, release("x2", "h", kept.LSN, 1)), contract.CodeOK)
	deadline := time.Now().Add(5 * time.Second)
	for {
		obs.mu.Lock()
		n := len(obs.late)
		var late time.Duration
		if n > 0 {
			late = obs.late[0]
		}
		obs.mu.Unlock()
		if n == 1 {
			if late < 0 || late > time.Second {
				t.Fatalf("lateness %v", late)
			}
			break
		}
		if n > 1 || time.Now().After(deadline) {
			t.Fatalf("%d expiries reported, want 1", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
