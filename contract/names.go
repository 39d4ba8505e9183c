package contract

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// DefaultPrefix is the subject prefix when none is configured (server flag --prefix).
const DefaultPrefix = "holdfast"

// StreamName is the JetStream stream the events go to.
const StreamName = "HOLDFAST_EVENTS"

// Subject is the subject of an operation: <prefix>.v1.<tenant>.<object>.<verb>.
func Subject(prefix, tenant, object, verb string) string {
	return prefix + ".v1." + tenant + "." + object + "." + verb
}

// ValidPrefix accepts one or more dot-separated subject tokens without wildcards,
// whitespace or control characters; the error says what is wrong.
func ValidPrefix(p string) error {
	if p == "" {
		return errors.New("prefix: must not be empty")
	}
	for _, tok := range strings.Split(p, ".") {
		if tok == "" {
			return fmt.Errorf("prefix %q: empty subject token", p)
		}
		for _, r := range tok {
			if r <= ' ' || r == '*' || r == '>' || r == 0x7f {
				return fmt.Errorf("prefix %q: subject tokens may not contain wildcards, spaces or control characters", p)
			}
		}
	}
	return nil
}

// The wire names of resource and lease states, range strategies and events. The kernel's
// enums print these; the wire messages and clients compare with them.
const (
	StateAvailable = "available"
	StateReserved  = "reserved"
	StateActive    = "active"
	StateRevoking  = "revoking"
	StateReleased  = "released"
	StateExpired   = "expired"
	StateRevoked   = "revoked"
	StateConsumed  = "consumed" // a pool hold confirmed as used up (lease.consume)

	StrategyLowestFree         = "lowest_free"
	StrategyRandom             = "random"
	StrategyLeastRecentlyFreed = "least_recently_freed"

	EventResourceCreated = "resource.created"
	EventPoolCreated     = "pool.created"
	EventRangeCreated    = "range.created"
	EventLeaseReserved   = "lease.reserved"
	EventLeaseActivated  = "lease.activated"
	EventLeaseRenewed    = "lease.renewed"
	EventLeaseReleased   = "lease.released"
	EventLeaseExpired    = "lease.expired"
	EventLeaseRevoking   = "lease.revoking"
	EventLeaseRevoked    = "lease.revoked"

	EventResourceDeleted = "resource.deleted"
	EventPoolDeleted     = "pool.deleted"
	EventRangeDeleted    = "range.deleted"
	EventRunDeleted      = "run.deleted"

	// Allocators (docs/api.md Part IV).
	EventLeaseConsumed = "lease.consumed"
	EventRangeExcluded = "range.excluded"
	EventRangeIncluded = "range.included"
	EventRangeResized  = "range.resized"
	EventPoolResized   = "pool.resized"
)

// Reasons a lease.revoking event gives (its reason field).
const (
	// RevokeReasonOperator: an operator's lease.revoke, or one lease of a lease.revoke_all.
	RevokeReasonOperator = "revoked"
	// RevokeReasonKeepAlive: an active lease's keep-alive deadline passed without a renew.
	RevokeReasonKeepAlive = "keepalive_lapsed"
)

// EventMsgID is the JetStream message id of the n-th event of entry (shard, lsn):
// "<shard>-<lsn>-<n>". The stream drops a republished event by it.
func EventMsgID(shard uint32, lsn uint64, n int) string {
	b := make([]byte, 0, 32)
	b = strconv.AppendUint(b, uint64(shard), 10)
	b = append(b, '-')
	b = strconv.AppendUint(b, lsn, 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(n), 10)
	return string(b)
}

// Direct routing (docs/api.md §7): in a cluster the owner of shard k also takes requests
// on ShardSubject, each carrying the public subject it stands for in HeaderSubject, so a
// client that knows a request's shard skips the hop through another node.
const (
	HeaderSubject   = "Holdfast-Subject"   // the public subject a request stands for
	HeaderForwarded = "Holdfast-Forwarded" // set by a node forwarding a client's request
)

// ShardSubject is where the owner of shard k takes requests sent straight to it.
func ShardSubject(prefix string, k uint32) string {
	return prefix + "._shard." + strconv.FormatUint(uint64(k), 10)
}
