package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/messages"
)

// printReplyJSON prints a reply in its JSON form on one line, with extra
// string fields added when given.
func printReplyJSON(e *env, rep *messages.Reply, extra map[string]string) {
	if rep == nil {
		rep = &messages.Reply{}
	}
	b, err := messages.MarshalJSON(rep)
	if err != nil {
		e.errorf("encode reply: %v", err)
		return
	}
	if len(extra) > 0 {
		var m map[string]json.RawMessage
		if json.Unmarshal(b, &m) == nil {
			for k, v := range extra {
				if v != "" {
					m[k], _ = json.Marshal(v)
				}
			}
			if nb, err := json.Marshal(m); err == nil {
				b = nb
			}
		}
	}
	fmt.Fprintf(e.stdout, "%s\n", b)
}

// printResult prints a committed result: the raw JSON reply with --json,
// else a status line and the view lines.
func printResult(e *env, r *client.Result, jsonOut bool, view func(w io.Writer)) int {
	if jsonOut {
		if len(r.Raw) > 0 {
			fmt.Fprintf(e.stdout, "%s\n", r.Raw)
		} else {
			printReplyJSON(e, r.Reply, nil)
		}
		return resultExit(r)
	}
	fmt.Fprintln(e.stdout, statusLine(r))
	if view != nil {
		view(e.stdout)
	}
	return resultExit(r)
}

// statusLine is the first line of a result:
//
//	ok lease.reserve lsn=1042 op=4f1c...
//	resource_busy lease.reserve lsn=1043 op=... : seat taken
//	ok resource.get applied_lsn=17
func statusLine(r *client.Result) string {
	var b strings.Builder
	b.WriteString(r.Code)
	b.WriteByte(' ')
	b.WriteString(r.Op)
	if r.LSN != 0 {
		b.WriteString(" lsn=" + strconv.FormatUint(r.LSN, 10))
	}
	if r.AppliedLSN != 0 {
		b.WriteString(" applied_lsn=" + strconv.FormatUint(r.AppliedLSN, 10))
	}
	if r.FromRetryCache {
		b.WriteString(" (from retry cache)")
	}
	if r.OperationID != "" {
		b.WriteString(" op=" + r.OperationID)
	}
	if r.Message != "" {
		b.WriteString(": " + r.Message)
	}
	return b.String()
}

// resourceLine: "resource node14/gpu0 state=reserved lease=3-1042 version=2".
func resourceLine(r *messages.Resource) string {
	s := fmt.Sprintf("resource %s state=%s", r.GetResourceId(), r.GetState())
	if r.GetCurrentLeaseId() != "" {
		s += " lease=" + r.GetCurrentLeaseId()
	}
	return s + fmt.Sprintf(" version=%d", r.GetVersion())
}

// poolLine: "pool node14/mem capacity=80 reserved=8 active=32 available=40".
func poolLine(p *messages.Pool) string {
	line := fmt.Sprintf("pool %s capacity=%d reserved=%d active=%d available=%d",
		p.GetPoolId(), p.GetCapacity(), p.GetReserved(), p.GetActive(), p.GetAvailable())
	if p.GetConsumed() != 0 {
		line += fmt.Sprintf(" consumed=%d", p.GetConsumed())
	}
	return line
}

// rangeLine: "range vxlan [4096..16777215] strategy=lowest_free allocated=3 free=16773117".
func rangeLine(r *messages.Range) string {
	strategy := r.GetStrategy()
	if strategy == "" {
		strategy = messages.StrategyLowestFree
	}
	f := func(v uint64) string { return client.FormatValue(r.GetFormat(), v) }
	line := fmt.Sprintf("range %s [%s..%s] strategy=%s allocated=%d free=%d",
		r.GetRangeId(), f(r.GetFirst()), f(r.GetLast()), strategy, r.GetAllocated(), r.GetFree())
	if r.GetExcluded() != 0 {
		line += fmt.Sprintf(" excluded=%d", r.GetExcluded())
	}
	if b := r.GetStaticBand(); b != nil {
		line += fmt.Sprintf(" static_band=%s..%s", f(b.GetFirst()), f(b.GetLast()))
	}
	if r.GetFormat() != "" {
		line += " format=" + r.GetFormat()
	}
	return line
}

// memberString renders a member as on the command line: "resource ID",
// "pool ID:QTY", "range ID" or "range ID=VALUE".
func memberString(m *messages.Member) string {
	switch {
	case m.GetResourceId() != "":
		return "resource " + m.GetResourceId()
	case m.GetPoolId() != "":
		return fmt.Sprintf("pool %s:%d", m.GetPoolId(), m.GetQuantity())
	case m.Value != nil:
		return fmt.Sprintf("range %s=%d", m.GetRangeId(), m.GetValue())
	default:
		return "range " + m.GetRangeId()
	}
}

func membersString(ms []*messages.Member) string {
	parts := make([]string, len(ms))
	for i, m := range ms {
		parts[i] = memberString(m)
	}
	return strings.Join(parts, ", ")
}

// leaseLine is the one-line form of a lease:
// "lease 3-1042 holder=alice state=reserved epoch=1 fence=3-1042@1 deadline_slot=99 members=resource n1/gpu0, pool n1/mem:4";
// with the slot length known (slot > 0), the deadline as a UTC time too
// ("deadline_slot=17955640224 deadline=2026-11-24T23:47:02.400Z").
func leaseLine(l *messages.Lease, slot time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "lease %s holder=%s state=%s epoch=%d fence=%s", l.GetLeaseId(), l.GetHolderId(), l.GetState(), l.GetLeaseEpoch(), client.FenceOf(l))
	if l.GetDeadlineSlot() != 0 && l.GetState() == messages.StateReserved {
		fmt.Fprintf(&b, " deadline_slot=%d", l.GetDeadlineSlot())
		if slot > 0 {
			b.WriteString(" deadline=" + slotStamp(l.GetDeadlineSlot(), slot))
		}
	}
	if len(l.GetMembers()) > 0 {
		b.WriteString(" members=" + membersString(l.GetMembers()))
	}
	if ls := labelPairs(l.GetLabels()); len(ls) > 0 {
		b.WriteString(" labels=" + strings.Join(ls, ","))
	}
	return b.String()
}

// labelPairs are a lease's labels as key=value, by key.
func labelPairs(ls map[string]string) []string {
	keys := make([]string, 0, len(ls))
	for k := range ls {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		keys[i] = k + "=" + ls[k]
	}
	return keys
}

// leaseBlock is the multi-line form of a lease, for a single-lease result. With the slot
// length known, the deadline and the end of its history window are shown as times too.
func leaseBlock(w io.Writer, l *messages.Lease, slot time.Duration, now time.Time) {
	if l == nil {
		return
	}
	fmt.Fprintf(w, "lease %s\n", l.GetLeaseId())
	fmt.Fprintf(w, "  holder   %s\n", l.GetHolderId())
	fmt.Fprintf(w, "  state    %s\n", l.GetState())
	fmt.Fprintf(w, "  epoch    %d\n", l.GetLeaseEpoch())
	fmt.Fprintf(w, "  fence    %s\n", client.FenceOf(l))
	var pos []string
	if v := l.GetCreatedLsn(); v != 0 {
		pos = append(pos, "created_lsn="+strconv.FormatUint(v, 10))
	}
	if v := l.GetDeadlineSlot(); v != 0 {
		pos = append(pos, "deadline_slot="+strconv.FormatUint(v, 10))
	}
	if v := l.GetReleasedLsn(); v != 0 {
		pos = append(pos, "released_lsn="+strconv.FormatUint(v, 10))
	}
	if v := l.GetRetireAfterSlot(); v != 0 {
		pos = append(pos, "retire_after_slot="+strconv.FormatUint(v, 10))
	}
	if len(pos) > 0 {
		fmt.Fprintf(w, "  log      %s\n", strings.Join(pos, " "))
	}
	if at := l.GetAllocatedAt(); at != "" {
		fmt.Fprintf(w, "  allocated %s\n", at)
	}
	if v := l.GetDeadlineSlot(); v != 0 && slot > 0 && l.GetState() == messages.StateReserved {
		fmt.Fprintf(w, "  expires  %s\n", whenString(client.SlotTime(v, slot), now))
	}
	if v := l.GetRetireAfterSlot(); v != 0 && slot > 0 {
		fmt.Fprintf(w, "  retires  %s\n", whenString(client.SlotTime(v, slot), now))
	}
	for _, m := range l.GetMembers() {
		fmt.Fprintf(w, "  member   %s\n", memberString(m))
	}
	for _, p := range labelPairs(l.GetLabels()) {
		fmt.Fprintf(w, "  label    %s\n", p)
	}
}

// eventLine is the one-line form of an event:
// "seq=12 lease.reserved tenant=default shard=2 lsn=1042 slot=99 lease 3-1042 holder=alice ...";
// with the slot length known (slot > 0), the slot and a lease's deadline as UTC times too
// ("slot=17955639924 time=2026-11-24T23:46:32.400Z").
func eventLine(ev client.Event, slot time.Duration) string {
	var b strings.Builder
	if ev.Sequence != 0 {
		fmt.Fprintf(&b, "seq=%d ", ev.Sequence)
	}
	fmt.Fprintf(&b, "%s tenant=%s shard=%d lsn=%d slot=%d", ev.GetEvent(), ev.GetTenant(), ev.GetShard(), ev.GetLsn(), ev.GetSlot())
	if slot > 0 && ev.GetSlot() != 0 {
		b.WriteString(" time=" + slotStamp(ev.GetSlot(), slot))
	}
	switch {
	case ev.GetLease() != nil:
		b.WriteString(" " + leaseLine(ev.GetLease(), slot))
	case ev.GetResource() != nil:
		b.WriteString(" " + resourceLine(ev.GetResource()))
	case ev.GetPool() != nil:
		b.WriteString(" " + poolLine(ev.GetPool()))
	case ev.GetRange() != nil:
		b.WriteString(" " + rangeLine(ev.GetRange()))
	case ev.GetRun() != nil:
		b.WriteString(" " + runLine(ev.GetRun()))
	case ev.GetWork() != nil:
		b.WriteString(" " + workLine(ev.GetWork()))
	}
	return b.String()
}

// slotStamp is the UTC time slot s starts at, to the millisecond.
func slotStamp(s uint64, slot time.Duration) string {
	return client.SlotTime(s, slot).UTC().Format("2006-01-02T15:04:05.000Z")
}

// whenString says how far t is from now, and when: "in 28.4s (14:16:40.300Z)", or
// "3.1s ago (…)" once past (under the labels "expires" and "retires"). A deadline is late,
// never early: the service may act on it a little after this time.
func whenString(t, now time.Time) string {
	at := t.UTC().Format("15:04:05.000Z")
	if d := t.Sub(now); d >= 0 {
		return fmt.Sprintf("in %s (%s)", d.Round(100*time.Millisecond), at)
	}
	return fmt.Sprintf("%s ago (%s)", now.Sub(t).Round(100*time.Millisecond), at)
}
