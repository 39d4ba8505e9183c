package kernel

import "github.com/holdfast/holdfast/contract"

// lease.release_all and lease.revoke_all (docs/api.md Part IV): every live lease of the
// shard carrying a label, in bounded steps, so that "hard-delete instance X frees
// everything it owns" is a loop of a few calls. The bridge sends the command to every
// shard; each ends or moves at most Limit leases and says whether more carry the label.

// bulkScan bounds the index entries one step looks at: a holder's release skips the
// leases of other holders and the ones it may not release.
func bulkScan(limit uint32) int { return 4*int(limit) + 64 }

// bulkVerb runs lease.release_all (the holder's reserved and active leases carrying the
// label: released) and lease.revoke_all (active leases carrying the label: revoking;
// with Reclaim also revoking ones, the just-revoked included: reclaimed).
func (k *Kernel) bulkVerb(e Entry, out *Output) {
	c := e.Cmd
	key := c.Tenant + "\x00" + c.Label.Key + "=" + c.Label.Value
	var lsns []uint64
	scanned, more := 0, false
	k.ix.ascendLabel(key, 0, func(lsn uint64) bool {
		if len(lsns) == int(c.Limit) || scanned == bulkScan(c.Limit) {
			more = true
			return false
		}
		scanned++
		l := &k.leases[k.leaseIdx[lsn]]
		switch c.Verb {
		case contract.VerbReleaseAll:
			_, h := splitKey(k.holders[l.holder].key)
			if h == c.HolderID && endableFrom(contract.VerbRelease, l.state) == contract.CodeOK {
				lsns = append(lsns, lsn)
			}
		case contract.VerbRevokeAll:
			if endableFrom(contract.VerbRevoke, l.state) == contract.CodeOK ||
				(c.Reclaim && endableFrom(contract.VerbReclaim, l.state) == contract.CodeOK) {
				lsns = append(lsns, lsn)
			}
		}
		return true
	})
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
