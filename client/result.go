package client

import (
	"fmt"
	"time"

	"github.com/holdfast/holdfast/messages"
)

// Result is the committed answer of a call: the reply envelope and the
// bookkeeping of the call. The verb-specific results embed it.
type Result struct {
	// Op is the operation, e.g. "lease.reserve".
	Op string
	// Code is "ok" or the verb's domain code (resource_busy, lease_not_found,
	// ...): a final answer either way.
	Code string
	// Message is the server's human-readable text, if any.
	Message string
	// LSN is the log position of a committed write (0 for reads).
	LSN uint64
	// AppliedLSN is the shard position a single-object read reflects.
	AppliedLSN uint64
	// FromRetryCache is true when the reply replays an earlier result of the
	// same operation id (a retry of this call, or of an earlier one).
	FromRetryCache bool
	// OperationID is the operation id the write was sent with ("" for reads).
	OperationID string
	// Attempts is how many requests the call sent (1 without retries).
	Attempts int
	// Reply is the decoded reply.
	Reply *messages.Reply
	// Raw is the reply body as received (JSON or protobuf, as requested).
	Raw []byte
}

func newResult(op string, rep *messages.Reply, raw []byte, opID string, attempts int) *Result {
	return &Result{
		Op:             op,
		Code:           rep.Code,
		Message:        rep.Message,
		LSN:            rep.Lsn,
		AppliedLSN:     rep.AppliedLsn,
		FromRetryCache: rep.FromRetryCache,
		OperationID:    opID,
		Attempts:       attempts,
		Reply:          rep,
		Raw:            raw,
	}
}

// OK reports whether the code is "ok".
func (r *Result) OK() bool { return r != nil && r.Code == messages.CodeOK }

// Err returns nil when the code is "ok", else a *CommittedError carrying the
// committed domain code. Use it where a domain failure should travel as an
// error.
func (r *Result) Err() error {
	if r == nil || r.Code == messages.CodeOK {
		return nil
	}
	return &CommittedError{Op: r.Op, Code: r.Code, Message: r.Message, LSN: r.LSN, OperationID: r.OperationID}
}

// ResourceResult is the result of resource.create and resource.get.
type ResourceResult struct {
	Result
	// Resource is the resource after the command (nil when not found).
	Resource *messages.Resource
}

// PoolResult is the result of pool.create and pool.get.
type PoolResult struct {
	Result
	// Pool is the pool after the command (nil when not found).
	Pool *messages.Pool
}

// RangeResult is the result of range.create and range.get.
type RangeResult struct {
	Result
	// Range is the range after the command (nil when not found).
	Range *messages.Range
}

// LeaseResult is the result of the lease verbs and lease.get.
type LeaseResult struct {
	Result
	// Lease is the lease after the command. Its pointer is nil when the
	// reply carries no lease (e.g. lease_not_found); its getters and Fence
	// are safe to call either way.
	Lease Lease
}

// Fence returns the fencing token of the lease in the result.
func (r *LeaseResult) Fence() Fence { return r.Lease.Fence() }

// ListResult is the result of lease.list.
type ListResult struct {
	Result
	// Leases are the holder's live leases, ordered by shard then by lsn.
	Leases []Lease
	// Truncated is true when the limit cut the list.
	Truncated bool
	// AppliedLSNs is the position each shard's part reflects.
	AppliedLSNs []*messages.ShardLsn
}

// Lease is a lease view with client helpers. It embeds the wire view, so
// its fields (LeaseId, HolderId, State, LeaseEpoch, Members, ...) and nil-safe
// getters are at hand.
type Lease struct {
	*messages.Lease
}

// Fence returns the lease's fencing token (lease id, current epoch).
func (l Lease) Fence() Fence { return Fence{LeaseID: l.GetLeaseId(), Epoch: l.GetLeaseEpoch()} }

// Live reports whether the lease is reserved, active or revoking.
func (l Lease) Live() bool {
	switch l.GetState() {
	case messages.StateReserved, messages.StateActive, messages.StateRevoking:
		return true
	}
	return false
}

// String is a one-line summary: "3-1042 holder=alice state=reserved epoch=1".
func (l Lease) String() string {
	if l.Lease == nil {
		return "<no lease>"
	}
	return fmt.Sprintf("%s holder=%s state=%s epoch=%d", l.LeaseId, l.HolderId, l.State, l.LeaseEpoch)
}

// ClusterResult is the result of cluster.status.
type ClusterResult struct {
	Result
	// Nodes are the live nodes, sorted by name, with the shards each serves.
	Nodes []*messages.ClusterNode
	// Shards are every shard in order with its owner ("" while it moves) and applied lsn.
	Shards []*messages.ClusterShard
	// Shard is the placement key's shard when one was given.
	Shard *uint32
	// Slot is the service's slot length: slot s starts s × Slot after the Unix epoch.
	Slot time.Duration
}
