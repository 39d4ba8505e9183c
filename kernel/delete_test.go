package kernel

import (
	"fmt"
	"testing"

	"github.com/holdfast/holdfast/contract"
)

// A shard that creates, uses and deletes objects forever never fills its tables: each
// deleted slot is reused once the history window of the leases that ended before the
// delete has passed (here: a round takes longer than the window). 2,000 rounds through
// tables of 4 resources, 2 runs and 4 work shards would fill them hundreds of times over
// without the reuse.
func TestDeleteChurnStaysWithinBounds(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SlotMillis, cfg.HistoryWindowSlots, cfg.DedupeWindowSlots = 100, 5, 5
	cfg.MaxResources, cfg.MaxRuns, cfg.MaxWork = 4, 2, 4
	k, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out Output
	lsn, slot, op := uint64(0), uint64(1), 0
	apply := func(c *Command) *Output {
		lsn++
		op++
		c.Tenant, c.OperationID = "t", fmt.Sprintf("op%d", op)
		k.Apply(Entry{LSN: lsn, Slot: slot, Cmd: c}, &out)
		if out.Code != contract.CodeOK {
			t.Fatalf("lsn %d: %s: %s", lsn, c.Verb, out.Code)
		}
		return &out
	}
	for round := range 2000 {
		id := fmt.Sprintf("gpu%d", round%3)
		apply(&Command{Verb: contract.VerbCreateResource, ObjectID: id})
		l := apply(&Command{Verb: contract.VerbReserve, HolderID: "h", TTLMillis: 1000,
			Members: []Member{{Kind: MemberResource, ID: id}}}).Lease.LSN
		apply(&Command{Verb: contract.VerbRelease, HolderID: "h", LeaseLSN: l, Epoch: 1})
		apply(&Command{Verb: contract.VerbDeleteResource, ObjectID: id})
		apply(&Command{Verb: contract.VerbCreateRun, ObjectID: "crawl", Work: []WorkSpec{{Name: "a"}, {Name: "b", Start: "m"}}})
		apply(&Command{Verb: contract.VerbCancelRun, ObjectID: "crawl"})
		apply(&Command{Verb: contract.VerbDeleteRun, ObjectID: "crawl"})
		slot += cfg.HistoryWindowSlots + 1
		if round%100 == 0 {
			if err := k.CheckInvariants(); err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
	if st := k.Stats(); len(k.res) > cfg.MaxResources || len(k.runs) > cfg.MaxRuns || len(k.works) > cfg.MaxWork || st.Resources > cfg.MaxResources {
		t.Fatalf("tables: %d resources, %d runs, %d work shards (stats %+v)", len(k.res), len(k.runs), len(k.works), st)
	}
}
