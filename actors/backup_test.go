package actors

import (
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// A copy's calls on a shard: a capture needs the copy's hold, another copy cannot hold
// meanwhile, a release says whether the hold lasted, and one that lapsed on its bound says
// it did not. While holding, a bundle's lease verb is still answered within its wait for
// the other shards (their acknowledgements are held back), the begin of a new bundle waits
// for the hold's end, and one-shard writes go on.
func TestBackupHold(t *testing.T) {
	o := bundleOptions(t.TempDir())
	o.Shards = 2
	sys := startSystem(t, o)
	defer sys.Stop()
	createOn(t, sys, "s0/a", "s1/b", "s0/c", "s1/d", "s0/e")
	granted := do(t, sys, 0, bundle("b1", "h", "s0/a", "s1/b"))
	wantCode(t, granted, contract.CodeOK)

	if _, _, _, err := sys.CaptureHeld(0, "c1"); err == nil {
		t.Fatal("a capture without a hold")
	}
	until := time.Now().Add(5 * time.Second)
	for k := range uint32(2) {
		if err := sys.HoldBundles(k, "c1", until); err != nil {
			t.Fatal(err)
		}
	}
	if err := sys.HoldBundles(0, "c2", until); err == nil || !strings.Contains(err.Error(), "another copy") {
		t.Fatalf("a second copy's hold: %v", err)
	}
	encode, lsn, _, err := sys.CaptureHeld(0, "c1")
	if err != nil || lsn == 0 {
		t.Fatalf("capture: %v at %d", err, lsn)
	}
	cfg := kernel.DefaultConfig()
	if _, err := kernel.Restore(cfg, encode()); err != nil {
		t.Fatalf("the captured state does not restore: %v", err)
	}

	start := time.Now()
	wantCode(t, do(t, sys, 0, release("r1", "h", granted.Lease.LSN, 1)), contract.CodeOK)
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("a bundle lease's release waited %v during a hold", took)
	}
	wantCode(t, do(t, sys, 0, reserve("one", "h", "s0/e", 60_000)), contract.CodeOK)
	begun := make(chan *Reply, 1)
	sys.Write(0, bundle("b2", "h", "s0/c", "s1/d"), func(r *Reply) { begun <- r })
	select {
	case r := <-begun:
		t.Fatalf("a bundle begun during the hold answered %s", r.Code)
	case <-time.After(200 * time.Millisecond):
	}
	for k := range uint32(2) {
		if whole, err := sys.ReleaseBundles(k, "c1"); err != nil || !whole {
			t.Fatalf("release of shard %d: whole %v, %v", k, whole, err)
		}
	}
	select {
	case r := <-begun:
		wantCode(t, r, contract.CodeOK)
	case <-time.After(10 * time.Second):
		t.Fatal("the bundle begun during the hold never ran")
	}
	if got := settled(t, sys, "s0/a", "s1/b"); got.LSN != 0 {
		t.Fatalf("the released bundle's members are held by %+v after the hold", got)
	}

	if err := sys.HoldBundles(1, "c3", time.Now().Add(50*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // past its bound: the shard ends it on a tick
	if whole, _ := sys.ReleaseBundles(1, "c3"); whole {
		t.Fatal("a hold that lapsed says it lasted")
	}
}
