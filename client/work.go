package client

import (
	"context"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/messages"
)

// Work coordination (docs/api.md Part III): runs of work shards that a worker fleet
// claims, checkpoints, completes, parks and splits. A claim is an ordinary lease, so its
// Fence guards every work call.

// WorkNext is a lease member claiming the next claimable work shard of a run.
func WorkNext(runID string) *messages.Member {
	return &messages.Member{Work: &messages.WorkRef{RunId: runID}}
}

// WorkNamed is a lease member claiming one named work shard of a run.
func WorkNamed(runID, name string) *messages.Member {
	return &messages.Member{Work: &messages.WorkRef{RunId: runID, Name: name}}
}

// Shard is one work shard of a manifest: a name and the key range [start, end) (an
// empty end is unbounded).
func Shard(name string, start, end []byte) *messages.WorkSpec {
	return &messages.WorkSpec{Name: name, Start: start, End: end}
}

// RunResult is the result of the run verbs and run.get.
type RunResult struct {
	Result
	// Run is the run after the command (nil when not found).
	Run *messages.Run
}

// WorkResult is the result of the work verbs, work.get and a claim.
type WorkResult struct {
	Result
	// Work is the work shard after the command (nil when none).
	Work *messages.Work
	// Lease is the claim: after a claim, or as it ended (complete, park,
	// split_replace). Its getters and Fence are safe on a nil lease.
	Lease Lease
	// Children are a split's new work shards.
	Children []*messages.Work
	// Capacity is a claim's advisory hint.
	Capacity *messages.Capacity
	// EarliestDeadlineSlot is, with resource_busy and none_available, the slot a
	// claim in the way may end at (0: none will by itself).
	EarliestDeadlineSlot uint64
}

// Fence is the claim's fencing token.
func (r *WorkResult) Fence() Fence { return r.Lease.Fence() }

func (c *Client) runCall(ctx context.Context, v contract.Verb, req proto.Message, opID string) (*RunResult, error) {
	return callAs(ctx, c, v, req, opID, 0, runResult)
}

func (c *Client) workCall(ctx context.Context, v contract.Verb, req proto.Message, opID string, extra time.Duration) (*WorkResult, error) {
	r, err := c.call(ctx, v, req, opID, extra)
	if err != nil {
		return nil, err
	}
	return &WorkResult{Result: *r, Work: r.Reply.Work, Lease: Lease{r.Reply.Lease}, Children: r.Reply.Children,
		Capacity: r.Reply.Capacity, EarliestDeadlineSlot: r.Reply.EarliestDeadlineSlot}, nil
}

// CreateRun creates a run with its manifest of work shards. Domain codes:
// already_exists, work_table_full.
func (c *Client) CreateRun(ctx context.Context, runID string, shards []*messages.WorkSpec, opts ...WriteOption) (*RunResult, error) {
	o := writeOpts(opts)
	return c.runCall(ctx, contract.VerbCreateRun, &messages.CreateRunRequest{OperationId: o.opID, RunId: runID, Shards: shards}, o.opID)
}

// RegisterRun adds work shards to an active run. Domain codes: run_not_found,
// run_terminal, already_exists, work_table_full.
func (c *Client) RegisterRun(ctx context.Context, runID string, shards []*messages.WorkSpec, opts ...WriteOption) (*RunResult, error) {
	o := writeOpts(opts)
	return c.runCall(ctx, contract.VerbRegisterRun, &messages.RegisterRunRequest{OperationId: o.opID, RunId: runID, Shards: shards}, o.opID)
}

// CompleteRun marks a run done: every work shard must be done or split. Domain
// codes: run_not_found, run_terminal, invalid_state.
func (c *Client) CompleteRun(ctx context.Context, runID string, opts ...WriteOption) (*RunResult, error) {
	o := writeOpts(opts)
	return c.runCall(ctx, contract.VerbCompleteRun, &messages.EndRunRequest{OperationId: o.opID, RunId: runID}, o.opID)
}

// FailRun ends a run as failed. Domain codes: run_not_found, run_terminal.
func (c *Client) FailRun(ctx context.Context, runID, reason string, opts ...WriteOption) (*RunResult, error) {
	o := writeOpts(opts)
	return c.runCall(ctx, contract.VerbFailRun, &messages.EndRunRequest{OperationId: o.opID, RunId: runID, Reason: reason}, o.opID)
}

// CancelRun ends a run as cancelled. Domain codes: run_not_found, run_terminal.
func (c *Client) CancelRun(ctx context.Context, runID, reason string, opts ...WriteOption) (*RunResult, error) {
	o := writeOpts(opts)
	return c.runCall(ctx, contract.VerbCancelRun, &messages.EndRunRequest{OperationId: o.opID, RunId: runID, Reason: reason}, o.opID)
}

// DeleteRun deletes an ended run (done, failed or cancelled) with all its work shards,
// once none is claimed. Domain codes: run_not_found, object_in_use (still active, or a
// claim is live: cancel it, then wait for its claims to end).
func (c *Client) DeleteRun(ctx context.Context, runID string, opts ...WriteOption) (*RunResult, error) {
	o := writeOpts(opts)
	return c.runCall(ctx, contract.VerbDeleteRun, &messages.DeleteRunRequest{OperationId: o.opID, RunId: runID}, o.opID)
}

// GetRun reads a run. Codes: ok, run_not_found.
func (c *Client) GetRun(ctx context.Context, runID string, opts ...ReadOption) (*RunResult, error) {
	minLSN, waitMs, extra := readOpts(opts)
	return callAs(ctx, c, contract.VerbGetRun, &messages.GetRunRequest{RunId: runID, MinLsn: minLSN, WaitMs: waitMs}, "", extra, runResult)
}

// GetWork reads a work shard. Codes: ok, run_not_found, work_not_found.
func (c *Client) GetWork(ctx context.Context, runID, name string, opts ...ReadOption) (*WorkResult, error) {
	minLSN, waitMs, extra := readOpts(opts)
	return c.workCall(ctx, contract.VerbGetWork, &messages.GetWorkRequest{RunId: runID, Name: name, MinLsn: minLSN, WaitMs: waitMs}, "", extra)
}

// Claim claims a work shard of a run for holder for ttl: the named one, or with name
// empty the next claimable one. Domain codes: run_not_found, work_not_found,
// run_terminal, work_terminal, resource_busy and none_available (with
// EarliestDeadlineSlot), and the lease table codes.
func (c *Client) Claim(ctx context.Context, holder, runID, name string, ttl time.Duration, opts ...WriteOption) (*WorkResult, error) {
	return c.ClaimWith(ctx, holder, runID, name, ttl, nil, opts...)
}

// ClaimWith claims a work shard as Claim does and, under the same lease, the members
// along (a GPU for the worker, say), of the run's placement key or of any others
// (docs/api.md §2): every member or none, one fence. Its domain codes are Claim's and
// those of lease.reserve for the members.
func (c *Client) ClaimWith(ctx context.Context, holder, runID, name string, ttl time.Duration, along []*messages.Member, opts ...WriteOption) (*WorkResult, error) {
	o := writeOpts(opts)
	req := &messages.ReserveRequest{OperationId: o.opID, HolderId: holder, TtlMs: durationMs(ttl),
		Members: append([]*messages.Member{WorkNamed(runID, name)}, along...)}
	return c.workCall(ctx, contract.VerbReserve, req, o.opID, 0)
}

// Checkpoint records how far the claim has got: lastKey inside the work shard's range,
// never before the last checkpoint, and an opaque token. Domain codes: the fence codes
// (lease_not_found, lease_retired, holder_mismatch, stale_epoch, lease_expired,
// work_not_found, run_terminal, work_terminal) and cursor_missing_key, cursor_too_large,
// cursor_regression, cursor_out_of_bounds.
func (c *Client) Checkpoint(ctx context.Context, holder string, f Fence, lastKey, token []byte, opts ...WriteOption) (*WorkResult, error) {
	o := writeOpts(opts)
	req := &messages.CheckpointRequest{OperationId: o.opID, LeaseId: f.LeaseID, HolderId: holder, LeaseEpoch: f.Epoch,
		Cursor: &messages.Cursor{LastKey: lastKey, Token: token}}
	return c.workCall(ctx, contract.VerbCheckpoint, req, o.opID, 0)
}

// CompleteWork marks the claimed work shard done for good and ends the claim; cursor,
// if not nil, is its final checkpoint. Domain codes: as Checkpoint, less
// cursor_missing_key.
func (c *Client) CompleteWork(ctx context.Context, holder string, f Fence, cursor *messages.Cursor, opts ...WriteOption) (*WorkResult, error) {
	o := writeOpts(opts)
	req := &messages.CheckpointRequest{OperationId: o.opID, LeaseId: f.LeaseID, HolderId: holder, LeaseEpoch: f.Epoch, Cursor: cursor}
	return c.workCall(ctx, contract.VerbCompleteWork, req, o.opID, 0)
}

// Park sets the claimed work shard aside with a reason (poison input, a bug) and ends
// the claim; an operator's Unpark makes it claimable again. Domain codes: the fence codes.
func (c *Client) Park(ctx context.Context, holder string, f Fence, reason string, opts ...WriteOption) (*WorkResult, error) {
	o := writeOpts(opts)
	req := &messages.ParkWorkRequest{OperationId: o.opID, LeaseId: f.LeaseID, HolderId: holder, LeaseEpoch: f.Epoch, Reason: reason}
	return c.workCall(ctx, contract.VerbParkWork, req, o.opID, 0)
}

// Unpark makes a parked work shard claimable again (an operator's verb). Domain codes:
// run_not_found, work_not_found, run_terminal, invalid_state.
func (c *Client) Unpark(ctx context.Context, runID, name string, opts ...WriteOption) (*WorkResult, error) {
	o := writeOpts(opts)
	return c.workCall(ctx, contract.VerbUnparkWork, &messages.UnparkWorkRequest{OperationId: o.opID, RunId: runID, Name: name}, o.opID, 0)
}

// SplitReplace retires the claimed work shard for children covering exactly its
// unfinished part [cursor or start, end), in order; the claim ends. Domain codes: the
// fence codes, split_invalid, work_table_full.
func (c *Client) SplitReplace(ctx context.Context, holder string, f Fence, children []*messages.KeyRange, opts ...WriteOption) (*WorkResult, error) {
	o := writeOpts(opts)
	req := &messages.SplitReplaceRequest{OperationId: o.opID, LeaseId: f.LeaseID, HolderId: holder, LeaseEpoch: f.Epoch, Children: children}
	return c.workCall(ctx, contract.VerbSplitReplace, req, o.opID, 0)
}

// SplitResidual gives [splitKey, end) of the claimed work shard to a new, claimable work
// shard; the claim keeps [start, splitKey). Domain codes: as SplitReplace.
func (c *Client) SplitResidual(ctx context.Context, holder string, f Fence, splitKey []byte, opts ...WriteOption) (*WorkResult, error) {
	o := writeOpts(opts)
	req := &messages.SplitResidualRequest{OperationId: o.opID, LeaseId: f.LeaseID, HolderId: holder, LeaseEpoch: f.Epoch, SplitKey: splitKey}
	return c.workCall(ctx, contract.VerbSplitResidual, req, o.opID, 0)
}

// ErrorClass is what a worker does about a code (docs/api.md W.3).
type ErrorClass int

const (
	// Retryable: try again (claim again, or retry the same operation id).
	Retryable ErrorClass = iota + 1
	// Fatal: stop working on this shard; the claim or the shard is gone.
	Fatal
	// Escalate: something the worker was given does not exist: tell a human.
	Escalate
)

func (e ErrorClass) String() string {
	switch e {
	case Retryable:
		return "retryable"
	case Fatal:
		return "fatal"
	case Escalate:
		return "escalate"
	}
	return "none"
}

// Classify sorts a reply code (or an error's code, see Code) into the seed's classes:
// resource_busy, none_available, lease_expired and the indefinite rejections are
// retryable; stale_epoch, work_terminal, run_terminal, the cursor and split codes and
// operation_conflict are fatal to the work on that shard; *_not_found escalates. ok and
// codes outside work coordination are 0.
func Classify(code string) ErrorClass {
	switch code {
	case messages.CodeResourceBusy, messages.CodeNoneAvailable, messages.CodeLeaseExpired,
		messages.CodeTimeout, messages.CodeEngineHalted, messages.CodeStorageFailure, messages.CodeOverloaded:
		return Retryable
	case messages.CodeStaleEpoch, messages.CodeWorkTerminal, messages.CodeRunTerminal, messages.CodeCursorMissingKey,
		messages.CodeCursorTooLarge, messages.CodeCursorRegression, messages.CodeCursorOutOfBounds, messages.CodeSplitInvalid,
		messages.CodeOperationConflict, messages.CodeHolderMismatch, messages.CodeLeaseRetired, messages.CodePermissionDenied:
		return Fatal
	case messages.CodeRunNotFound, messages.CodeWorkNotFound, messages.CodeLeaseNotFound:
		return Escalate
	}
	return 0
}
