package actors

import (
	"time"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// Reply is a shard's answer to one request. Views are copies owned by the reply.
type Reply struct {
	// shownWaiting says the answer's view of its object, as its entry left the object,
	// counts what an undecided bundle or an ending part holds: the answer waits (held).
	// Known at the entry: a later entry of the same batch may decide the bundle, and the
	// view would be stale, not waiting, by the time the answer is given.
	shownWaiting bool

	Code           kernel.Code
	Message        string // human text for rejections; never another holder's identity
	LSN            uint64 // the entry's lsn (writes committed)
	AppliedLSN     uint64 // the shard position the answer reflects
	FromRetryCache bool
	MemberIndex    int // failing member of a reserve, -1 otherwise
	Object         kernel.ObjectKind
	Resource       kernel.ResourceView
	Pool           kernel.PoolView
	Range          kernel.RangeView
	Lease          kernel.LeaseView
	Leases         []kernel.LeaseView // lease.list
	Truncated      bool
	// Allocators (docs/api.md Part IV): a listing's page, range.lookup's value state, the
	// leases an import or a bulk verb changed, an import's failing lease, a bulk verb's
	// count, the held value a range verb found in its way.
	Page       *kernel.ListPage
	ValueState string
	Changes    []kernel.LeaseChange
	ItemIndex  int
	Count      int
	More       bool
	Value      uint64
	// Work coordination (kernel.Output's fields of the same names).
	Run                  kernel.RunView
	Work                 kernel.WorkView
	HasWork              bool
	Children             []kernel.WorkView
	Capacity             kernel.CapacityView
	EarliestDeadlineSlot uint64
	// Bundles across shards (kernel.Output's fields of the same names): never sent to a
	// client — the shard acts on them (bundles.go).
	Pending, Undecided, Elsewhere bool
	Txn                           kernel.TxnRef
	TxnPriority                   uint64
	Parts                         []kernel.LeaseView
}

// Event is one change of an applied entry, for publishing.
type Event struct {
	Shard    uint32
	LSN      uint64
	Slot     uint64
	N        int // index among the entry's events
	Kind     kernel.EventKind
	Tenant   string
	Object   kernel.ObjectKind
	Resource kernel.ResourceView
	Pool     kernel.PoolView
	Range    kernel.RangeView
	Lease    kernel.LeaseView
	Run      kernel.RunView
	Work     kernel.WorkView
	// Reason says why a lease went revoking: contract.RevokeReasonOperator or
	// contract.RevokeReasonKeepAlive.
	Reason string
}

// ReadRequest is a read of one shard.
type ReadRequest struct {
	Verb   kernel.Verb // VerbGetResource, VerbGetPool, VerbGetRange, VerbGetLease, VerbListLeases, VerbGetRun, VerbGetWork
	Tenant string
	ID     string // object id, run id, or holder id for lease.list
	Name   string // work.get: the work shard's name
	Lease  uint64 // lease lsn for lease.get
	Limit  int    // lease.list without a cursor
	Value  uint64 // range.lookup
	// List is a listing's query (docs/api.md Part IV): the listing verbs, and lease.list
	// with a cursor, a label or a state.
	List   *kernel.ListQuery
	MinLSN uint64
	Wait   time.Duration // how long a read with MinLSN may wait
}

// Callbacks run on the shard's goroutine: they must hand off and return.
type replyFunc func(*Reply)

type writeMsg struct {
	cmd   *kernel.Command
	reply replyFunc
}

type readMsg struct {
	req      ReadRequest
	reply    replyFunc
	deadline time.Time
	// undecidedUntil is how long the read waits for an undecided bundle (bundles.go).
	undecidedUntil time.Time
	// barrier says the read waits for a bundle's commit answered before it was applied,
	// not for a min_lsn of its own (readApplied): past its wait it is answered timeout.
	barrier bool
}

// reconfigureMsg asks a shard to serve under System.Config (System.Configure).
type reconfigureMsg struct{}

// batchDone reports a journal append from the writer.
type batchDone struct {
	gen uint64
	err error
}

// tick advances the slot clock: expiry and read deadlines.
type tick struct{}

// flushNow is a shard's note to itself: hand the filling batch to the writer. Sent to
// the back of its own mailbox, it lets the writes already queued there join the batch.
type flushNow struct{ gen uint64 }

// published tells the shard how far its events are durably published.
type published struct{ lsn uint64 }

// snapshotDone reports a snapshot written (or failed) by the goroutine
// maybeWriteSnapshot starts beside the shard.
type snapshotDone struct {
	gen uint64
	lsn uint64
	err error
}

func copyLease(v kernel.LeaseView) kernel.LeaseView {
	v.Members = append([]kernel.MemberView(nil), v.Members...)
	return v
}

// copyWork copies a work view out of the kernel's reused buffers.
func copyWork(v kernel.WorkView) kernel.WorkView {
	v.Children = append([]string(nil), v.Children...)
	return v
}

func replyFromOutput(o *kernel.Output, applied uint64) *Reply {
	r := &Reply{Code: o.Code, LSN: o.LSN, AppliedLSN: applied, FromRetryCache: o.FromRetryCache,
		MemberIndex: o.MemberIndex, Object: o.Object, Resource: o.Resource, Pool: o.Pool, Range: o.Range,
		Run: o.Run, HasWork: o.HasWork, Capacity: o.Capacity, EarliestDeadlineSlot: o.EarliestDeadlineSlot,
		ItemIndex: o.ItemIndex, Count: o.Count, More: o.More, Value: o.Value,
		Pending: o.Pending, Undecided: o.Undecided, Elsewhere: o.Elsewhere, Txn: o.Txn, TxnPriority: o.TxnPriority}
	if o.ShowsLease() {
		r.Lease = copyLease(o.Lease)
	}
	if o.HasWork {
		r.Work = copyWork(o.Work)
	}
	for _, c := range o.Children {
		r.Children = append(r.Children, copyWork(c))
	}
	if r.Lease.LSN == 0 && o.Lease.LSN != 0 && (o.Code == contract.CodeValueBusy || o.Code == contract.CodeObjectInUse) {
		r.Lease.LSN = o.Lease.LSN // the lease holding the value in a range verb's way, for the message
	}
	for _, ch := range o.Changes {
		r.Changes = append(r.Changes, kernel.LeaseChange{Event: ch.Event, Lease: copyLease(ch.Lease)})
	}
	for _, p := range o.Parts {
		r.Parts = append(r.Parts, copyLease(p))
	}
	return r
}

func rejection(code kernel.Code, msg string, applied uint64) *Reply {
	return &Reply{Code: code, Message: msg, AppliedLSN: applied, MemberIndex: -1, ItemIndex: -1}
}
