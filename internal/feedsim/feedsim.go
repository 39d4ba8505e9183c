// Package feedsim is the feed-as-journal protocol (docs/design.md, "What the events cost,
// and the feed as the journal") as pure state machines, for a simulation that explores
// every order of its steps up to a bound before the protocol is built: one shard's
// journal subject in the shared stream, the nodes that own it in turn, the appends in
// flight between them, crashes and lost replies.
//
// The protocol: an owner claims the subject (a claim message appended with the
// per-subject expected sequence it read), rebuilds from what the subject holds, and then
// appends each batch as one atomic batch — a record message (its entries, and the lsn
// through which the shard's events are stored, header "through") and the events of
// entries applied before it, on their own subjects — fenced by the subject's expected
// sequence, one append in flight. Entries are applied once their append is acknowledged;
// their events go with the next append (an events-only one when nothing else comes).
// A refused or unanswered append halts the owner; whoever claims next rebuilds.
package feedsim

import (
	"fmt"
	"slices"
	"strings"
)

// EventsPerEntry is how many events applying an entry yields in the model: an entry's
// events are (lsn, 0) .. (lsn, EventsPerEntry-1).
const EventsPerEntry = 2

// EventID names an event: its entry's lsn and its number within the entry.
type EventID struct{ LSN, N int }

// Msg is one message of the stream on the shard's subjects.
type Msg struct {
	Claim   int       // a claim message: the claimer's epoch (0 otherwise)
	Epoch   int       // the epoch of the owner that appended it
	LSNs    []int     // a record message: its entries
	Through int       // a record message: the shard's events are stored through this lsn
	Events  []EventID // the events appended with it (stored after it, same atomic batch)
}

// Append is an atomic batch on its way to the stream: a claim, or a record with events.
type Append struct {
	Node   int
	Expect int // the subject's last sequence it expects
	Msg    Msg // its Epoch is the sender's
}

// Node is one process that may own the shard.
type Node struct {
	Epoch   int   // the epoch it claimed (0: owns nothing)
	Serving bool  // claimed and rebuilt; halted owners are not serving
	Last    int   // the subject's last sequence as it knows it
	Applied []int // lsns applied (durable)
	Through int   // the lsn through which its events are in the stream, as it knows
	Waiting []int // entries sequenced, not yet in an append
	Flight  *Append
}

// World is the whole system.
type World struct {
	Stream  []Msg
	Nodes   []Node
	Net     []Append // appends on their way to the stream
	Replies []Reply  // the stream's answers on their way back
	Epochs  int      // epochs handed out
	// Bounds of the exploration: what may still happen.
	Writes, Crashes, Claims, Losses int
}

// Reply is the stream's answer to an append.
type Reply struct {
	Node, Epoch int
	OK          bool
	Seq         int // the record's (or claim's) subject sequence when OK
}

// NewWorld is a shard with nodes processes, none owning it yet.
func NewWorld(nodes, writes, crashes, claims, losses int) *World {
	return &World{Nodes: make([]Node, nodes), Writes: writes, Crashes: crashes, Claims: claims, Losses: losses}
}

// Clone copies w deeply.
func (w *World) Clone() *World {
	c := *w
	c.Stream = slices.Clone(w.Stream)
	c.Nodes = slices.Clone(w.Nodes)
	for i := range c.Nodes {
		n := &c.Nodes[i]
		n.Applied, n.Waiting = slices.Clone(n.Applied), slices.Clone(n.Waiting)
		if n.Flight != nil {
			f := *n.Flight
			n.Flight = &f
		}
	}
	c.Net, c.Replies = slices.Clone(w.Net), slices.Clone(w.Replies)
	return &c
}

// Step is one thing that can happen.
type Step struct {
	Kind string // claim, write, send, deliver, reply, lose, crash
	Node int
	I    int // which append or reply
}

func (s Step) String() string { return fmt.Sprintf("%s %d/%d", s.Kind, s.Node, s.I) }

// Steps lists what can happen in w, in a fixed order.
func (w *World) Steps() []Step {
	var ss []Step
	for i := range w.Nodes {
		n := &w.Nodes[i]
		if w.Claims > 0 && !n.Serving && n.Flight == nil {
			ss = append(ss, Step{Kind: "claim", Node: i})
		}
		if n.Serving && w.Writes > 0 {
			ss = append(ss, Step{Kind: "write", Node: i})
		}
		if n.Serving && n.Flight == nil && (len(n.Waiting) > 0 || n.Through < last(n.Applied)) {
			ss = append(ss, Step{Kind: "send", Node: i})
		}
		if w.Crashes > 0 {
			ss = append(ss, Step{Kind: "crash", Node: i})
		}
	}
	for i := range w.Net {
		ss = append(ss, Step{Kind: "deliver", I: i})
	}
	for i := range w.Replies {
		ss = append(ss, Step{Kind: "reply", I: i})
		if w.Losses > 0 {
			ss = append(ss, Step{Kind: "lose", I: i})
		}
	}
	return ss
}

func last(s []int) int {
	if len(s) == 0 {
		return 0
	}
	return s[len(s)-1]
}

// Do takes step s.
func (w *World) Do(s Step) {
	switch s.Kind {
	case "claim":
		w.Claims--
		n := &w.Nodes[s.Node]
		w.Epochs++
		// A claimer reads the subject's last sequence, then appends its claim expecting it.
		a := Append{Node: s.Node, Expect: len(w.Stream), Msg: Msg{Claim: w.Epochs, Epoch: w.Epochs}}
		*n = Node{Epoch: w.Epochs, Flight: &a}
		w.Net = append(w.Net, a)
	case "write":
		// The owner gives the entry the next lsn after what it has applied and sequenced
		// (after a rebuild: after the subject's last record).
		w.Writes--
		n := &w.Nodes[s.Node]
		n.Waiting = append(n.Waiting, max(last(n.Applied), last(n.Waiting))+1)
	case "send":
		n := &w.Nodes[s.Node]
		a := Append{Node: s.Node, Expect: n.Last, Msg: Msg{Epoch: n.Epoch,
			LSNs: slices.Clone(n.Waiting), Through: last(n.Applied), Events: eventsOf(n.Through, last(n.Applied))}}
		if mutation == "through-ahead" {
			a.Msg.Through = max(last(n.Applied), last(n.Waiting))
		}
		n.Waiting = nil
		n.Flight = &a
		w.Net = append(w.Net, a)
	case "deliver":
		a := w.Net[s.I]
		w.Net = slices.Delete(w.Net, s.I, s.I+1)
		r := Reply{Node: a.Node, Epoch: a.Msg.Epoch}
		if a.Expect == len(w.Stream) || mutation == "no-fence" { // the per-subject expectation: all or nothing
			w.Stream = append(w.Stream, a.Msg)
			r.OK, r.Seq = true, len(w.Stream) // the subject's sequences count from 1
		}
		w.Replies = append(w.Replies, r)
	case "reply", "lose":
		r := w.Replies[s.I]
		w.Replies = slices.Delete(w.Replies, s.I, s.I+1)
		n := &w.Nodes[r.Node]
		if n.Epoch != r.Epoch || n.Flight == nil {
			return // a node that crashed or claimed again since: not its append's answer any more
		}
		f := n.Flight
		n.Flight = nil
		if s.Kind == "lose" || !r.OK {
			if s.Kind == "lose" {
				w.Losses--
			}
			n.Serving = false // indefinite or refused: halt; a claim rebuilds
			return
		}
		n.Last = r.Seq
		if f.Msg.Claim != 0 {
			w.rebuild(n)
			return
		}
		n.Applied = append(n.Applied, f.Msg.LSNs...)
		n.Through = f.Msg.Through
	case "crash":
		w.Crashes--
		w.Nodes[s.Node] = Node{} // a restart with nothing in memory; its appends in flight may still land
	}
}

// rebuild makes a claimer's state from the subject: every record's entries are applied
// (they were stored, so durable), and the events are stored through the last record's
// "through".
func (w *World) rebuild(n *Node) {
	n.Applied, n.Through = nil, 0
	first := true
	for _, m := range w.Stream[:n.Last] {
		if m.Claim == 0 { // a record
			n.Applied = append(n.Applied, m.LSNs...)
			if mutation != "rebuild-first" || first {
				n.Through = m.Through
			}
			first = false
		}
	}
	n.Serving = true
}

// mutation breaks the protocol on purpose, for a test that shows the explorer finds it:
// "rebuild-first" keeps the first record's "through" instead of the last, "no-fence"
// stores an append whatever the subject's last sequence, "through-ahead" says in a
// record that the events of its own entries are stored too.
var mutation string

// eventsOf is the events of the entries after lsn through to lsn to.
func eventsOf(from, to int) []EventID {
	var es []EventID
	for lsn := from + 1; lsn <= to; lsn++ {
		for i := range EventsPerEntry {
			es = append(es, EventID{lsn, i})
		}
	}
	return es
}

// Check reports what is wrong with w: an event stored twice, events out of lsn order, an
// event stored before its entry, a record appended by an owner after a later claim.
func (w *World) Check() error {
	seen := map[EventID]bool{}
	stored := map[int]bool{}
	prev := EventID{}
	claim := 0
	for i, m := range w.Stream {
		if m.Claim != 0 {
			claim = m.Claim
			continue
		}
		if m.Epoch < claim {
			return fmt.Errorf("message %d: a record of epoch %d after the claim of epoch %d", i+1, m.Epoch, claim)
		}
		for _, e := range m.Events {
			if seen[e] {
				return fmt.Errorf("message %d: event %v stored twice", i+1, e)
			}
			if !stored[e.LSN] {
				return fmt.Errorf("message %d: event %v stored before its entry", i+1, e)
			}
			if prev.LSN > 0 && (e.LSN < prev.LSN || (e.LSN == prev.LSN && e.N <= prev.N)) {
				return fmt.Errorf("message %d: event %v after %v", i+1, e, prev)
			}
			seen[e], prev = true, e
		}
		for _, l := range m.LSNs {
			stored[l] = true
		}
	}
	return nil
}

// Settled reports, for a world where nothing is in flight and a node serves with nothing
// waiting, whether every stored entry's events are stored; "" when they are.
func (w *World) Settled() string {
	seen := map[EventID]bool{}
	var lsns []int
	for _, m := range w.Stream {
		lsns = append(lsns, m.LSNs...)
		for _, e := range m.Events {
			seen[e] = true
		}
	}
	for _, l := range lsns {
		for i := range EventsPerEntry {
			if !seen[EventID{l, i}] {
				return fmt.Sprintf("entry %d is stored but its event %d is not", l, i)
			}
		}
	}
	return ""
}

// Key is a canonical form of w, for the explorer's memory of visited states.
func (w *World) Key() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v|%v|%v|%d %d %d %d %d|", w.Stream, w.Net, w.Replies, w.Epochs, w.Writes, w.Crashes, w.Claims, w.Losses)
	for _, n := range w.Nodes {
		fmt.Fprintf(&b, "%d %v %d %d %v %v %v;", n.Epoch, n.Serving, n.Last, n.Through, n.Applied, n.Waiting, n.Flight != nil)
		if n.Flight != nil {
			fmt.Fprintf(&b, "%v", *n.Flight)
		}
	}
	return b.String()
}
