package xshard

import (
	"fmt"
	"slices"
)

// Parallel commits (docs/design.md, "Parallel commits"): the client is answered once the
// home's begin and every participant's prepare are durable — the transaction is then
// implicitly committed — and the home's commit record follows off the client's path. A
// home that restarts with a begin it never decided cannot abort it, as the two-round
// protocol does: its client may have been answered. It sends the prepares again instead:
// a participant that holds its prepare durably answers prepared again, one that does not
// prepares now or refuses (or tells it to die), as for any prepare. Every vote prepared:
// the home commits; a refusal: it aborts, and no client was answered ok, because that
// participant's prepare was never durable. No other message is needed.

// blindRecovery makes a home with parallel commits abort what it never decided when it
// restarts, as the two-round protocol's home does: a broken protocol (a client answered ok,
// then its bundle aborted) for the test that shows the checker catches it.
var blindRecovery bool

// hastyRecovery makes a home with parallel commits commit what it never decided when it
// restarts, without asking: a broken protocol (a bundle committed whose prepare was never
// durable on some participant) for the test that shows the checker catches it.
var hastyRecovery bool

// recoverBegins is a restarted home's start: with parallel commits it sends the prepares
// of every begin it holds durably and never decided again; without, it aborts them.
func (w *World) recoverBegins(s int) {
	n := w.Nodes[s]
	for _, r := range n.Durable {
		if r.Kind != recBegin || n.decided(r.Txn, true) != "" {
			continue
		}
		t := w.Txns[r.Txn]
		switch {
		case !w.Parallel || blindRecovery:
			n.Pending = append(n.Pending, Record{recAbort, r.Txn})
			continue
		case hastyRecovery:
			n.recovering[t.ID] = map[int]bool{}
			w.commitAt(n, t)
			continue
		}
		n.votes[t.ID] = map[int]bool{}
		n.recovering[t.ID] = map[int]bool{}
		for _, p := range t.participants() {
			w.send(Message{msgPrepare, s, p, t.ID})
		}
	}
}

// commitAt is the home's commit of t with every vote in and its begin durable: with
// parallel commits the client is answered now, before the commit record is durable
// (unless a restart lost the client: recovery's commit answers nobody); the participants
// are told once it is, as without.
func (w *World) commitAt(n *Node, t *Txn) {
	n.Pending = append(n.Pending, Record{recCommit, t.ID})
	delete(n.votes, t.ID)
	recovered := n.recovering[t.ID] != nil
	delete(n.recovering, t.ID)
	if !w.Parallel {
		if earlyAnswer {
			w.Answers[t.ID] = "ok" // the mistake the simulation must catch
		}
		return
	}
	if !recovered {
		w.Answers[t.ID] = "ok"
	}
}

// implicit reports whether t is implicitly committed: its begin and every prepare durable.
func (w *World) implicit(t *Txn) bool {
	if !w.Nodes[t.Home].has(recBegin, t.ID, false) {
		return false
	}
	for _, p := range t.participants() {
		if !w.Nodes[p].has(recPrepare, t.ID, false) {
			return false
		}
	}
	return true
}

// checkParallel returns what t violates of parallel commits ("" none): an answer ok or a
// commit (the home's record, or a participant's apply) before t was implicitly committed,
// or an abort of t anywhere after its client was answered ok or a participant applied it.
func (w *World) checkParallel(t *Txn) string {
	home := w.Nodes[t.Home]
	implicit := w.implicit(t)
	applied := slices.ContainsFunc(t.participants(), func(p int) bool { return w.Nodes[p].has(recApplied, t.ID, true) })
	aborted := home.has(recAbort, t.ID, true) ||
		slices.ContainsFunc(t.participants(), func(p int) bool { return w.Nodes[p].has(recAborted, t.ID, true) })
	switch ok := w.Answers[t.ID] == "ok"; {
	case (ok || applied || home.has(recCommit, t.ID, true)) && !implicit:
		return fmt.Sprintf("t%d: answered ok or committed before its begin and every prepare were durable", t.ID)
	case ok && aborted:
		return fmt.Sprintf("t%d: answered ok, and aborted", t.ID)
	case applied && aborted:
		return fmt.Sprintf("t%d: applied by a participant, and aborted", t.ID)
	case home.has(recCommit, t.ID, true) && aborted:
		return fmt.Sprintf("t%d: committed by its home, and aborted", t.ID)
	}
	return ""
}
