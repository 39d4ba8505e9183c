package kernel

import (
	"fmt"
	"slices"
)

// CheckCut reports whether states of every shard of one service (shards[k] is shard k's)
// make a consistent cut for the bundles across shards: restored together, each bundle is
// whole or absent, and what is undecided is decided by the journals as after a crash of
// every process. It finds the two ways a cut can tear a bundle:
//
//   - a home's live lease with members on a shard whose state holds no part of it (that
//     shard's state is from before its prepare, and the members would be free there);
//   - a participant's committed part whose home's state is from before the decision
//     (the home would abort it).
//
// A participant's undecided part, or a part still held after its home ended the lease,
// is what any crash leaves, and recovery settles it.
func CheckCut(shards []*Kernel) error {
	for h, home := range shards {
		for _, lsn := range home.BundleLeases(nil) {
			if _, live := home.leaseIdx[lsn]; !live {
				continue
			}
			txn := home.BundleTxn(lsn)
			for _, p := range home.BundleShards(lsn, nil) {
				if int(p) >= len(shards) {
					return fmt.Errorf("shard %d's lease %d has members on shard %d, past the %d shards", h, lsn, p, len(shards))
				}
				if _, ok := shards[p].txns[txn]; !ok {
					return fmt.Errorf("shard %d's lease %d is live with members on shard %d, whose state (lsn %d) holds no part of it",
						h, lsn, p, shards[p].lastLSN)
				}
			}
		}
	}
	for p, part := range shards {
		txns := make([]TxnRef, 0, len(part.txns))
		for txn := range part.txns { // sorted below: the order cannot reach the output
			txns = append(txns, txn)
		}
		slices.SortFunc(txns, TxnRef.Compare)
		for _, txn := range txns {
			if part.bundles[part.txns[txn]].pending {
				continue
			}
			if int(txn.Shard) >= len(shards) {
				return fmt.Errorf("shard %d holds a part of a bundle of shard %d, past the %d shards", p, txn.Shard, len(shards))
			}
			home := shards[txn.Shard]
			if _, _, _, pending := home.BundleState(txn.LSN); pending || home.lastLSN < txn.LSN {
				return fmt.Errorf("shard %d holds a committed part of the bundle begun at %d-%d, which shard %d's state (lsn %d) has not decided",
					p, txn.Shard, txn.LSN, txn.Shard, home.lastLSN)
			}
		}
	}
	return nil
}
