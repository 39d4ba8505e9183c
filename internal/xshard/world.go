package xshard

import (
	"fmt"
	"slices"
	"strings"
)

// World is the shards of a simulation, the messages in flight and what the clients were
// answered. Every step is one event; Events lists those enabled.
type World struct {
	Txns      map[int]*Txn
	Nodes     []*Node
	Net       []Message
	Submitted map[int]bool
	Answers   map[int]string // txn → what its client was answered: ok, refused, die

	// Budgets of faults left on this path.
	Crashes, Drops, Dups int
	// Timers: the exploration fires timeouts, queries and resends at any point (settling
	// always does, when nothing else is left). Without faults they only add orders.
	Timers bool
	// Waitless: settling must decide every transaction without a timeout (no two wait on
	// each other); set where no fault is explored.
	Waitless bool
	// Ends: a committed transaction's lease may end (its holder's release, its expiry) at
	// any point; EndAnswered records that the end's client was answered.
	Ends        bool
	EndAnswered map[int]bool
	// Parallel: parallel commits — the client answered once the begin and every prepare
	// are durable, recovery asking the participants (parallel.go).
	Parallel bool
}

// NewWorld is shards nodes and the transactions txns, none submitted; granted lists
// members held by leases granted before (shard → member).
func NewWorld(shards int, txns []*Txn, granted map[int]string, crashes, drops, dups int) *World {
	w := &World{Txns: map[int]*Txn{}, Submitted: map[int]bool{}, Answers: map[int]string{}, EndAnswered: map[int]bool{},
		Crashes: crashes, Drops: drops, Dups: dups, Timers: true}
	for range shards {
		w.Nodes = append(w.Nodes, newNode())
	}
	for _, t := range txns {
		w.Txns[t.ID] = t
	}
	for shard, member := range granted {
		// A lease outside the model (txn 0 would be "nobody"): its own txn id, committed.
		id := 100 + shard
		w.Txns[id] = &Txn{ID: id, Home: shard, Priority: -1, Members: map[int]string{shard: member}}
		w.Nodes[shard].Durable = append(w.Nodes[shard].Durable, Record{recGranted, id})
	}
	return w
}

func (w *World) clone() *World {
	c := &World{Txns: w.Txns, Net: slices.Clone(w.Net), Submitted: map[int]bool{}, Answers: map[int]string{},
		Crashes: w.Crashes, Drops: w.Drops, Dups: w.Dups, Timers: w.Timers, Waitless: w.Waitless,
		Ends: w.Ends, EndAnswered: map[int]bool{}, Parallel: w.Parallel}
	for k, v := range w.EndAnswered {
		c.EndAnswered[k] = v
	}
	for _, n := range w.Nodes {
		c.Nodes = append(c.Nodes, n.clone())
	}
	for k, v := range w.Submitted {
		c.Submitted[k] = v
	}
	for k, v := range w.Answers {
		c.Answers[k] = v
	}
	return c
}

// Key identifies the world's state (the simulation visits each once).
func (w *World) Key() string {
	var b strings.Builder
	for _, n := range w.Nodes {
		n.key(&b)
		b.WriteByte('#')
	}
	net := make([]string, len(w.Net))
	for i, m := range w.Net {
		net[i] = m.String()
	}
	slices.Sort(net)
	b.WriteString(strings.Join(net, ","))
	ids := make([]int, 0, len(w.Txns))
	for id := range w.Txns {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		fmt.Fprintf(&b, "#%d%v%s%v", id, w.Submitted[id], w.Answers[id], w.EndAnswered[id])
	}
	fmt.Fprintf(&b, "#%d%d%d", w.Crashes, w.Drops, w.Dups)
	return b.String()
}

func (w *World) send(m Message) {
	if !slices.Contains(w.Net, m) { // a message twice in flight is one more than the protocol needs
		w.Net = append(w.Net, m)
	}
}

// participants of t, in shard order.
func (t *Txn) participants() []int {
	var ps []int
	for s := range t.Members {
		ps = append(ps, s)
	}
	slices.Sort(ps)
	return ps
}

// submit: the client's reserve reaches the home, which sequences the begin and sends the
// prepares without waiting for its sync.
// An import submits its group's transactions in one entry.
func (w *World) submit(t *Txn) {
	home := w.Nodes[t.Home]
	for _, u := range w.groupOf(t) {
		w.Submitted[u.ID] = true
		home.Pending = append(home.Pending, Record{recBegin, u.ID})
		home.votes[u.ID] = map[int]bool{}
		for _, p := range u.participants() {
			w.send(Message{msgPrepare, u.Home, p, u.ID})
		}
	}
}

// deliver hands m to its node.
func (w *World) deliver(m Message) {
	n, t := w.Nodes[m.To], w.Txns[m.Txn]
	switch m.Kind {
	case msgPrepare:
		w.prepare(m.To, t, m)
	case msgPrepared:
		if _, pending := n.votes[t.ID]; pending && n.decided(t.ID, true) == "" {
			n.votes[t.ID][m.From] = true
			w.maybeCommit(t)
		}
	case msgRefused, msgDie:
		if _, pending := n.votes[t.ID]; pending && n.decided(t.ID, true) == "" {
			w.abortGroup(n, t, m.Kind)
		}
	case msgCommit:
		switch {
		case n.has(recApplied, t.ID, false):
			w.send(Message{msgAck, m.To, m.From, t.ID})
		case n.has(recPrepare, t.ID, true) && n.outcome(t.ID) == "":
			n.Pending = append(n.Pending, Record{recApplied, t.ID})
		}
	case msgAbort:
		switch {
		case n.has(recAborted, t.ID, false):
			w.send(Message{msgAck, m.To, m.From, t.ID})
		case n.outcome(t.ID) == "":
			// Also with no intent yet: the tombstone keeps a late prepare from taking one.
			n.Pending = append(n.Pending, Record{recAborted, t.ID})
		}
	case msgAck:
		if n.acks[t.ID] == nil {
			n.acks[t.ID] = map[int]bool{}
		}
		n.acks[t.ID][m.From] = true
	case msgEnding, msgEndingOK, msgFree, msgFreeOK:
		w.deliverEnd(m, n, t)
	case msgQuery:
		switch d := n.decided(t.ID, false); {
		case d == recCommit:
			w.send(Message{msgCommit, m.To, m.From, t.ID})
		case d == recAbort:
			w.send(Message{msgAbort, m.To, m.From, t.ID})
		case n.votes[t.ID] != nil || n.decided(t.ID, true) != "":
			// Pending in memory (or decided, not yet durable): answered at the decision.
			if n.queriers[t.ID] == nil {
				n.queriers[t.ID] = map[int]bool{}
			}
			n.queriers[t.ID][m.From] = true
		default:
			// Not known: no durable begin and nothing in memory. It can never commit.
			w.send(Message{msgAbort, m.To, m.From, t.ID})
		}
	}
}

// deliverEnd hands a message of an end's rounds to node n.
func (w *World) deliverEnd(m Message, n *Node, t *Txn) {
	switch m.Kind {
	case msgEnding:
		w.ending(m.To, t)
	case msgEndingOK:
		if n.has(recEnd, t.ID, false) && !n.endingOK[t.ID][m.From] {
			note(n.endingOK, t.ID, m.From)
			if w.allMarked(t) {
				// Every part is ending: nobody can read a member held now, so none is
				// read free before another is read held. Free them.
				w.EndAnswered[t.ID] = true
				for _, p := range t.participants() {
					w.send(Message{msgFree, m.To, p, t.ID})
				}
			}
		}
	case msgFree:
		switch {
		case n.has(recFree, t.ID, false):
			w.send(Message{msgFreeOK, m.To, m.From, t.ID})
		case n.has(recFree, t.ID, true):
			// answered at the sync
		case n.has(recPrepare, t.ID, true):
			// Ending, or — the one other shard of a short end — held still (or an intent
			// whose commit was lost, learnt with the end).
			if !n.has(recApplied, t.ID, true) {
				n.Pending = append(n.Pending, Record{recApplied, t.ID})
			}
			n.Pending = append(n.Pending, Record{recFree, t.ID})
			if endsFreeGroup {
				for _, u := range w.groupOf(t) {
					if u != t && n.has(recApplied, u.ID, true) && !n.has(recFree, u.ID, true) {
						n.Pending = append(n.Pending, Record{recFree, u.ID}) // the mistake the simulation must catch
					}
				}
			}
		}
	case msgFreeOK:
		note(n.freeOK, t.ID, m.From)
		if t.short() && m.From != t.Home && n.has(recEnd, t.ID, false) && !n.has(recFree, t.ID, true) {
			// The one other shard freed its part: the home frees its own, which was
			// ending from the end on, and answers.
			w.EndAnswered[t.ID] = true
			n.Pending = append(n.Pending, Record{recFree, t.ID})
		}
	}
}

// ending marks t's part on shard s ending (a part whose commit was lost learns it
// with the end), or answers again for one marked or freed already.
func (w *World) ending(s int, t *Txn) {
	n := w.Nodes[s]
	switch {
	case n.has(recEnding, t.ID, false) || n.has(recFree, t.ID, false):
		w.send(Message{msgEndingOK, s, t.Home, t.ID})
	case n.has(recEnding, t.ID, true):
		// answered at the sync
	case n.has(recPrepare, t.ID, true):
		if !n.has(recApplied, t.ID, true) {
			n.Pending = append(n.Pending, Record{recApplied, t.ID})
		}
		kind := recEnding
		if oneRoundEnds {
			kind = recFree // the mistake the simulation must catch: free at once
		}
		n.Pending = append(n.Pending, Record{kind, t.ID})
	}
}

// allMarked reports whether every participant of t told its home its part is ending.
func (w *World) allMarked(t *Txn) bool {
	for _, p := range t.participants() {
		if !w.Nodes[t.Home].endingOK[t.ID][p] {
			return false
		}
	}
	return true
}

// end is the lease's end at its home: journaled, then told to every participant. The
// home's own part is ending from the same entry on; with one other shard (short) that
// one is told to free its part at once: no other member can read held by then.
func (w *World) end(t *Txn) {
	home := w.Nodes[t.Home]
	home.Pending = append(home.Pending, Record{recEnd, t.ID})
	if t.short() && !shortEndsOff {
		if !home.has(recApplied, t.ID, true) {
			home.Pending = append(home.Pending, Record{recApplied, t.ID})
		}
		home.Pending = append(home.Pending, Record{recEnding, t.ID})
	}
}

// short reports whether t's end takes the short way: the home and one other shard.
func (t *Txn) short() bool {
	_, homeToo := t.Members[t.Home]
	return len(t.Members) == 2 && homeToo && !shortEndsOff
}

// shortEndsOff makes every end take both rounds (a test's switch).
var shortEndsOff bool

// oneRoundEnds frees each part as the end reaches it, as the first build did: a broken
// protocol (a member read free, then another read held) for the test that shows the
// checker catches it.
var oneRoundEnds bool

// prepare takes t's member on shard s as an intent, or says why not.
func (w *World) prepare(s int, t *Txn, m Message) {
	n := w.Nodes[s]
	switch {
	case n.outcome(t.ID) == recAborted:
		return // decided already; the home knows
	case n.has(recPrepare, t.ID, false):
		w.send(Message{msgPrepared, s, t.Home, t.ID}) // a resend: answer again
		return
	case n.has(recPrepare, t.ID, true):
		return // answered at the sync
	}
	holder, h := n.holder(t.Members[s], w.Txns, s, true)
	switch {
	case h == holdHeld:
		w.send(Message{msgRefused, s, t.Home, t.ID})
	case h == holdIntent && w.Txns[holder].Priority < t.Priority && !noWaitDie:
		w.send(Message{msgDie, s, t.Home, t.ID}) // the holder is older: the younger dies
	case h == holdIntent || h == holdEnding:
		// The holder is younger (wait for its decision), or ending (wait for its free).
		if !slices.Contains(n.parked, m) {
			n.parked = append(n.parked, m)
		}
	default:
		n.Pending = append(n.Pending, Record{recPrepare, t.ID})
	}
}

// maybeCommit decides commit once the home's begin is durable and every participant
// answered prepared.
// An import's transactions are committed together, once every one's are in.
func (w *World) maybeCommit(t *Txn) {
	n := w.Nodes[t.Home]
	together := w.decidedTogether(t)
	for _, u := range together {
		votes, pending := n.votes[u.ID]
		if !pending || !n.has(recBegin, u.ID, false) || n.decided(u.ID, true) != "" {
			return
		}
		for _, p := range u.participants() {
			if !votes[p] {
				return
			}
		}
	}
	for _, u := range together {
		w.commitAt(n, u)
	}
}

// noWaitDie makes every prepare wait for the intent it meets: a broken protocol (two
// bundles in opposite orders wait on each other) for the test that shows the checker
// catches it.
var noWaitDie bool

// earlyAnswer makes the home answer ok when it decides, before its commit is durable: a
// broken protocol for the test that shows the checker catches it.
var earlyAnswer bool

// sync makes shard s's pending records durable and does what waited for them.
func (w *World) sync(s int) {
	n := w.Nodes[s]
	synced := n.Pending
	n.Durable, n.Pending = append(n.Durable, synced...), nil
	for _, r := range synced {
		t := w.Txns[r.Txn]
		switch r.Kind {
		case recBegin:
			w.maybeCommit(t)
		case recPrepare:
			w.send(Message{msgPrepared, s, t.Home, t.ID})
		case recCommit, recAbort:
			if r.Kind == recCommit && !w.Parallel {
				w.Answers[t.ID] = "ok"
			} else if a := w.Answers[t.ID]; strings.HasPrefix(a, "pending-") {
				w.Answers[t.ID] = strings.TrimPrefix(a, "pending-")
			}
			kind := msgCommit
			if r.Kind == recAbort {
				kind = msgAbort
			}
			for _, p := range t.participants() {
				w.send(Message{kind, s, p, t.ID})
			}
			delete(n.queriers, t.ID)
		case recApplied, recAborted:
			w.send(Message{msgAck, s, t.Home, t.ID})
			w.unpark(s)
		case recEnd:
			for _, p := range t.participants() {
				if !t.short() {
					w.send(Message{msgEnding, s, p, t.ID})
				} else if p != t.Home {
					w.send(Message{msgFree, s, p, t.ID})
				}
			}
		case recEnding:
			if !(s == t.Home && t.short()) {
				w.send(Message{msgEndingOK, s, t.Home, t.ID})
			}
		case recFree:
			if oneRoundEnds {
				w.send(Message{msgEndingOK, s, t.Home, t.ID})
			}
			w.send(Message{msgFreeOK, s, t.Home, t.ID})
			w.unpark(s)
		}
	}
}

// unpark retries the prepares that waited on shard s.
func (w *World) unpark(s int) {
	n := w.Nodes[s]
	parked := n.parked
	n.parked = nil
	for _, m := range parked {
		w.prepare(s, w.Txns[m.Txn], m)
	}
}

// crash loses shard s's pending records, its memory and the messages in flight to it;
// it restarts at once from its durable journal. A home aborts every transaction it
// began and did not decide — it answered none of them, and their votes are gone — or,
// with parallel commits, prepares them again (recoverBegins).
func (w *World) crash(s int) {
	n := w.Nodes[s]
	w.Nodes[s] = newNode()
	w.Nodes[s].Durable = n.Durable
	w.Net = slices.DeleteFunc(w.Net, func(m Message) bool { return m.To == s })
	w.recoverBegins(s)
	for id, a := range w.Answers {
		if strings.HasPrefix(a, "pending-") && w.Txns[id].Home == s {
			delete(w.Answers, id) // the client's request got no answer (indefinite)
		}
	}
}
