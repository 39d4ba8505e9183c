package actors

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/persistence"
)

func TestWritesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	sys := startSystem(t, testOptions(dir))
	wantCode(t, do(t, sys, 0, createResource("c1", "seat")), contract.CodeOK)
	r := do(t, sys, 0, reserve("r1", "alice", "seat", 60_000))
	wantCode(t, r, contract.CodeOK)
	lease := r.Lease.LSN
	sys.Stop()

	sys = startSystem(t, testOptions(dir))
	defer sys.Stop()
	got := read(t, sys, 0, ReadRequest{Verb: contract.VerbGetResource, Tenant: "t", ID: "seat"})
	wantCode(t, got, contract.CodeOK)
	if got.Resource.State != kernel.ResourceReserved || got.Resource.LeaseLSN != lease {
		t.Fatalf("after restart: %+v", got.Resource)
	}
	// The retry of an acknowledged write answers from the rebuilt operation table.
	again := do(t, sys, 0, reserve("r1", "alice", "seat", 60_000))
	if !again.FromRetryCache || again.LSN != r.LSN || again.Code != contract.CodeOK {
		t.Fatalf("retry after restart: %+v", again)
	}
}

func TestConcurrentWritesGroupCommit(t *testing.T) {
	sys := startSystem(t, testOptions(t.TempDir()))
	defer sys.Stop()
	const workers, each = 32, 50
	for w := 0; w < workers; w++ {
		wantCode(t, do(t, sys, 0, createResource(fmt.Sprintf("c%d", w), fmt.Sprintf("r%d", w))), contract.CodeOK)
	}
	var wg sync.WaitGroup
	var lsns sync.Map
	var failures atomic.Int64
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				r := do(t, sys, 0, reserve(fmt.Sprintf("w%d-%d-r", w, i), "h", fmt.Sprintf("r%d", w), 60_000))
				if r.Code != contract.CodeOK {
					failures.Add(1)
					return
				}
				if _, dup := lsns.LoadOrStore(r.LSN, true); dup {
					failures.Add(1)
				}
				rel := do(t, sys, 0, release(fmt.Sprintf("w%d-%d-x", w, i), "h", r.Lease.LSN, r.Lease.Epoch))
				if rel.Code != contract.CodeOK {
					failures.Add(1)
				}
			}
		}(w)
	}
	wg.Wait()
	if failures.Load() != 0 {
		t.Fatalf("%d failures", failures.Load())
	}
}

func TestDuplicateInFlightExecutesOnce(t *testing.T) {
	sys := startSystem(t, testOptions(t.TempDir()))
	defer sys.Stop()
	wantCode(t, do(t, sys, 0, createResource("c", "seat")), contract.CodeOK)
	// Many copies of one operation at once: one entry, one result for all.
	const n = 64
	replies := make(chan *Reply, n)
	for i := 0; i < n; i++ {
		sys.Write(0, reserve("same", "alice", "seat", 60_000), func(r *Reply) { replies <- r })
	}
	var first *Reply
	for i := 0; i < n; i++ {
		r := <-replies
		wantCode(t, r, contract.CodeOK)
		if first == nil {
			first = r
		}
		if r.LSN != first.LSN || r.Lease.LSN != first.Lease.LSN {
			t.Fatalf("two executions: lsn %d and %d", first.LSN, r.LSN)
		}
	}
	// A different command under the same id, in flight or not, is a conflict.
	wantCode(t, do(t, sys, 0, reserve("same", "bob", "seat", 60_000)), contract.CodeOperationConflict)
}

func TestOverloadedPastQueueBound(t *testing.T) {
	o := testOptions(t.TempDir())
	o.MaxQueue = 1
	sys := startSystem(t, o)
	defer sys.Stop()
	var overloaded atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < 200; i++ {
		wg.Add(1)
		sys.Write(0, createResource(fmt.Sprintf("c%d", i), fmt.Sprintf("r%d", i)), func(r *Reply) {
			if r.Code == contract.CodeOverloaded {
				overloaded.Add(1)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if overloaded.Load() == 0 {
		t.Fatal("a queue bound of 1 never answered overloaded")
	}
}

func TestCommandTooLarge(t *testing.T) {
	o := testOptions(t.TempDir())
	o.Kernel.MaxCommandBytes = 64
	sys := startSystem(t, o)
	defer sys.Stop()
	c := createResource("c", "r")
	c.ObjectID = "a123456789a123456789a123456789a123456789a123456789a123456789"
	wantCode(t, do(t, sys, 0, c), contract.CodeCommandTooLarge)
}

// TestFsyncFailureHaltsAndRetryResolves: a failed fsync halts the shard (writes and
// reads answer engine_halted); after a restart the ambiguous operation's retry returns
// its original result if it reached the journal, or executes once if it did not.
func TestFsyncFailureHaltsAndRetryResolves(t *testing.T) {
	for _, reached := range []bool{true, false} {
		t.Run(fmt.Sprintf("reached=%v", reached), func(t *testing.T) {
			dir := t.TempDir()
			var fail atomic.Bool
			o := testOptions(dir)
			o.Faults = &persistence.Faults{
				FailSync: func() error {
					if fail.Load() {
						return errors.New("injected fsync failure")
					}
					return nil
				},
				FailWrite: func() error {
					if fail.Load() && !reached {
						return errors.New("injected write failure")
					}
					return nil
				},
			}
			sys := startSystem(t, o)
			wantCode(t, do(t, sys, 0, createResource("c", "seat")), contract.CodeOK)
			fail.Store(true)
			r := do(t, sys, 0, reserve("amb", "alice", "seat", 60_000))
			wantCode(t, r, contract.CodeStorageFailure)
			if !r.Code.IsIndefinite() {
				t.Fatal("storage_failure must be indefinite")
			}
			wantCode(t, do(t, sys, 0, createResource("c2", "other")), contract.CodeEngineHalted)
			wantCode(t, read(t, sys, 0, ReadRequest{Verb: contract.VerbGetResource, Tenant: "t", ID: "seat"}), contract.CodeEngineHalted)
			sys.Stop()

			fail.Store(false)
			sys = startSystem(t, o)
			defer sys.Stop()
			retry := do(t, sys, 0, reserve("amb", "alice", "seat", 60_000))
			wantCode(t, retry, contract.CodeOK)
			// Written but not synced may or may not have survived; either way exactly one
			// execution: a second retry replays the same lsn.
			again := do(t, sys, 0, reserve("amb", "alice", "seat", 60_000))
			if !again.FromRetryCache || again.LSN != retry.LSN {
				t.Fatalf("second retry: %+v, first %+v", again, retry)
			}
			if !reached && retry.FromRetryCache {
				t.Fatal("an operation that never reached the journal answered from the cache")
			}
		})
	}
}

// TestExpiryNeverEarly: with a controlled clock, a hold expires at its deadline slot and
// not before; with the clock jumped backwards it neither expires early nor moves the
// shard's slot back.
func TestExpiryNeverEarly(t *testing.T) {
	o := testOptions(t.TempDir())
	clock := newFakeClock(1000, o.Slot)
	o.Clock = clock
	sys := startSystem(t, o)
	defer sys.Stop()
	wantCode(t, do(t, sys, 0, createResource("c", "seat")), contract.CodeOK)
	r := do(t, sys, 0, reserve("r", "alice", "seat", 50)) // 5 slots of 10ms
	wantCode(t, r, contract.CodeOK)
	if r.Lease.DeadlineSlot != 1005 {
		t.Fatalf("deadline %d, want 1005", r.Lease.DeadlineSlot)
	}
	state := func() kernel.LeaseState {
		return read(t, sys, 0, ReadRequest{Verb: contract.VerbGetLease, Tenant: "t", Lease: r.Lease.LSN}).Lease.State
	}
	clock.setSlot(1004, o.Slot)
	time.Sleep(10 * o.Slot)
	if s := state(); s != kernel.LeaseReserved {
		t.Fatalf("expired early: %s at slot 1004", s)
	}
	// The clock jumps back: the shard's slot stays, nothing expires.
	clock.setSlot(10, o.Slot)
	time.Sleep(10 * o.Slot)
	if s := state(); s != kernel.LeaseReserved {
		t.Fatalf("expired with the clock behind: %s", s)
	}
	c2 := do(t, sys, 0, createResource("c2", "other"))
	wantCode(t, c2, contract.CodeOK)
	act := do(t, sys, 0, &kernel.Command{Verb: contract.VerbActivate, Tenant: "t", OperationID: "probe",
		HolderID: "bob", LeaseLSN: r.Lease.LSN, Epoch: 1})
	wantCode(t, act, contract.CodeHolderMismatch)
	clock.setSlot(1005, o.Slot)
	deadline := time.Now().Add(10 * time.Second)
	for state() != kernel.LeaseExpired {
		if time.Now().After(deadline) {
			t.Fatal("never expired after the deadline slot")
		}
		time.Sleep(o.Slot)
	}
	got := read(t, sys, 0, ReadRequest{Verb: contract.VerbGetLease, Tenant: "t", Lease: r.Lease.LSN})
	if got.Lease.Epoch != 2 || got.Lease.ReleasedLSN == 0 {
		t.Fatalf("expired lease: %+v", got.Lease)
	}
}

// TestSlotNeverGoesBackAcrossRestart: entries after a restart with a clock that jumped
// back are stamped no earlier than the journal's last slot.
func TestSlotNeverGoesBackAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir)
	clock := newFakeClock(5000, o.Slot)
	o.Clock = clock
	sys := startSystem(t, o)
	wantCode(t, do(t, sys, 0, createResource("c", "seat")), contract.CodeOK)
	sys.Stop()
	clock.setSlot(100, o.Slot)
	sys = startSystem(t, o)
	defer sys.Stop()
	r := do(t, sys, 0, reserve("r", "alice", "seat", 50))
	wantCode(t, r, contract.CodeOK)
	if r.Lease.DeadlineSlot < 5005 {
		t.Fatalf("deadline %d: the slot went back across the restart", r.Lease.DeadlineSlot)
	}
}

func TestReadWaitsForMinLSN(t *testing.T) {
	sys := startSystem(t, testOptions(t.TempDir()))
	defer sys.Stop()
	c := do(t, sys, 0, createResource("c", "seat"))
	wantCode(t, read(t, sys, 0, ReadRequest{Verb: contract.VerbGetResource, Tenant: "t", ID: "seat", MinLSN: c.LSN}), contract.CodeOK)
	wantCode(t, read(t, sys, 0, ReadRequest{Verb: contract.VerbGetResource, Tenant: "t", ID: "seat", MinLSN: c.LSN + 5, Wait: 30 * time.Millisecond}), contract.CodeFenceNotApplied)
	// A read waiting for lsn+1 is answered once that entry applies.
	ch := make(chan *Reply, 1)
	sys.Read(0, ReadRequest{Verb: contract.VerbGetResource, Tenant: "t", ID: "other", MinLSN: c.LSN + 1, Wait: 10 * time.Second}, func(r *Reply) { ch <- r })
	time.Sleep(20 * time.Millisecond)
	wantCode(t, do(t, sys, 0, createResource("c2", "other")), contract.CodeOK)
	r := <-ch
	wantCode(t, r, contract.CodeOK)
	if r.AppliedLSN < c.LSN+1 {
		t.Fatalf("answered at %d before %d", r.AppliedLSN, c.LSN+1)
	}
}

// TestSnapshotRecoveryEqualsReplay: recovering from snapshot + journal gives the same
// state as recovering from the journal alone, and as the uninterrupted run.
func TestSnapshotRecoveryEqualsReplay(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	oA, oB := testOptions(dirA), testOptions(dirB)
	clock := newFakeClock(1, oA.Slot)
	oA.Clock, oB.Clock = clock, clock
	oB.SnapshotEvery = 37
	a, b := startSystem(t, oA), startSystem(t, oB)
	for i := 0; i < 20; i++ {
		for _, s := range []*System{a, b} {
			wantCode(t, do(t, s, 0, createResource(fmt.Sprintf("c%d", i), fmt.Sprintf("r%d", i))), contract.CodeOK)
		}
	}
	for i := 0; i < 300; i++ {
		c := reserve(fmt.Sprintf("op%d", i), "h", fmt.Sprintf("r%d", i%20), 100)
		ra, rb := do(t, a, 0, c), do(t, b, 0, c)
		if ra.Code != rb.Code || ra.LSN != rb.LSN {
			t.Fatalf("op %d: %s@%d vs %s@%d", i, ra.Code, ra.LSN, rb.Code, rb.LSN)
		}
		if ra.Code == contract.CodeOK && i%3 == 0 {
			rel := release(fmt.Sprintf("x%d", i), "h", ra.Lease.LSN, 1)
			do(t, a, 0, rel)
			do(t, b, 0, rel)
		}
	}
	time.Sleep(50 * time.Millisecond) // let the last snapshot land
	a.Stop()
	b.Stop()
	a, b = startSystem(t, oA), startSystem(t, oB)
	defer a.Stop()
	defer b.Stop()
	for i := 0; i < 20; i++ {
		q := ReadRequest{Verb: contract.VerbGetResource, Tenant: "t", ID: fmt.Sprintf("r%d", i)}
		ga, gb := read(t, a, 0, q), read(t, b, 0, q)
		if ga.Resource != gb.Resource || ga.AppliedLSN != gb.AppliedLSN {
			t.Fatalf("r%d: %+v vs %+v", i, ga.Resource, gb.Resource)
		}
	}
}

// TestHaltAnswersParkedReads: a read waiting for a min_lsn when the shard halts is
// answered engine_halted at once, not left to time out.
func TestHaltAnswersParkedReads(t *testing.T) {
	var fail atomic.Bool
	o := testOptions(t.TempDir())
	o.Faults = &persistence.Faults{FailSync: func() error {
		if fail.Load() {
			return errors.New("injected fsync failure")
		}
		return nil
	}}
	sys := startSystem(t, o)
	defer sys.Stop()
	c := do(t, sys, 0, createResource("c", "seat"))
	ch := make(chan *Reply, 1)
	sys.Read(0, ReadRequest{Verb: contract.VerbGetResource, Tenant: "t", ID: "seat", MinLSN: c.LSN + 100, Wait: time.Minute},
		func(r *Reply) { ch <- r })
	time.Sleep(20 * time.Millisecond)
	fail.Store(true)
	wantCode(t, do(t, sys, 0, createResource("c2", "other")), contract.CodeStorageFailure)
	select {
	case r := <-ch:
		wantCode(t, r, contract.CodeEngineHalted)
	case <-time.After(5 * time.Second):
		t.Fatal("the parked read was not answered when the shard halted")
	}
}
