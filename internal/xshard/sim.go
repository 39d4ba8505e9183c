package xshard

import (
	"fmt"
	"slices"
	"strings"
)

// Event is one step the world can take.
type Event struct {
	Kind  string // submit, deliver, drop, dup, sync, crash, timeout, query, resend
	Shard int
	Txn   int
	Msg   Message
}

func (e Event) String() string {
	switch e.Kind {
	case "deliver", "drop", "dup":
		return e.Kind + " " + e.Msg.String()
	case "submit", "timeout", "end":
		return fmt.Sprintf("%s t%d", e.Kind, e.Txn)
	case "query", "resend", "resend-ending", "resend-free", "resend-recover":
		return fmt.Sprintf("%s t%d at %d", e.Kind, e.Txn, e.Shard)
	}
	return fmt.Sprintf("%s %d", e.Kind, e.Shard)
}

// Events lists every event enabled in w, in a fixed order.
func (w *World) Events() []Event {
	var es []Event
	ids := make([]int, 0, len(w.Txns))
	for id := range w.Txns {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		t := w.Txns[id]
		if t.Priority >= 0 && !w.Submitted[id] && w.first(t) {
			es = append(es, Event{Kind: "submit", Txn: id})
		}
		if home := w.Nodes[t.Home]; w.Ends && t.Priority >= 0 && home.has(recCommit, id, false) && !home.has(recEnd, id, true) {
			es = append(es, Event{Kind: "end", Txn: id})
		}
	}
	for _, m := range w.Net {
		es = append(es, Event{Kind: "deliver", Msg: m})
		if w.Drops > 0 {
			es = append(es, Event{Kind: "drop", Msg: m})
		}
		if w.Dups > 0 {
			es = append(es, Event{Kind: "dup", Msg: m})
		}
	}
	for s, n := range w.Nodes {
		if len(n.Pending) > 0 {
			es = append(es, Event{Kind: "sync", Shard: s})
		}
		if w.Crashes > 0 {
			es = append(es, Event{Kind: "crash", Shard: s})
		}
	}
	for _, id := range ids {
		t := w.Txns[id]
		if t.Priority < 0 || !w.Submitted[id] || !w.Timers {
			continue
		}
		home := w.Nodes[t.Home]
		if home.votes[id] != nil && home.decided(id, true) == "" && home.recovering[id] == nil {
			es = append(es, Event{Kind: "timeout", Txn: id, Shard: t.Home})
		}
		for _, p := range t.participants() {
			n := w.Nodes[p]
			if n.has(recPrepare, id, false) && n.outcome(id) == "" && !home.queriers[id][p] &&
				!slices.Contains(w.Net, Message{msgQuery, p, t.Home, id}) {
				es = append(es, Event{Kind: "query", Txn: id, Shard: p})
			}
			// A recovering home's prepares, resent until answered (one parked behind another
			// transaction's intent is not lost: it is answered when that one is decided).
			prep := Message{msgPrepare, t.Home, p, id}
			if home.recovering[id] != nil && !home.votes[id][p] && !slices.Contains(w.Net, prep) && !slices.Contains(n.parked, prep) {
				es = append(es, Event{Kind: "resend-recover", Txn: id, Shard: p})
			}
			d := home.decided(id, false)
			kind := map[string]string{recCommit: msgCommit, recAbort: msgAbort}[d]
			if d != "" && !home.acks[id][p] && !slices.Contains(w.Net, Message{kind, t.Home, p, id}) {
				es = append(es, Event{Kind: "resend", Txn: id, Shard: p})
			}
			// The ending rounds, resent until answered: after a restart of the home, whose
			// memory of the answers is gone, from the first round again.
			ended := home.has(recEnd, id, false)
			if ended && !t.short() && !home.endingOK[id][p] && !slices.Contains(w.Net, Message{msgEnding, t.Home, p, id}) {
				es = append(es, Event{Kind: "resend-ending", Txn: id, Shard: p})
			}
			freeing := w.allMarked(t) || (t.short() && p != t.Home)
			if ended && freeing && !home.freeOK[id][p] && !slices.Contains(w.Net, Message{msgFree, t.Home, p, id}) {
				es = append(es, Event{Kind: "resend-free", Txn: id, Shard: p})
			}
		}
	}
	return es
}

// Step applies e to a copy of w and returns it.
func (w *World) Step(e Event) *World {
	c := w.clone()
	c.apply(e)
	if c.Crashes == 0 {
		// With no crash left on this path, when a record becomes durable cannot be seen:
		// sync at once (the orders of the messages it sends are still explored).
		c.syncAll()
	}
	return c
}

// syncAll syncs every shard until nothing is pending.
func (w *World) syncAll() {
	for again := true; again; {
		again = false
		for s, n := range w.Nodes {
			if len(n.Pending) > 0 {
				w.sync(s)
				again = true
			}
		}
	}
}

// apply applies e to w.
func (c *World) apply(e Event) {
	switch e.Kind {
	case "submit":
		c.submit(c.Txns[e.Txn])
	case "deliver", "drop", "dup":
		if e.Kind != "dup" {
			i := slices.Index(c.Net, e.Msg)
			c.Net = slices.Delete(c.Net, i, i+1)
		}
		switch e.Kind {
		case "drop":
			c.Drops--
		case "dup":
			c.Dups--
			c.deliver(e.Msg)
		default:
			c.deliver(e.Msg)
		}
	case "sync":
		c.sync(e.Shard)
	case "crash":
		c.Crashes--
		c.crash(e.Shard)
	case "timeout":
		c.abortGroup(c.Nodes[e.Shard], c.Txns[e.Txn], "timeout")
	case "end":
		c.end(c.Txns[e.Txn])
	case "resend-ending":
		c.send(Message{msgEnding, c.Txns[e.Txn].Home, e.Shard, e.Txn})
	case "resend-free":
		c.send(Message{msgFree, c.Txns[e.Txn].Home, e.Shard, e.Txn})
	case "resend-recover":
		c.send(Message{msgPrepare, c.Txns[e.Txn].Home, e.Shard, e.Txn})
	case "query":
		c.send(Message{msgQuery, e.Shard, c.Txns[e.Txn].Home, e.Txn})
	case "resend":
		t := c.Txns[e.Txn]
		kind := map[string]string{recCommit: msgCommit, recAbort: msgAbort}[c.Nodes[t.Home].decided(e.Txn, false)]
		c.send(Message{kind, t.Home, e.Shard, e.Txn})
	}
}

// Check returns what w violates of the protocol's safety ("" none).
func (w *World) Check() string {
	for id, t := range w.Txns {
		if t.Priority < 0 {
			continue
		}
		home := w.Nodes[t.Home]
		committed := home.has(recCommit, id, false)
		if committed && home.has(recAbort, id, false) {
			return fmt.Sprintf("t%d: the home recorded both commit and abort", id)
		}
		if w.Answers[id] == "ok" && !committed && !w.Parallel {
			return fmt.Sprintf("t%d: answered ok without a durable commit", id)
		}
		if w.Parallel {
			if bad := w.checkParallel(t); bad != "" {
				return bad
			}
		}
		for _, p := range t.participants() {
			n := w.Nodes[p]
			if n.has(recApplied, id, true) && !committed && !w.Parallel {
				return fmt.Sprintf("t%d: shard %d applied a commit the home has not made durable", id, p)
			}
			if n.has(recAborted, id, true) && committed {
				return fmt.Sprintf("t%d: shard %d aborted a committed transaction", id, p)
			}
			if n.has(recApplied, id, true) && n.has(recAborted, id, true) {
				return fmt.Sprintf("t%d: shard %d both applied and aborted", id, p)
			}
		}
		if bad := w.checkEnd(t, committed); bad != "" {
			return bad
		}
		if bad := w.checkGroup(t); bad != "" {
			return bad
		}
		if w.Answers[id] == "die" {
			older := false
			for _, u := range w.Txns {
				older = older || (u.Priority >= 0 && u.Priority < t.Priority)
			}
			if !older {
				return fmt.Sprintf("t%d: the oldest transaction was told to die", id)
			}
		}
	}
	for s, n := range w.Nodes {
		seen := map[string]int{}
		for _, t := range w.Txns {
			if m, ok := t.Members[s]; ok {
				if holder, h := n.holder(m, w.Txns, s, true); h != holdFree {
					if other, dup := seen[m]; dup && other != holder {
						return fmt.Sprintf("shard %d: member %s held by t%d and t%d", s, m, other, holder)
					}
					seen[m] = holder
				}
			}
		}
	}
	return ""
}

// checkEnd returns what t's end violates ("" none): a part ended or freed before the home
// made the end durable, or — what readers see — a member read free by t's end while
// another is still read held, or one read held after the end's client was answered. A
// reader sees what a shard has made durable; an intent and an ending member it does not
// see (it waits for them).
func (w *World) checkEnd(t *Txn, committed bool) string {
	home := w.Nodes[t.Home]
	heldAt, freedAt := -1, -1
	for _, p := range t.participants() {
		n := w.Nodes[p]
		if (n.has(recEnding, t.ID, false) || n.has(recFree, t.ID, false)) && !(committed && home.has(recEnd, t.ID, false)) {
			return fmt.Sprintf("t%d: shard %d ends its part before the home's end is durable", t.ID, p)
		}
		switch holder, h := n.holder(t.Members[p], w.Txns, p, false); {
		case holder == t.ID && h == holdHeld:
			heldAt = p
		case n.has(recFree, t.ID, false):
			freedAt = p
		}
	}
	switch {
	case heldAt >= 0 && freedAt >= 0:
		return fmt.Sprintf("t%d: its member on shard %d reads free, on shard %d still held", t.ID, freedAt, heldAt)
	case heldAt >= 0 && w.EndAnswered[t.ID]:
		return fmt.Sprintf("t%d: its end was answered, its member on shard %d still reads held", t.ID, heldAt)
	}
	return ""
}

// Settle runs w without faults until nothing is left to do — every pending record
// synced, every message delivered, every query and resend sent — and returns it. Timers
// that abort fire only when nothing else can happen (a quiet network).
func (w *World) Settle() *World {
	w, _ = w.settle()
	return w
}

// settle is Settle, checking safety after every step: the first violation, if any.
func (w *World) settle() (*World, string) {
	w = w.clone()
	w.Crashes, w.Drops, w.Dups, w.Timers = 0, 0, 0, true
	for range 1000 {
		var next *Event
		var timeout *Event
		for _, e := range w.Events() {
			if e.Kind == "timeout" {
				if timeout == nil {
					timeout = &e
				}
				continue
			}
			next = &e
			break
		}
		if next == nil && timeout != nil && w.Waitless {
			return w, "only a timeout can decide t" + fmt.Sprint(timeout.Txn) + ": transactions wait on each other"
		}
		if next == nil {
			next = timeout
		}
		if next == nil {
			return w, ""
		}
		w.apply(*next)
		if bad := w.Check(); bad != "" {
			return w, bad + " (while settling, at " + next.String() + ")"
		}
	}
	panic("xshard: the world does not settle")
}

// CheckSettled returns what a settled world violates of the protocol's liveness: every
// transaction decided at its home (or never begun durably) and its decision applied on
// every participant; no intent, no parked prepare left.
func (w *World) CheckSettled() string {
	if bad := w.Check(); bad != "" {
		return bad
	}
	for id, t := range w.Txns {
		if t.Priority < 0 || !w.Submitted[id] {
			continue
		}
		d := w.Nodes[t.Home].decided(id, false)
		for _, p := range t.participants() {
			n := w.Nodes[p]
			prepared := n.has(recPrepare, id, false)
			switch {
			case d == recCommit && !n.has(recApplied, id, false):
				return fmt.Sprintf("t%d committed, shard %d has not applied it", id, p)
			case d != recCommit && prepared && !n.has(recAborted, id, false):
				return fmt.Sprintf("t%d not committed (%q), shard %d still holds its intent", id, d, p)
			}
		}
		if d == recCommit && w.Answers[id] != "ok" && !(w.Parallel && w.Answers[id] == "") {
			// With parallel commits a restart may lose the answer of a bundle its recovery
			// commits: the client's request is then indefinite, as any lost reply.
			return fmt.Sprintf("t%d committed, its client was answered %q", id, w.Answers[id])
		}
		if w.Answers[id] == "ok" && d != recCommit {
			return fmt.Sprintf("t%d answered ok, and not committed (%q)", id, d)
		}
		if w.Nodes[t.Home].has(recEnd, id, false) {
			for _, p := range t.participants() {
				if !w.Nodes[p].has(recFree, id, false) {
					return fmt.Sprintf("t%d ended, shard %d has not freed its part", id, p)
				}
			}
		}
	}
	for s, n := range w.Nodes {
		if len(n.parked) > 0 || len(n.Pending) > 0 {
			return fmt.Sprintf("shard %d: %d parked prepares, %d pending records left", s, len(n.parked), len(n.Pending))
		}
	}
	if len(w.Net) > 0 {
		return fmt.Sprintf("messages left in flight: %v", w.Net)
	}
	return ""
}

// Explore visits every world reachable from w (each state once), checking safety after
// every step and liveness after settling every state it reaches; it stops at the first
// violation, returning it with the events that led there, or after limit states.
func Explore(w *World, limit int) (states int, violation string) {
	seen := map[string]bool{}
	type frame struct {
		w    *World
		path []Event
	}
	stack := []frame{{w: w}}
	for len(stack) > 0 && states < limit {
		f := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		key := f.w.Key()
		if seen[key] {
			continue
		}
		seen[key] = true
		states++
		if bad := f.w.Check(); bad != "" {
			return states, trace(bad, f.path)
		}
		settled, bad := f.w.settle()
		if bad == "" {
			bad = settled.CheckSettled()
		}
		if bad != "" {
			return states, trace(bad+" (settling from there)", f.path)
		}
		for _, e := range f.w.Events() {
			stack = append(stack, frame{w: f.w.Step(e), path: append(slices.Clone(f.path), e)})
		}
	}
	return states, ""
}

func trace(bad string, path []Event) string {
	steps := make([]string, len(path))
	for i, e := range path {
		steps[i] = e.String()
	}
	return bad + "\n  after: " + strings.Join(steps, "\n         ")
}
