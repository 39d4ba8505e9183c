package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/persistence"
)

// The feed is the journal in the events stream (data format 3; docs/design.md, "The feed
// is the journal"). Each shard appends to its journal subject <prefix>._j.<k> in the one
// stream that also holds the events, fenced by the subject's expected last sequence, one
// append in flight; each append is one atomic batch: the subject's message (the batch's
// records, a barrier, or nothing but the position) first, then the events of batches
// applied before it, each on its contract subject. The subject's message says through
// which entry the shard's events are stored (hdrEvents), so the batch that stores an event
// also records it, and a new owner re-derives exactly the events after its claim's.

// hdrEvents is "<lsn>.<n>": every event of the entries through lsn is stored, and the
// first n of entry lsn+1 (an entry whose events fill more than one append).
const hdrEvents = "Holdfast-Events"

// Kinds of the subject's messages beside "batch", "claim" and "barrier": an append that
// stores events only.
const kindEvents = "events"

// Bounds of one append: nats-server takes at most 1,000 messages in an atomic batch by
// default (max_batch_size); the events' bytes are bounded beside the records' message.
const (
	feedBatchEvents = 500
	feedEventBytes  = 512 << 10
)

// FeedIdle is how long events wait for an append to ride with before they are appended
// on their own: under load they ride with the next batch, alone a request's events follow
// its answer by one append.
var FeedIdle = time.Millisecond

// EventPosition is how far a shard's events are stored: every event of the entries
// through LSN, and the first N events of entry LSN+1.
type EventPosition struct {
	LSN uint64
	N   int
}

func (p EventPosition) String() string {
	return strconv.FormatUint(p.LSN, 10) + "." + strconv.Itoa(p.N)
}

// covers reports whether event n of entry lsn is stored by p.
func (p EventPosition) covers(lsn uint64, n int) bool {
	return lsn <= p.LSN || (lsn == p.LSN+1 && n < p.N)
}

func parseEvents(v string) (EventPosition, error) {
	if v == "" {
		return EventPosition{}, nil
	}
	a, b, ok := strings.Cut(v, ".")
	lsn, err1 := strconv.ParseUint(a, 10, 64)
	n, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || n < 0 {
		return EventPosition{}, fmt.Errorf("header %s %q: want <lsn>.<n>", hdrEvents, v)
	}
	return EventPosition{LSN: lsn, N: n}, nil
}

// FeedConfig is a shard's journal in the events stream.
type FeedConfig struct {
	JournalConfig
	// Stream is the events stream, which holds the journal subjects too (EnsureFeedStream).
	Stream string
	// Encode makes an event's message (subject, message id, payload); nil stores no
	// events (the position still moves: events are disabled, and dropped).
	Encode func(*actors.Event) (*nats.Msg, error)
	// Metrics gets the events' progress (nil: none).
	Metrics FeedMetrics
}

// Feed is a shard's journal on its subject of the events stream; it stores the shard's
// events too (actors.Feed).
type Feed struct {
	cfg     FeedConfig
	subject string
	label   string // the shard, for metrics
	stream  jetstream.Stream
	nc      *nats.Conn

	mu             sync.Mutex
	lastSeq        uint64   // stream sequence of the subject's last message (ours since the claim)
	tail           position // after every record stored
	subTail        position // after every record submitted
	ops            []*feedOp
	carried        []actors.Event // handed over by the shard, not yet in an append
	carriedThrough uint64         // the entries whose events were handed over
	sending        int            // events in the append in flight
	stored         EventPosition  // events stored through
	watch          func(uint64)
	index          []stored // subject messages not yet compacted, in order
	failed         error
	closed         bool
	flushed        bool // closing, the events carried were sent once
	wake           chan struct{}
	exited         chan struct{}

	// Retention (feed_retention.go): the subject's oldest message not purged, the lsn a
	// snapshot covers (Compact's), a refresh of the tail asked for, and a snapshot wanted.
	oldest, covered uint64
	refresh         bool
	stale           atomic.Bool

	claimSeq                   uint64
	anchorClaimed, anchorLocal int64
	appends                    uint64 // appends made since the claim: names each one
}

// feedOp is a submitted batch or barrier.
type feedOp struct {
	records []persistence.Record // nil: a barrier
	done    func(error)
}

var (
	_ actors.Anchored       = (*Feed)(nil)
	_ actors.Feed           = (*Feed)(nil)
	_ persistence.Pipelined = (*Feed)(nil)
	_ persistence.Barriered = (*Feed)(nil)
)

// OpenFeed claims shard cfg.Shard's subject at cfg.Epoch and returns the journal
// positioned after the claim. As OpenJournal, a claim refused because another writer
// appended in between is tried again on the new tail for a few seconds.
func OpenFeed(ctx context.Context, cfg FeedConfig) (*Feed, error) {
	if cfg.MaxRecord == 0 {
		cfg.MaxRecord = persistence.DefaultMaxRecordSize
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = openCall
	}
	if cfg.Metrics == nil {
		cfg.Metrics = noFeedMetrics{}
	}
	f := &Feed{cfg: cfg, subject: cfg.Names.JournalSubject(cfg.Shard), nc: cfg.JS.Conn(),
		label: strconv.FormatUint(uint64(cfg.Shard), 10), wake: make(chan struct{}, 1), exited: make(chan struct{})}
	err := attempts(ctx, func(actx context.Context) (err error) {
		f.stream, err = cfg.JS.Stream(actx, cfg.Stream)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("the events stream %s, which holds shard %d's journal: %w", cfg.Stream, cfg.Shard, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := f.claim(ctx)
		if err == nil {
			go f.run()
			go f.retention(feedRetentionEvery)
			return f, nil
		}
		if !(errors.Is(err, errMoved) || retryable(err) || isNotReady(err)) || time.Now().After(deadline) {
			return nil, err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// claim reads the subject's last message and appends the claim expecting it; the claim
// carries the position and the events' position on.
func (f *Feed) claim(ctx context.Context) error {
	last, tail, events, err := f.readTail(ctx)
	if err != nil {
		return err
	}
	msg := f.message("claim", tail, events)
	msg.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%d-claim-%d", f.cfg.Shard, f.cfg.Epoch))
	ack, err := publishClaim(ctx, f.cfg.JS, msg, f.cfg.Shard, f.cfg.Epoch, jetstream.WithExpectLastSequencePerSubject(last))
	if err != nil {
		return err
	}
	gctx, cancel := context.WithTimeout(ctx, f.cfg.Timeout)
	cm, err := f.stream.GetMsg(gctx, ack.Sequence)
	cancel()
	if err != nil {
		return fmt.Errorf("reading back the claim: %w", err)
	}
	f.anchorClaimed, f.anchorLocal = cm.Time.UnixNano(), actors.MonoNow()
	f.lastSeq, f.claimSeq, f.tail, f.subTail, f.stored = ack.Sequence, ack.Sequence, tail, tail, events
	f.oldest = ack.Sequence // until a replay reads the messages before it
	f.carriedThrough = events.LSN
	return nil
}

// readTail is the subject's last message: its sequence (0: none), the journal's position
// and the events' position it records.
func (f *Feed) readTail(ctx context.Context) (uint64, position, EventPosition, error) {
	gctx, cancel := context.WithTimeout(ctx, openCall)
	m, err := f.stream.GetLastMsgForSubject(gctx, f.subject)
	cancel()
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, position{}, EventPosition{}, nil
	}
	if err != nil {
		return 0, position{}, EventPosition{}, fmt.Errorf("reading the tail of shard %d's journal: %w", f.cfg.Shard, err)
	}
	tail, err := parseLast(m.Header.Get(hdrLast))
	if err != nil {
		return 0, position{}, EventPosition{}, fmt.Errorf("journal message %d: %w", m.Sequence, err)
	}
	events, err := parseEvents(m.Header.Get(hdrEvents))
	if err != nil {
		return 0, position{}, EventPosition{}, fmt.Errorf("journal message %d: %w", m.Sequence, err)
	}
	return m.Sequence, tail, events, nil
}

// message is a subject message of kind after position after, recording events. It never
// expires: the stream's age limit is the events', and a journal message goes only when a
// snapshot covers it (Compact).
func (f *Feed) message(kind string, after position, events EventPosition) *nats.Msg {
	msg := nats.NewMsg(f.subject)
	msg.Header.Set(hdrKind, kind)
	msg.Header.Set(hdrEpoch, strconv.FormatUint(f.cfg.Epoch, 10))
	msg.Header.Set(hdrNode, f.cfg.Node)
	msg.Header.Set(hdrLast, strconv.FormatUint(after.lsn, 10)+"."+strconv.FormatUint(after.slot, 10))
	msg.Header.Set(hdrEvents, events.String())
	msg.Header.Set(jetstream.MsgTTLHeader, "never")
	return msg
}

// Anchor is the time the claim was stored, by the JetStream server's clock, and this
// process's monotonic reading right after.
func (f *Feed) Anchor() (int64, int64) { return f.anchorClaimed, f.anchorLocal }

// Last returns the lsn and slot of the last stored record.
func (f *Feed) Last() (uint64, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tail.lsn, f.tail.slot
}

// Stored is how far the shard's events are stored: every event of the entries through
// the lsn it returns.
func (f *Feed) Stored() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stored.LSN
}

// Watch has fn called, on the feed's goroutine, with the lsn through which events are
// stored each time it moves.
func (f *Feed) Watch(fn func(lsn uint64)) {
	f.mu.Lock()
	f.watch = fn
	f.mu.Unlock()
}

// Held is how many events were handed over and are not yet stored.
func (f *Feed) Held() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.carried) + f.sending
}

// Carry takes the events of the entries through lsn; they are stored with the next
// append. Events already stored (a recovery re-deriving from its claim's position, an
// entry whose first events went in an earlier append) are dropped.
func (f *Feed) Carry(through uint64, events []actors.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed || f.failed != nil || through <= f.carriedThrough {
		return
	}
	before := len(f.carried)
	for i := range events {
		if e := &events[i]; !f.stored.covers(e.LSN, e.N) {
			f.carried = append(f.carried, *e)
		}
	}
	f.cfg.Metrics.EventsQueued(f.label, len(f.carried)-before)
	f.carriedThrough = through
	f.signal()
}

// signal wakes the feed's goroutine (under mu).
func (f *Feed) signal() {
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// AppendAsync queues a batch behind what is submitted (persistence.Pipelined); done is
// called once it is stored, or cannot be.
func (f *Feed) AppendAsync(batch []persistence.Record, done func(error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.refusal(); err != nil {
		done(err)
		return
	}
	if len(batch) == 0 {
		done(nil)
		return
	}
	if err := persistence.CheckBatch(f.subTail.lsn, f.subTail.slot, batch, f.cfg.MaxRecord); err != nil {
		done(err)
		return
	}
	last := batch[len(batch)-1]
	f.subTail = position{lsn: last.LSN, slot: last.Slot}
	f.ops = append(f.ops, &feedOp{records: batch, done: done})
	f.signal()
}

// Append stores the batch and returns once JetStream has acknowledged it.
func (f *Feed) Append(batch []persistence.Record) error {
	done := make(chan error, 1)
	f.AppendAsync(batch, func(err error) { done <- err })
	return <-done
}

// Barrier appends a message with no records behind everything submitted, expecting the
// subject's last sequence like a batch (persistence.Barriered).
func (f *Feed) Barrier(done func(error)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.refusal(); err != nil {
		done(err)
		return
	}
	f.ops = append(f.ops, &feedOp{done: done})
	f.signal()
}

func (f *Feed) refusal() error {
	if f.closed {
		return persistence.ErrClosed
	}
	return f.failed
}

// Close ends this journal's use once the append in flight is settled and the events
// carried are stored (one more append, as any: fenced if another node has claimed the
// journal); batches queued behind it are refused. The stream stays.
func (f *Feed) Close() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	f.signal()
	f.mu.Unlock()
	<-f.exited
	return nil
}

type noFeedMetrics struct{}

func (noFeedMetrics) EventsQueued(string, int)    {}
func (noFeedMetrics) EventPublished(string, bool) {}
func (noFeedMetrics) PublishError(string)         {}
func (noFeedMetrics) PublishedLSN(string, uint64) {}
