package actors

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// A bundle lease's end is one step to readers: readers racing a release, each reading
// the members one after another, never see one member freed by it and then another still
// held — over three shards (the end's two rounds: every part ending before any is freed)
// and over two (the short end: the home's part ending until the other is freed).
func TestBundleEndIsOneStepToReaders(t *testing.T) {
	for _, ids := range [][]string{{"s0/x", "s1/y", "s2/z"}, {"s0/u", "s1/v", "s0/w"}} {
		t.Run(ids[2], func(t *testing.T) { endIsOneStep(t, ids) })
	}
}

func endIsOneStep(t *testing.T, ids []string) {
	sys := startSystem(t, bundleOptions(t.TempDir()))
	defer sys.Stop()
	createOn(t, sys, ids...)
	for round := range 30 {
		r := do(t, sys, 0, bundle(fmt.Sprintf("b%d", round), "h", ids...))
		wantCode(t, r, contract.CodeOK)
		lease := kernel.TxnRef{Shard: r.Lease.Shard, LSN: r.Lease.LSN}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		bad := make(chan string, 4)
		for reader, order := range [][]string{ids, {ids[2], ids[1], ids[0]}, {ids[1], ids[0], ids[2]}} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				freed := ""
				for {
					for _, id := range order {
						select {
						case <-stop:
							return
						default:
						}
						code, l := holderOf(t, sys, id)
						switch {
						case code != contract.CodeOK:
						case l == lease && freed != "":
							bad <- fmt.Sprintf("reader %d: %s read free, then %s still held by the released lease", reader, freed, id)
							return
						case l != lease && freed == "":
							freed = id
						}
					}
				}
			}()
		}
		wantCode(t, do(t, sys, 0, release(fmt.Sprintf("r%d", round), "h", lease.LSN, 1)), contract.CodeOK)
		time.Sleep(5 * time.Millisecond)
		close(stop)
		wg.Wait()
		select {
		case msg := <-bad:
			t.Fatalf("round %d: %s", round, msg)
		default:
		}
		settled(t, sys, ids...)
	}
}
