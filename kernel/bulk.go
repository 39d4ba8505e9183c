package kernel

import "github.com/holdfast/holdfast/contract"

// lease.release_all and lease.revoke_all (docs/api.md Part IV): every live lease of the
// shard carrying a label, in bounded steps, so that "hard-delete instance X frees
// everything it owns" is a loop of a few calls. The bridge sends the command to every
// shard; each ends or moves at most Limit leases and says whether more are left to act on.
//
// A step walks only leases it acts on — the label's active ones (and revoking ones, with
// Reclaim), or the holder's releasable ones under the label (index.go's bulk trees) — so
// it looks at Limit + 1 entries at most, and n leases take ⌈n / Limit⌉ calls: a lease it
// cannot act on (another holder's, a reserved one an operator leaves to expire, a revoking
// one without Reclaim) is never met, so it can never hold a loop back.

// bulkTargets are the lsns of the leases one step acts on, in issue order (active before
// revoking for revoke_all with Reclaim), and whether more are left after them.
func (k *Kernel) bulkTargets(c *Command) (lsns []uint64, more bool) {
	key := c.Tenant + "\x00" + c.Label.Key + "=" + c.Label.Value
	take := func(lsn uint64) bool {
		if len(lsns) == int(c.Limit) {
			more = true
			return false
		}
		lsns = append(lsns, lsn)
		return true
	}
	if c.Verb == contract.VerbReleaseAll {
		if h, ok := k.holderIdx[string(k.tenantKey(c.Tenant, c.HolderID))]; ok {
			ascendLabelPair(k.ix.labelHolders, key, uint64(h), 0, take)
		}
		return lsns, more
	}
	ascendLabelPair(k.ix.labelStates, key, uint64(LeaseActive), 0, take)
	if c.Reclaim && !more {
		ascendLabelPair(k.ix.labelStates, key, uint64(LeaseRevoking), 0, take)
	}
	return lsns, more
}

// bulkVerb runs lease.release_all (the holder's reserved and active leases carrying the
// label: released) and lease.revoke_all (active leases carrying the label: revoking;
// with Reclaim also revoking ones, the just-revoked included: reclaimed). A lease revoked
// and reclaimed in one step has both events; Changes holds both, the reply shows the last.
func (k *Kernel) bulkVerb(e Entry, out *Output) {
	c := e.Cmd
	lsns, more := k.bulkTargets(c)
	step := func(v Verb, idx int32) {
		var o Output
		k.endStep(v, idx, e, &o)
		out.Changes = append(out.Changes, LeaseChange{Event: o.Event, Lease: o.Lease})
	}
	for _, lsn := range lsns {
		idx := k.leaseIdx[lsn]
		switch {
		case c.Verb == contract.VerbReleaseAll:
			step(contract.VerbRelease, idx)
			continue
		case k.leases[idx].state == LeaseActive:
			step(contract.VerbRevoke, idx)
			if !c.Reclaim {
				continue
			}
		}
		step(contract.VerbReclaim, idx)
	}
	out.Count, out.More = len(lsns), more
}
