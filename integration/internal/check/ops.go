package check

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/integration/internal/history"
	"github.com/holdfast/holdfast/messages"
)

// Verbs of the wire contract.
const (
	VResourceCreate = "resource.create"
	VResourceGet    = "resource.get"
	VPoolCreate     = "pool.create"
	VPoolGet        = "pool.get"
	VRangeCreate    = "range.create"
	VRangeGet       = "range.get"
	VReserve        = "lease.reserve"
	VActivate       = "lease.activate"
	VRenew          = "lease.renew"
	VRelease        = "lease.release"
	VRevoke         = "lease.revoke"
	VReclaim        = "lease.reclaim"
	VLeaseGet       = "lease.get"
	VList           = "lease.list"
	VResourceDelete = "resource.delete"
	VPoolDelete     = "pool.delete"
	VRangeDelete    = "range.delete"
)

// isDelete reports whether verb deletes an object.
func isDelete(verb string) bool {
	return verb == VResourceDelete || verb == VPoolDelete || verb == VRangeDelete
}

// IsWrite reports whether verb is a write (carries an operation_id).
func IsWrite(verb string) bool {
	switch verb {
	case VResourceCreate, VPoolCreate, VRangeCreate, VReserve, VActivate, VRenew, VRelease, VRevoke, VReclaim:
		return true
	}
	return isDelete(verb)
}

// holderVerb reports whether verb is holder-authorized (holder_id + lease_epoch).
func holderVerb(verb string) bool { return verb == VActivate || verb == VRenew || verb == VRelease }

// leaseVerb reports whether verb acts on an existing lease by id.
func leaseVerb(verb string) bool {
	switch verb {
	case VActivate, VRenew, VRelease, VRevoke, VReclaim:
		return true
	}
	return false
}

// Req is the union of the request fields of every verb.
type Req struct {
	OperationID string
	ResourceID  string
	PoolID      string
	RangeID     string
	HolderID    string
	LeaseID     string
	Strategy    string
	Capacity    uint64
	First, Last uint64
	TTLMs       uint64
	Epoch       uint64
	Activate    bool
	MinLSN      uint64
	WaitMs      *uint32
	Limit       *uint32
	Members     []*messages.Member
}

// ObjectID is the resource, pool or range id of an object verb.
func (r *Req) ObjectID() string {
	switch {
	case r.ResourceID != "":
		return r.ResourceID
	case r.PoolID != "":
		return r.PoolID
	}
	return r.RangeID
}

func newRequest(verb string) proto.Message {
	switch verb {
	case VResourceCreate:
		return &messages.CreateResourceRequest{}
	case VResourceGet:
		return &messages.GetResourceRequest{}
	case VPoolCreate:
		return &messages.CreatePoolRequest{}
	case VPoolGet:
		return &messages.GetPoolRequest{}
	case VRangeCreate:
		return &messages.CreateRangeRequest{}
	case VRangeGet:
		return &messages.GetRangeRequest{}
	case VReserve:
		return &messages.ReserveRequest{}
	case VActivate:
		return &messages.ActivateRequest{}
	case VRenew:
		return &messages.RenewRequest{}
	case VRelease:
		return &messages.ReleaseRequest{}
	case VRevoke:
		return &messages.RevokeRequest{}
	case VReclaim:
		return &messages.ReclaimRequest{}
	case VLeaseGet:
		return &messages.GetLeaseRequest{}
	case VList:
		return &messages.ListLeasesRequest{}
	case VResourceDelete:
		return &messages.DeleteResourceRequest{}
	case VPoolDelete:
		return &messages.DeletePoolRequest{}
	case VRangeDelete:
		return &messages.DeleteRangeRequest{}
	}
	return nil
}

// DecodeRequest decodes the JSON form of a request of verb.
func DecodeRequest(verb string, raw []byte) (Req, error) {
	m := newRequest(verb)
	if m == nil {
		return Req{}, fmt.Errorf("unknown verb %q", verb)
	}
	if len(raw) > 0 {
		if err := messages.UnmarshalJSON(raw, m); err != nil {
			return Req{}, err
		}
	}
	var r Req
	switch q := m.(type) {
	case *messages.CreateResourceRequest:
		r.OperationID, r.ResourceID = q.OperationId, q.ResourceId
	case *messages.CreatePoolRequest:
		r.OperationID, r.PoolID, r.Capacity = q.OperationId, q.PoolId, q.Capacity
	case *messages.CreateRangeRequest:
		r.OperationID, r.RangeID, r.First, r.Last, r.Strategy = q.OperationId, q.RangeId, q.First, q.Last, q.Strategy
	case *messages.ReserveRequest:
		r.OperationID, r.HolderID, r.Members, r.TTLMs, r.Activate = q.OperationId, q.HolderId, q.Members, q.TtlMs, q.Activate
	case *messages.ActivateRequest:
		r.OperationID, r.LeaseID, r.HolderID, r.Epoch = q.OperationId, q.LeaseId, q.HolderId, q.LeaseEpoch
	case *messages.RenewRequest:
		r.OperationID, r.LeaseID, r.HolderID, r.Epoch, r.TTLMs = q.OperationId, q.LeaseId, q.HolderId, q.LeaseEpoch, q.TtlMs
	case *messages.ReleaseRequest:
		r.OperationID, r.LeaseID, r.HolderID, r.Epoch = q.OperationId, q.LeaseId, q.HolderId, q.LeaseEpoch
	case *messages.RevokeRequest:
		r.OperationID, r.LeaseID = q.OperationId, q.LeaseId
	case *messages.ReclaimRequest:
		r.OperationID, r.LeaseID = q.OperationId, q.LeaseId
	case *messages.GetResourceRequest:
		r.ResourceID, r.MinLSN, r.WaitMs = q.ResourceId, q.MinLsn, q.WaitMs
	case *messages.GetPoolRequest:
		r.PoolID, r.MinLSN, r.WaitMs = q.PoolId, q.MinLsn, q.WaitMs
	case *messages.GetRangeRequest:
		r.RangeID, r.MinLSN, r.WaitMs = q.RangeId, q.MinLsn, q.WaitMs
	case *messages.GetLeaseRequest:
		r.LeaseID, r.MinLSN, r.WaitMs = q.LeaseId, q.MinLsn, q.WaitMs
	case *messages.ListLeasesRequest:
		r.HolderID, r.Limit = q.HolderId, q.Limit
	case *messages.DeleteResourceRequest:
		r.OperationID, r.ResourceID = q.OperationId, q.ResourceId
	case *messages.DeletePoolRequest:
		r.OperationID, r.PoolID = q.OperationId, q.PoolId
	case *messages.DeleteRangeRequest:
		r.OperationID, r.RangeID = q.OperationId, q.RangeId
	}
	return r, nil
}

// Attempt is one send of an operation.
type Attempt struct {
	Rec   *history.Record
	Reply *messages.Reply // nil when the attempt got no reply (Rec.Err)
}

// class of an attempt's outcome.
type class int

const (
	clsCommitted class = iota
	clsDefinite
	clsIndefinite
)

func (a *Attempt) class() class {
	switch {
	case a.Reply == nil:
		return clsIndefinite
	case a.Reply.Outcome == messages.OutcomeCommitted:
		return clsCommitted
	case a.Reply.Category == messages.CategoryDefinite:
		return clsDefinite
	}
	return clsIndefinite
}

// Status of a logical operation.
type Status int

// Statuses.
const (
	// Committed: a write with a committed reply (its lsn and result are final), or a read
	// with a committed answer.
	Committed Status = iota + 1
	// Rejected: every attempt was rejected definitely; the operation had no effect.
	Rejected
	// Unresolved: at least one attempt had an indefinite outcome and none committed.
	Unresolved
	// ReadFailed: a read that got no committed answer (it shows nothing).
	ReadFailed
)

func (s Status) String() string {
	switch s {
	case Committed:
		return "committed"
	case Rejected:
		return "rejected"
	case Unresolved:
		return "unresolved"
	case ReadFailed:
		return "read-failed"
	}
	return "?"
}

// Op is one logical operation: a write with all its attempts (one operation_id), or one
// read.
type Op struct {
	Idx      int // position in History.Ops
	Verb     string
	Tenant   string
	Key      string // operation_id, or the read's id
	Client   int
	Intent   string
	Req      Req
	Write    bool
	Attempts []*Attempt

	Status   Status
	Result   *messages.Reply // the first committed reply (writes), the reply (reads)
	Resolved *Attempt        // the attempt that carried Result
	Invoke   int64           // first attempt's invocation
	Return   int64           // the resolving attempt's response; the last attempt's when unresolved

	Shard    uint32 // the shard the operation goes to (not for lease.list)
	HasShard bool
}

// LSN is the committed lsn of a write (0 otherwise).
func (o *Op) LSN() uint64 {
	if o.Write && o.Status == Committed {
		return o.Result.Lsn
	}
	return 0
}

// Code is the result code ("" unless committed).
func (o *Op) Code() string {
	if o.Status == Committed {
		return o.Result.Code
	}
	return ""
}

// OK reports a committed ok.
func (o *Op) OK() bool { return o.Status == Committed && o.Result.Code == messages.CodeOK }

// Fresh reports that the resolving reply was not replayed from the retry cache.
func (o *Op) Fresh() bool { return o.Status == Committed && !o.Result.FromRetryCache }

func (o *Op) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "[%s c%d %s %s", fmtTime(o.Invoke), o.Client, o.Tenant, o.Verb)
	if o.Write {
		fmt.Fprintf(&sb, " op=%s", o.Key)
	}
	sb.WriteString(" ")
	sb.WriteString(o.reqString())
	fmt.Fprintf(&sb, " → ")
	switch o.Status {
	case Committed:
		sb.WriteString(replyString(o.Result))
	case Rejected:
		sb.WriteString("rejected/definite " + o.Attempts[len(o.Attempts)-1].Reply.Code)
	default:
		sb.WriteString(o.Status.String())
	}
	if len(o.Attempts) > 1 {
		fmt.Fprintf(&sb, " (%d attempts)", len(o.Attempts))
	}
	fmt.Fprintf(&sb, " %s]", fmtTime(o.Return))
	return sb.String()
}

func (o *Op) reqString() string {
	r := &o.Req
	switch o.Verb {
	case VResourceCreate, VResourceGet, VPoolGet, VRangeGet, VResourceDelete, VPoolDelete, VRangeDelete:
		s := r.ObjectID()
		if r.MinLSN > 0 {
			s += fmt.Sprintf(" min_lsn=%d", r.MinLSN)
		}
		return s
	case VPoolCreate:
		return fmt.Sprintf("%s cap=%d", r.PoolID, r.Capacity)
	case VRangeCreate:
		return fmt.Sprintf("%s [%d,%d] %s", r.RangeID, r.First, r.Last, r.Strategy)
	case VReserve:
		parts := make([]string, len(r.Members))
		for i, m := range r.Members {
			parts[i] = memberString(m)
		}
		s := fmt.Sprintf("holder=%s {%s}", r.HolderID, strings.Join(parts, ", "))
		if r.Activate {
			return s + " activate"
		}
		return s + fmt.Sprintf(" ttl=%dms", r.TTLMs)
	case VActivate, VRelease:
		return fmt.Sprintf("%s holder=%s epoch=%d", r.LeaseID, r.HolderID, r.Epoch)
	case VRenew:
		return fmt.Sprintf("%s holder=%s epoch=%d ttl=%dms", r.LeaseID, r.HolderID, r.Epoch, r.TTLMs)
	case VRevoke, VReclaim:
		return r.LeaseID
	case VLeaseGet:
		s := r.LeaseID
		if r.MinLSN > 0 {
			s += fmt.Sprintf(" min_lsn=%d", r.MinLSN)
		}
		return s
	case VList:
		if r.Limit != nil {
			return fmt.Sprintf("holder=%s limit=%d", r.HolderID, *r.Limit)
		}
		return "holder=" + r.HolderID
	}
	return ""
}

func memberString(m *messages.Member) string {
	switch {
	case m.ResourceId != "":
		return m.ResourceId
	case m.PoolId != "":
		return fmt.Sprintf("%s×%d", m.PoolId, m.Quantity)
	case m.Value != nil:
		return fmt.Sprintf("%s=%d", m.RangeId, *m.Value)
	}
	return m.RangeId + "=?"
}

func replyString(r *messages.Reply) string {
	var sb strings.Builder
	sb.WriteString(r.Code)
	if r.Lsn > 0 {
		fmt.Fprintf(&sb, " lsn=%d", r.Lsn)
	}
	if r.AppliedLsn > 0 {
		fmt.Fprintf(&sb, " applied=%d", r.AppliedLsn)
	}
	if r.FromRetryCache {
		sb.WriteString(" cached")
	}
	if r.EarliestDeadlineSlot > 0 {
		fmt.Fprintf(&sb, " until=%d", r.EarliestDeadlineSlot)
	}
	switch {
	case r.Lease != nil:
		sb.WriteString(" " + leaseString(r.Lease))
	case r.Resource != nil:
		fmt.Fprintf(&sb, " {%s %s lease=%s v%d}", r.Resource.ResourceId, r.Resource.State, r.Resource.CurrentLeaseId, r.Resource.Version)
	case r.Pool != nil:
		fmt.Fprintf(&sb, " {%s cap=%d res=%d act=%d avail=%d}", r.Pool.PoolId, r.Pool.Capacity, r.Pool.Reserved, r.Pool.Active, r.Pool.Available)
	case r.Range != nil:
		fmt.Fprintf(&sb, " {%s [%d,%d] %s alloc=%d free=%d}", r.Range.RangeId, r.Range.First, r.Range.Last, r.Range.Strategy, r.Range.Allocated, r.Range.Free)
	}
	if len(r.Leases) > 0 || r.Truncated {
		parts := make([]string, len(r.Leases))
		for i, l := range r.Leases {
			parts[i] = fmt.Sprintf("%s:%s/e%d", l.LeaseId, l.State, l.LeaseEpoch)
		}
		fmt.Fprintf(&sb, " [%s]", strings.Join(parts, " "))
		if r.Truncated {
			sb.WriteString(" truncated")
		}
	}
	return sb.String()
}

func leaseString(l *messages.Lease) string {
	parts := make([]string, len(l.Members))
	for i, m := range l.Members {
		parts[i] = memberString(m)
	}
	s := fmt.Sprintf("{%s %s e%d holder=%s", l.LeaseId, l.State, l.LeaseEpoch, l.HolderId)
	if l.DeadlineSlot > 0 {
		s += fmt.Sprintf(" deadline=%d", l.DeadlineSlot)
	}
	return s + " [" + strings.Join(parts, ", ") + "]}"
}

func fmtTime(ns int64) string {
	if ns >= farFuture {
		return "∞"
	}
	return strconv.FormatFloat(float64(ns)/1e9, 'f', 4, 64) + "s"
}

// farFuture stands for "after everything" in time comparisons.
const farFuture = int64(1) << 62

// Event is one decoded event of the stream.
type Event struct {
	Rec   *history.Record
	Ev    *messages.Event
	Shard uint32
	LSN   uint64
	N     int
}

func (e *Event) String() string {
	s := fmt.Sprintf("[event seq=%d id=%s %s %s slot=%d", e.Rec.Seq, e.Rec.MsgID, e.Ev.Tenant, e.Ev.Event, e.Ev.Slot)
	switch {
	case e.Ev.Lease != nil:
		s += " " + leaseString(e.Ev.Lease)
	case e.Ev.Resource != nil:
		s += " " + e.Ev.Resource.ResourceId
	case e.Ev.Pool != nil:
		s += fmt.Sprintf(" %s cap=%d", e.Ev.Pool.PoolId, e.Ev.Pool.Capacity)
	case e.Ev.Range != nil:
		s += fmt.Sprintf(" %s [%d,%d]", e.Ev.Range.RangeId, e.Ev.Range.First, e.Ev.Range.Last)
	}
	return s + "]"
}

// History is a round's records, decoded.
type History struct {
	Meta    history.Meta
	Ops     []*Op
	Events  []*Event
	Faults  []*history.Record
	Decode  []string // records that could not be decoded (reported by the replies checker)
	Tenants map[string]bool
}

// Build decodes the records of one round.
func Build(recs []history.Record) *History {
	h := &History{Tenants: map[string]bool{}}
	byKey := map[string]*Op{}
	for i := range recs {
		rec := &recs[i]
		switch rec.Kind {
		case history.KindMeta:
			if rec.Meta != nil {
				h.Meta = *rec.Meta
				for _, t := range rec.Meta.Tenants {
					h.Tenants[t] = true
				}
			}
		case history.KindFault:
			h.Faults = append(h.Faults, rec)
		case history.KindEvent:
			ev := &messages.Event{}
			if err := messages.UnmarshalJSONTolerant(rec.Event, ev); err != nil {
				h.Decode = append(h.Decode, fmt.Sprintf("event seq %d: %v", rec.Seq, err))
				continue
			}
			e := &Event{Rec: rec, Ev: ev, N: -1}
			if sh, lsn, n, ok := parseMsgID(rec.MsgID); ok {
				e.Shard, e.LSN, e.N = sh, lsn, n
			}
			h.Events = append(h.Events, e)
		case history.KindCall:
			a := &Attempt{Rec: rec}
			if rec.Err == "" {
				rep := &messages.Reply{}
				if err := messages.UnmarshalJSONTolerant(rec.Reply, rep); err != nil {
					h.Decode = append(h.Decode, fmt.Sprintf("reply of %s %s attempt %d: %v", rec.Verb, rec.Op, rec.Attempt, err))
					rec2 := *rec
					rec2.Err = history.ErrOther
					a.Rec = &rec2
				} else {
					a.Reply = rep
				}
			}
			key := rec.Tenant + "\x00" + rec.Intent + "\x00" + rec.Op
			op := byKey[key]
			if op == nil {
				req, err := DecodeRequest(rec.Verb, rec.Request)
				if err != nil {
					h.Decode = append(h.Decode, fmt.Sprintf("request of %s %s: %v", rec.Verb, rec.Op, err))
				}
				op = &Op{Idx: len(h.Ops), Verb: rec.Verb, Tenant: rec.Tenant, Key: rec.Op, Client: rec.Client,
					Intent: rec.Intent, Req: req, Write: IsWrite(rec.Verb)}
				byKey[key] = op
				h.Ops = append(h.Ops, op)
			}
			op.Attempts = append(op.Attempts, a)
		}
	}
	for _, op := range h.Ops {
		sort.SliceStable(op.Attempts, func(i, j int) bool { return op.Attempts[i].Rec.Invoke < op.Attempts[j].Rec.Invoke })
		h.resolve(op)
	}
	sort.SliceStable(h.Events, func(i, j int) bool { return h.Events[i].Rec.Seq < h.Events[j].Rec.Seq })
	return h
}

func parseMsgID(s string) (shard uint32, lsn uint64, n int, ok bool) {
	parts := strings.Split(s, "-")
	if len(parts) != 3 {
		return 0, 0, 0, false
	}
	a, err1 := strconv.ParseUint(parts[0], 10, 32)
	b, err2 := strconv.ParseUint(parts[1], 10, 64)
	c, err3 := strconv.Atoi(parts[2])
	if err1 != nil || err2 != nil || err3 != nil {
		return 0, 0, 0, false
	}
	return uint32(a), b, c, true
}

// resolve computes an operation's status, result, interval and shard.
func (h *History) resolve(op *Op) {
	op.Invoke = op.Attempts[0].Rec.Invoke
	last := op.Attempts[len(op.Attempts)-1]
	op.Return = last.Rec.Return
	if op.Return < op.Invoke {
		op.Return = op.Invoke
	}
	indefinite, shape := false, false
	for _, a := range op.Attempts {
		if a.Reply != nil && shapeRejection(a.Reply.Code) {
			shape = true
		}
		switch a.class() {
		case clsCommitted:
			if op.Result == nil {
				op.Result, op.Resolved = a.Reply, a
				op.Return = a.Rec.Return
			}
		case clsIndefinite:
			indefinite = true
		}
	}
	switch {
	case op.Result != nil:
		op.Status = Committed
	case !op.Write:
		op.Status = ReadFailed
	case indefinite && !shape:
		op.Status = Unresolved
		op.Return = farFuture // it may still take effect at any later moment
	default:
		op.Status = Rejected
	}
	h.placeShard(op)
}

func (h *History) placeShard(op *Op) {
	shards := h.Meta.Shards
	if shards == 0 {
		shards = 1
	}
	switch op.Verb {
	case VResourceCreate, VResourceGet, VPoolCreate, VPoolGet, VRangeCreate, VRangeGet, VResourceDelete, VPoolDelete, VRangeDelete:
		id := op.Req.ObjectID()
		op.Shard, op.HasShard = contract.ShardOf(op.Tenant, contract.PlacementKey(id), shards), id != ""
	case VReserve:
		if len(op.Req.Members) > 0 {
			m := op.Req.Members[0]
			id := m.ResourceId + m.PoolId + m.RangeId
			op.Shard, op.HasShard = contract.ShardOf(op.Tenant, contract.PlacementKey(id), shards), true
		}
	case VActivate, VRenew, VRelease, VRevoke, VReclaim, VLeaseGet:
		if sh, _, ok := contract.ParseLeaseID(op.Req.LeaseID); ok {
			op.Shard, op.HasShard = sh, true
		}
	}
}

// shapeRejection reports the rejection codes that depend on the request and the
// server's configuration alone (docs/api.md §4: checked before the journal, whatever the
// operation_id). A body answered one of them was never admitted, in any attempt, so it
// resolves an earlier indefinite outcome as "no effect".
func shapeRejection(code string) bool {
	switch code {
	case "invalid_request", "command_too_large", "cross_shard", "duplicate_member", "bundle_too_large", "ttl_out_of_range":
		return true
	}
	return false
}
