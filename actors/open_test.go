package actors

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/persistence"
)

// owner is a test's Ownership: it serves a shard while serving says so (always when nil),
// with the standing standing says (Leased when nil), and is told of nothing.
type owner struct {
	serving  func() bool
	standing func() Standing
}

func (o owner) Standing(uint32) Standing {
	switch {
	case o.serving != nil && !o.serving():
		return NotServing
	case o.standing != nil:
		return o.standing()
	}
	return Leased
}
func (o owner) Halted(uint32) {}

// A system with an owner serves only the shards opened on it; a closed shard keeps its state in
// its storage and a later Open recovers it, as a cluster node hands shards on.
func TestLazySystemServesOpenedShardsOnly(t *testing.T) {
	o := testOptions(t.TempDir())
	o.Shards = 2
	o.Ownership = owner{}
	sys := startSystem(t, o)
	wantCode(t, do(t, sys, 1, createResource("c1", "seat")), contract.CodeEngineHalted)
	if err := sys.Open(1); err != nil {
		t.Fatal(err)
	}
	wantCode(t, do(t, sys, 1, createResource("c1", "seat")), contract.CodeOK)
	wantCode(t, do(t, sys, 0, createResource("c2", "seat")), contract.CodeEngineHalted)
	sys.Close(1)
	if sys.IsOpen(1) {
		t.Fatal("shard 1 open after Close")
	}
	wantCode(t, do(t, sys, 1, createResource("c3", "seat")), contract.CodeEngineHalted)
	if err := sys.Open(1); err != nil {
		t.Fatal(err)
	}
	// Recovered: the same operation is a retry, the same id a conflict.
	r := do(t, sys, 1, createResource("c1", "seat"))
	wantCode(t, r, contract.CodeOK)
	if !r.FromRetryCache {
		t.Fatal("reopened shard forgot the operation")
	}
	wantCode(t, do(t, sys, 1, createResource("c4", "seat")), contract.CodeAlreadyExists)
}

// A shard whose node's claim is not current answers neither writes nor reads.
func TestShardNotServingAnswersEngineHalted(t *testing.T) {
	var serving atomic.Bool
	serving.Store(true)
	o := testOptions(t.TempDir())
	o.Ownership = owner{serving: serving.Load}
	sys := startSystem(t, o)
	if err := sys.Open(0); err != nil {
		t.Fatal(err)
	}
	wantCode(t, do(t, sys, 0, createResource("c1", "seat")), contract.CodeOK)
	serving.Store(false)
	wantCode(t, do(t, sys, 0, createResource("c2", "seat2")), contract.CodeEngineHalted)
	serving.Store(true)
	wantCode(t, do(t, sys, 0, createResource("c2", "seat2")), contract.CodeOK)
}

// anchoredStorage is file storage whose journal says it was claimed at a given time.
type anchoredStorage struct {
	FileStorage
	claimed int64
}

type anchoredJournal struct {
	persistence.Journal
	claimed, local int64
}

func (j anchoredJournal) Anchor() (int64, int64) { return j.claimed, j.local }

func (a anchoredStorage) OpenJournal() (persistence.Journal, error) {
	j, err := a.FileStorage.OpenJournal()
	return anchoredJournal{Journal: j, claimed: a.claimed, local: MonoNow()}, err
}

// A shard on an Anchored journal runs its slot clock from the claim's time, not from a
// node clock that runs an hour ahead: a lease reserved for 1 s gets a deadline about one
// second after the claim, so it cannot expire an hour early.
func TestAnchoredJournalDrivesTheSlotClock(t *testing.T) {
	o := testOptions(t.TempDir())
	claimed := time.Now()
	o.Clock = newFakeClock(uint64(claimed.Add(time.Hour).UnixNano()/int64(o.Slot)), o.Slot) // an hour ahead
	o.Storage = func(shard uint32) (Storage, error) {
		dir := filepath.Join(o.Dir, fmt.Sprintf("shard-%03d", shard))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		return anchoredStorage{FileStorage: FileStorage{Dir: dir}, claimed: claimed.UnixNano()}, nil
	}
	sys := startSystem(t, o)
	defer sys.Stop()
	wantCode(t, do(t, sys, 0, createResource("c1", "seat")), contract.CodeOK)
	r := do(t, sys, 0, reserve("r1", "h1", "seat", 1000))
	wantCode(t, r, contract.CodeOK)
	claimSlot := uint64(claimed.UnixNano() / int64(o.Slot))
	if d := r.Lease.DeadlineSlot; d < claimSlot+100 || d > claimSlot+100+uint64(time.Minute/o.Slot) {
		t.Fatalf("deadline slot %d, claim at slot %d: the clock did not run from the claim", d, claimSlot)
	}
}

// refusingStorage cannot give its journal: recovery refuses.
type refusingStorage struct{ FileStorage }

func (refusingStorage) OpenJournal() (persistence.Journal, error) {
	return nil, errors.New("the journal is not reachable")
}

// A shard whose recovery refuses answers engine_halted to writes and reads (it never
// serves from empty state, and a write to it must not crash the actor); a lazy Open says
// so, so that a cluster node gives the claim up instead of serving a halted shard.
func TestShardThatRefusesToStart(t *testing.T) {
	o := testOptions(t.TempDir())
	o.Ownership = owner{}
	o.Storage = func(uint32) (Storage, error) { return refusingStorage{FileStorage{Dir: t.TempDir()}}, nil }
	sys := startSystem(t, o)
	defer sys.Stop()
	if err := sys.Open(0); err == nil || !strings.Contains(err.Error(), "not reachable") {
		t.Fatalf("open of a shard that refuses: %v", err)
	}
	if sys.IsOpen(0) {
		t.Fatal("a shard that refused stays open")
	}
	o.Ownership = nil
	sys2 := startSystem(t, o)
	defer sys2.Stop()
	for i := 0; i < 3; i++ {
		wantCode(t, do(t, sys2, 0, createResource("c1", "seat")), contract.CodeEngineHalted)
	}
	wantCode(t, read(t, sys2, 0, ReadRequest{Verb: contract.VerbGetResource, Tenant: "t", ID: "seat"}), contract.CodeEngineHalted)
}

// blockingStorage's journal of shard 0 does not open until release is closed (a journal
// stream electing a leader).
type blockingStorage struct {
	FileStorage
	opening chan struct{} // closed when the open of shard 0's journal starts
	release chan struct{}
}

func (b blockingStorage) OpenJournal() (persistence.Journal, error) {
	close(b.opening)
	<-b.release
	return b.FileStorage.OpenJournal()
}

// One shard's load that hangs holds up no other shard's: shard 1 opens, serves and
// closes while shard 0's journal is still being opened. (Under one lock for all shards,
// a cluster node's shards waited 25 s behind one stuck load.)
func TestAHangingLoadHoldsUpNoOtherShard(t *testing.T) {
	o := testOptions(t.TempDir())
	o.Shards = 2
	o.Ownership = owner{}
	dir := t.TempDir()
	hang := blockingStorage{opening: make(chan struct{}), release: make(chan struct{})}
	o.Storage = func(k uint32) (Storage, error) {
		fs := FileStorage{Dir: filepath.Join(dir, fmt.Sprint(k))}
		if k == 0 {
			hang.FileStorage = fs
			return hang, nil
		}
		return fs, nil
	}
	sys := startSystem(t, o)
	opened := make(chan error, 1)
	go func() { opened <- sys.Open(0) }()
	<-hang.opening
	done := make(chan error, 1)
	go func() { done <- sys.Open(1) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		close(hang.release)
		t.Fatal("shard 1's open waited for shard 0's")
	}
	wantCode(t, do(t, sys, 1, createResource("c1", "seat")), contract.CodeOK)
	sys.Close(1)
	close(hang.release)
	if err := <-opened; err != nil {
		t.Fatal(err)
	}
	wantCode(t, do(t, sys, 0, createResource("c2", "seat")), contract.CodeOK)
}

// echoSink publishes every event at once: the position comes straight back.
type echoSink struct{ pos chan Position }

func (e echoSink) Events(shard uint32, through uint64, _ []Event) {
	select {
	case e.pos <- Position{Shard: shard, LSN: through}:
	default:
	}
}

func (e echoSink) Positions() <-chan Position { return e.pos }

func (e echoSink) Unpublished(uint32) int { return 0 }

// stuckPositionStorage's published-position writes hang until release is closed (the
// cluster bucket electing a leader), and then write nothing.
type stuckPositionStorage struct {
	FileStorage
	writing chan struct{} // closed when the first write starts
	once    *sync.Once
	release chan struct{}
}

func (s stuckPositionStorage) WritePublished(uint64) error {
	s.once.Do(func() { close(s.writing) })
	<-s.release
	return nil
}

// A shard opened again while its previous opening's published-position write still
// hangs is served at once: the new start does not wait for the old write. (It waited
// on the write's lock: 25 s on a cluster node whose bucket was electing a leader, with
// every other shard's load queued behind it.)
func TestReopenDoesNotWaitForAHangingPositionWrite(t *testing.T) {
	o := testOptions(t.TempDir())
	o.Ownership = owner{}
	o.Events = echoSink{pos: make(chan Position, 16)}
	st := stuckPositionStorage{FileStorage: FileStorage{Dir: t.TempDir()}, writing: make(chan struct{}), once: &sync.Once{}, release: make(chan struct{})}
	o.Storage = func(uint32) (Storage, error) { return st, nil }
	sys := startSystem(t, o)
	defer sys.Stop()
	defer close(st.release)
	if err := sys.Open(0); err != nil {
		t.Fatal(err)
	}
	wantCode(t, do(t, sys, 0, createResource("c1", "seat")), contract.CodeOK)
	select {
	case <-st.writing:
	case <-time.After(10 * time.Second):
		t.Fatal("the published position was not written")
	}
	done := make(chan error, 1)
	go func() {
		sys.Close(0)
		done <- sys.Open(0)
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the shard's close and reopen waited for the hanging position write")
	}
	wantCode(t, do(t, sys, 0, createResource("c2", "seat2")), contract.CodeOK)
}
