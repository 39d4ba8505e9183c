package actors

import (
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// Imports across shards (docs/design.md "lease.import across keys"): the runtime of a
// group — one coordinator for the import's leases, as for a bundle's members. Its members
// are the import's, flattened lease by lease (a vote's and a refusal's member indexes
// count in that order); each participant gets one prepare with its members of every lease
// and answers one vote; the home commits or aborts every lease in one decision. After the
// commit each lease is a bundle lease like any other (mirrors by its own transaction).

// bundleMembers is a begin's members in request order: a reserve's, or an import's
// leases' one after another.
func bundleMembers(c *kernel.Command) []kernel.Member {
	if c.Verb != contract.VerbImport {
		return c.Members
	}
	var ms []kernel.Member
	for i := range c.Imports {
		ms = append(ms, c.Imports[i].Members...)
	}
	return ms
}

// leaseOf is the lease of an import and the member's index in it, of flattened member f
// (-1, f past the import's members).
func leaseOf(c *kernel.Command, f int) (lease, member int) {
	for i := range c.Imports {
		if n := len(c.Imports[i].Members); f < n {
			return i, f
		} else {
			f -= n
		}
	}
	return -1, f
}

// groupTxns are the transactions whose parts a coordinator's participants may hold: a
// bundle's one, or an import's leases' (lease i's is n positions after its id, the last
// the import's own position).
func (co *coord) groupTxns() []kernel.TxnRef {
	if co.cmd.Verb != contract.VerbImport {
		return []kernel.TxnRef{co.txn}
	}
	n := len(co.cmd.Imports)
	txns := make([]kernel.TxnRef, n)
	for i := range n {
		txns[i] = kernel.GroupTxn(co.txn, n, i)
	}
	return txns
}

// freeParts tells participant shard to free whatever it prepared of co: an abort.
func (s *shard) freeParts(co *coord, shard uint32) {
	for _, txn := range co.groupTxns() {
		s.sendShard(shard, &mirrorMsg{txn: txn, priority: co.cmd.Priority})
	}
}

// groupPrepare is participant p's prepare of import co: each lease with its members there.
func groupPrepare(co *coord, p *coordPart) *prepareMsg {
	c := co.cmd
	m := &prepareMsg{txn: co.txn, priority: c.Priority, tenant: c.Tenant, imports: make([]kernel.ImportLease, len(c.Imports))}
	for i := range c.Imports {
		m.imports[i] = kernel.ImportLease{HolderID: c.Imports[i].HolderID, Activate: c.Imports[i].Activate}
	}
	members := bundleMembers(c)
	for _, f := range p.index {
		i, _ := leaseOf(c, f)
		m.imports[i].Members = append(m.imports[i].Members, members[f])
		m.members = append(m.members, members[f])
	}
	return m
}

// byLease cuts an import's flattened members into its leases'.
func byLease(c *kernel.Command, members []kernel.Member) [][]kernel.Member {
	split := make([][]kernel.Member, len(c.Imports))
	at := 0
	for i := range c.Imports {
		n := len(c.Imports[i].Members)
		split[i], at = members[at:at+n], at+n
	}
	return split
}

// groupDecide is the decision of import co: every lease committed with its members as the
// votes resolved them (members, flattened), or aborted with ref's refusal.
func groupDecide(co *coord, members []kernel.Member, ref refusal, commit bool) *kernel.Command {
	c := co.cmd
	d := &kernel.Command{Verb: contract.VerbDecide, Txn: co.txn, Group: true, Limit: uint32(len(c.Imports)), Commit: commit}
	if commit {
		for _, ms := range byLease(c, members) {
			d.Imports = append(d.Imports, kernel.ImportLease{Members: ms})
		}
		return d
	}
	d.Refusal = ref.code
	if lease, member := leaseOf(c, ref.member); ref.member >= 0 && lease >= 0 {
		d.RefusalMember, d.Value = uint32(member+1), uint64(lease+1)
	}
	return d
}

// groupRefusal is an import's answer to a refusal of flattened member f: the lease and
// its member (a table's refusal names neither).
func groupRefusal(c *kernel.Command, code contract.Code, f int) *Reply {
	r := &Reply{Code: code, MemberIndex: -1, ItemIndex: -1}
	if lease, member := leaseOf(c, f); f >= 0 && lease >= 0 {
		r.ItemIndex, r.MemberIndex = lease, member
	}
	return r
}

// groupEarly is import co's answer once every vote is in and its commit sequenced: each
// lease as its commit will show it (kernel.GroupView).
func (s *shard) groupEarly(co *coord, members []kernel.Member) *Reply {
	var out kernel.Output
	if !s.k.GroupView(co.txn.LSN, len(co.cmd.Imports), byLease(co.cmd, members), &out) {
		return nil
	}
	return replyFromOutput(&out, s.applied())
}

// groupCoord finds the coordinator of the import whose lease's transaction is txn (nil:
// none, or not an import's).
func (s *shard) groupCoord(txn kernel.TxnRef) *coord {
	if g, _ := s.k.GroupOf(txn.LSN); g != 0 {
		return s.b.coords[g]
	}
	return nil
}

// recoverGroup makes a restarted home's coordinator of the import its undecided lease at
// lsn belongs to, once, and prepares it again (parallel commits: its client may have been
// answered). It reports whether lsn is an import's.
func (s *shard) recoverGroup(lsn uint64) bool {
	g, n := s.k.GroupOf(lsn)
	if g == 0 {
		return false
	}
	s.b.init()
	if s.b.coords[g] != nil {
		return true // made for an earlier lease of it
	}
	if c := s.k.GroupCommand(g, n); c != nil {
		s.recoverCoord(kernel.TxnRef{Shard: s.h.shard, LSN: g}, c)
	}
	return true
}

// groupCommand is a participant's prepare of an import as it is journaled.
func groupCommand(m *prepareMsg) *kernel.Command {
	return &kernel.Command{Verb: contract.VerbPrepare, Tenant: m.tenant, Txn: m.txn, Priority: m.priority, Group: true,
		Imports: m.imports}
}

// partTxns are the transactions of a participant's parts of import m.
func partTxns(m *prepareMsg) []kernel.TxnRef {
	var txns []kernel.TxnRef
	for i := range m.imports {
		if len(m.imports[i].Members) > 0 {
			txns = append(txns, kernel.GroupTxn(m.txn, len(m.imports), i))
		}
	}
	return txns
}

// groupVote is a participant's vote on import m from its prepare's answer: its members of
// every lease in the prepare's order, or the refused member's index among them.
func groupVote(m *prepareMsg, r *Reply, v *voteMsg) {
	if r.Code == contract.CodeOK {
		for _, p := range r.Parts {
			v.members = append(v.members, p.Members...)
		}
		return
	}
	if r.ItemIndex < 0 || r.MemberIndex < 0 {
		v.member = -1
		return
	}
	f := r.MemberIndex
	for i := range r.ItemIndex {
		f += len(m.imports[i].Members)
	}
	v.member = f
}
