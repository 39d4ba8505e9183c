package kernel

import "github.com/holdfast/holdfast/contract"

// lease.import (docs/api.md Part IV): many leases in one entry, all or nothing, as a
// control plane moves its existing allocations over. Each lease needs an id of its own,
// and an id is the lsn of an entry: so an import of n leases follows n-1 skip entries
// (VerbSkip, sequenced with it), and its leases take the lsns L-n+1 .. L of those entries
// and its own. Apply checks that the skips are there: a journal without them cannot
// make an import give out ids of other entries.

// skip applies a skip entry: nothing but its lsn, counted for the import that follows.
func (k *Kernel) skip(_ Entry, out *Output) {
	k.skipRun = k.prevSkips + 1
	out.Code = contract.CodeNoop
}

// afterSkips reports whether an import entry follows the skip entries its leases take
// their ids from (Apply refuses it otherwise, before it is remembered).
func (k *Kernel) afterSkips(e Entry) bool {
	n := uint64(SkipsBefore(e.Cmd)) + 1 // the entries whose lsns it takes, its own included
	return n-1 <= k.prevSkips && e.LSN >= n
}

// importLeases runs lease.import.
func (k *Kernel) importLeases(e Entry, out *Output) {
	c := e.Cmd
	if c.Group {
		k.importBegin(e, out)
		return
	}
	n := len(c.Imports)
	first := e.LSN - uint64(n) + 1
	picks := k.picks[:0]
	defer func() { k.picks = picks[:0] }()
	ends := make([]int, n) // each lease's picks end here
	pending := map[int32]uint64{}
	members, expiring := 0, 0
	for i := range c.Imports {
		im := &c.Imports[i]
		for j := range im.Members {
			m := &im.Members[j]
			p, code := k.check(c.Tenant, m, picks, first+uint64(i), j)
			if code == contract.CodeOK && p.kind == MemberPool {
				pl := &k.pools[p.obj]
				if pl.capacity-pl.reserved-pl.active-pl.consumed-pending[p.obj] < p.quantity {
					code = contract.CodeInsufficientCapacity
				}
				pending[p.obj] += p.quantity
			}
			if code == contract.CodeOK && p.kind == MemberResource && pickedResource(picks, p.obj) {
				code = contract.CodeResourceBusy
			}
			if code != contract.CodeOK {
				out.Code, out.ItemIndex, out.MemberIndex = code, i, j
				return
			}
			picks = append(picks, p)
		}
		ends[i] = len(picks)
		members += len(im.Members)
		if !im.Activate || im.KeepAliveSlots > 0 {
			expiring++
		}
	}
	if code := k.checkBoundsN(n, members, expiring, e.Slot); code != contract.CodeOK {
		out.Code = code
		return
	}
	start := 0
	for i := range c.Imports {
		im := &c.Imports[i]
		lsn := first + uint64(i)
		idx := k.grant(lsn, e.Slot, c.Tenant, im.HolderID, im.Labels, picks[start:ends[i]], im.Activate,
			im.TTLSlots, im.KeepAliveSlots)
		start = ends[i]
		ev := EventLeaseReserved
		if im.Activate {
			ev = EventLeaseActivated
		}
		var v Output
		k.viewLease(idx, &v)
		out.Changes = append(out.Changes, LeaseChange{Event: ev, Lease: v.Lease})
	}
}

func pickedResource(picks []pick, obj int32) bool {
	for _, p := range picks {
		if p.kind == MemberResource && p.obj == obj {
			return true
		}
	}
	return false
}

// checkBoundsN is checkBounds for n leases at once: expiring of them take a deadline.
func (k *Kernel) checkBoundsN(n, members, expiring int, slot uint64) Code {
	for k.leaseCount()+n > k.shape.MaxLeases && k.retireLease(slot) {
	}
	if k.leaseCount()+n > k.shape.MaxLeases {
		return contract.CodeLeaseTableFull
	}
	for k.members+members > k.shape.MaxMembers && k.retireLease(slot) {
	}
	if k.members+members > k.shape.MaxMembers {
		return contract.CodeLeaseMemberTableFull
	}
	if k.expiry.len()+expiring > k.shape.MaxExpirations {
		return contract.CodeExpirationIndexFull
	}
	return contract.CodeOK
}
