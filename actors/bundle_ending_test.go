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

// A write's answer that shows its object as an undecided bundle holds it waits for the
// decision even when the decision is applied in the same batch, after it: whether the
// view shows an intent is judged at the write's entry, not once the batch is applied
// (TestFaults found the answer given with the intent's view, stale by then).
func TestAnswerShowingAnIntentWaitsWhenItsBatchDecides(t *testing.T) {
	cfg := kernel.DefaultConfig()
	cfg.Shard = 0
	k, err := kernel.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	q := NewSequencer[string](k, 0, 0, cfg.Limits, 1024)
	durable := func() []Answer[string] {
		t.Helper()
		if q.Batch() == nil {
			t.Fatal("nothing to write")
		}
		answers, _ := q.Durable(nil)
		return answers
	}
	q.Write(createResource("c", "s0/x"), q.Stamp(1000), "create")
	durable()
	begin := bundle("b", "h", "s0/x", "s1/y")
	q.Write(begin, q.Stamp(1000), "begin")
	begun := durable()
	txn := kernel.TxnRef{Shard: 0, LSN: begun[0].Reply.Lease.LSN}
	// In one batch: a create of the held resource (already_exists, its view the intent's),
	// then the bundle's commit.
	q.Write(createResource("c2", "s0/x"), q.Stamp(1000), "again")
	q.Internal(&kernel.Command{Verb: contract.VerbDecide, Txn: txn, Commit: true, Members: begin.Members}, q.Stamp(1000), "decide")
	for _, a := range durable() {
		if a.To != "again" {
			continue
		}
		if a.Reply.Code != contract.CodeAlreadyExists || !a.Reply.shownWaiting {
			t.Fatalf("the create's answer: %s, shown waiting %v (view %+v)", a.Reply.Code, a.Reply.shownWaiting, a.Reply.Resource)
		}
		return
	}
	t.Fatal("the create was not answered")
}
