package actors

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/persistence"
)

// barrierJournal is a file journal that takes barriers: each one counted, held while
// hold is set, failed while fail is.
type barrierJournal struct {
	persistence.Journal
	gate *barrierGate
}

type barrierGate struct {
	mu       sync.Mutex
	barriers int
	hold     chan struct{} // non-nil: barriers wait for it to close
	fail     bool
}

func (j barrierJournal) Barrier(done func(error)) {
	g := j.gate
	g.mu.Lock()
	g.barriers++
	hold, fail := g.hold, g.fail
	g.mu.Unlock()
	go func() {
		if hold != nil {
			<-hold
		}
		if fail {
			done(errors.New("fenced: another node appended"))
			return
		}
		done(nil)
	}()
}

func (g *barrierGate) count() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.barriers
}

type barrierStorage struct {
	FileStorage
	gate *barrierGate
}

func (s barrierStorage) OpenJournal() (persistence.Journal, error) {
	j, err := s.FileStorage.OpenJournal()
	return barrierJournal{Journal: j, gate: s.gate}, err
}

func fencedSystem(t *testing.T) (*System, *barrierGate, *atomic.Uint32) {
	t.Helper()
	o := testOptions(t.TempDir())
	gate := &barrierGate{}
	var standing atomic.Uint32
	standing.Store(uint32(Leased))
	o.Ownership = owner{standing: func() Standing { return Standing(standing.Load()) }}
	o.Storage = func(shard uint32) (Storage, error) {
		dir := filepath.Join(o.Dir, fmt.Sprintf("shard-%03d", shard))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		return barrierStorage{FileStorage: FileStorage{Dir: dir}, gate: gate}, nil
	}
	sys := startSystem(t, o)
	t.Cleanup(sys.Stop)
	if err := sys.Open(0); err != nil {
		t.Fatal(err)
	}
	return sys, gate, &standing
}

// A Fenced shard (its node cannot renew the claim) serves on: writes that append go as
// always (the journal fences them), and every answer that appends nothing — a read, a
// refusal decided from state, a retry's remembered outcome — waits for a barrier through
// the journal. Leased, nothing waits.
func TestFencedShardAnswersAfterABarrier(t *testing.T) {
	sys, gate, standing := fencedSystem(t)
	wantCode(t, do(t, sys, 0, createResource("c1", "seat")), contract.CodeOK)
	wantCode(t, do(t, sys, 0, reserve("r1", "h1", "seat", 60_000)), contract.CodeOK)
	get := ReadRequest{Verb: contract.VerbGetResource, Tenant: "t", ID: "seat"}
	wantCode(t, read(t, sys, 0, get), contract.CodeOK)
	wantCode(t, do(t, sys, 0, reserve("r2", "h2", "seat", 60_000)), contract.CodeResourceBusy)
	if n := gate.count(); n != 0 {
		t.Fatalf("%d barriers while leased", n)
	}

	standing.Store(uint32(Fenced))
	steps := []struct {
		what     string
		do       func() *Reply
		code     contract.Code
		barriers int
	}{
		{"a read", func() *Reply { return read(t, sys, 0, get) }, contract.CodeOK, 1},
		{"a retry's remembered outcome", func() *Reply { return do(t, sys, 0, reserve("r1", "h1", "seat", 60_000)) }, contract.CodeOK, 2},
		{"a refusal decided at admission", func() *Reply { return do(t, sys, 0, createResource("r1", "seat9")) }, contract.CodeOperationConflict, 3},
		// A domain failure is committed (the journal remembers it for retries): it appends.
		{"a committed refusal", func() *Reply { return do(t, sys, 0, reserve("r3", "h3", "seat", 60_000)) }, contract.CodeResourceBusy, 3},
		{"a write", func() *Reply { return do(t, sys, 0, createResource("c2", "seat2")) }, contract.CodeOK, 3},
	}
	for _, st := range steps {
		wantCode(t, st.do(), st.code)
		if n := gate.count(); n != st.barriers {
			t.Fatalf("after %s: %d barriers, want %d", st.what, n, st.barriers)
		}
	}
}

// Answers that come while a barrier is on its way wait for the next one: a barrier sent
// before a read proves nothing about the moment of the read. However many come, two
// barriers answer them all.
func TestFencedReadsShareBarriers(t *testing.T) {
	sys, gate, standing := fencedSystem(t)
	wantCode(t, do(t, sys, 0, createResource("c1", "seat")), contract.CodeOK)
	standing.Store(uint32(Fenced))
	hold := make(chan struct{})
	gate.mu.Lock()
	gate.hold = hold
	gate.mu.Unlock()
	replies := make(chan *Reply, 50)
	for range 50 {
		sys.Read(0, ReadRequest{Verb: contract.VerbGetResource, Tenant: "t", ID: "seat"}, func(r *Reply) { replies <- r })
	}
	time.Sleep(50 * time.Millisecond)
	if len(replies) != 0 {
		t.Fatalf("%d reads answered before their barrier was stored", len(replies))
	}
	gate.mu.Lock()
	gate.hold = nil
	gate.mu.Unlock()
	close(hold)
	for range 50 {
		select {
		case r := <-replies:
			wantCode(t, r, contract.CodeOK)
		case <-time.After(10 * time.Second):
			t.Fatal("reads not answered after the barrier")
		}
	}
	if n := gate.count(); n != 2 {
		t.Fatalf("%d barriers for 50 reads, want 2", n)
	}
}

// A barrier the journal refuses (another node appended: it owns the shard now) answers
// nothing from this shard's state: what waits is refused engine_halted, the shard halts
// (its node gives it up), and later requests are refused too.
func TestFencedBarrierRefusedHaltsTheShard(t *testing.T) {
	sys, gate, standing := fencedSystem(t)
	wantCode(t, do(t, sys, 0, createResource("c1", "seat")), contract.CodeOK)
	standing.Store(uint32(Fenced))
	gate.mu.Lock()
	gate.fail = true
	gate.mu.Unlock()
	wantCode(t, read(t, sys, 0, ReadRequest{Verb: contract.VerbGetResource, Tenant: "t", ID: "seat"}), contract.CodeEngineHalted)
	if !sys.Halted(0) {
		t.Fatal("shard not halted after a refused barrier")
	}
	wantCode(t, do(t, sys, 0, reserve("r1", "h1", "seat", 60_000)), contract.CodeEngineHalted)
	if err := sys.Barrier(0); err == nil {
		t.Fatal("Barrier of a halted shard: nil")
	}
}
