package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/persistence"
)

// Journal message headers. Every message says the journal position after it, so the
// tail is read from the last message alone.
const (
	hdrKind  = "Holdfast-Kind"  // "batch", "claim" or "barrier" (empty: actors' read barrier)
	hdrEpoch = "Holdfast-Epoch" // the writer's ownership epoch
	hdrNode  = "Holdfast-Node"  // the writer's node name
	hdrFirst = "Holdfast-First" // first lsn of a batch message
	hdrLast  = "Holdfast-Last"  // "<lsn>.<slot>" of the journal after this message
)

// maxMessageBytes bounds one journal message; a larger batch goes as several messages
// appended in order (NATS' default max_payload is 1 MiB).
const maxMessageBytes = 768 << 10

// JournalConfig is one shard's JetStream journal.
type JournalConfig struct {
	JS       jetstream.JetStream
	Names    Names
	Shard    uint32
	Replicas int
	Node     string
	// Epoch is the ownership epoch this node claims the journal at (the revision of its
	// claim in the KV bucket); it names the writer in every message it appends.
	Epoch     uint64
	MaxRecord int // persistence.DefaultMaxRecordSize when 0
	// Timeout bounds each JetStream call of a serving journal — an append's
	// acknowledgement, the read that settles it (contract.Timing's JournalCall); 2s when 0.
	Timeout time.Duration
	// Window is the journal messages kept in flight at once (DefaultWindow when 0).
	Window int
	// Logger says when the stream's leadership is brought back here (nil: nothing).
	Logger *slog.Logger
	// Ctx, when set, ends a replay early (the node stops).
	Ctx context.Context
}

// Journal is a shard's journal in a JetStream stream of its own: one message per batch
// (the same checksummed frames as the file journal), appended with the stream's expected
// last sequence. Opening it appends a claim the same way, so from then on every append of
// an earlier owner expects a sequence the stream has passed and is refused by JetStream:
// the journal itself fences a stale owner, whatever its clock believes.
type Journal struct {
	cfg    JournalConfig
	stream jetstream.Stream

	mu      sync.Mutex
	lastSeq uint64 // stream sequence of the last message, ours since the claim
	// subSeq and subTail are where the next message submitted goes: the stream's last
	// sequence and the journal's position once everything submitted is stored.
	subSeq   uint64
	subTail  position
	pipe     *pipe
	claimSeq uint64
	tail     position
	index    []stored // batch messages not yet compacted, in order
	failed   error
	closed   bool

	anchorClaimed, anchorLocal int64

	leadStop context.CancelFunc // called by Close: keepLead's goroutine ends
	leadDone chan struct{}
}

type position struct{ lsn, slot uint64 }

// stored is where a batch message sits in the stream, for compaction.
type stored struct{ seq, lastLSN uint64 }

var _ actors.Anchored = (*Journal)(nil)

// OpenJournal creates the shard's stream if needed, claims it at cfg.Epoch and returns the
// journal positioned after the claim. A claim refused because another writer appended in
// between is retried on the new tail for a few seconds; a writer that keeps appending is
// still serving, and the claim fails.
func OpenJournal(ctx context.Context, cfg JournalConfig) (*Journal, error) {
	if cfg.MaxRecord == 0 {
		cfg.MaxRecord = persistence.DefaultMaxRecordSize
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = openCall
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	j := &Journal{cfg: cfg}
	var stream jetstream.Stream
	err := attempts(ctx, func(actx context.Context) (err error) {
		stream, err = cfg.JS.CreateOrUpdateStream(actx, jetstream.StreamConfig{
			Name:        cfg.Names.JournalStream(cfg.Shard),
			Description: "Holdfast shard journal",
			Subjects:    []string{cfg.Names.JournalSubject(cfg.Shard)},
			Storage:     jetstream.FileStorage,
			Replicas:    cfg.Replicas,
			Retention:   jetstream.LimitsPolicy,
			Discard:     jetstream.DiscardNew,
			Duplicates:  2 * time.Minute,
			DenyDelete:  true,
			AllowDirect: false, // reads of the tail must come from the stream leader
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("journal stream of shard %d: %w", cfg.Shard, err)
	}
	j.stream = stream
	if cfg.Replicas > 1 {
		j.leadHere(ctx)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := j.claim(ctx)
		if err == nil {
			j.keepLead()
			return j, nil
		}
		if !(errors.Is(err, errMoved) || retryable(err)) || time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// openCall bounds each JetStream call of claiming a journal. A claim is not yet serving,
// so the serve window does not bound it, and right after a NATS server is lost the
// stream's API answers slowly while its group elects a leader: a call given less than
// this kept failing and sending again.
const openCall = 2 * time.Second

// replayStall is how long a replay waits for its next message before it fails (the
// shard's open fails, and its claim is given up to be tried again).
var replayStall = 6 * openCall // a variable for a test

// errMoved is a claim refused because the stream's tail moved after it was read.
var errMoved = errors.New("the journal's tail moved during the claim")

// claim reads the tail and appends the claim message expecting it.
func (j *Journal) claim(ctx context.Context) error {
	ictx, cancel := context.WithTimeout(ctx, openCall)
	info, err := j.stream.Info(ictx)
	cancel()
	if err != nil {
		return fmt.Errorf("reading journal %s: %w", j.cfg.Names.JournalStream(j.cfg.Shard), err)
	}
	last := info.State.LastSeq
	tail := position{}
	if last > 0 {
		if info.State.Msgs == 0 {
			// Compaction always keeps the newest message: only a purge from outside empties it.
			return fmt.Errorf("journal %s was purged empty past sequence %d: where it ended is lost, so shard %d cannot be recovered from it",
				j.cfg.Names.JournalStream(j.cfg.Shard), last, j.cfg.Shard)
		}
		if tail, err = j.validTail(ctx, last, info.State.FirstSeq); err != nil {
			return err
		}
	}
	msg := j.message("claim", tail)
	msg.Header.Set(hdrKind, "claim")
	claimID := fmt.Sprintf("%d-claim-%d", j.cfg.Shard, j.cfg.Epoch)
	ack, err := publishClaim(ctx, j.cfg.JS, msg, j.cfg.Shard, j.cfg.Epoch, jetstream.WithExpectLastSequence(last), jetstream.WithMsgID(claimID))
	if err != nil {
		return err
	}
	cm, err := j.get(ctx, ack.Sequence)
	if err != nil {
		return fmt.Errorf("reading back the claim: %w", err)
	}
	j.anchorClaimed, j.anchorLocal = cm.Time.UnixNano(), actors.MonoNow()
	j.lastSeq, j.claimSeq, j.tail = ack.Sequence, ack.Sequence, tail
	j.subSeq, j.subTail = ack.Sequence, tail
	return nil
}

// Anchor is the time the claim was stored, by the JetStream server's clock, and this
// process's monotonic reading right after.
func (j *Journal) Anchor() (int64, int64) { return j.anchorClaimed, j.anchorLocal }

func (j *Journal) message(kind string, after position) *nats.Msg {
	msg := nats.NewMsg(j.cfg.Names.JournalSubject(j.cfg.Shard))
	msg.Header.Set(hdrKind, kind)
	msg.Header.Set(hdrEpoch, strconv.FormatUint(j.cfg.Epoch, 10))
	msg.Header.Set(hdrNode, j.cfg.Node)
	msg.Header.Set(hdrLast, strconv.FormatUint(after.lsn, 10)+"."+strconv.FormatUint(after.slot, 10))
	return msg
}

func parseLast(v string) (position, error) {
	a, b, ok := strings.Cut(v, ".")
	if !ok {
		return position{}, fmt.Errorf("header %s %q: want <lsn>.<slot>", hdrLast, v)
	}
	lsn, err1 := strconv.ParseUint(a, 10, 64)
	slot, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		return position{}, fmt.Errorf("header %s %q: want <lsn>.<slot>", hdrLast, v)
	}
	return position{lsn: lsn, slot: slot}, nil
}

func (j *Journal) get(ctx context.Context, seq uint64) (*jetstream.RawStreamMsg, error) {
	return j.getWithin(ctx, seq, j.cfg.Timeout)
}

func (j *Journal) getWithin(ctx context.Context, seq uint64, d time.Duration) (*jetstream.RawStreamMsg, error) {
	gctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return j.stream.GetMsg(gctx, seq)
}

// Append stores the batch and returns once JetStream has acknowledged it: stored on a
// quorum of the stream's replicas (fsynced there when the servers run with sync: always).
// It is AppendAsync and a wait.
func (j *Journal) Append(batch []persistence.Record) error {
	done := make(chan error, 1)
	j.AppendAsync(batch, func(err error) { done <- err })
	return <-done
}

// appendMessage publishes one message of records and settles its outcome. An unknown
// outcome (a timeout, or a refusal of a retry) is resolved by reading the message at
// the expected position: ours means stored, anything else means fenced.
func (j *Journal) appendMessage(m *outMsg) error {
	var lastErr error
	// A send JetStream says is still in process (its replication is under way, as when a
	// follower has just died), or one whose stream does not answer (it elects a leader),
	// is waited for, not counted as a failed attempt: failing it would halt a shard whose
	// journal is fine, and its recovery would wait for the same election.
	patientUntil := time.Now().Add(streamElectionWait)
	for attempt := 0; attempt < 3; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), j.cfg.Timeout)
		ack, err := j.cfg.JS.PublishMsg(ctx, m.msg, m.expectations()...)
		cancel()
		if err == nil {
			if ack.Sequence != m.expected+1 {
				return fmt.Errorf("stored at stream sequence %d, expected %d", ack.Sequence, m.expected+1)
			}
			return nil
		}
		lastErr = err
		// Was it stored after all (a lost ack, or a retry refused because the first try landed)?
		switch stored, err := j.storedAtPatiently(m, patientUntil); {
		case err != nil:
			return err
		case stored:
			return nil
		}
		if (isInProcess(lastErr) || retryable(lastErr)) && time.Now().Before(patientUntil) {
			attempt--
			time.Sleep(50 * time.Millisecond)
		}
	}
	return fmt.Errorf("append not acknowledged: %w", lastErr)
}

// streamElectionWait bounds how long an append waits for its stream to answer again (a
// leader's election: 4-9 s with nats-server's default raft timing). Safety does not
// hang on it — each append's expectations fence it — only how long the shard's
// requests wait before it halts and is recovered elsewhere.
var streamElectionWait = 10 * time.Second

// storedAtPatiently is storedAt, read again while the stream does not answer, until.
func (j *Journal) storedAtPatiently(m *outMsg, until time.Time) (bool, error) {
	for {
		stored, err := j.storedAt(m)
		var unknown *outcomeUnknown
		if err == nil || !errors.As(err, &unknown) || !retryable(unknown.err) || time.Now().After(until) {
			return stored, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// outcomeUnknown is a read-back of an append that failed.
type outcomeUnknown struct{ err error }

func (e *outcomeUnknown) Error() string {
	return "append outcome unknown, and reading it back failed: " + e.err.Error()
}
func (e *outcomeUnknown) Unwrap() error { return e.err }

// storedAt reads the stream at m's position: true when m is there (ours), false when
// nothing is, an error when another writer's message is (fenced) or the read failed.
func (j *Journal) storedAt(m *outMsg) (bool, error) {
	got, err := j.get(context.Background(), m.expected+1)
	switch {
	case err == nil && got.Header.Get(jetstream.MsgIDHeader) == m.id: // its id names the epoch and the first lsn
		return true, nil
	case err == nil:
		return false, fmt.Errorf("fenced: stream sequence %d was written by node %q at epoch %s (another node owns shard %d)",
			m.expected+1, got.Header.Get(hdrNode), got.Header.Get(hdrEpoch), j.cfg.Shard)
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return false, nil
	}
	return false, &outcomeUnknown{err: err}
}

func (j *Journal) stored(seq uint64, after position) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.lastSeq = seq
	j.tail = after
	j.index = append(j.index, stored{seq: seq, lastLSN: after.lsn})
}

// Last returns the lsn and slot of the last stored record.
func (j *Journal) Last() (uint64, uint64) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.tail.lsn, j.tail.slot
}

// Replay reads the stream from its first message through the claim and calls fn for
// every record with LSN >= from. It returns persistence.ErrCompacted when records at or
// after from are no longer in the stream.
func (j *Journal) Replay(from uint64, fn func(persistence.Record) error) error {
	j.mu.Lock()
	through, tailLSN := j.claimSeq, j.tail.lsn
	j.mu.Unlock()
	index, _, err := replayJournal(j.cfg, through, from, tailLSN, func(ctx context.Context, c jetstream.OrderedConsumerConfig) (jetstream.Consumer, error) {
		return j.cfg.JS.OrderedConsumer(ctx, j.cfg.Names.JournalStream(j.cfg.Shard), c)
	}, fn)
	if err != nil {
		return err
	}
	j.mu.Lock()
	j.index = append(index, j.index...)
	j.mu.Unlock()
	return nil
}

// Compact purges the batch messages all of whose records are at or below upTo (a
// snapshot covers them), except the stream's newest message: it says where the journal
// ends (its Holdfast-Last header), and the next owner's claim reads it there — a stream
// purged empty keeps its last sequence but not that position. It is purged in its turn
// once a later message follows. The purge is not fenced: a stale owner purges only what
// its own snapshot, already stored, covers, all of it before the current owner's claim.
func (j *Journal) Compact(upTo uint64) error {
	j.mu.Lock()
	below, n := compactable(j.index, upTo, j.lastSeq)
	if below == 0 {
		j.mu.Unlock()
		return nil
	}
	j.index = append(j.index[:0], j.index[n:]...)
	j.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), j.cfg.Timeout)
	defer cancel()
	return j.stream.Purge(ctx, jetstream.WithPurgeSequence(below))
}

// compactable is how far a journal's messages can be purged once a snapshot covers
// upTo: below sequence below, the first n of index (the messages, in order, whose records
// end at lastLSN) — never the journal's newest message (at lastSeq), which says where it
// ends. below is 0 when nothing can be.
func compactable(index []stored, upTo, lastSeq uint64) (below uint64, n int) {
	for n < len(index) && index[n].lastLSN <= upTo {
		n++
	}
	if n == 0 {
		return 0, 0
	}
	below = index[n-1].seq + 1
	if index[n-1].seq == lastSeq {
		below, n = index[n-1].seq, n-1
	}
	return below, n
}

// Close ends this journal's use once the appends in flight are settled; the stream stays.
func (j *Journal) Close() error {
	j.mu.Lock()
	if j.closed {
		j.mu.Unlock()
		return nil
	}
	j.closed = true
	j.mu.Unlock()
	if j.leadStop != nil {
		j.leadStop()
		<-j.leadDone
	}
	if j.pipe != nil {
		close(j.pipe.quit)
		<-j.pipe.exited
	}
	return nil
}

// publishClaim appends an owner's claim message to its journal under opts (the expected
// last position): errMoved when the journal moved on (another owner claimed it), an error
// when this epoch's claim was made once already — the epoch is spent, never claimed twice.
func publishClaim(ctx context.Context, js jetstream.JetStream, msg *nats.Msg, shard uint32, epoch uint64, opts ...jetstream.PublishOpt) (*jetstream.PubAck, error) {
	pctx, cancel := context.WithTimeout(ctx, openCall)
	ack, err := js.PublishMsg(pctx, msg, opts...)
	cancel()
	if isWrongLast(err) {
		return nil, errMoved
	}
	if err != nil {
		return nil, fmt.Errorf("claiming journal of shard %d: %w", shard, err)
	}
	if ack.Duplicate {
		return nil, fmt.Errorf("claim of shard %d at epoch %d was already made once: the epoch is spent", shard, epoch)
	}
	return ack, nil
}
