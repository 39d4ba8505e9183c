package actors

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/persistence"
)

// faultOp is one operation of TestImportsAndBundlesThroughJournalFaults, retried with its
// operation_id until its answer is definite.
type faultOp struct {
	cmd     *kernel.Command
	home    uint32
	members [][]string // each lease's resources (a bundle: one lease)
	answer  *Reply     // the definite answer
	last    *Reply     // the last answer that was not
	tries   int        // answers not definite in the round without faults
	release bool       // release the first lease once granted
}

// definite reports whether r settles op: a grant or a refusal for a reserve or an import,
// ok for a release. Anything else (a halted shard, a failed write, a bundle that timed
// out) is retried with the same operation_id.
func (op *faultOp) definite(r *Reply) bool {
	return r.Code == contract.CodeOK || (op.cmd.Verb != contract.VerbRelease && r.Code == contract.CodeResourceBusy)
}

// ids are the leases an ok answer grants, and whether its lsn names them as docs/api.md §2
// says: a bundle's lsn is its lease's id, an import's its last lease's.
func (op *faultOp) ids(r *Reply) ([]uint64, bool) {
	if op.cmd.Verb == contract.VerbImport {
		var ids []uint64
		for _, ch := range r.Changes {
			ids = append(ids, ch.Lease.LSN)
		}
		return ids, len(ids) == len(op.members) && r.LSN == ids[len(ids)-1]
	}
	return []uint64{r.Lease.LSN}, r.LSN == r.Lease.LSN
}

// Imports and bundles across shards while the journal fails now and then (a write or an
// fsync refused: the shard halts) and the system restarts from its directory after each
// round, as an operator restarts a process: every operation is retried with its
// operation_id until its answer is definite — first thing at each restart, so a retry may
// wait on a restarted home's decision. Every ok answer's lsn names its lease ids, the same
// ids its later retries get; at the end each member is held by the one granted, unreleased
// lease that names it, or free.
func TestImportsAndBundlesThroughJournalFaults(t *testing.T) {
	var failing atomic.Bool
	var writes atomic.Uint64
	inject := func(every uint64) func() error {
		return func() error {
			if failing.Load() && writes.Add(1)%every == 0 {
				return errors.New("injected journal failure")
			}
			return nil
		}
	}
	o := bundleOptions(t.TempDir())
	o.Faults = &persistence.Faults{FailWrite: inject(41), FailSync: inject(37)}
	var ids []string
	for s := range 3 {
		for i := range 6 {
			ids = append(ids, fmt.Sprintf("s%d/r%d", s, i))
		}
	}
	sys := startSystem(t, o)
	createOn(t, sys, ids...)
	failing.Store(true)

	const clients = 4
	queues := make([][]*faultOp, clients)
	var all []*faultOp
	for c := range clients {
		rng := rand.New(rand.NewPCG(uint64(c), 7))
		pick := func(taken map[string]bool) []string { return pickMembers(rng, ids, taken) }
		for i := range 16 {
			op := &faultOp{release: rng.IntN(2) == 0}
			name := fmt.Sprintf("c%d-%d", c, i)
			if rng.IntN(2) == 0 {
				taken := map[string]bool{}
				op.members = [][]string{pick(taken), pick(taken)}
				op.cmd = importOf(name, op.members...)
			} else {
				op.members = [][]string{pick(map[string]bool{})}
				op.cmd = bundle(name, "hb", op.members[0]...)
			}
			op.home = shardOfID(op.members[0][0])
			queues[c] = append(queues[c], op)
			all = append(all, op)
		}
	}

	var mu sync.Mutex
	var granted, released, halts int
	// run sends each client's operations in order until one is not definite (its shard
	// halted or its bundle could not be decided): the client waits for the restart.
	run := func(sys *System, queue []*faultOp) []*faultOp {
		for len(queue) > 0 {
			op := queue[0]
			r := within(sys, op.home, op.cmd, 10*time.Second)
			if r == nil {
				var st []string
				for k := range uint32(3) {
					x := sys.Stats(k)
					st = append(st, fmt.Sprintf("shard %d applied %d halted %v queue %d", k, x.AppliedLSN, x.Halted, x.QueueDepth))
				}
				t.Errorf("%s %s (home %d, shards %v): no answer in 10 s (%v)", op.cmd.Verb, op.cmd.OperationID, op.home, op.cmd.Shards, st)
				return queue
			}
			if !op.definite(r) {
				op.last = r
				mu.Lock()
				halts++
				mu.Unlock()
				if failing.Load() || op.tries >= 50 {
					return queue // its shard halted: retried after the restart
				}
				op.tries++ // without faults: a restarted shard still deciding what it left
				time.Sleep(20 * time.Millisecond)
				continue
			}
			queue = queue[1:]
			if op.answer != nil { // a release's
				continue
			}
			op.answer = r
			if r.Code != contract.CodeOK {
				continue
			}
			got, named := op.ids(r)
			if !named {
				t.Errorf("%s answered lsn %d for leases %v", op.cmd.OperationID, r.LSN, got)
			}
			mu.Lock()
			granted++
			mu.Unlock()
			if op.release {
				holder := op.cmd.HolderID
				if op.cmd.Verb == contract.VerbImport {
					holder = op.cmd.Imports[0].HolderID
				}
				rel := &faultOp{cmd: release(op.cmd.OperationID+"-rel", holder, got[0], 1), home: op.home, answer: r}
				queue = append([]*faultOp{rel}, queue...)
				mu.Lock()
				released++
				mu.Unlock()
			}
		}
		return nil
	}
	const faultyRounds = 4
	for round := 0; ; round++ {
		var wg sync.WaitGroup
		for c := range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				queues[c] = run(sys, queues[c])
			}()
		}
		wg.Wait()
		left := 0
		for _, q := range queues {
			left += len(q)
		}
		if left == 0 {
			break
		}
		if !failing.Load() {
			var codes []string
			for _, q := range queues {
				for _, op := range q[:min(1, len(q))] {
					codes = append(codes, fmt.Sprintf("%s %s: %s (%s)", op.cmd.Verb, op.cmd.OperationID, op.last.Code, op.last.Message))
				}
			}
			t.Fatalf("round %d without faults left %d operations undecided: %v", round, left, codes)
		}
		sys.Stop()
		failing.Store(round+1 < faultyRounds) // the restart writes too
		sys = startSystem(t, o)
	}
	defer sys.Stop()

	want := map[string]kernel.TxnRef{}
	for _, op := range all {
		again := do(t, sys, op.home, op.cmd)
		if again.Code != op.answer.Code {
			t.Fatalf("%s answered %s, its retry %s", op.cmd.OperationID, op.answer.Code, again.Code)
		}
		if op.answer.Code != contract.CodeOK {
			continue
		}
		first, _ := op.ids(op.answer)
		if got, named := op.ids(again); !again.FromRetryCache || !named || fmt.Sprint(got) != fmt.Sprint(first) {
			t.Fatalf("%s granted leases %v (lsn %d), its retry %v (lsn %d, from the retry cache %v)",
				op.cmd.OperationID, first, op.answer.LSN, got, again.LSN, again.FromRetryCache)
		}
		for i, members := range op.members {
			if op.release && i == 0 {
				continue
			}
			for _, id := range members {
				if other, twice := want[id]; twice {
					t.Fatalf("%s granted to leases %+v and %d", id, other, first[i])
				}
				want[id] = kernel.TxnRef{Shard: op.home, LSN: first[i]}
			}
		}
	}
	for _, id := range ids {
		if got := settled(t, sys, id); got != want[id] {
			t.Fatalf("%s held by %+v, want %+v", id, got, want[id])
		}
	}
	if granted == 0 || halts == 0 {
		t.Fatalf("%d granted, %d answers not definite: the test tests nothing", granted, halts)
	}
	t.Logf("%d granted, %d released, %d answers not definite", granted, released, halts)
}

// within sends one write and waits up to d for its reply (nil: none).
func within(sys *System, shard uint32, c *kernel.Command, d time.Duration) *Reply {
	ch := make(chan *Reply, 1)
	sys.Write(shard, c, func(r *Reply) { ch <- r })
	select {
	case r := <-ch:
		return r
	case <-time.After(d):
		return nil
	}
}

// pickMembers picks one or two of ids at random, none of taken (which it adds them to).
func pickMembers(rng *rand.Rand, ids []string, taken map[string]bool) []string {
	var ms []string
	for n := 1 + rng.IntN(2); len(ms) < n; {
		if id := ids[rng.IntN(len(ids))]; !taken[id] {
			taken[id] = true
			ms = append(ms, id)
		}
	}
	return ms
}
