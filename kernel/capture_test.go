package kernel

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/holdfast/holdfast/contract"
)

// A capture encodes the state it was taken at, also when the shard goes on meanwhile —
// appending to the queues, retiring from them past chunk boundaries, ending and retiring
// leases — and when the encoding runs on another goroutine (run with -race).
func TestCaptureWhileApplying(t *testing.T) {
	cfg := DefaultConfig()
	cfg.DedupeWindowSlots, cfg.HistoryWindowSlots = 3, 3
	s := newBenchShard(t, cfg)
	s.slotEvery = 500
	create := &Command{Verb: contract.VerbCreateResource, Tenant: "t"}
	for i := 0; i < 64; i++ {
		create.OperationID, create.ObjectID = fmt.Sprint("c", i), fmt.Sprint("n/r", i)
		s.apply(t, create)
	}
	reserve := &Command{Verb: contract.VerbReserve, Tenant: "t", TTLMillis: 1000, Members: []Member{{Kind: MemberResource}, {Kind: MemberResource}}}
	release := &Command{Verb: contract.VerbRelease, Tenant: "t", Epoch: 1}
	cycle := func(i int) {
		reserve.OperationID, reserve.HolderID = fmt.Sprint("r-", i), fmt.Sprint("h", i%7)
		reserve.Members[0].ID, reserve.Members[1].ID = fmt.Sprint("n/r", i%32), fmt.Sprint("n/r", 32+i%32)
		release.LeaseLSN = s.apply(t, reserve).Lease.LSN
		release.OperationID, release.HolderID = fmt.Sprint("x-", i), reserve.HolderID
		s.apply(t, release)
	}
	for i := 0; i < 3000; i++ {
		cycle(i)
	}
	want := s.k.Snapshot(nil)
	c := s.k.Capture(nil)
	done := make(chan []byte)
	go func() { done <- c.AppendTo(make([]byte, 0, c.Size())) }()
	for i := 3000; i < 9000; i++ { // several windows: every record of the capture retires
		cycle(i)
	}
	if got := <-done; !bytes.Equal(got, want) {
		t.Fatalf("a capture encoded while the shard went on differs from the snapshot at the capture (%d vs %d bytes)", len(got), len(want))
	}
	if got := c.AppendTo(nil); !bytes.Equal(got, want) {
		t.Fatalf("a capture encoded after the shard went on differs from the snapshot at the capture")
	}
	if _, err := Restore(cfg, want); err != nil {
		t.Fatal(err)
	}
}
