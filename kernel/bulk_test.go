package kernel

import (
	"fmt"
	"testing"

	"github.com/holdfast/holdfast/contract"
)

// bulkShard is a shard with n active leases under owner_uuid=vm1 held by "ipam", then
// reserved ones of another holder under the same label, each its own range value.
func bulkShard(t *testing.T, active, othersReserved int) (*Kernel, func(c *Command) *Output) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.MaxLeases, cfg.MaxRangeValues = 20000, 20000
	k, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var out Output
	lsn, op := uint64(0), 0
	apply := func(c *Command) *Output {
		t.Helper()
		lsn++
		op++
		c.Tenant, c.OperationID = "t", fmt.Sprintf("op%d", op)
		k.Apply(Entry{LSN: lsn, Slot: 1, Cmd: c}, &out)
		if msg := eventBoundBroken(c, &out); msg != "" {
			t.Fatal(msg)
		}
		if out.Code != contract.CodeOK {
			t.Fatalf("lsn %d: %s: %s", lsn, c.Verb, out.Code)
		}
		return &out
	}
	apply(&Command{Verb: contract.VerbCreateRange, ObjectID: "ports", First: 1, Last: 1 << 20})
	label := []Label{{Key: "owner_uuid", Value: "vm1"}}
	for range active {
		apply(&Command{Verb: contract.VerbReserve, HolderID: "ipam", Activate: true, Labels: label,
			Members: []Member{{Kind: MemberRange, ID: "ports"}}})
	}
	for range othersReserved {
		apply(&Command{Verb: contract.VerbReserve, HolderID: "other", TTLMillis: 60000, Labels: label,
			Members: []Member{{Kind: MemberRange, ID: "ports"}}})
	}
	return k, apply
}

// A bulk verb reaches every lease it may act on in ⌈n / limit⌉ calls, whatever it skips:
// an operator's revoke_all without reclaim leaves the leases it moved to revoking (and
// the reserved ones) behind it, and used to count them against its scan bound — 300
// leases with limit 10 stuck after 104 with "count 0, more true" for ever.
func TestBulkVerbsAlwaysProgress(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		active, reserved, limit int
		reclaim                 bool
		maxCalls                int
	}{
		{"revoke_all 300 by 10", 300, 0, 10, false, 30},
		{"revoke_all 10000 by 100", 10000, 0, 100, false, 100},
		{"revoke_all reclaim 10000 by 100 behind 5000 reserved", 10000, 5000, 100, true, 100},
		{"revoke_all 10000 by 100 behind 5000 reserved", 10000, 5000, 100, false, 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, apply := bulkShard(t, tc.active, tc.reserved)
			moved, calls := 0, 0
			for more := true; more; calls++ {
				if calls > tc.maxCalls {
					t.Fatalf("%d calls moved %d of %d leases and still say more", calls, moved, tc.active)
				}
				o := apply(&Command{Verb: contract.VerbRevokeAll, Label: Label{Key: "owner_uuid", Value: "vm1"},
					Limit: uint32(tc.limit), Reclaim: tc.reclaim})
				if o.Count == 0 && o.More {
					t.Fatalf("call %d: count 0, more true", calls+1)
				}
				moved += o.Count
				more = o.More
			}
			if moved != tc.active || calls != (tc.active+tc.limit-1)/tc.limit {
				t.Fatalf("%d calls moved %d leases, want %d calls moving %d", calls, moved, (tc.active+tc.limit-1)/tc.limit, tc.active)
			}
			want := LeaseRevoking
			if tc.reclaim {
				want = 0 // none left live but the reserved ones
			}
			if got := k.live[LeaseActive]; got != 0 {
				t.Fatalf("%d leases still active", got)
			}
			if want != 0 && k.live[want] != tc.active {
				t.Fatalf("%d leases revoking, want %d", k.live[want], tc.active)
			}
			if k.live[LeaseReserved] != tc.reserved {
				t.Fatalf("%d reserved leases left, want %d: revoke_all leaves them to expire", k.live[LeaseReserved], tc.reserved)
			}
			if err := k.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// release_all by a holder with nothing under the label is done on its first call, however
// many leases of other holders carry it; the holder's own go in ⌈n / limit⌉ calls.
func TestReleaseAllMeetsOnlyTheHoldersLeases(t *testing.T) {
	k, apply := bulkShard(t, 1000, 1000)
	sel := Label{Key: "owner_uuid", Value: "vm1"}
	if o := apply(&Command{Verb: contract.VerbReleaseAll, HolderID: "stranger", Label: sel, Limit: 100}); o.Count != 0 || o.More {
		t.Fatalf("a holder with nothing under the label: count %d, more %v", o.Count, o.More)
	}
	calls, released := 0, 0
	for more := true; more; calls++ {
		o := apply(&Command{Verb: contract.VerbReleaseAll, HolderID: "other", Label: sel, Limit: 100})
		released += o.Count
		more = o.More
		if calls > 10 {
			t.Fatalf("%d calls released %d", calls, released)
		}
	}
	if calls != 10 || released != 1000 {
		t.Fatalf("%d calls released %d, want 10 releasing 1000", calls, released)
	}
	if k.live[LeaseActive] != 1000 || k.live[LeaseReserved] != 0 {
		t.Fatalf("live %v: ipam's 1000 active leases must stay, other's reserved ones go", k.live)
	}
	if err := k.CheckInvariants(); err != nil {
		t.Fatal(err)
	}
}

// A filtered listing never stalls either: a page that skips entries ends short with the
// position to go on at, so a walk over n candidates of which m match takes at most
// ⌈m / limit⌉ + ⌈n / ListScan⌉ + 1 pages.
func TestFilteredListingsProgress(t *testing.T) {
	k, _ := bulkShard(t, 3000, 2000)
	for _, q := range []ListQuery{
		{Verb: contract.VerbListLeases, ID: "ipam", HasLabel: true, Label: Label{Key: "owner_uuid", Value: "nobody"}, Limit: 10},
		{Verb: contract.VerbListLeases, ID: "other", State: contract.StateActive, Limit: 10},
		{Verb: contract.VerbListLeases, HasLabel: true, Label: Label{Key: "owner_uuid", Value: "vm1"}, State: contract.StateReserved, Limit: 100},
	} {
		q.Tenant = "t"
		pages, seen := 0, 0
		for {
			var p ListPage
			k.List(&q, &p)
			pages++
			seen += len(p.Leases)
			if !p.More {
				break
			}
			if p.Next <= q.From && pages > 1 {
				t.Fatalf("%+v: page %d does not move (next %d)", q, pages, p.Next)
			}
			q.From = p.Next
			if pages > 2000/q.Limit+5000/ListScan(q.Limit)+3 {
				t.Fatalf("%+v: %d pages and not done", q, pages)
			}
		}
		want := 0
		if q.State == contract.StateReserved {
			want = 2000
		}
		if seen != want {
			t.Fatalf("%+v: %d leases listed, want %d", q, seen, want)
		}
	}
}

// range.resize's kept bounds travel in journal format 5; a resize that gives both bounds
// keeps format 4, byte for byte, so journals written before decode as they always did.
func TestResizeKeepsTravelInFormat5(t *testing.T) {
	both := &Command{Verb: contract.VerbResizeRange, Tenant: "t", OperationID: "z", ObjectID: "ports", First: 30000, Last: 40000}
	if enc := roundTrip(t, both); enc[0] != commandFormatAllocators {
		t.Fatalf("a resize with both bounds in format %d", enc[0])
	}
	for _, c := range []*Command{
		{Verb: contract.VerbResizeRange, Tenant: "t", OperationID: "z", ObjectID: "ports", Last: 40000, KeepFirst: true},
		{Verb: contract.VerbResizeRange, Tenant: "t", OperationID: "z", ObjectID: "ports", First: 1, KeepLast: true},
		{Verb: contract.VerbResizeRange, Tenant: "t", OperationID: "z", ObjectID: "ports", KeepFirst: true, KeepLast: true,
			HasBand: true, Band: Interval{First: 3, Last: 4}},
	} {
		if enc := roundTrip(t, c); enc[0] != commandFormatKeeps {
			t.Fatalf("%+v in format %d", c, enc[0])
		}
	}
	// Format 5 is only a resize's, with a bound kept.
	bad := (&Command{Verb: contract.VerbResizeRange, Tenant: "t", OperationID: "z", ObjectID: "ports", KeepFirst: true}).AppendBinary(nil)
	var d Command
	bad[len(bad)-1] = 0
	if DecodeCommand(bad, &d) == nil {
		t.Fatal("format 5 with nothing kept decoded")
	}
}

// work.list with a status nothing has walks the run's manifest in pages that each move
// past what they looked at, as lease.list's do.
func TestFilteredWorkListingProgresses(t *testing.T) {
	k, apply := bulkShard(t, 0, 0)
	for i := range 3 {
		c := &Command{Verb: contract.VerbCreateRun, ObjectID: "crawl"}
		if i > 0 {
			c.Verb = contract.VerbRegisterRun
		}
		for j := range 200 {
			c.Work = append(c.Work, WorkSpec{Name: fmt.Sprintf("w%03d-%03d", i, j)})
		}
		apply(c)
	}
	q := ListQuery{Verb: contract.VerbListWork, Tenant: "t", ID: "crawl", State: contract.WorkParked, Limit: 10}
	pages := 0
	for {
		var p ListPage
		k.List(&q, &p)
		pages++
		if p.Code != contract.CodeOK || len(p.Works) != 0 {
			t.Fatalf("page %d: %s, %d parked", pages, p.Code, len(p.Works))
		}
		if !p.More {
			break
		}
		if p.Next <= q.From {
			t.Fatalf("page %d does not move (next %d after %d)", pages, p.Next, q.From)
		}
		q.From = p.Next
	}
	if want := 600/ListScan(10) + 1; pages > want {
		t.Fatalf("%d pages over 600 work shards, want at most %d", pages, want)
	}
}

// Expiry sweeps progress too: the shard commits at most perTick expiries a tick, each
// takes its lease out of the index, so n due leases are all expired within ⌈n / perTick⌉
// ticks, earliest deadline first, whatever else is in the index.
func TestExpirySweepsProgress(t *testing.T) {
	k, _ := bulkShard(t, 0, 1000) // 1000 reserved leases, deadline a minute on
	var out Output
	lsn, perTick, ticks := k.LastLSN(), 64, 0
	slot := uint64(1) + 600 // past every deadline (60 s at 100 ms slots)
	for {
		due := k.DueExpirations(slot, perTick, nil)
		if len(due) == 0 {
			break
		}
		ticks++
		for _, d := range due {
			lsn++
			k.Apply(Entry{LSN: lsn, Slot: slot, Cmd: &Command{Verb: contract.VerbExpire, Tenant: d.Tenant, LeaseLSN: d.LeaseLSN, Deadline: d.Deadline}}, &out)
			if out.Code != contract.CodeOK {
				t.Fatalf("expire %d: %s", d.LeaseLSN, out.Code)
			}
		}
		if ticks > (1000+perTick-1)/perTick {
			t.Fatalf("%d ticks and leases still due", ticks)
		}
	}
	if k.live[LeaseReserved] != 0 {
		t.Fatalf("%d reserved leases left", k.live[LeaseReserved])
	}
}
