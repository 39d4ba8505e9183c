package actors

import (
	"reflect"
	"testing"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// peerSamples are one message of each kind, with every field set.
func peerSamples() []any {
	txn := kernel.TxnRef{Shard: 3, LSN: 1 << 40}
	return []any{
		&prepareMsg{txn: txn, priority: 77, tenant: "acme", holder: "vm-1", activate: true, members: []kernel.Member{
			{Kind: kernel.MemberResource, ID: "node14/gpu0"},
			{Kind: kernel.MemberPool, ID: "net/vni", Quantity: 4},
			{Kind: kernel.MemberRange, ID: "node14/ports", Value: 30001, HasValue: true},
			{Kind: kernel.MemberRange, ID: "cloud/cid"},
		}},
		&prepareMsg{txn: txn, priority: 78, tenant: "acme", members: []kernel.Member{
			{Kind: kernel.MemberResource, ID: "node14/gpu0"}, {Kind: kernel.MemberPool, ID: "net/vni", Quantity: 4}},
			imports: []kernel.ImportLease{{HolderID: "vm-1", Activate: true, Members: []kernel.Member{{Kind: kernel.MemberResource, ID: "node14/gpu0"}}},
				{HolderID: "vm-2"}, {HolderID: "vm-3", Members: []kernel.Member{{Kind: kernel.MemberPool, ID: "net/vni", Quantity: 4}}}}},
		&voteMsg{txn: txn, shard: 5, prepared: true, member: -1, members: []kernel.MemberView{
			{Kind: kernel.MemberRange, ID: "node14/ports", Value: 30001}, {Kind: kernel.MemberPool, ID: "net/vni", Quantity: 4}}},
		&voteMsg{txn: txn, shard: 5, code: contract.CodeResourceBusy, member: 2},
		&voteMsg{txn: txn, shard: 0, die: true, member: -1},
		&mirrorMsg{txn: txn, state: kernel.LeaseActive, deadline: 99, lease: 1<<40 + 3},
		&mirrorMsg{txn: txn},
		&queryMsg{txn: txn, shard: 7},
		&ackMsg{lease: 12, state: kernel.LeaseReleased, shard: 2},
		&mirrorMsg{txn: txn, priority: 77, state: kernel.LeaseExpired, lease: 1<<40 + 3, phase: kernel.PhaseEnding},
		&mirrorMsg{txn: txn, priority: 77, state: kernel.LeaseConsumed, lease: 1<<40 + 3, phase: kernel.PhaseFree},
		&ackMsg{lease: 12, state: kernel.LeaseReleased, phase: kernel.PhaseEnding, shard: 2},
		&ackMsg{lease: 12, state: kernel.LeaseReleased, phase: kernel.PhaseFree, shard: 2},
	}
}

// Every peer message reads back as it was sent.
func TestPeerMessagesRoundTrip(t *testing.T) {
	for _, m := range peerSamples() {
		got, err := decodePeer(encodePeer(m))
		if err != nil {
			t.Fatalf("%T: %v", m, err)
		}
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
		}
	}
}

// A peer message is read whole or refused: never a panic, never a message with bytes
// left over, and what is read writes back to the same bytes.
func FuzzDecodePeer(f *testing.F) {
	for _, m := range peerSamples() {
		f.Add(encodePeer(m))
	}
	f.Add([]byte{peerVersion + 1, peerAck, 0, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := decodePeer(b)
		if err != nil {
			return
		}
		again, err := decodePeer(encodePeer(m))
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("%x read as %+v, which reads back as %+v (%v)", b, m, again, err)
		}
	})
}
