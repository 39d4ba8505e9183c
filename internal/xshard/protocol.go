// Package xshard is the protocol of bundles across shards (docs/design.md, "Bundles across
// shards") as pure state machines, and the simulation that checks it before it serves: a
// transaction's home shard records the decision in its journal, participants hold
// intents, conflicts between transactions are settled by wait-die. Everything here is
// deterministic: a node's state is its journal (durable records, and records sequenced
// but not yet synced) plus what it holds in memory, which a crash loses.
package xshard

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Txn describes one bundle: its home shard, its priority (lower is older: wait-die) and
// the member it holds on each participant shard (the home included).
type Txn struct {
	ID       int
	Home     int
	Priority int
	Members  map[int]string // shard → member
	// Group is the import the transaction is a lease of (0: a bundle on its own): the
	// transactions of one group share their home and priority, are begun by one entry and
	// decided by one (imports.go).
	Group int
}

// Record kinds of a shard's journal.
const (
	recBegin   = "begin"   // home: the transaction record, durable before any commit
	recCommit  = "commit"  // home: the decision
	recAbort   = "abort"   // home: the decision (also written by recovery)
	recPrepare = "prepare" // participant: the members held as intents
	recApplied = "applied" // participant: the intents became the lease's members
	recAborted = "aborted" // participant: the intents were freed (or never taken)
	recGranted = "granted" // participant: a member held by a lease granted outside the model

	// Endings in two rounds: the home decides the end (end); each participant marks its
	// part ending — still held, read by nobody — (ending), and once every one has, each
	// frees it (free).
	recEnd    = "end"    // home: the lease ended (its client's release, its expiry)
	recEnding = "ending" // participant: the members are the lease's, ending: nobody reads them
	recFree   = "free"   // participant: the members are free
)

// Record is one journal entry.
type Record struct {
	Kind string
	Txn  int
}

// Message kinds between shards (and to the client).
const (
	msgPrepare  = "prepare"
	msgPrepared = "prepared"
	msgRefused  = "refused" // a member held by a granted lease: definite
	msgDie      = "die"     // a member under an older transaction's intent: the younger one aborts (wait-die)
	msgCommit   = "commit"
	msgAbort    = "abort"
	msgAck      = "ack" // a participant applied the decision
	msgQuery    = "query"

	msgEnding   = "ending"    // home → participant: the lease ended; mark the part ending
	msgEndingOK = "ending-ok" // participant → home: marked (durably)
	msgFree     = "free"      // home → participant: every part is ending; free yours
	msgFreeOK   = "free-ok"   // participant → home: freed (durably)
)

// Message is one message in flight.
type Message struct {
	Kind     string
	From, To int
	Txn      int
}

func (m Message) String() string { return fmt.Sprintf("%s(t%d %d→%d)", m.Kind, m.Txn, m.From, m.To) }

// Node is one shard: its journal and what it keeps in memory.
type Node struct {
	Durable []Record
	Pending []Record // sequenced, not yet synced: a crash loses them

	// In memory (lost by a crash): the home's votes and waiting queriers, and prepares
	// parked behind an older transaction's intent.
	votes    map[int]map[int]bool // txn → participants that answered prepared
	queriers map[int]map[int]bool // txn → participants that asked
	acks     map[int]map[int]bool // txn → participants that applied the decision
	parked   []Message            // prepares waiting for an older intent's decision (or an ending)
	// The home's ending rounds: participants that marked their part ending, and that freed it.
	endingOK map[int]map[int]bool
	freeOK   map[int]map[int]bool
	// Parallel commits: the begins a restarted home is recovering (parallel.go).
	recovering map[int]map[int]bool
}

func newNode() *Node {
	return &Node{votes: map[int]map[int]bool{}, queriers: map[int]map[int]bool{}, acks: map[int]map[int]bool{},
		endingOK: map[int]map[int]bool{}, freeOK: map[int]map[int]bool{}, recovering: map[int]map[int]bool{}}
}

func (n *Node) clone() *Node {
	c := &Node{Durable: slices.Clone(n.Durable), Pending: slices.Clone(n.Pending), parked: slices.Clone(n.parked),
		votes: cloneSets(n.votes), queriers: cloneSets(n.queriers), acks: cloneSets(n.acks),
		endingOK: cloneSets(n.endingOK), freeOK: cloneSets(n.freeOK), recovering: cloneSets(n.recovering)}
	return c
}

// note adds p to the set of txn in m.
func note(m map[int]map[int]bool, txn, p int) {
	if m[txn] == nil {
		m[txn] = map[int]bool{}
	}
	m[txn][p] = true
}

func cloneSets(m map[int]map[int]bool) map[int]map[int]bool {
	c := make(map[int]map[int]bool, len(m))
	for k, v := range m {
		s := make(map[int]bool, len(v))
		for a, b := range v {
			s[a] = b
		}
		c[k] = s
	}
	return c
}

// has reports whether the journal (durable, and with pending also sequenced) holds
// record kind for txn.
func (n *Node) has(kind string, txn int, pending bool) bool {
	for _, r := range n.Durable {
		if r.Kind == kind && r.Txn == txn {
			return true
		}
	}
	if pending {
		for _, r := range n.Pending {
			if r.Kind == kind && r.Txn == txn {
				return true
			}
		}
	}
	return false
}

// decided is the home's decision on txn as its journal holds it ("" none).
func (n *Node) decided(txn int, pending bool) string {
	return n.firstOf(txn, pending, recCommit, recAbort)
}

// outcome is a participant's end of txn ("" none: an intent, or nothing).
func (n *Node) outcome(txn int) string { return n.firstOf(txn, true, recApplied, recAborted) }

// firstOf is the first of kinds the journal holds for txn ("" none).
func (n *Node) firstOf(txn int, pending bool, kinds ...string) string {
	for _, k := range kinds {
		if n.has(k, txn, pending) {
			return k
		}
	}
	return ""
}

// hold is what a shard's journal says of a member: free, an undecided transaction's
// intent, a granted lease's, or an ended lease's still (ending).
type hold int

const (
	holdFree hold = iota
	holdIntent
	holdHeld
	holdEnding
)

// holder is who holds member on this shard and how; the journal (with pending also what
// is sequenced, not synced) decides it.
func (n *Node) holder(member string, txns map[int]*Txn, shard int, pending bool) (txn int, h hold) {
	rs := slices.Clone(n.Durable)
	if pending {
		rs = append(rs, n.Pending...)
	}
	for _, r := range rs {
		t := txns[r.Txn]
		if t == nil || t.Members[shard] != member {
			continue
		}
		switch r.Kind {
		case recPrepare:
			txn, h = r.Txn, holdIntent
		case recApplied, recGranted:
			txn, h = r.Txn, holdHeld
		case recEnding:
			txn, h = r.Txn, holdEnding
		case recAborted, recFree:
			if txn == r.Txn {
				txn, h = 0, holdFree
			}
		}
	}
	return txn, h
}

// key identifies the node's state. A journal's records are kept as a set: each
// transaction's records on a shard only ever go begin → decision or prepare → outcome, so
// the set decides every holder, and interleavings that reach one set are one state.
func (n *Node) key(b *strings.Builder) {
	records := func(rs []Record) {
		c := slices.Clone(rs)
		slices.SortFunc(c, func(x, y Record) int {
			if x.Txn != y.Txn {
				return x.Txn - y.Txn
			}
			return strings.Compare(x.Kind, y.Kind)
		})
		for _, r := range c {
			b.WriteString(r.Kind[:3])
			b.WriteString(strconv.Itoa(r.Txn))
			b.WriteByte(',')
		}
		b.WriteByte('|')
	}
	records(n.Durable)
	records(n.Pending)
	parked := make([]string, len(n.parked))
	for i, m := range n.parked {
		parked[i] = m.String()
	}
	slices.Sort(parked)
	b.WriteString(strings.Join(parked, ","))
	b.WriteByte('|')
	for _, m := range []map[int]map[int]bool{n.votes, n.queriers, n.acks, n.endingOK, n.freeOK, n.recovering} {
		keys := make([]int, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			b.WriteString(strconv.Itoa(k))
			b.WriteByte(':')
			for p := range 8 {
				if m[k][p] {
					b.WriteString(strconv.Itoa(p))
				}
			}
			b.WriteByte(';')
		}
		b.WriteByte('|')
	}
}
