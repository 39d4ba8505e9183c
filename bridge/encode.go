package bridge

import (
	"strconv"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/messages"
	"github.com/holdfast/holdfast/wire"
)

// encodeReply renders a call's result in the encoding of its request.
func encodeReply(c *call) ([]byte, error) {
	m := replyMessage(c)
	if c.b != nil && c.b.cfg.Holders.Bound {
		c.caller.redact(m)
	}
	return marshalReply(m, c.proto)
}

// marshalReply encodes a reply as protobuf or JSON.
func marshalReply(m *messages.Reply, proto bool) ([]byte, error) {
	if proto {
		return messages.MarshalProto(m)
	}
	return messages.MarshalJSON(m)
}

// rejectionReply is the wire envelope of a rejection (docs/api.md §4): its outcome,
// code, category and message.
func rejectionReply(code kernel.Code, message string) *messages.Reply {
	m := &messages.Reply{Outcome: messages.OutcomeRejected, Code: code.String(), Category: messages.CategoryDefinite,
		Message: message}
	if code.IsIndefinite() {
		m.Category = messages.CategoryIndefinite
	}
	return m
}

// replyMessage maps a shard's (or the bridge's) reply to the wire envelope of docs/api.md §4.
func replyMessage(c *call) *messages.Reply {
	r := c.res
	read := c.spec.verb.IsRead()
	if r.Code.IsRejection() {
		m := rejectionReply(r.Code, r.Message)
		if read && c.parts == nil {
			m.AppliedLsn = r.AppliedLSN
		}
		return m
	}
	m := &messages.Reply{Code: r.Code.String()}
	if c.status != nil {
		c.status.Outcome, c.status.Code = messages.OutcomeCommitted, r.Code.String()
		return c.status
	}
	m.Outcome = messages.OutcomeCommitted
	m.FromRetryCache = r.FromRetryCache
	if read {
		m.AppliedLsn = r.AppliedLSN
	} else {
		m.Lsn = r.LSN
	}
	if r.Code != contract.CodeOK {
		m.Message = domainMessage(c)
	}
	if c.parts != nil {
		return spanningReply(c, m)
	}
	if r.Page != nil {
		pageReply(c, r.Page, m)
		return m
	}
	allocReply(c, m)
	objectView(c, m)
	// The work shard (beside the lease of a claim), a split's new work shards, the
	// capacity hint of a claim, and until when a busy claim may last.
	if r.HasWork && r.Work.Tenant == c.tenant {
		m.Work = wire.Work(c.op.shard, &r.Work)
		for i := range r.Children {
			m.Children = append(m.Children, wire.Work(c.op.shard, &r.Children[i]))
		}
		if r.Object == kernel.ObjectLease && !r.FromRetryCache {
			m.Capacity = &messages.Capacity{Claimable: r.Capacity.Claimable, EarliestDeadlineSlot: r.Capacity.EarliestDeadline}
		}
	}
	m.EarliestDeadlineSlot = r.EarliestDeadlineSlot
	return m
}

// objectView shows the reply's object, only when it belongs to the request's tenant. A
// lease view of a lease verb only with ok: a failed lease verb (also when it is replayed
// from the retry cache) must show nothing of a lease that is another holder's or another
// tenant's.
func objectView(c *call, m *messages.Reply) {
	r := c.res
	switch r.Object {
	case kernel.ObjectResource:
		if r.Resource.Tenant == c.tenant {
			m.Resource = wire.Resource(&r.Resource)
		}
	case kernel.ObjectPool:
		if r.Pool.Tenant == c.tenant {
			m.Pool = wire.Pool(&r.Pool)
		}
	case kernel.ObjectRange:
		if r.Range.Tenant == c.tenant {
			m.Range = wire.Range(&r.Range)
		}
	case kernel.ObjectLease:
		if r.Lease.Tenant == c.tenant && r.Code == contract.CodeOK {
			m.Lease = wire.Lease(&r.Lease)
		}
	case kernel.ObjectRun:
		if r.Run.Tenant == c.tenant {
			m.Run = wire.Run(&r.Run)
		}
	case kernel.ObjectWork:
		// A work verb that ended its claim shows the claim as it ended.
		if r.Lease.LSN != 0 && r.Lease.Tenant == c.tenant && r.Code == contract.CodeOK {
			m.Lease = wire.Lease(&r.Lease)
		}
	}
}

// appliedLSNs is each shard's position in a spanning reply: the position its part
// reflects (listings), or its entry (bulk verbs).
func appliedLSNs(parts []*actors.Reply, entries bool) []*messages.ShardLsn {
	out := make([]*messages.ShardLsn, len(parts))
	for i, p := range parts {
		lsn := p.AppliedLSN
		if entries {
			lsn = p.LSN
		}
		out[i] = &messages.ShardLsn{Shard: uint32(i), Lsn: lsn}
	}
	return out
}

// domainMessage is the human text of a committed domain outcome. It names only what the
// request itself named (a member's id and index), never another holder.
func domainMessage(c *call) string {
	r := c.res
	member := ""
	var members []kernel.Member
	prefix := ""
	if c.op.cmd != nil {
		members = c.op.cmd.Members
		if imports := c.op.cmd.Imports; r.ItemIndex >= 0 && r.ItemIndex < len(imports) {
			members, prefix = imports[r.ItemIndex].Members, "leases["+strconv.Itoa(r.ItemIndex)+"]."
		}
	}
	if r.MemberIndex >= 0 && r.MemberIndex < len(members) {
		mm := &members[r.MemberIndex]
		member = prefix + "members[" + strconv.Itoa(r.MemberIndex) + "]: "
		id, name := strconv.Quote(mm.ID), strconv.Quote(mm.Name)
		if r.Code == contract.CodeResourceBusy && mm.Kind == kernel.MemberWork {
			return member + "work shard " + name + " of run " + id + " is claimed by another lease"
		}
		switch r.Code {
		case contract.CodeResourceNotFound:
			return member + "resource " + id + " does not exist"
		case contract.CodePoolNotFound:
			return member + "pool " + id + " does not exist"
		case contract.CodeRangeNotFound:
			return member + "range " + id + " does not exist"
		case contract.CodeResourceBusy:
			return member + "resource " + id + " is held by another lease"
		case contract.CodeInsufficientCapacity:
			return member + "pool " + id + " has fewer than " + strconv.FormatUint(mm.Quantity, 10) + " units available"
		case contract.CodeValueBusy:
			return member + "value " + strconv.FormatUint(mm.Value, 10) + " of range " + id + " is held by another lease"
		case contract.CodeValueOutOfRange:
			return member + "value " + strconv.FormatUint(mm.Value, 10) + " is outside range " + id
		case contract.CodeValueExcluded:
			return member + "value " + strconv.FormatUint(mm.Value, 10) + " of range " + id + " is excluded: never handed out"
		case contract.CodeRangeExhausted:
			return member + "range " + id + " has no free value left"
		case contract.CodeRunNotFound:
			return member + "run " + id + " does not exist"
		case contract.CodeRunTerminal:
			return member + "run " + id + " has ended: nothing in it can be claimed"
		case contract.CodeWorkNotFound:
			return member + "run " + id + " has no work shard " + name
		case contract.CodeWorkTerminal:
			return member + "work shard " + name + " of run " + id + " is done, split or parked"
		case contract.CodeNoneAvailable:
			return member + "run " + id + " has no claimable work shard now (earliest_deadline_slot says when one may free up)"
		}
	}
	if t := verbTexts[c.spec.verb]; t != nil {
		if msg := t(c); msg != "" {
			return msg
		}
	}
	if msg, ok := codeTexts[r.Code]; ok {
		return msg
	}
	if r.Code == contract.CodeInvalidState {
		return "the lease's state does not allow " + c.spec.verb.String()
	}
	return r.Code.String()
}
