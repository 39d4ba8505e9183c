package actors

import (
	"encoding/binary"
	"errors"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// Peers carries the messages of bundles across shards (bundles.go) to shards served by
// other processes of a cluster. The protocol takes any of them being lost (a prepare or
// vote by the home's prepare bound, a mirror by its resend, a query by the next one), so
// Send is fire and forget: it must not block, and what nobody takes is dropped.
type Peers interface {
	// Send hands msg (EncodePeer's form) to the owner of shard k, if any.
	Send(k uint32, msg []byte)
}

// The kinds of a peer message, its second byte (the first is peerVersion).
const (
	peerPrepare byte = 1 + iota
	peerVote
	peerMirror
	peerQuery
	peerAck
)

// peerVersion is the peer messages' format. A message of another version is dropped, as
// a lost one is: the protocol retries, and a node that cannot read its peers says so in
// its log (Deliver's error).
const peerVersion = 1

// Bounds a peer message's lengths are read against: the journal's (kernel/codec.go).
const (
	peerMaxMembers = 4096
	peerMaxString  = 256
)

// ErrBadPeerMessage is a peer message this build cannot read.
var ErrBadPeerMessage = errors.New("actors: malformed peer message")

// encodePeer is a bundle message in its wire form: prepares and mirrors as the commands
// they are journaled as (the kernel's binary form, one codec for both), votes, queries and
// acknowledgements as varints.
func encodePeer(msg any) []byte {
	b := []byte{peerVersion, 0}
	switch m := msg.(type) {
	case *prepareMsg:
		b[1] = peerPrepare
		if m.imports != nil {
			return groupCommand(m).AppendBinary(b)
		}
		c := kernel.Command{Verb: contract.VerbPrepare, Tenant: m.tenant, HolderID: m.holder, Activate: m.activate,
			Members: m.members, Txn: m.txn, Priority: m.priority}
		return c.AppendBinary(b)
	case *mirrorMsg:
		b[1] = peerMirror
		c := kernel.Command{Verb: contract.VerbMirror, Txn: m.txn, Priority: m.priority, State: m.state, Deadline: m.deadline,
			LeaseLSN: m.lease, Phase: m.phase}
		return c.AppendBinary(b)
	case *voteMsg:
		b[1] = peerVote
		b = appendTxn(b, m.txn)
		b = binary.AppendUvarint(b, uint64(m.shard))
		b = append(b, boolByte(m.prepared)|boolByte(m.die)<<1, byte(m.code))
		b = binary.AppendUvarint(b, uint64(m.member+1))
		b = binary.AppendUvarint(b, uint64(len(m.members)))
		for _, v := range m.members {
			b = append(b, byte(v.Kind))
			b = appendPeerString(appendPeerString(b, v.ID), v.Name)
			b = binary.AppendUvarint(binary.AppendUvarint(b, v.Quantity), v.Value)
		}
		return b
	case *queryMsg:
		b[1] = peerQuery
		return binary.AppendUvarint(binary.AppendUvarint(appendTxn(b, m.txn), uint64(m.shard)), m.priority)
	case *ackMsg:
		b[1] = peerAck
		b = binary.AppendUvarint(b, m.lease)
		b = append(b, byte(m.state))
		b = binary.AppendUvarint(b, uint64(m.shard))
		if m.phase != kernel.PhaseNone {
			b = append(b, byte(m.phase)) // after the first build's fields: its acks read the same
		}
		return b
	}
	panic("actors: not a peer message")
}

// decodePeer reads a message encodePeer wrote; what it cannot read whole is an error.
func decodePeer(b []byte) (any, error) {
	if len(b) < 2 || b[0] != peerVersion {
		return nil, ErrBadPeerMessage
	}
	r := peerReader{b: b[2:], ok: true}
	var msg any
	switch b[1] {
	case peerPrepare, peerMirror:
		var c kernel.Command
		if err := kernel.DecodeCommand(r.b, &c); err != nil {
			return nil, ErrBadPeerMessage
		}
		r.b = nil
		switch {
		case b[1] == peerPrepare && c.Verb == contract.VerbPrepare && c.Group:
			p := &prepareMsg{txn: c.Txn, priority: c.Priority, tenant: c.Tenant, imports: c.Imports}
			p.members = bundleMembers(&kernel.Command{Verb: contract.VerbImport, Imports: c.Imports})
			msg = p
		case b[1] == peerPrepare && c.Verb == contract.VerbPrepare:
			msg = &prepareMsg{txn: c.Txn, priority: c.Priority, tenant: c.Tenant, holder: c.HolderID,
				activate: c.Activate, members: c.Members}
		case b[1] == peerMirror && c.Verb == contract.VerbMirror:
			msg = &mirrorMsg{txn: c.Txn, priority: c.Priority, state: c.State, deadline: c.Deadline, lease: c.LeaseLSN, phase: c.Phase}
		default:
			return nil, ErrBadPeerMessage
		}
	case peerVote:
		v := &voteMsg{txn: r.txn(), shard: r.shard()}
		flags := r.byte()
		v.prepared, v.die = flags&1 != 0, flags&2 != 0
		v.code = contract.Code(r.byte())
		v.member = int(r.count(peerMaxMembers+1)) - 1
		n := r.count(peerMaxMembers)
		for i := uint64(0); i < n && r.ok; i++ {
			m := kernel.MemberView{Kind: kernel.MemberKind(r.byte()), ID: r.string(), Name: r.string()}
			m.Quantity, m.Value = r.uvarint(), r.uvarint()
			v.members = append(v.members, m)
		}
		if flags > 3 {
			r.ok = false
		}
		msg = v
	case peerQuery:
		msg = &queryMsg{txn: r.txn(), shard: r.shard(), priority: r.uvarint()}
	case peerAck:
		a := &ackMsg{lease: r.uvarint(), state: kernel.LeaseState(r.byte()), shard: r.shard()}
		if len(r.b) > 0 {
			if a.phase = kernel.Phase(r.byte()); a.phase == kernel.PhaseNone || a.phase > kernel.PhaseFree {
				r.ok = false
			}
		}
		msg = a
	default:
		return nil, ErrBadPeerMessage
	}
	if !r.ok || len(r.b) != 0 {
		return nil, ErrBadPeerMessage
	}
	return msg, nil
}

// Deliver hands a peer message for shard k to its actor, when k is open here; a message
// for a shard not open here is dropped, as one lost on the way.
func (s *System) Deliver(k uint32, data []byte) error {
	if k >= uint32(len(s.hosts)) {
		return ErrBadPeerMessage
	}
	msg, err := decodePeer(data)
	if err != nil {
		return err
	}
	if pid := s.hosts[k].pid.Load(); pid != nil {
		s.root.Send(pid, msg)
	}
	return nil
}

func appendTxn(b []byte, t kernel.TxnRef) []byte {
	return binary.AppendUvarint(binary.AppendUvarint(b, uint64(t.Shard)), t.LSN)
}

func appendPeerString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// peerReader reads varints and strings; the first short or oversized field clears ok.
type peerReader struct {
	b  []byte
	ok bool
}

func (r *peerReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.b, r.ok = nil, false
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *peerReader) count(max uint64) uint64 {
	v := r.uvarint()
	if v > max {
		r.b, r.ok = nil, false
		return 0
	}
	return v
}

func (r *peerReader) byte() byte {
	if len(r.b) == 0 {
		r.ok = false
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *peerReader) string() string {
	n := r.count(peerMaxString)
	if uint64(len(r.b)) < n {
		r.b, r.ok = nil, false
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *peerReader) shard() uint32 { return uint32(r.count(1<<32 - 1)) }

func (r *peerReader) txn() kernel.TxnRef { return kernel.TxnRef{Shard: r.shard(), LSN: r.uvarint()} }
