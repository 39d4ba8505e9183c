package contract

// Bounds of work coordination (docs/api.md Part III).
const (
	MaxWorkKeyLen      = 256  // a key range bound or a cursor's last key, in bytes
	MaxWorkMetadataLen = 1024 // a work shard's metadata
	MaxCursorTokenLen  = 1024 // a cursor's opaque token
	MaxReasonLen       = 256  // why a run failed or was cancelled, why work was parked
	MaxManifestWork    = 256  // work shards per run.create or run.register
	MaxSplitChildren   = 16   // children of one split_replace
)

// Run states (docs/api.md Part III).
const (
	RunActive    = "active"
	RunDone      = "done"
	RunFailed    = "failed"
	RunCancelled = "cancelled"
)

// Work shard states.
const (
	WorkActive = "active"
	WorkDone   = "done"
	WorkSplit  = "split"
	WorkParked = "parked"
	// WorkClaimed selects active work shards a lease holds (work.list's status filter).
	WorkClaimed = "claimed"
)

// WorkID is a work shard's id: <run_id>/<name>, so the run id is its placement key and a
// run lives on one shard with all its work.
func WorkID(runID, name string) string { return runID + "/" + name }

// Events of work coordination.
const (
	EventRunCreated       = "run.created"
	EventRunRegistered    = "run.registered"
	EventRunCompleted     = "run.completed"
	EventRunFailed        = "run.failed"
	EventRunCancelled     = "run.cancelled"
	EventWorkCheckpointed = "work.checkpointed"
	EventWorkCompleted    = "work.completed"
	EventWorkParked       = "work.parked"
	EventWorkUnparked     = "work.unparked"
	EventWorkSplit        = "work.split"
)
