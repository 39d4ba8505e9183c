package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/internal/natstest"
	"github.com/holdfast/holdfast/persistence"
)

func connectJS(t testing.TB, url string) jetstream.JetStream {
	_, js := natstest.Connect(t, url)
	return js
}

func openJournal(t *testing.T, js jetstream.JetStream, replicas int, node string, epoch uint64) *Journal {
	t.Helper()
	j, err := OpenJournal(context.Background(), JournalConfig{JS: js, Names: NamesFor("holdfast"), Shard: 3,
		Replicas: replicas, Node: node, Epoch: epoch})
	if err != nil {
		t.Fatal(err)
	}
	return j
}

func records(from, n uint64, size int) []persistence.Record {
	var b []persistence.Record
	for i := from; i < from+n; i++ {
		b = append(b, persistence.Record{LSN: i, Slot: 100 + i, Payload: bytes.Repeat([]byte{byte(i)}, size)})
	}
	return b
}

func replayAll(t *testing.T, j persistence.Journal, from uint64) []persistence.Record {
	t.Helper()
	var got []persistence.Record
	if err := j.Replay(from, func(r persistence.Record) error {
		r.Payload = append([]byte(nil), r.Payload...)
		got = append(got, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return got
}

func wantRecords(t *testing.T, got []persistence.Record, from, n uint64) {
	t.Helper()
	if uint64(len(got)) != n {
		t.Fatalf("replayed %d records, want %d", len(got), n)
	}
	for i, r := range got {
		if r.LSN != from+uint64(i) || r.Slot != 100+r.LSN || len(r.Payload) == 0 || r.Payload[0] != byte(r.LSN) {
			t.Fatalf("record %d: lsn %d slot %d", i, r.LSN, r.Slot)
		}
	}
}

// Records appended by one owner are replayed by the next, in order, whole, and a batch
// larger than a message goes as several.
func TestJournalAppendsAndTheNextOwnerReplays(t *testing.T) {
	js := connectJS(t, natstest.Start(t, 1).URL())
	j1 := openJournal(t, js, 1, "a", 1)
	if lsn, _ := j1.Last(); lsn != 0 {
		t.Fatalf("fresh journal at lsn %d", lsn)
	}
	wantRecords(t, replayAll(t, j1, 1), 1, 0)
	if err := j1.Append(records(1, 10, 100)); err != nil {
		t.Fatal(err)
	}
	if err := j1.Append(records(11, 40, 60<<10)); err != nil { // 2.4 MB: four messages
		t.Fatal(err)
	}
	if err := j1.Append(records(60, 1, 10)); !errors.Is(err, persistence.ErrOutOfOrder) {
		t.Fatalf("gap appended: %v", err)
	}
	j2 := openJournal(t, js, 1, "b", 2)
	if lsn, slot := j2.Last(); lsn != 50 || slot != 150 {
		t.Fatalf("next owner sees the journal at %d.%d, want 50.150", lsn, slot)
	}
	wantRecords(t, replayAll(t, j2, 1), 1, 50)
	wantRecords(t, replayAll(t, j2, 30), 30, 21)
}

// Once a new owner has claimed the journal, the former owner's appends are refused by
// JetStream and its journal fails; nothing it tried is replayed. On one server and on a
// replicated stream of three.
func TestJournalFencesTheFormerOwner(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("R%d", n), func(t *testing.T) {
			js := connectJS(t, natstest.Start(t, n).URL())
			old := openJournal(t, js, n, "a", 1)
			if err := old.Append(records(1, 5, 10)); err != nil {
				t.Fatal(err)
			}
			next := openJournal(t, js, n, "b", 2)
			err := old.Append(records(6, 1, 10))
			if !errors.Is(err, persistence.ErrFailed) {
				t.Fatalf("former owner appended after the claim: %v", err)
			}
			if err := old.Append(records(6, 1, 10)); !errors.Is(err, persistence.ErrFailed) {
				t.Fatalf("failed journal accepted an append: %v", err)
			}
			if err := next.Append(records(6, 3, 10)); err != nil {
				t.Fatal(err)
			}
			third := openJournal(t, js, n, "c", 3)
			wantRecords(t, replayAll(t, third, 1), 1, 8)
		})
	}
}

// A claim at an epoch already used is refused: two claims never share an epoch.
func TestJournalClaimEpochIsSpent(t *testing.T) {
	js := connectJS(t, natstest.Start(t, 1).URL())
	openJournal(t, js, 1, "a", 7)
	if _, err := OpenJournal(context.Background(), JournalConfig{JS: js, Names: NamesFor("holdfast"), Shard: 3, Node: "b", Epoch: 7}); err == nil {
		t.Fatal("second claim at epoch 7 accepted")
	}
}

// Compaction drops the messages a snapshot covers; a replay from before them says so.
func TestJournalCompacts(t *testing.T) {
	js := connectJS(t, natstest.Start(t, 1).URL())
	j := openJournal(t, js, 1, "a", 1)
	for i := uint64(0); i < 4; i++ {
		if err := j.Append(records(1+i*5, 5, 10)); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Compact(12); err != nil { // drops lsn 1..10
		t.Fatal(err)
	}
	next := openJournal(t, js, 1, "b", 2)
	wantRecords(t, replayAll(t, next, 13), 13, 8)
	for _, from := range []uint64{1, 5} {
		err := next.Replay(from, func(persistence.Record) error { return nil })
		if !errors.Is(err, persistence.ErrCompacted) {
			t.Fatalf("replay from compacted lsn %d: %v", from, err)
		}
	}
}

// A replay from any lsn gets exactly the records from there, whatever lies before them:
// batches of several owners, their claims, a batch split over several messages; and
// what the replay passed over is compacted.
func TestJournalReplaysFromAnyLSN(t *testing.T) {
	js := connectJS(t, natstest.Start(t, 1).URL())
	lsn := uint64(1)
	var j *Journal
	for owner := uint64(1); owner <= 4; owner++ {
		j = openJournal(t, js, 1, fmt.Sprintf("n%d", owner), owner)
		for b := 0; b < 5; b++ {
			n, size := uint64(1+b%3), 10
			if owner == 2 && b == 2 {
				n, size = 20, 60<<10 // 1.2 MB: two messages
			}
			if err := j.Append(records(lsn, n, size)); err != nil {
				t.Fatal(err)
			}
			lsn += n
		}
	}
	last := lsn - 1
	next := openJournal(t, js, 1, "n5", 5)
	for from := uint64(1); from <= last+1; from++ {
		wantRecords(t, replayAll(t, next, from), from, last+1-from)
	}
	// Compacting to the tail purges all but the newest message, the claim, which says
	// where the journal ends.
	if err := next.Compact(last); err != nil {
		t.Fatal(err)
	}
	info, err := next.stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 {
		t.Fatalf("after compaction to the tail: %d messages (first %d, last %d), want the claim alone", info.State.Msgs, info.State.FirstSeq, info.State.LastSeq)
	}
	if lsn, _ := openJournal(t, js, 1, "n6", 6).Last(); lsn != last {
		t.Fatalf("the next owner finds the journal at lsn %d, want %d", lsn, last)
	}
}

// A snapshot can cover the whole journal (the owner took it right after its last
// append). Compaction then keeps the newest message, which says where the journal ends:
// the next owner claims after it and replays nothing, and the one after that too.
func TestJournalCompactedToItsEndIsClaimedAgain(t *testing.T) {
	js := connectJS(t, natstest.Start(t, 1).URL())
	j := openJournal(t, js, 1, "a", 1)
	for i := uint64(0); i < 3; i++ {
		if err := j.Append(records(1+i*5, 5, 10)); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Compact(15); err != nil {
		t.Fatal(err)
	}
	for epoch, node := range []string{"b", "c"} {
		next := openJournal(t, js, 1, node, uint64(epoch+2))
		if lsn, slot := next.Last(); lsn != 15 || slot != 115 {
			t.Fatalf("owner %s sees the journal at %d.%d, want 15.115", node, lsn, slot)
		}
		wantRecords(t, replayAll(t, next, 16), 16, 0)
		if err := next.Compact(15); err != nil {
			t.Fatal(err)
		}
	}
	// Once more appends follow, the message kept at the end is compacted in its turn.
	last := openJournal(t, js, 1, "d", 4)
	wantRecords(t, replayAll(t, last, 16), 16, 0)
	if err := last.Append(records(16, 5, 10)); err != nil {
		t.Fatal(err)
	}
	if err := last.Compact(20); err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(context.Background(), NamesFor("holdfast").JournalStream(3))
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if info.State.Msgs != 1 || info.State.FirstSeq != info.State.LastSeq {
		t.Fatalf("after compacting through lsn 20: %d message(s), sequences %d..%d; want the last one only",
			info.State.Msgs, info.State.FirstSeq, info.State.LastSeq)
	}
}

// A journal purged empty from outside has lost where it ended: a claim says so instead
// of serving from the wrong position.
func TestJournalPurgedEmptyIsRefused(t *testing.T) {
	js := connectJS(t, natstest.Start(t, 1).URL())
	j := openJournal(t, js, 1, "a", 1)
	if err := j.Append(records(1, 5, 10)); err != nil {
		t.Fatal(err)
	}
	stream, err := js.Stream(context.Background(), NamesFor("holdfast").JournalStream(3))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Purge(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, err = OpenJournal(context.Background(), JournalConfig{JS: js, Names: NamesFor("holdfast"), Shard: 3, Node: "b", Epoch: 2})
	if err == nil || !strings.Contains(err.Error(), "purged empty") {
		t.Fatalf("claim of a journal purged empty: %v", err)
	}
}

// A replay whose stream loses the server of the replay's consumer and its quorum midway
// fails once no message came for replayStall, instead of the ordered consumer remaking
// itself for good (a load held the node's stop for the shard's 10-minute start bound).
// The servers go as the replay applies the first of 20,000 messages: the one JetStream
// placed the replay's consumer on, and one more.
func TestJournalReplayLosingQuorumFails(t *testing.T) {
	defer func(d time.Duration) { replayStall = d }(replayStall)
	replayStall = 3 * time.Second
	cl := natstest.Start(t, 3)
	nc0, js := natstest.Connect(t, cl.Servers[0].ClientURL())
	// The filler's acknowledgements may be lost (a leader change under a loaded machine's
	// slow fsyncs): its futures time out rather than hold PublishAsyncComplete for ever.
	fill, err := jetstream.New(nc0, jetstream.WithPublishAsyncTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	first, err := OpenJournal(context.Background(), JournalConfig{JS: js, Names: NamesFor("holdfast"), Shard: 0, Node: "a", Epoch: 1, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Append(records(1, 1, 100)); err != nil {
		t.Fatal(err)
	}
	// Many messages a replay passes over (not batches), fast; then an owner's batch.
	for i := range 20_000 {
		m := nats.NewMsg(NamesFor("holdfast").JournalSubject(0))
		m.Header.Set(hdrLast, "0.0")
		if _, err := fill.PublishMsgAsync(m); err != nil {
			t.Fatal(err)
		}
		if i%1000 == 999 { // within the client's bound on publishes awaiting their acks
			<-fill.PublishAsyncComplete()
		}
	}
	j, err := OpenJournal(context.Background(), JournalConfig{JS: js, Names: NamesFor("holdfast"), Shard: 0, Node: "a", Epoch: 2, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Append(records(2, 1, 100)); err != nil {
		t.Fatal(err)
	}
	// The replaying node may lose its own server: it knows them all, in order.
	var urls []string
	for _, s := range cl.Servers {
		urls = append(urls, s.ClientURL())
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.DontRandomize(), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	rjs, _ := jetstream.New(nc)
	next, err := OpenJournal(context.Background(), JournalConfig{JS: rjs, Names: NamesFor("holdfast"), Shard: 0, Node: "b", Epoch: 3, Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	var start time.Time
	done := make(chan error, 1)
	go func() {
		done <- next.Replay(1, func(r persistence.Record) error {
			if r.LSN != 1 {
				return nil
			}
			host := consumerHost(t, cl, NamesFor("holdfast").JournalStream(0))
			lost := []int{host, (host + 1) % 3}
			for _, k := range lost {
				cl.Servers[k].Shutdown()
			}
			t.Logf("servers %v lost (the consumer was on %d)", lost, host)
			start = time.Now()
			return nil
		})
	}()
	select {
	case err := <-done:
		if start.IsZero() {
			t.Fatalf("the replay ended before the servers went: %v", err)
		}
		t.Logf("the replay ended %v after the quorum was lost: %v", time.Since(start).Round(time.Millisecond), err)
		if err == nil {
			t.Fatal("a replay without its consumer's server and a quorum succeeded")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the replay still waits a minute after the quorum was lost")
	}
}

// consumerHost is the index of the server holding the stream's one consumer.
func consumerHost(t *testing.T, cl *natstest.Cluster, stream string) int {
	for k, s := range cl.Servers {
		_, js := natstest.Connect(t, s.ClientURL())
		st, err := js.Stream(context.Background(), stream)
		if err != nil {
			t.Fatal(err)
		}
		for info := range st.ListConsumers(context.Background()).Info() {
			if info.Cluster != nil {
				for i, s := range cl.Servers {
					if s.Name() == info.Cluster.Leader {
						return i
					}
				}
			}
		}
		t.Fatalf("no consumer of %s seen from server %d", stream, k)
	}
	return 0
}

func barrier(j *Journal) error {
	done := make(chan error, 1)
	j.Barrier(func(err error) { done <- err })
	return <-done
}

// A barrier is stored behind the appends submitted before it while the journal is this
// writer's, and refused once another writer has claimed it (the journal fails, as for an
// append); a replay, and the next owner's tail, read past barriers.
func TestJournalBarrier(t *testing.T) {
	js := connectJS(t, natstest.Start(t, 1).URL())
	old := openJournal(t, js, 1, "a", 1)
	if err := barrier(old); err != nil {
		t.Fatalf("barrier on a fresh claim: %v", err)
	}
	if err := old.Append(records(1, 5, 10)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 2)
	old.AppendAsync(records(6, 2, 10), func(err error) { done <- err })
	old.Barrier(func(err error) { done <- err })
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if lsn, _ := old.Last(); lsn != 7 {
		t.Fatalf("last lsn %d after a barrier, want 7", lsn)
	}
	next := openJournal(t, js, 1, "b", 2)
	if lsn, slot := next.Last(); lsn != 7 || slot != 107 {
		t.Fatalf("the next owner reads the tail at %d.%d past a barrier, want 7.107", lsn, slot)
	}
	wantRecords(t, replayAll(t, next, 1), 1, 7)
	if err := barrier(old); !errors.Is(err, persistence.ErrFailed) {
		t.Fatalf("barrier after another writer's claim: %v", err)
	}
	if err := old.Append(records(8, 1, 10)); !errors.Is(err, persistence.ErrFailed) {
		t.Fatalf("append after a refused barrier: %v", err)
	}
	if err := barrier(next); err != nil {
		t.Fatalf("the new owner's barrier: %v", err)
	}
}

// An owner keeps its journal's leadership on its own server: moved away after the claim
// (JetStream moves leaders for reasons of its own), it is brought back, and said so.
func TestJournalKeepsItsLeadershipHere(t *testing.T) {
	defer func(d time.Duration) { leadCheckEvery = d }(leadCheckEvery)
	leadCheckEvery = 200 * time.Millisecond
	js := connectJS(t, natstest.Start(t, 3).URL())
	var logged atomic.Int32
	log := slog.New(countingHandler{&logged})
	j, err := OpenJournal(context.Background(), JournalConfig{JS: js, Names: NamesFor("holdfast"), Shard: 3,
		Replicas: 3, Node: "a", Epoch: 1, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	here := js.Conn().ConnectedServerName()
	leader := func() string {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		info, err := j.stream.Info(ctx)
		if err != nil || info.Cluster == nil {
			return ""
		}
		return info.Cluster.Leader
	}
	for deadline := time.Now().Add(10 * time.Second); leader() != here; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("leader %q after the claim, not this node's server %q", leader(), here)
		}
	}
	for round := range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		info, err := j.stream.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		req := fmt.Sprintf(`{"placement":{"preferred":%q}}`, info.Cluster.Replicas[0].Name)
		if _, err := js.Conn().RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+j.cfg.Names.JournalStream(j.cfg.Shard), []byte(req)); err != nil {
			t.Fatal(err)
		}
		cancel()
		for deadline := time.Now().Add(10 * time.Second); logged.Load() <= int32(round); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("step-down %d: the leadership was not asked back (leader %q, here %q)", round, leader(), here)
			}
		}
		for deadline := time.Now().Add(10 * time.Second); leader() != here; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("step-down %d: asked back, but the leader is %q, not %q", round, leader(), here)
			}
		}
	}
	if err := j.Append(records(1, 3, 10)); err != nil {
		t.Fatal(err)
	}
}

// countingHandler counts the records logged.
type countingHandler struct{ n *atomic.Int32 }

func (h countingHandler) Enabled(context.Context, slog.Level) bool  { return true }
func (h countingHandler) Handle(context.Context, slog.Record) error { h.n.Add(1); return nil }
func (h countingHandler) WithAttrs([]slog.Attr) slog.Handler        { return h }
func (h countingHandler) WithGroup(string) slog.Handler             { return h }

// A former owner's messages whose predecessor was lost land behind the next owner's
// claim (by sequence JetStream cannot tell whose message filled the place) and are void:
// the next owner's append finds them and fails, the stream keeps its leader and takes
// writes, and the owner after that claims from where the valid journal ends and replays
// without them. On one server and on a replicated stream of three.
func TestJournalVoidsAFormerOwnersMessagesBehindAClaim(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("R%d", n), func(t *testing.T) {
			js := connectJS(t, natstest.Start(t, n).URL())
			ctx := context.Background()
			old := openJournal(t, js, n, "a", 1)
			if err := old.Append(records(1, 5, 10)); err != nil {
				t.Fatal(err)
			}
			next := openJournal(t, js, n, "b", 2)
			// old's message with lsn 6 was lost; those with 7 and 8, sent after it, land.
			seq := next.claimSeq
			for lsn := uint64(7); lsn <= 8; lsn++ {
				m := old.message("batch", position{lsn: lsn, slot: 100 + lsn})
				m.Header.Set(hdrFirst, strconv.FormatUint(lsn, 10))
				m.Data = persistence.AppendFrames(nil, records(lsn, 1, 10))
				out := &outMsg{msg: m, id: fmt.Sprintf("3-1-%d", lsn), expected: seq}
				if _, err := js.PublishMsg(ctx, m, out.expectations()...); err != nil {
					t.Fatal(err)
				}
				seq++
			}
			if err := next.Append(records(6, 1, 10)); !errors.Is(err, persistence.ErrFailed) {
				t.Fatalf("the claim's owner appended behind void messages: %v", err)
			}
			third := openJournal(t, js, n, "c", 3)
			if lsn, slot := third.Last(); lsn != 5 || slot != 105 {
				t.Fatalf("claimed at %d.%d, want 5.105 (where the valid journal ends)", lsn, slot)
			}
			wantRecords(t, replayAll(t, third, 1), 1, 5)
			if err := third.Append(records(6, 3, 10)); err != nil {
				t.Fatal(err)
			}
			wantRecords(t, replayAll(t, openJournal(t, js, n, "d", 4), 1), 1, 8)
		})
	}
}

// Voids: after a claim only its epoch's batches count; before any claim, the first
// batch's epoch owns the journal; the claim in stream order decides, not the larger epoch.
func TestVoids(t *testing.T) {
	msg := func(kind, epoch string) nats.Header { return nats.Header{hdrKind: {kind}, hdrEpoch: {epoch}} }
	var v Voids
	steps := []struct {
		h    nats.Header
		void bool
	}{
		{msg("batch", "4"), false}, {msg("batch", "4"), false}, {msg("batch", "3"), true},
		{msg("claim", "5"), false}, {msg("batch", "4"), true}, {msg("barrier", "4"), false}, {msg("batch", "5"), false},
		{msg("claim", "2"), false}, {msg("batch", "5"), true}, {msg("batch", "2"), false},
	}
	for i, s := range steps {
		if got := v.Void(s.h); got != s.void {
			t.Fatalf("step %d (%v): void %v, want %v", i, s.h, got, s.void)
		}
	}
}
