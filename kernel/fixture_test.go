package kernel

import (
	"fmt"
	"strings"
	"testing"

	"github.com/holdfast/holdfast/contract"
)

// fixtureState builds a shard that uses every table: objects, leases with labels over
// resources, pools and ranges (one released, one expired, one revoking, one consumed),
// an exclusion and a band, an import, a run with claimed, completed and split work.
func fixtureState(t testing.TB) *Kernel {
	cfg := DefaultConfig()
	cfg.SlotMillis, cfg.HistoryWindowSlots, cfg.DedupeWindowSlots = 100, 1000, 1000
	k, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out Output
	lsn, slot, op := uint64(0), uint64(17_958_000_000), 0
	apply := func(c *Command) *Output {
		lsn++
		op++
		c.Tenant, c.OperationID = "t", fmt.Sprintf("op%d", op)
		Normalize(&k.shape, c)
		k.Apply(Entry{LSN: lsn, Slot: slot, Cmd: c}, &out)
		if out.Code != contract.CodeOK {
			t.Fatalf("lsn %d %s: %s", lsn, c.Verb, out.Code)
		}
		return &out
	}
	owner := []Label{{Key: "owner_type", Value: "instance"}, {Key: "owner_uuid", Value: "vm-1"}}
	apply(&Command{Verb: contract.VerbCreateResource, ObjectID: "n1/gpu0"})
	apply(&Command{Verb: contract.VerbCreateResource, ObjectID: "n1/gpu1"})
	apply(&Command{Verb: contract.VerbCreatePool, ObjectID: "n1/mem", Capacity: 80})
	apply(&Command{Verb: contract.VerbCreateRange, ObjectID: "n1/ports", First: 30000, Last: 30100, Strategy: StrategyLeastRecentlyFreed,
		Excluded: []Interval{{First: 30022, Last: 30022}}, HasBand: true, Band: Interval{First: 30000, Last: 30009}, Format: "port"})
	apply(&Command{Verb: contract.VerbReserve, HolderID: "sched", Activate: true, Labels: owner,
		Members: []Member{{Kind: MemberResource, ID: "n1/gpu0"}, {Kind: MemberPool, ID: "n1/mem", Quantity: 16}, {Kind: MemberRange, ID: "n1/ports"}}})
	r := apply(&Command{Verb: contract.VerbReserve, HolderID: "sched", TTLMillis: 60000,
		Members: []Member{{Kind: MemberRange, ID: "n1/ports"}}}).Lease.LSN
	apply(&Command{Verb: contract.VerbRelease, HolderID: "sched", LeaseLSN: r, Epoch: 1})
	rv := apply(&Command{Verb: contract.VerbReserve, HolderID: "ops", Activate: true, Labels: owner,
		Members: []Member{{Kind: MemberResource, ID: "n1/gpu1"}}}).Lease.LSN
	apply(&Command{Verb: contract.VerbRevoke, LeaseLSN: rv})
	c := apply(&Command{Verb: contract.VerbReserve, HolderID: "shop", TTLMillis: 60000,
		Members: []Member{{Kind: MemberPool, ID: "n1/mem", Quantity: 4}}}).Lease.LSN
	apply(&Command{Verb: contract.VerbConsume, HolderID: "shop", LeaseLSN: c, Epoch: 1})
	apply(&Command{Verb: contract.VerbReserve, HolderID: "short", TTLMillis: 200,
		Members: []Member{{Kind: MemberPool, ID: "n1/mem", Quantity: 2}}})
	apply(&Command{Verb: contract.VerbCreateRun, ObjectID: "crawl", Work: []WorkSpec{{Name: "a", End: "m"}, {Name: "b", Start: "m"}}})
	w := apply(&Command{Verb: contract.VerbReserve, HolderID: "w1", TTLMillis: 60000,
		Members: []Member{{Kind: MemberWork, ID: "crawl", Name: "a"}}}).Lease.LSN
	apply(&Command{Verb: contract.VerbCompleteWork, HolderID: "w1", LeaseLSN: w, Epoch: 1})
	w2 := apply(&Command{Verb: contract.VerbReserve, HolderID: "w2", TTLMillis: 60000,
		Members: []Member{{Kind: MemberWork, ID: "crawl", Name: "b"}}}).Lease.LSN
	apply(&Command{Verb: contract.VerbCheckpoint, HolderID: "w2", LeaseLSN: w2, Epoch: 1, CursorKey: "p", CursorToken: "tok", HasCursor: true})
	slot += 5 // past "short"'s deadline: its expiry
	for _, d := range k.DueExpirations(slot, 10, nil) {
		apply(&Command{Verb: contract.VerbExpire, LeaseLSN: d.LeaseLSN, Deadline: d.Deadline})
	}
	return k
}

// fixtureDump is what a shard answers about everything fixtureState made, as text.
func fixtureDump(k *Kernel) string {
	var b strings.Builder
	var out Output
	lease := func(l *LeaseView) {
		fmt.Fprintf(&b, "  lease %d holder=%s state=%s epoch=%d deadline=%d released=%d members=", l.LSN, l.HolderID, l.State, l.Epoch, l.DeadlineSlot, l.ReleasedLSN)
		for _, m := range l.Members {
			fmt.Fprintf(&b, "[%d %s q%d v%d %s]", m.Kind, m.ID, m.Quantity, m.Value, m.Name)
		}
		for _, lb := range l.Labels {
			fmt.Fprintf(&b, " %s=%s", lb.Key, lb.Value)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "last lsn %d\n", k.LastLSN())
	for lsn := uint64(1); lsn <= k.LastLSN(); lsn++ {
		k.GetLease("t", lsn, 17_958_000_010, &out)
		if out.Code == contract.CodeOK {
			lease(&out.Lease)
		}
	}
	for _, id := range []string{"n1/gpu0", "n1/gpu1"} {
		k.GetResource("t", id, &out)
		fmt.Fprintf(&b, "resource %s: %s %s lease=%d version=%d\n", id, out.Code, out.Resource.State, out.Resource.LeaseLSN, out.Resource.Version)
	}
	k.GetPool("t", "n1/mem", &out)
	p := out.Pool
	fmt.Fprintf(&b, "pool: %s cap=%d reserved=%d active=%d consumed=%d available=%d\n", out.Code, p.Capacity, p.Reserved, p.Active, p.Consumed, p.Available)
	k.GetRange("t", "n1/ports", &out)
	g := out.Range
	fmt.Fprintf(&b, "range: %s [%d,%d] %s allocated=%d free=%d excluded=%d band=%v format=%s\n", out.Code, g.First, g.Last, g.Strategy, g.Allocated, g.Free, g.Excluded, g.Band, g.Format)
	for v := uint64(30000); v <= 30012; v++ {
		state := k.LookupValue("t", "n1/ports", v, &out)
		fmt.Fprintf(&b, "value %d: %s lease=%d\n", v, state, out.Lease.LSN)
	}
	k.GetRun("t", "crawl", &out)
	fmt.Fprintf(&b, "run: %s %s work=%d done=%d claimed=%d\n", out.Code, out.Run.Status, out.Run.Work, out.Run.Done, out.Run.Claimed)
	for _, n := range []string{"a", "b"} {
		k.GetWork("t", "crawl", n, &out)
		w := out.Work
		fmt.Fprintf(&b, "work %s: %s %s lease=%d cursor=%v %q\n", n, out.Code, w.Status, w.LeaseLSN, w.HasCursor, w.CursorKey)
	}
	var pg ListPage
	k.List(&ListQuery{Verb: contract.VerbListLeases, Tenant: "t", HasLabel: true, Label: Label{Key: "owner_uuid", Value: "vm-1"}, Limit: 100}, &pg)
	fmt.Fprintf(&b, "by label: %s %d leases\n", pg.Code, len(pg.Leases))
	return b.String()
}
