package kernel

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/holdfast/holdfast/contract"
)

// Small helpers shared by model_test.go and replay_test.go: copying commands and outputs
// (an Output's lease members reuse its buffer, so anything kept must be copied) and
// printing them compactly for failure messages.

// mCloneCmd deep-copies a command; an empty member list becomes nil, as DecodeCommand
// produces it.
func mCloneCmd(c *Command) *Command {
	d := *c
	d.Members = nil
	if len(c.Members) > 0 {
		d.Members = append([]Member(nil), c.Members...)
	}
	d.Labels = nil
	if len(c.Labels) > 0 {
		d.Labels = append([]Label(nil), c.Labels...)
	}
	return &d
}

// mNormOut returns a copy of o that shares no memory with it; an empty member list
// becomes nil so that equal outputs compare equal whatever buffer they were written to.
func mNormOut(o Output) Output {
	if o.ItemIndex < 0 {
		o.ItemIndex = 0 // no import failed (the models build outputs without it)
	}
	if len(o.Lease.Members) == 0 {
		o.Lease.Members = nil
	} else {
		o.Lease.Members = append([]MemberView(nil), o.Lease.Members...)
	}
	return o
}

func mFmtMembers(ms []Member) string {
	var b strings.Builder
	for i, m := range ms {
		if i > 0 {
			b.WriteString(" ")
		}
		switch m.Kind {
		case MemberResource:
			fmt.Fprintf(&b, "res:%s", m.ID)
		case MemberPool:
			fmt.Fprintf(&b, "pool:%s*%d", m.ID, m.Quantity)
		case MemberRange:
			if m.HasValue {
				fmt.Fprintf(&b, "range:%s=%d", m.ID, m.Value)
			} else {
				fmt.Fprintf(&b, "range:%s=any", m.ID)
			}
		default:
			fmt.Fprintf(&b, "kind%d:%s(q=%d,v=%d,%v)", m.Kind, m.ID, m.Quantity, m.Value, m.HasValue)
		}
	}
	return b.String()
}

// mFmtCmd prints the fields a verb uses (and any stray ones), one line.
func mFmtCmd(c *Command) string {
	var b strings.Builder
	if c.Verb == contract.VerbConfigure {
		fmt.Fprintf(&b, "%s %+v", c.Verb, c.Settings)
		return b.String()
	}
	fmt.Fprintf(&b, "%s %q/%q", c.Verb, c.Tenant, c.OperationID)
	if c.ObjectID != "" {
		fmt.Fprintf(&b, " id=%q", c.ObjectID)
	}
	if c.Capacity != 0 {
		fmt.Fprintf(&b, " cap=%d", c.Capacity)
	}
	if c.Verb == contract.VerbCreateRange || c.First != 0 || c.Last != 0 {
		fmt.Fprintf(&b, " [%d,%d] %s", c.First, c.Last, c.Strategy)
	}
	if c.HolderID != "" {
		fmt.Fprintf(&b, " holder=%q", c.HolderID)
	}
	if len(c.Members) > 0 {
		fmt.Fprintf(&b, " members=[%s]", mFmtMembers(c.Members))
	}
	if c.Activate {
		b.WriteString(" activate")
	}
	if c.TTLMillis != 0 {
		fmt.Fprintf(&b, " ttl=%dms", c.TTLMillis)
	}
	if c.LeaseLSN != 0 {
		fmt.Fprintf(&b, " lease=%d", c.LeaseLSN)
	}
	if c.Epoch != 0 {
		fmt.Fprintf(&b, " epoch=%d", c.Epoch)
	}
	if c.Deadline != 0 {
		fmt.Fprintf(&b, " deadline=%d", c.Deadline)
	}
	if c.Value != 0 || c.Verb == contract.VerbReleaseValue || c.Verb == contract.VerbRevokeValue || c.Verb == contract.VerbReclaimValue {
		fmt.Fprintf(&b, " value=%d", c.Value)
	}
	if c.WholeLease {
		b.WriteString(" whole")
	}
	if len(c.Labels) > 0 {
		fmt.Fprintf(&b, " labels=%v", c.Labels)
	}
	return b.String()
}

func mFmtLease(v *LeaseView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "lease{%d-%d %s/%s %s e%d created=%d deadline=%d released=%d retire=%d [",
		v.Shard, v.LSN, v.Tenant, v.HolderID, v.State, v.Epoch, v.CreatedLSN, v.DeadlineSlot,
		v.ReleasedLSN, v.RetireAfterSlot)
	for i, m := range v.Members {
		if i > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "%d:%s q%d v%d", m.Kind, m.ID, m.Quantity, m.Value)
	}
	b.WriteString("]}")
	return b.String()
}

// mFmtOut prints an output with only its filled view.
func mFmtOut(o *Output) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s lsn=%d", o.Code, o.LSN)
	if o.FromRetryCache {
		b.WriteString(" retry")
	}
	if o.MemberIndex >= 0 {
		fmt.Fprintf(&b, " member=%d", o.MemberIndex)
	}
	if o.Event != EventNone {
		fmt.Fprintf(&b, " event=%s", o.Event)
	}
	switch o.Object {
	case ObjectResource:
		fmt.Fprintf(&b, " %+v", o.Resource)
	case ObjectPool:
		fmt.Fprintf(&b, " %+v", o.Pool)
	case ObjectRange:
		fmt.Fprintf(&b, " %+v", o.Range)
	case ObjectLease:
		b.WriteString(" " + mFmtLease(&o.Lease))
	}
	if o.Object == ObjectNone && (o.Resource != (ResourceView{}) || o.Pool != (PoolView{}) ||
		o.Range != (RangeView{}) || o.Lease.LSN != 0) {
		b.WriteString(" (stray view)")
	}
	return b.String()
}

// echoDiff asks the retry cache, at once, for the write k just applied (c as Admit left
// it) and says how its answer differs from the first one, "" when it does not or the
// outcome is not remembered (a rejection, an undecided bundle, no room). Nothing changed
// in between, so a retry must answer what the first reply answered: code and lsn, the
// failing member and item, earliest_deadline_slot, a bulk verb's count, the lease, the
// objects, a claim's capacity, a split's children. It differs only where the contract
// says: from_retry_cache, no events, a delete's object gone with it, and a lease verb's
// retry showing the work shard its lease holds where the first reply did not. It needs no
// model: once the models shared the kernel's blind spots (a replayed refusal without its
// hint, a split without its children).
func echoDiff(k *Kernel, c *Command, slot uint64, first *Output) string {
	var again Output
	if !k.LookupOperation(c, slot, &again) {
		return ""
	}
	if !again.FromRetryCache {
		return "not from the retry cache"
	}
	a, b := mNormOut(*first), mNormOut(again)
	a.FromRetryCache, a.Event, a.Changes, b.Event, b.Changes = true, 0, nil, 0, nil
	switch c.Verb {
	case contract.VerbDeleteResource, contract.VerbDeletePool, contract.VerbDeleteRange, contract.VerbDeleteRun:
		a.Object, a.Resource, a.Pool, a.Range, a.Run = b.Object, b.Resource, b.Pool, b.Range, b.Run
	}
	if !a.HasWork && b.HasWork {
		b.Work, b.HasWork = a.Work, false
	}
	if len(a.Children) == 0 && len(b.Children) == 0 {
		a.Children, b.Children = nil, nil
	}
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	var d []string
	for f := range va.NumField() {
		if x, y := va.Field(f).Interface(), vb.Field(f).Interface(); !reflect.DeepEqual(x, y) {
			d = append(d, fmt.Sprintf("%s: first %+v, again %+v", va.Type().Field(f).Name, x, y))
		}
	}
	return strings.Join(d, "; ")
}
