package kernel

// Stats is the fill of the shard's tables, for metrics: each next to its bound in the
// shape in force (Shape).
type Stats struct {
	// Shape is the shape in force: the bounds the tables are held to, as journaled.
	Shape Shape
	// Object slots in use: live objects and deleted ones whose slots are not free yet.
	Resources   int
	Pools       int
	Ranges      int
	Leases      int // live and retained terminal
	Members     int
	Operations  int
	Expirations int // reserved leases in the expiry index
	RangeValues int // freed values remembered for least_recently_freed
	Runs        int // run slots in use (live runs and deleted ones not yet freed)
	Work        int // work-shard slots in use
	// Live leases by state.
	Reserved, Active, Revoking int
	// NextDeadline is the earliest deadline in the expiry index (0: none).
	NextDeadline uint64
}

// TableFill is one bounded table of a shard: its entries and the bound the shape in
// force holds it to.
type TableFill struct {
	Name           string
	Entries, Bound int
}

// Tables lists the shard's bounded tables, always in this order.
func (st *Stats) Tables() [10]TableFill {
	k := &st.Shape
	return [10]TableFill{
		{"resources", st.Resources, k.MaxResources},
		{"pools", st.Pools, k.MaxPools},
		{"ranges", st.Ranges, k.MaxRanges},
		{"leases", st.Leases, k.MaxLeases},
		{"members", st.Members, k.MaxMembers},
		{"operations", st.Operations, k.MaxOperations},
		{"expirations", st.Expirations, k.MaxExpirations},
		{"range_values", st.RangeValues, k.MaxRangeValues},
		{"runs", st.Runs, k.MaxRuns},
		{"work", st.Work, k.MaxWork},
	}
}

// Stats reports table fill. O(1).
func (k *Kernel) Stats() Stats {
	st := Stats{Shape: k.shape, Resources: len(k.res) - len(k.free.res), Pools: len(k.pools) - len(k.free.pools),
		Ranges: len(k.ranges) - len(k.free.ranges), Leases: k.leaseCount(),
		Members: k.members, Operations: k.ops.len(), Expirations: k.expiry.len(), RangeValues: k.rangeValues,
		Reserved: k.live[LeaseReserved], Active: k.live[LeaseActive], Revoking: k.live[LeaseRevoking],
		Runs: len(k.runs) - len(k.free.runs), Work: len(k.works) - len(k.free.works)}
	if d, ok := k.NextDeadline(); ok {
		st.NextDeadline = d
	}
	return st
}
