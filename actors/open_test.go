package actors

import (
	"sync/atomic"
	"testing"

	"github.com/holdfast/holdfast/contract"
)

// A lazy system serves only the shards opened on it; a closed shard keeps its state in
// its storage and a later Open recovers it, as a cluster node hands shards on.
func TestLazySystemServesOpenedShardsOnly(t *testing.T) {
	o := testOptions(t.TempDir())
	o.Shards = 2
	o.Lazy = true
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
	o.Serving = func(uint32) bool { return serving.Load() }
	sys := startSystem(t, o)
	wantCode(t, do(t, sys, 0, createResource("c1", "seat")), contract.CodeOK)
	serving.Store(false)
	wantCode(t, do(t, sys, 0, createResource("c2", "seat2")), contract.CodeEngineHalted)
	serving.Store(true)
	wantCode(t, do(t, sys, 0, createResource("c2", "seat2")), contract.CodeOK)
}
