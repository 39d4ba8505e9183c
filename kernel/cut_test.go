package kernel

import (
	"testing"

	"github.com/holdfast/holdfast/contract"
)

// CheckCut tells the cuts a copy may hold from those that tear a bundle: states of a home
// and its participant taken at every step of one bundle's life, in every pairing.
func TestCheckCutFindsATornBundle(t *testing.T) {
	home, part := newBShard(t, 0), newBShard(t, 1)
	home.create("a")
	part.create("b")
	state := func(s *bshard) *Kernel {
		cfg := DefaultConfig()
		cfg.Shard = s.k.Shard()
		k, err := Restore(cfg, s.k.Snapshot(nil))
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	homes := []*Kernel{state(home)} // before the begin
	parts := []*Kernel{state(part)} // before the prepare
	out := home.apply(begin("op1", []uint32{0, 1}, "a", "b"))
	txn := TxnRef{Shard: 0, LSN: out.Lease.LSN}
	homes = append(homes, state(home)) // begun
	part.apply(&Command{Verb: contract.VerbPrepare, Tenant: "t", HolderID: "h", Members: resources("b"), Txn: txn, Priority: 7})
	parts = append(parts, state(part)) // prepared
	dec := home.apply(&Command{Verb: contract.VerbDecide, Txn: txn, Commit: true, Members: resources("a", "b")})
	homes = append(homes, state(home)) // committed
	part.apply(&Command{Verb: contract.VerbMirror, Txn: txn, State: LeaseReserved, Deadline: dec.Lease.DeadlineSlot, LeaseLSN: dec.Lease.LSN})
	parts = append(parts, state(part)) // the commit mirrored
	home.apply(&Command{Verb: contract.VerbRelease, Tenant: "t", OperationID: "rel", HolderID: "h", LeaseLSN: dec.Lease.LSN, Epoch: 1})
	homes = append(homes, state(home)) // released
	part.apply(&Command{Verb: contract.VerbMirror, Txn: txn, State: LeaseReleased, LeaseLSN: dec.Lease.LSN})
	parts = append(parts, state(part)) // the release mirrored

	names := []string{"before", "begun/prepared", "committed", "released"}
	torn := map[[2]int]bool{
		{2, 0}: true, // the home's lease is live, the participant never prepared
		{0, 2}: true, // a committed part, the home not begun
		{1, 2}: true, // a committed part, the home undecided
		{2, 3}: true, // the home's lease is live, the participant freed it at a later release
	}
	for h := range homes {
		for p := range parts {
			err := CheckCut([]*Kernel{homes[h], parts[p]})
			if (err != nil) != torn[[2]int{h, p}] {
				t.Errorf("home %s, participant %s: %v, torn %v", names[h], names[p], err, torn[[2]int{h, p}])
			}
		}
	}
}
