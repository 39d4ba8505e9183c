package xshard

import (
	"fmt"
	"slices"
)

// Imports across shards (docs/design.md, "`lease.import` across keys"): an import of n
// leases is n transactions — one a lease, each with its own members, participants and
// later its own end — begun by one entry at their common home and decided by one entry:
// a group. Every transaction of a group is committed, or none: the home commits them
// together once every one's votes are in, and a refusal, a die or a timeout of any one
// aborts them all. The participants see ordinary transactions. After the commit each
// lease lives alone: its end is its own, and frees none of its siblings' members.

// groupOf is t's group in id order: t alone when it belongs to none.
func (w *World) groupOf(t *Txn) []*Txn {
	if t.Group == 0 {
		return []*Txn{t}
	}
	var g []*Txn
	for _, u := range w.Txns {
		if u.Group == t.Group {
			g = append(g, u)
		}
	}
	slices.SortFunc(g, func(a, b *Txn) int { return a.ID - b.ID })
	return g
}

// first reports whether t is its group's first transaction (the one the client's import
// submits, and the one a group's events are listed under).
func (w *World) first(t *Txn) bool { return w.groupOf(t)[0] == t }

// splitDecisions makes the home decide each transaction of an import on its own votes, as
// a bundle's: a broken protocol (one lease of an import granted, another refused) for the
// test that shows the checker catches it.
var splitDecisions bool

// endsFreeGroup makes a lease's end free its siblings' members too: a broken protocol (a
// lease of an import freed while it lives: checkEnd sees its part freed without its end)
// for the test that shows the checker catches it.
var endsFreeGroup bool

// decidedTogether lists the transactions decided with t: its group, or with
// splitDecisions t alone.
func (w *World) decidedTogether(t *Txn) []*Txn {
	if splitDecisions {
		return []*Txn{t}
	}
	return w.groupOf(t)
}

// abortGroup journals the abort of every undecided transaction decided with t, and notes
// the client's answer once it is durable (kind: refused, die, timeout).
func (w *World) abortGroup(n *Node, t *Txn, kind string) {
	for _, u := range w.decidedTogether(t) {
		if n.decided(u.ID, true) != "" {
			continue
		}
		n.Pending = append(n.Pending, Record{recAbort, u.ID})
		delete(n.votes, u.ID)
		delete(n.recovering, u.ID)
		w.Answers[u.ID] = "pending-" + kind // answered once the abort is durable
	}
}

// checkGroup returns what t's group violates ("" none): one of its transactions
// committed (at the home, applied by a participant or answered ok) while another is
// aborted anywhere, or — with parallel commits — answered ok before every one of them
// was implicitly committed.
func (w *World) checkGroup(t *Txn) string {
	if t.Group == 0 || !w.first(t) {
		return ""
	}
	g := w.groupOf(t)
	committed, aborted := -1, -1
	for _, u := range g {
		home := w.Nodes[u.Home]
		if home.has(recCommit, u.ID, true) || w.Answers[u.ID] == "ok" ||
			slices.ContainsFunc(u.participants(), func(p int) bool { return w.Nodes[p].has(recApplied, u.ID, true) }) {
			committed = u.ID
		}
		if home.has(recAbort, u.ID, true) ||
			slices.ContainsFunc(u.participants(), func(p int) bool { return w.Nodes[p].has(recAborted, u.ID, true) }) {
			aborted = u.ID
		}
	}
	if committed >= 0 && aborted >= 0 {
		return fmt.Sprintf("import %d: t%d committed, t%d aborted", t.Group, committed, aborted)
	}
	if !w.Parallel {
		return ""
	}
	for _, u := range g {
		if w.Answers[u.ID] != "ok" {
			continue
		}
		for _, v := range g {
			if !w.implicit(v) {
				return fmt.Sprintf("import %d: t%d answered ok before t%d was implicitly committed", t.Group, u.ID, v.ID)
			}
		}
	}
	return ""
}
