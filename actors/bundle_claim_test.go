package actors

import (
	"sync"
	"testing"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// A work claim that brings a resource of another shard along, in one process: granted
// with its work shard and the resource under one lease, read consistently while it is
// decided, and ended by its work verb on every shard before the answer.
func TestBundleClaimBringsResourcesAlong(t *testing.T) {
	sys := startSystem(t, bundleOptions(t.TempDir()))
	defer sys.Stop()
	createOn(t, sys, "s1/gpu", "s2/gpu")
	wantCode(t, do(t, sys, 0, &kernel.Command{Verb: contract.VerbCreateRun, Tenant: "t", OperationID: "run", ObjectID: "s0",
		Work: []kernel.WorkSpec{{Name: "a"}, {Name: "b"}}}), contract.CodeOK)
	claim := func(op, gpu string) *kernel.Command {
		return &kernel.Command{Verb: contract.VerbReserve, Tenant: "t", OperationID: op, HolderID: "w", TTLMillis: 600_000,
			Members: []kernel.Member{{Kind: kernel.MemberWork, ID: "s0"}, {Kind: kernel.MemberResource, ID: gpu}},
			Shards:  []uint32{0, shardOfID(gpu)}}
	}

	// Two claims at once, each with a GPU of its own: both granted, each a work shard of
	// its own; readers of the run meanwhile never see a claim that is not granted.
	var wg sync.WaitGroup
	replies := make([]*Reply, 2)
	for i, gpu := range []string{"s1/gpu", "s2/gpu"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = do(t, sys, 0, claim("c"+gpu, gpu))
		}()
	}
	for range 20 {
		r := read(t, sys, 0, ReadRequest{Verb: contract.VerbGetRun, Tenant: "t", ID: "s0"})
		if r.Code != contract.CodeOK {
			t.Fatalf("run.get while claims are decided: %s", r.Code)
		}
	}
	wg.Wait()
	names := map[string]bool{}
	for _, r := range replies {
		wantCode(t, r, contract.CodeOK)
		if !r.HasWork || r.Work.LeaseLSN != r.Lease.LSN || len(r.Lease.Members) != 2 {
			t.Fatalf("claim across shards: work %+v lease %d members %d", r.Work, r.Lease.LSN, len(r.Lease.Members))
		}
		names[r.Work.Name] = true
	}
	if !names["a"] || !names["b"] {
		t.Fatalf("two claims took %v, want a and b", names)
	}
	r := read(t, sys, 0, ReadRequest{Verb: contract.VerbGetRun, Tenant: "t", ID: "s0"})
	if r.Run.Claimed != 2 {
		t.Fatalf("run after two claims: %+v", r.Run)
	}

	// The claim ends with its work shard; the answer comes once the GPU is free too.
	first := replies[0]
	done := do(t, sys, 0, &kernel.Command{Verb: contract.VerbCompleteWork, Tenant: "t", OperationID: "done", HolderID: "w",
		LeaseLSN: first.Lease.LSN, Epoch: first.Lease.Epoch})
	wantCode(t, done, contract.CodeOK)
	if code, l := holderOf(t, sys, "s1/gpu"); code != contract.CodeOK || l != (kernel.TxnRef{}) {
		t.Fatalf("the claim's GPU after work.complete was answered: held by %+v (%s)", l, code)
	}
	if code, l := holderOf(t, sys, "s2/gpu"); code != contract.CodeOK || l.LSN != replies[1].Lease.LSN {
		t.Fatalf("the other claim's GPU: held by %+v (%s)", l, code)
	}
}
