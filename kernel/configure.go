package kernel

import (
	"fmt"

	"github.com/holdfast/holdfast/contract"
)

// CheckConfigure says why a configure entry with shape s would be refused by Apply, or
// nil: the shape must pass Shape.Validate, and a journal's slot length never changes
// (its entries' slots, deadlines and windows count in it). The runtime asks before it
// journals one, so Apply's refusal is only a guard against a journal that was tampered
// with.
func (k *Kernel) CheckConfigure(s Shape) error {
	return k.checkConfigure(s, k.lastLSN > 0)
}

// checkConfigure is CheckConfigure; applied says whether entries were applied before
// (their slots count in the shape in force, even one New gave).
func (k *Kernel) checkConfigure(s Shape, applied bool) error {
	if err := s.Validate(); err != nil {
		return err
	}
	if s.SlotMillis != k.shape.SlotMillis && (k.configured || applied) {
		return fmt.Errorf("the slot length of a journal cannot change: it was written with %dms, not %dms", k.shape.SlotMillis, s.SlotMillis)
	}
	return nil
}

// configure applies a configure entry: its shape is in force from this lsn on. A bound
// lowered below what a table holds keeps everything the table holds and refuses only
// new entries; a window changed applies to what is remembered from now on (retention
// stays in commit order: see retireAfter).
func (k *Kernel) configure(c *Command, applied bool, out *Output) {
	if k.checkConfigure(c.Settings, applied) != nil {
		out.Code = contract.CodeInvalidRequest
		return
	}
	k.shape, k.configured = c.Settings, true
	k.raiseCeilings()
}

// ceilings are the largest fills the invariants allow per bounded table (Kernel.ceil).
type ceilings struct {
	resources, pools, ranges, runs, work     int
	leases, members, operations, expirations int
	rangeValues                              int
}

// raiseCeilings sets each table's ceiling to its bound, or to what it holds if that is
// more (a bound just lowered below it).
func (k *Kernel) raiseCeilings() {
	st, s := k.Stats(), &k.shape
	k.ceil = ceilings{
		resources: max(s.MaxResources, st.Resources), pools: max(s.MaxPools, st.Pools), ranges: max(s.MaxRanges, st.Ranges),
		runs: max(s.MaxRuns, st.Runs), work: max(s.MaxWork, st.Work), leases: max(s.MaxLeases, st.Leases),
		members: max(s.MaxMembers, st.Members), operations: max(s.MaxOperations, st.Operations),
		expirations: max(s.MaxExpirations, st.Expirations), rangeValues: max(s.MaxRangeValues, st.RangeValues),
	}
}
