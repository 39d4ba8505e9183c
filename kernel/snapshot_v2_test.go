package kernel

import (
	"bytes"
	"os"
	"testing"

	"github.com/holdfast/holdfast/contract"
)

// A snapshot written by format 2 (ended leases among the live ones, one queue of
// outcomes with verb and object) restores into the compact tables with the same answers:
// testdata/snapshots/format2.bin was written by the format-2 kernel after creates, a
// three-member reserve activated, revoked and reclaimed, a busy reserve, a reserve
// released, and a reserve renewed and expired.
func TestRestoreFormat2(t *testing.T) {
	b, err := os.ReadFile("testdata/snapshots/format2.bin")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Shard = 1
	cfg.HistoryWindowSlots, cfg.DedupeWindowSlots = 50, 100
	k, err := Restore(cfg, b)
	if err != nil {
		t.Fatal(err)
	}
	var out Output
	for _, want := range []struct {
		lsn  uint64
		view string
	}{
		{5, "lease{1-5 t1/h1 revoked e2 created=5 deadline=0 released=10 retire=56 [1:n/a q0 v0 2:n/mem q3 v0 3:n/vx q0 v1]}"},
		{8, "lease{1-8 t1/h2 released e2 created=8 deadline=0 released=11 retire=57 [1:n/b q0 v0]}"},
	} {
		k.GetLease("t1", want.lsn, 20, &out)
		if got := mFmtLease(&out.Lease); out.Code != contract.CodeOK || got != want.view {
			t.Errorf("lease %d: %s %s, want %s", want.lsn, out.Code, got, want.view)
		}
	}
	k.GetLease("t1", 12, 20, &out)
	if out.Code != contract.CodeOK || out.Lease.State != LeaseExpired || out.Lease.ReleasedLSN != 14 || out.Lease.RetireAfterSlot != 70 {
		t.Errorf("lease 12: %s %s", out.Code, mFmtLease(&out.Lease))
	}
	res := []Member{{Kind: MemberResource, ID: "n/a"}}
	for _, r := range []struct {
		c     *Command
		code  Code
		lsn   uint64
		epoch uint64
	}{
		{&Command{Verb: contract.VerbReserve, Tenant: "t1", OperationID: "r1", HolderID: "h1", Members: []Member{{Kind: MemberResource, ID: "n/a"}, {Kind: MemberPool, ID: "n/mem", Quantity: 3}, {Kind: MemberRange, ID: "n/vx"}}, TTLMillis: 1000}, contract.CodeOK, 5, 1},
		{&Command{Verb: contract.VerbReserve, Tenant: "t1", OperationID: "r2", HolderID: "h2", Members: res, TTLMillis: 1000}, contract.CodeResourceBusy, 6, 0},
		{&Command{Verb: contract.VerbRevoke, Tenant: "t1", OperationID: "v1", LeaseLSN: 5}, contract.CodeOK, 9, 2},
		{&Command{Verb: contract.VerbRenew, Tenant: "t1", OperationID: "n1", HolderID: "h3", LeaseLSN: 12, Epoch: 1, TTLMillis: 500}, contract.CodeOK, 13, 1},
		{&Command{Verb: contract.VerbCreatePool, Tenant: "t1", OperationID: "c3", ObjectID: "n/mem", Capacity: 10}, contract.CodeOK, 3, 0},
	} {
		if !k.LookupOperation(r.c, 20, &out) || out.Code != r.code || out.LSN != r.lsn || out.Lease.Epoch != r.epoch || !out.FromRetryCache {
			t.Errorf("retry of %s: %s", mFmtCmd(r.c), mFmtOut(&out))
		}
	}
	// Written again in format 3, it restores to the same bytes.
	snap := k.Snapshot(nil)
	k2, err := Restore(cfg, snap)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k2.Snapshot(nil), snap) {
		t.Errorf("format 3 snapshot of a restored format 2 state does not restore to itself")
	}
}
