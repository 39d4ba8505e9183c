package check

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/integration/internal/history"
	"github.com/holdfast/holdfast/messages"
)

// domainCodes is docs/api.md §4's table of the domain codes each verb may answer (besides
// ok), written down here independently of the server's own table.
var domainCodes = map[string][]string{
	VResourceCreate: {"already_exists", "resource_table_full"},
	VPoolCreate:     {"already_exists", "pool_table_full"},
	VRangeCreate:    {"already_exists", "range_table_full"},
	VReserve: {"resource_not_found", "pool_not_found", "range_not_found", "resource_busy", "insufficient_capacity",
		"value_busy", "value_out_of_range", "range_exhausted", "lease_table_full", "lease_member_table_full", "expiration_index_full"},
	VActivate:       {"lease_not_found", "lease_retired", "holder_mismatch", "stale_epoch", "invalid_state", "lease_expired"},
	VRenew:          {"lease_not_found", "lease_retired", "holder_mismatch", "stale_epoch", "invalid_state", "lease_expired"},
	VRelease:        {"lease_not_found", "lease_retired", "holder_mismatch", "stale_epoch", "invalid_state"},
	VRevoke:         {"lease_not_found", "lease_retired", "invalid_state"},
	VReclaim:        {"lease_not_found", "lease_retired", "invalid_state"},
	VResourceGet:    {"resource_not_found"},
	VPoolGet:        {"pool_not_found"},
	VRangeGet:       {"range_not_found"},
	VLeaseGet:       {"lease_not_found", "lease_retired"},
	VList:           {},
	VResourceDelete: {"resource_not_found", "object_in_use"},
	VPoolDelete:     {"pool_not_found", "object_in_use"},
	VRangeDelete:    {"range_not_found", "object_in_use"},
	"(member-code)": {"resource_not_found", "pool_not_found", "range_not_found", "resource_busy", "insufficient_capacity", "value_busy", "value_out_of_range", "range_exhausted"},
}

// rejectionCategory is docs/api.md §4's category of each rejection code.
var rejectionCategory = map[string]string{
	"invalid_request": "definite", "command_too_large": "definite", "cross_shard": "definite",
	"duplicate_member": "definite", "bundle_too_large": "definite", "ttl_out_of_range": "definite",
	"slot_overflow": "definite", "overloaded": "definite", "lsn_exhausted": "definite",
	"operation_conflict": "definite", "operation_table_full": "definite", "fence_not_applied": "definite",
	"engine_halted": "indefinite", "storage_failure": "indefinite", "timeout": "indefinite",
}

func allowed(verb, code string) bool {
	if code == messages.CodeOK {
		return true
	}
	for _, c := range domainCodes[verb] {
		if c == code {
			return true
		}
	}
	return false
}

func isMemberCode(code string) bool {
	for _, c := range domainCodes["(member-code)"] {
		if c == code {
			return true
		}
	}
	return false
}

var memberIndexRE = regexp.MustCompile(`^members\[(\d+)\]`)

// memberIndex is the failing member of a reserve's domain failure, from its message
// (docs/api.md §5: "names the failing member by index"); -1 when it names none.
func memberIndex(r *messages.Reply) int {
	m := memberIndexRE.FindStringSubmatch(r.Message)
	if m == nil {
		return -1
	}
	i, err := strconv.Atoi(m[1])
	if err != nil {
		return -1
	}
	return i
}

// checkReplies: every reply is well formed (outcome, category, lsn, views) and its code
// is one docs/api.md allows for the verb.
func checkReplies(h *History, rep *Report) {
	for _, d := range h.Decode {
		rep.add(CReplies, "undecodable record: "+d)
	}
	for _, op := range h.Ops {
		if op.Intent == history.IntentHostile {
			continue
		}
		for _, a := range op.Attempts {
			if a.Reply == nil {
				continue
			}
			rep.count(CReplies, 1)
			if msg := replyProblem(h, op, a.Reply); msg != "" {
				rep.add(CReplies, msg, attemptLines(op)...)
			}
		}
	}
}

func replyProblem(h *History, op *Op, r *messages.Reply) string {
	switch r.Outcome {
	case messages.OutcomeRejected:
		cat, ok := rejectionCategory[r.Code]
		switch {
		case !ok:
			return fmt.Sprintf("rejected with %q, not a rejection code", r.Code)
		case r.Category != cat:
			return fmt.Sprintf("%s must be %s, was %q", r.Code, cat, r.Category)
		case r.Lsn != 0 || r.FromRetryCache:
			return "a rejection carries an lsn or from_retry_cache"
		case r.Code == "fence_not_applied" && (op.Write || op.Req.MinLSN == 0):
			return "fence_not_applied without a min_lsn"
		case r.Message == "":
			return "a rejection without a message"
		}
		return ""
	case messages.OutcomeCommitted:
	default:
		return fmt.Sprintf("outcome %q", r.Outcome)
	}
	if r.Category != "" {
		return "a committed reply with a category"
	}
	if !allowed(op.Verb, r.Code) {
		return fmt.Sprintf("%s may not answer %q", op.Verb, r.Code)
	}
	if !op.Write {
		if r.Lsn != 0 || r.FromRetryCache {
			return "a read with an lsn or from_retry_cache"
		}
		return readViewProblem(op, r)
	}
	if r.Lsn == 0 {
		return "a committed write without an lsn"
	}
	if r.Code != messages.CodeOK && r.Message == "" {
		return "a domain failure without a message"
	}
	// docs/api.md §5: a reserve's domain failure names the failing member, replays too.
	if op.Verb == VReserve && isMemberCode(r.Code) {
		if i := memberIndex(r); i < 0 || i >= len(op.Req.Members) {
			return fmt.Sprintf("a reserve's %s does not name a member of the request: %q", r.Code, r.Message)
		}
	}
	if (op.Verb == VReserve || leaseVerb(op.Verb)) && r.Code != messages.CodeOK && r.Lease != nil {
		return "a failed lease verb shows a lease"
	}
	if r.Code != messages.CodeOK || r.FromRetryCache {
		return ""
	}
	switch op.Verb {
	case VReserve:
		l := r.Lease
		if l == nil {
			return "reserve ok without its lease"
		}
		if want := contract.FormatLeaseID(op.Shard, r.Lsn); l.LeaseId != want || l.CreatedLsn != r.Lsn {
			return fmt.Sprintf("lease id %s / created_lsn %d, want %s from the committing entry", l.LeaseId, l.CreatedLsn, want)
		}
		want := "reserved"
		if op.Req.Activate {
			want = "active"
		}
		if l.State != want || l.LeaseEpoch != 1 || l.HolderId != op.Req.HolderID {
			return fmt.Sprintf("new lease %s, want state %s epoch 1 holder %s", leaseString(l), want, op.Req.HolderID)
		}
		if (l.DeadlineSlot == 0) != op.Req.Activate {
			return "a reserved lease without a deadline, or an active one with one"
		}
		if len(l.Members) != len(op.Req.Members) {
			return "the lease's members differ from the request's"
		}
		for i, m := range op.Req.Members {
			v := l.Members[i]
			if v.ResourceId != m.ResourceId || v.PoolId != m.PoolId || v.RangeId != m.RangeId || v.Quantity != m.Quantity ||
				(m.RangeId != "" && v.Value == nil) || (m.Value != nil && (v.Value == nil || *v.Value != *m.Value)) {
				return fmt.Sprintf("member %d is %s, the request asked for %s", i, memberString(v), memberString(m))
			}
		}
	case VActivate, VRenew, VRelease, VRevoke, VReclaim:
		if r.Lease == nil || r.Lease.LeaseId != op.Req.LeaseID {
			return "a lease verb's ok without the lease"
		}
	case VResourceCreate:
		if r.Resource == nil || r.Resource.ResourceId != op.Req.ResourceID {
			return "create without its resource"
		}
	case VPoolCreate:
		if r.Pool == nil || r.Pool.PoolId != op.Req.PoolID || r.Pool.Capacity != op.Req.Capacity {
			return "create without its pool"
		}
	case VRangeCreate:
		if r.Range == nil || r.Range.RangeId != op.Req.RangeID || r.Range.First != op.Req.First || r.Range.Last != op.Req.Last {
			return "create without its range"
		}
	case VResourceDelete, VPoolDelete, VRangeDelete:
		if r.FromRetryCache {
			break // a replay of a delete carries no view (docs/api.md §4)
		}
		if eventObjectIDOf(r.Resource, r.Pool, r.Range) != op.Req.ObjectID() {
			return "delete without the object it deleted"
		}
	}
	return ""
}

func readViewProblem(op *Op, r *messages.Reply) string {
	ok := r.Code == messages.CodeOK
	switch op.Verb {
	case VResourceGet:
		if ok != (r.Resource != nil) || (ok && r.Resource.ResourceId != op.Req.ResourceID) {
			return "resource view missing or of another resource"
		}
	case VPoolGet:
		if ok != (r.Pool != nil) || (ok && r.Pool.PoolId != op.Req.PoolID) {
			return "pool view missing or of another pool"
		}
		if ok && r.Pool.Available != r.Pool.Capacity-r.Pool.Reserved-r.Pool.Active {
			return "pool available ≠ capacity − reserved − active"
		}
	case VRangeGet:
		if ok != (r.Range != nil) || (ok && r.Range.RangeId != op.Req.RangeID) {
			return "range view missing or of another range"
		}
	case VLeaseGet:
		if ok != (r.Lease != nil) || (ok && r.Lease.LeaseId != op.Req.LeaseID) {
			return "lease view missing or of another lease"
		}
	case VList:
		var prevShard uint32
		var prevLSN uint64
		for i, l := range r.Leases {
			if l.HolderId != op.Req.HolderID {
				return "lease.list shows another holder's lease"
			}
			if l.State != "reserved" && l.State != "active" && l.State != "revoking" {
				return "lease.list shows a lease that is not live"
			}
			sh, lsn, ok := contract.ParseLeaseID(l.LeaseId)
			if !ok || (i > 0 && (sh < prevShard || sh == prevShard && lsn <= prevLSN)) {
				return "lease.list is not ordered by shard, then lsn"
			}
			prevShard, prevLSN = sh, lsn
		}
		if op.Req.Limit != nil && uint32(len(r.Leases)) > *op.Req.Limit {
			return "lease.list returned more than its limit"
		}
		if h := len(r.AppliedLsns); h == 0 {
			return "lease.list without applied_lsns"
		}
	}
	return ""
}

// checkDedupe: one operation id → one lsn → one result. Every committed reply of an
// operation id agrees on code, lsn and lease id; the first send of an id is never a
// replay (unless the target resends forwards itself: Options.Forwarding); no two
// operation ids share a log position.
func checkDedupe(h *History, rep *Report, forwarding bool) {
	type key struct {
		tenant, op string
	}
	groups := map[key][]*Op{}
	for _, op := range h.Ops {
		if op.Write {
			k := key{op.Tenant, op.Key}
			groups[k] = append(groups[k], op)
		}
	}
	keys := make([]key, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return groups[keys[i]][0].Idx < groups[keys[j]][0].Idx })
	type pos struct {
		shard uint32
		lsn   uint64
	}
	owner := map[pos]*Op{}
	for _, k := range keys {
		ops := groups[k]
		rep.count(CDedupe, 1)
		var first *messages.Reply
		var firstOp *Op
		for _, op := range ops {
			for i, a := range op.Attempts {
				r := a.Reply
				if r == nil {
					continue
				}
				if r.Code == messages.CodeOperationConflict && op.Intent != history.IntentHostile {
					rep.add(CDedupe, "operation_conflict for a retry with the same body", attemptLines(op)...)
				}
				if shapeRejection(r.Code) && op.Status == Committed && op.Intent != history.IntentHostile {
					rep.add(CDedupe, "one body both committed and was rejected as malformed", attemptLines(op)...)
				}
				if r.Outcome != messages.OutcomeCommitted {
					continue
				}
				if i == 0 && r.FromRetryCache && op.Intent != history.IntentHostile && op == ops[0] && !forwarding {
					rep.add(CDedupe, "the first send of an operation id was answered from the retry cache", attemptLines(op)...)
				}
				if first == nil {
					first, firstOp = r, op
					continue
				}
				if r.Code != first.Code || r.Lsn != first.Lsn || r.EarliestDeadlineSlot != first.EarliestDeadlineSlot ||
					leaseIDOf(r) != leaseIDOf(first) && leaseIDOf(r) != "" && leaseIDOf(first) != "" {
					ex := attemptLines(firstOp)
					if op != firstOp {
						ex = append(ex, attemptLines(op)...)
					}
					rep.add(CDedupe, fmt.Sprintf("operation %s has two results: %s and %s", k.op, replyString(first), replyString(r)), ex...)
				}
			}
		}
		if first == nil || !firstOp.HasShard {
			continue
		}
		p := pos{firstOp.Shard, first.Lsn}
		if o := owner[p]; o != nil {
			rep.add(CDedupe, fmt.Sprintf("two operations committed at shard %d lsn %d", p.shard, p.lsn), opLines(o, firstOp)...)
		} else {
			owner[p] = firstOp
		}
	}
}

func leaseIDOf(r *messages.Reply) string {
	if r.Lease != nil && r.Code == messages.CodeOK {
		return r.Lease.LeaseId
	}
	return ""
}

// checkAmbiguity: every write with an indefinite outcome (engine_halted, storage_failure,
// timeout, no reply) was retried with the same operation id until one committed result.
func checkAmbiguity(h *History, rep *Report) {
	for _, op := range h.Ops {
		if !op.Write || op.Intent == history.IntentHostile {
			continue
		}
		indef := false
		for _, a := range op.Attempts {
			if a.class() == clsIndefinite {
				indef = true
				k := a.Rec.Err
				if a.Reply != nil {
					k = a.Reply.Code
				}
				rep.Stats.Indefinite[k]++
			}
		}
		if !indef {
			continue
		}
		rep.count(CAmbiguity, 1)
		if op.Status == Unresolved {
			rep.Stats.Unresolved++
			rep.add(CAmbiguity, "an indefinite outcome was never resolved by retrying the same operation id", attemptLines(op)...)
		}
	}
}

// position is one fact about a shard's log: op saw or produced position pos.
type position struct {
	op    *Op
	pos   uint64
	write bool
	inv   int64
	ret   int64
	part  string // for lease.list parts
}

// positions collects, per shard, every committed write's lsn and every read's applied
// position (lease.list: one per shard), with their real-time intervals.
func positions(h *History) map[uint32][]position {
	out := map[uint32][]position{}
	for _, op := range h.Ops {
		if op.Intent == history.IntentHostile {
			continue
		}
		switch {
		case op.Write && op.Status == Committed && op.HasShard:
			out[op.Shard] = append(out[op.Shard], position{op: op, pos: op.Result.Lsn, write: true, inv: op.Invoke, ret: op.Return})
		case !op.Write && op.Verb == VList && op.Status == Committed:
			for _, p := range op.Result.AppliedLsns {
				out[p.Shard] = append(out[p.Shard], position{op: op, pos: p.Lsn, inv: op.Invoke, ret: op.Return, part: fmt.Sprintf("shard %d part", p.Shard)})
			}
		case !op.Write && op.HasShard && len(op.Attempts) == 1 && op.Attempts[0].Reply != nil:
			r := op.Attempts[0].Reply
			if r.Outcome == messages.OutcomeCommitted || r.Code == messages.CodeFenceNotApplied {
				out[op.Shard] = append(out[op.Shard], position{op: op, pos: r.AppliedLsn, inv: op.Invoke, ret: op.Attempts[0].Rec.Return})
			}
		}
	}
	return out
}

// checkRealtime: per shard, the log positions respect real time. If A's response came
// before B's invocation, B's lsn is above every position A saw or made (B a write), and
// B's applied position is at least as far (B a read). Applied state never goes back,
// across restarts included.
func checkRealtime(h *History, rep *Report) {
	for shard, ps := range positions(h) {
		byRet := append([]position(nil), ps...)
		sort.Slice(byRet, func(i, j int) bool { return byRet[i].ret < byRet[j].ret })
		byInv := append([]position(nil), ps...)
		sort.Slice(byInv, func(i, j int) bool { return byInv[i].inv < byInv[j].inv })
		j := 0
		var best *position
		for i := range byInv {
			b := &byInv[i]
			for j < len(byRet) && byRet[j].ret < b.inv {
				if best == nil || byRet[j].pos > best.pos {
					best = &byRet[j]
				}
				j++
			}
			rep.count(CRealtime, 1)
			if best == nil {
				continue
			}
			if (b.write && b.pos <= best.pos) || (!b.write && b.pos < best.pos) {
				what := "applied position"
				if b.write {
					what = "lsn"
				}
				rep.add(CRealtime, fmt.Sprintf("shard %d: %s %d of an operation invoked after another saw or made position %d", shard, what, b.pos, best.pos),
					opLines(best.op, b.op)...)
			}
		}
	}
}

// checkFence: a read with min_lsn answers from a position at or after it, or
// fence_not_applied from a position before it.
func checkFence(h *History, rep *Report) {
	for _, op := range h.Ops {
		if op.Write || op.Req.MinLSN == 0 || len(op.Attempts) == 0 || op.Attempts[0].Reply == nil || op.Intent == history.IntentHostile {
			continue
		}
		r := op.Attempts[0].Reply
		rep.count(CFence, 1)
		switch {
		case r.Outcome == messages.OutcomeCommitted && r.AppliedLsn < op.Req.MinLSN:
			rep.add(CFence, fmt.Sprintf("read with min_lsn %d answered from position %d", op.Req.MinLSN, r.AppliedLsn), opLines(op)...)
		case r.Code == messages.CodeFenceNotApplied && r.AppliedLsn >= op.Req.MinLSN:
			rep.add(CFence, fmt.Sprintf("fence_not_applied for min_lsn %d at position %d", op.Req.MinLSN, r.AppliedLsn), opLines(op)...)
		}
	}
}

// checkIsolation: a request in one tenant naming another tenant's lease, or a lease id the
// shard never issued, behaves exactly as if it did not exist.
func checkIsolation(h *History, rep *Report) {
	for _, op := range h.Ops {
		if op.Intent != history.IntentWrongTenant && op.Intent != history.IntentUnknownID {
			continue
		}
		if op.Status != Committed {
			continue
		}
		rep.count(CIsolation, 1)
		code := op.Result.Code
		if op.Verb == VList {
			if msg := wrongTenantList(op); msg != "" || code != messages.CodeOK {
				rep.add(CIsolation, "lease.list across tenants: "+msg+code, opLines(op)...)
			}
			continue
		}
		okCodes := map[string]bool{"lease_not_found": true, "resource_not_found": true, "pool_not_found": true, "range_not_found": true}
		if op.Intent == history.IntentWrongTenant {
			okCodes["lease_retired"] = true
		}
		if !okCodes[code] {
			rep.add(CIsolation, fmt.Sprintf("%s request answered %s instead of not found", op.Intent, code), opLines(op)...)
			continue
		}
		if op.Result.Lease != nil || op.Result.Resource != nil || op.Result.Pool != nil || op.Result.Range != nil || len(op.Result.Leases) > 0 {
			rep.add(CIsolation, "a not-found answer shows an object", opLines(op)...)
		}
	}
}
