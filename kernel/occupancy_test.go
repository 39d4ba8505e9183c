package kernel

import (
	"fmt"
	"testing"

	"github.com/holdfast/holdfast/contract"
)

// Fullest ranks ranges and pools by fill, exactly (no floats), ties by tenant and id, and
// returns at most n of each.
func TestFullest(t *testing.T) {
	k, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var out Output
	lsn := uint64(0)
	apply := func(c *Command) {
		lsn++
		c.OperationID = fmt.Sprint("op", lsn)
		k.Apply(Entry{LSN: lsn, Slot: 1, Cmd: c}, &out)
		if out.Code != contract.CodeOK {
			t.Fatalf("%s: %s", c.Verb, out.Code)
		}
	}
	for i, capacity := range []uint64{10, 4, 3, 1000} {
		apply(&Command{Verb: contract.VerbCreatePool, Tenant: "t", ObjectID: fmt.Sprint("p", i), Capacity: capacity})
	}
	apply(&Command{Verb: contract.VerbCreateRange, Tenant: "t", ObjectID: "r0", First: 1, Last: 10, Excluded: []Interval{{1, 5}}})
	apply(&Command{Verb: contract.VerbCreateRange, Tenant: "t", ObjectID: "r1", First: 0, Last: ^uint64(0)})
	apply(&Command{Verb: contract.VerbReserve, Tenant: "t", HolderID: "h", Activate: true, Members: []Member{{Kind: MemberPool, ID: "p0", Quantity: 5}}})
	apply(&Command{Verb: contract.VerbReserve, Tenant: "t", HolderID: "h", Activate: true, Members: []Member{{Kind: MemberPool, ID: "p1", Quantity: 2}}})
	apply(&Command{Verb: contract.VerbReserve, Tenant: "t", HolderID: "h", Activate: true, Members: []Member{{Kind: MemberPool, ID: "p2", Quantity: 3}}})
	apply(&Command{Verb: contract.VerbReserve, Tenant: "t", HolderID: "h", Activate: true, Members: []Member{{Kind: MemberRange, ID: "r0"}}})
	apply(&Command{Verb: contract.VerbReserve, Tenant: "t", HolderID: "h", Activate: true, Members: []Member{{Kind: MemberRange, ID: "r1"}}})
	ranges, pools := k.Fullest(3)
	if got := fmt.Sprint(pools); got != "[{t p2 3 3} {t p0 5 10} {t p1 2 4}]" {
		t.Errorf("pools: %s", got)
	}
	if got := fmt.Sprint(ranges); got != "[{t r0 1 5} {t r1 1 0}]" {
		t.Errorf("ranges: %s", got)
	}
	if r, p := k.Fullest(0); r != nil || p != nil {
		t.Error("Fullest(0)")
	}
}
