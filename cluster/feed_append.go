package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/persistence"
)

// feedAppend is one append: the subject's message and the events that ride with it.
type feedAppend struct {
	op       *feedOp // nil: events only
	last     bool    // the op's last append (a batch larger than a message takes several)
	kind     string
	records  []persistence.Record
	after    position
	events   []actors.Event
	msgs     []*nats.Msg // the events' messages (encode)
	through  EventPosition
	id       string
	expected uint64 // the subject's last sequence it expects
	plainIDs bool   // the events go without message ids (see send)
	refresh  bool   // the tail appended again (feed_retention.go)
}

// run is the feed's goroutine: one append at a time, each settled before the next is
// built, so that every append expects the sequence the last one stored.
func (f *Feed) run() {
	defer close(f.exited)
	for {
		a, ok := f.next()
		if !ok {
			return
		}
		seq, err := f.send(a)
		f.settle(a, seq, err)
	}
}

// next waits for something to append: a submitted batch or barrier (with the events
// carried so far), or events alone once FeedIdle has passed with nothing else to ride
// with. False once the feed is closed or failed; what is queued is then refused.
func (f *Feed) next() (*feedAppend, bool) {
	var idle <-chan time.Time
	idleOver := false
	for {
		f.mu.Lock()
		owed := len(f.carried) > 0 || f.carriedThrough > f.stored.LSN
		if f.closed || f.failed != nil {
			return f.endLocked(owed)
		}
		if len(f.ops) > 0 || (owed && idleOver) || f.refresh {
			a := f.buildLocked()
			f.mu.Unlock()
			f.encode(a)
			return a, true
		}
		f.mu.Unlock()
		if owed && idle == nil {
			idle = time.After(FeedIdle)
		}
		select {
		case <-f.wake:
		case <-idle:
			idleOver = true
		}
	}
}

// endLocked ends a closed or failed feed (under mu, which it unlocks): what is queued is
// refused, and a closing feed that owes events stores them first, in one last append (a
// shard handed over leaves its next owner nothing to derive again).
func (f *Feed) endLocked(owed bool) (*feedAppend, bool) {
	err, ops := f.refusal(), f.ops
	f.ops = nil
	var last *feedAppend
	if f.failed == nil && owed && !f.flushed {
		f.flushed = true
		last = f.buildLocked()
	} else {
		f.cfg.Metrics.EventsQueued(f.label, -len(f.carried)-f.sending)
		f.carried, f.sending = nil, 0
	}
	f.mu.Unlock()
	for _, op := range ops {
		op.done(err)
	}
	if last == nil {
		return nil, false
	}
	f.encode(last)
	return last, true
}

// buildLocked takes the next append from the queue and the events carried (under mu).
func (f *Feed) buildLocked() *feedAppend {
	f.appends++
	a := &feedAppend{kind: kindEvents, after: f.tail, expected: f.lastSeq, refresh: f.refresh,
		id: fmt.Sprintf("%d-%d-a%d", f.cfg.Shard, f.cfg.Epoch, f.appends)}
	f.refresh = false
	if len(f.ops) > 0 {
		op := f.ops[0]
		a.op, a.kind = op, "barrier"
		if op.records != nil {
			n, size := 0, 0
			for n < len(op.records) && (n == 0 || size+persistence.FrameSize(op.records[n]) <= maxMessageBytes) {
				size += persistence.FrameSize(op.records[n])
				n++
			}
			a.kind, a.records = "batch", op.records[:n]
			r := a.records[n-1]
			a.after = position{lsn: r.LSN, slot: r.Slot}
			op.records = op.records[n:]
		}
		if len(op.records) == 0 {
			a.last = true
			f.ops = f.ops[1:]
		}
	}
	n := min(len(f.carried), feedBatchEvents)
	a.events = f.carried[:n:n]
	f.carried = f.carried[n:]
	a.through = f.throughLocked(n == len(a.events) && len(f.carried) == 0)
	f.sending = len(a.events)
	return a
}

// throughLocked is the events' position once the events taken from carried are stored:
// all of them handed over (all), or up to the first one left.
func (f *Feed) throughLocked(all bool) EventPosition {
	if all {
		return EventPosition{LSN: f.carriedThrough}
	}
	next := f.carried[0]
	return EventPosition{LSN: next.LSN - 1, N: next.N}
}

// encode makes the events' messages, off the lock; events past the bytes bound go back
// to the front of carried, for the next append.
func (f *Feed) encode(a *feedAppend) {
	if f.cfg.Encode == nil {
		a.events = nil // events disabled: the position moves, nothing is stored
		return
	}
	size := 0
	a.msgs = make([]*nats.Msg, 0, len(a.events))
	for i := range a.events {
		m, err := f.cfg.Encode(&a.events[i])
		if err != nil {
			continue // cannot happen (views hold validated ids); skipping beats stopping the feed
		}
		size += len(m.Data) + len(m.Subject)
		if i > 0 && size > feedEventBytes {
			f.mu.Lock()
			f.carried = append(a.events[i:len(a.events):len(a.events)], f.carried...)
			a.through = f.throughLocked(false)
			f.sending = i
			f.mu.Unlock()
			a.events = a.events[:i]
			return
		}
		a.msgs = append(a.msgs, m)
	}
}

// send appends a, settling an unknown outcome by reading the subject's last message
// back: ours means stored, the one it expected means not stored (sent again), any other
// means another writer has appended (fenced). It returns the stream sequence of a's
// subject message.
func (f *Feed) send(a *feedAppend) (uint64, error) {
	var lastErr error
	patientUntil := time.Now().Add(streamElectionWait)
	for attempt := 0; attempt < 3; attempt++ {
		seq, err := f.publish(a)
		if err == nil {
			return seq, nil
		}
		lastErr = err
		seq, stored, rerr := f.readBack(a, patientUntil)
		switch {
		case rerr != nil:
			return 0, rerr
		case stored:
			return seq, nil
		}
		if isDuplicateInBatch(err) && !a.plainIDs {
			// One of the events' ids is in the stream's duplicate window already: another
			// prefix sharing the stream numbers its shards' events the same way. The feed's
			// own position, not the ids, keeps each event once; they go without.
			a.plainIDs = true
			attempt--
			continue
		}
		if (isInProcess(err) || isNotReady(err) || isBatchBusy(err) || retryable(err)) && time.Now().Before(patientUntil) {
			attempt--
			time.Sleep(50 * time.Millisecond)
		}
	}
	return 0, fmt.Errorf("append not acknowledged: %w", lastErr)
}

// publish sends a once: its subject message alone, or with its events as one atomic
// batch, the subject message first.
func (f *Feed) publish(a *feedAppend) (uint64, error) {
	head := f.message(a.kind, a.after, a.through)
	head.Header.Set(jetstream.MsgIDHeader, a.id)
	if a.records != nil {
		head.Header.Set(hdrFirst, strconv.FormatUint(a.records[0].LSN, 10))
		size := 0
		for _, r := range a.records {
			size += persistence.FrameSize(r)
		}
		head.Data = persistence.AppendFrames(make([]byte, 0, size), a.records)
	}
	head.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(a.expected, 10))
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.Timeout)
	defer cancel()
	if len(a.msgs) == 0 {
		ack, err := f.cfg.JS.PublishMsg(ctx, head)
		if err != nil {
			return 0, err
		}
		return ack.Sequence, nil
	}
	batch := nuid.Next()
	count := 1 + len(a.msgs)
	for i := 0; i < count; i++ {
		m := head
		if i > 0 {
			if m = a.msgs[i-1]; a.plainIDs {
				m.Header.Del(jetstream.MsgIDHeader)
			}
		}
		m.Header.Set("Nats-Batch-Id", batch)
		m.Header.Set("Nats-Batch-Sequence", strconv.Itoa(i+1))
		if i < count-1 {
			if err := f.nc.PublishMsg(m); err != nil {
				return 0, err
			}
			continue
		}
		m.Header.Set("Nats-Batch-Commit", "1")
		resp, err := f.nc.RequestMsgWithContext(ctx, m)
		if err != nil {
			return 0, err
		}
		return batchAck(resp, count)
	}
	return 0, errors.New("unreachable")
}

// batchAck reads an atomic batch's acknowledgement: the sequence of its first message.
func batchAck(resp *nats.Msg, count int) (uint64, error) {
	var ack struct {
		Seq   uint64 `json:"seq"`
		Count int    `json:"count"`
		Error *struct {
			Code        int                 `json:"code"`
			ErrorCode   jetstream.ErrorCode `json:"err_code"`
			Description string              `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &ack); err != nil {
		return 0, fmt.Errorf("unreadable acknowledgement %q: %w", resp.Data, err)
	}
	if ack.Error != nil {
		return 0, &jetstream.APIError{Code: ack.Error.Code, ErrorCode: ack.Error.ErrorCode, Description: ack.Error.Description}
	}
	if ack.Count != count || ack.Seq < uint64(count) {
		return 0, fmt.Errorf("atomic batch of %d messages acknowledged as %d at sequence %d", count, ack.Count, ack.Seq)
	}
	return ack.Seq - uint64(count) + 1, nil
}

// readBack reads the subject's last message, as long as the stream does not answer and
// until: a's (stored, at its sequence), the one a expected (not stored), or another
// writer's (fenced: an error).
func (f *Feed) readBack(a *feedAppend, until time.Time) (uint64, bool, error) {
	for {
		ctx, cancel := context.WithTimeout(context.Background(), f.cfg.Timeout)
		m, err := f.stream.GetLastMsgForSubject(ctx, f.subject)
		cancel()
		switch {
		case err == nil && m.Header.Get(jetstream.MsgIDHeader) == a.id:
			return m.Sequence, true, nil
		case err == nil && m.Sequence == a.expected:
			return 0, false, nil
		case err == nil:
			return 0, false, fmt.Errorf("fenced: journal of shard %d was appended to at stream sequence %d by node %q at epoch %s",
				f.cfg.Shard, m.Sequence, m.Header.Get(hdrNode), m.Header.Get(hdrEpoch))
		case errors.Is(err, jetstream.ErrMsgNotFound) && a.expected == 0:
			return 0, false, nil
		case !retryable(err) || time.Now().After(until):
			return 0, false, &outcomeUnknown{err: err}
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// settle records a's outcome: stored, the journal and the events' position move on and
// its batch is reported; failed, the feed fails, and everything queued with it.
func (f *Feed) settle(a *feedAppend, seq uint64, err error) {
	f.mu.Lock()
	if err != nil {
		f.failed = fmt.Errorf("%w: %w", persistence.ErrFailed, err)
		f.cfg.Metrics.EventsQueued(f.label, -f.sending)
		f.cfg.Metrics.PublishError(f.label)
		f.sending = 0
		failed := f.failed
		f.mu.Unlock()
		if a.op != nil {
			a.op.done(failed)
		}
		return // next refuses the rest
	}
	moved := a.through.LSN > f.stored.LSN
	f.cfg.Metrics.EventsQueued(f.label, -f.sending)
	for range a.msgs {
		f.cfg.Metrics.EventPublished(f.label, true)
	}
	if moved {
		f.cfg.Metrics.PublishedLSN(f.label, a.through.LSN)
	}
	f.lastSeq, f.tail, f.stored, f.sending = seq, a.after, a.through, 0
	f.index = append(f.index, stored{seq: seq, lastLSN: a.after.lsn})
	watch := f.watch
	f.mu.Unlock()
	if a.last && a.op.done != nil {
		a.op.done(nil)
	}
	if moved && watch != nil {
		watch(a.through.LSN)
	}
	if a.refresh {
		f.refreshed(seq)
	}
}
