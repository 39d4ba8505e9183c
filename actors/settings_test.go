package actors

import (
	"bytes"
	"path/filepath"
	"testing"
	"time"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/persistence"
)

// A shard started with other settings than its journal was written under keeps every
// acknowledged write: the lease of 50 minutes keeps its members and deadline, the objects
// created under a higher bound stay, a retry inside the old dedupe window still replays.
// The new admission limits judge new requests, the new shape is journaled at that start
// (once: a start with the same settings journals nothing), and the journal replays to
// the same state byte for byte whatever configuration replays it.
func TestRestartUnderOtherSettingsKeepsWhatWasAcknowledged(t *testing.T) {
	dir := t.TempDir()
	wide := testOptions(dir)
	wide.Kernel.MaxTTLMillis = 3_600_000
	wide.Kernel.MaxBundle = 8
	wide.Kernel.MaxResources = 10
	sys := startSystem(t, wide)
	for i, id := range []string{"n/a", "n/b", "n/c", "n/d", "n/e"} {
		wantCode(t, do(t, sys, 0, createResource("c"+string(rune('1'+i)), id)), contract.CodeOK)
	}
	bundle := &kernel.Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: "r1", HolderID: "h", TTLMillis: 50 * 60 * 1000,
		Members: []kernel.Member{{Kind: kernel.MemberResource, ID: "n/a"}, {Kind: kernel.MemberResource, ID: "n/b"}, {Kind: kernel.MemberResource, ID: "n/c"}}}
	granted := do(t, sys, 0, bundle)
	wantCode(t, granted, contract.CodeOK)
	sys.Stop()
	last := journalEnd(t, dir)

	narrow := testOptions(dir)
	narrow.Kernel.MaxTTLMillis = 10 * 60 * 1000
	narrow.Kernel.MaxBundle = 2
	narrow.Kernel.MaxResources = 2
	narrow.Kernel.HistoryWindowSlots, narrow.Kernel.DedupeWindowSlots = 1, 1
	sys = startSystem(t, narrow)
	r := read(t, sys, 0, ReadRequest{Verb: contract.VerbGetLease, Tenant: "t", Lease: granted.Lease.LSN})
	wantCode(t, r, contract.CodeOK)
	if r.Lease.State != kernel.LeaseReserved || r.Lease.DeadlineSlot != granted.Lease.DeadlineSlot || len(r.Lease.Members) != 3 {
		t.Fatalf("the 50-minute lease after a start with --max-ttl 10m: %+v, granted %+v", r.Lease, granted.Lease)
	}
	for _, id := range []string{"n/a", "n/d", "n/e"} {
		wantCode(t, read(t, sys, 0, ReadRequest{Verb: contract.VerbGetResource, Tenant: "t", ID: id}), contract.CodeOK)
	}
	again := do(t, sys, 0, bundle)
	if again.Code != contract.CodeOK || !again.FromRetryCache || again.LSN != granted.LSN {
		t.Fatalf("the reserve's retry, inside the window it was remembered for: %+v", again)
	}
	wantCode(t, do(t, sys, 0, reserve("r2", "h", "n/d", 50*60*1000)), contract.CodeTTLOutOfRange)
	three := &kernel.Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: "r3", HolderID: "h", TTLMillis: 1000,
		Members: []kernel.Member{{Kind: kernel.MemberResource, ID: "n/d"}, {Kind: kernel.MemberResource, ID: "n/e"}, {Kind: kernel.MemberResource, ID: "n/f"}}}
	wantCode(t, do(t, sys, 0, three), contract.CodeBundleTooLarge)
	wantCode(t, do(t, sys, 0, createResource("c9", "n/f")), contract.CodeResourceTableFull)
	sys.Stop()
	if got := journalEnd(t, dir); got != last+2 { // the configure entry and the refused create
		t.Fatalf("journal ends at %d, want %d: one configure entry at the start, one create", got, last+2)
	}

	// The same settings again: nothing new to journal.
	sys = startSystem(t, narrow)
	sys.Stop()
	if got := journalEnd(t, dir); got != last+2 {
		t.Fatalf("a start with the journal's settings journaled something: %d, was %d", got, last+2)
	}

	// The journal files alone decide: replayed under three configurations, one state.
	var want []byte
	for i, cfg := range []kernel.Config{wide.Kernel, narrow.Kernel, kernel.DefaultConfig()} {
		snap := replayFiles(t, dir, cfg)
		if i == 0 {
			want = snap
		} else if !bytes.Equal(snap, want) {
			t.Fatalf("the journal replayed under configuration %d gives another state", i)
		}
	}
}

// journalEnd is the last lsn of shard 0's journal files.
func journalEnd(t *testing.T, dir string) uint64 {
	t.Helper()
	j, err := persistence.OpenFileJournal(filepath.Join(dir, "shard-000"), persistence.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	last, _ := j.Last()
	return last
}

// replayFiles replays shard 0's journal files into a shard configured with cfg and
// returns its snapshot.
func replayFiles(t *testing.T, dir string, cfg kernel.Config) []byte {
	t.Helper()
	j, err := persistence.OpenFileJournal(filepath.Join(dir, "shard-000"), persistence.FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	k, err := kernel.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var c kernel.Command
	var out kernel.Output
	if err := j.Replay(1, func(r persistence.Record) error {
		if err := kernel.DecodeCommand(r.Payload, &c); err != nil {
			return err
		}
		k.Apply(kernel.Entry{LSN: r.LSN, Slot: r.Slot, Cmd: &c}, &out)
		c.Members = nil
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return k.Snapshot(nil)
}

// A journal written with one slot length refuses to be served with another: its slots,
// deadlines and windows count in it. (The data directory's layout refuses it first; this
// is the shard's own check, for a journal that reaches a process some other way.)
func TestShardRefusesAnotherSlotLength(t *testing.T) {
	dir := t.TempDir()
	o := testOptions(dir)
	sys := startSystem(t, o)
	wantCode(t, do(t, sys, 0, createResource("c1", "a")), contract.CodeOK)
	sys.Stop()
	o.Slot = 20 * time.Millisecond
	sys = startSystem(t, o)
	defer sys.Stop()
	if !sys.Halted(0) {
		t.Fatal("a shard served its journal with another slot length")
	}
	r := read(t, sys, 0, ReadRequest{Verb: contract.VerbGetResource, Tenant: "t", ID: "a"})
	wantCode(t, r, contract.CodeEngineHalted)
}
