package cluster

import (
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/persistence"
)

// The journal's appends are pipelined: up to Window messages are in flight to JetStream
// at once, each expecting the stream's last sequence to be the one before it, so a
// shard's next batch is on its way while the quorum acknowledges the last (the stream's
// expectation counts proposals in flight: nats-server's clseq). One goroutine owns the
// window: it publishes, settles the acknowledgements in order and reports each batch
// durable in order. A refusal or a lost acknowledgement settles as a lone append does —
// the message at the expected position is read back: ours is stored, another writer's
// means fenced, nothing means send it again — and every later message in the window is
// settled the same way, in order, after it. Nothing is reported durable out of order,
// and a fence fails the journal (the shard halts) for every batch behind it.

// DefaultWindow is the messages a journal keeps in flight, MaxWindow the most it may.
const (
	DefaultWindow = 8
	MaxWindow     = 16
)

// outMsg is one journal message: its records, where it must land, and the batch it
// ends (nil when the batch goes on in a later message).
type outMsg struct {
	msg      *nats.Msg
	id       string
	expected uint64 // the stream's last sequence it expects; it lands at expected+1
	after    position
	done     func(error) // the batch's, on its last message
	fut      jetstream.PubAckFuture
}

// expectations are a message's publish options: its id, and the stream's last sequence
// it must follow. Not the last message's id as well: a replicated stream checks that one
// only as each replica applies the message, and a replica that refuses it there takes it
// for a write error and stops taking part in the stream for good (observer mode until
// its server restarts) — a stream that refused on all three had no leader for minutes.
// A message landing behind another writer's claim is void instead (voids.go).
func (m *outMsg) expectations() []jetstream.PublishOpt {
	return []jetstream.PublishOpt{jetstream.WithExpectLastSequence(m.expected), jetstream.WithMsgID(m.id)}
}

// pipe is the append pipeline's state, owned by its goroutine.
type pipe struct {
	in     chan []*outMsg // batches, split into messages, in submission order
	quit   chan struct{}
	exited chan struct{}
}

// AppendAsync queues a batch behind the appends in flight; done is called once it is
// stored (nil) or cannot be (the journal has failed): successes in submission order
// (persistence.Pipelined). A batch that breaks the log's order or holds a record over
// the bound is refused at once and leaves the journal usable; one submitted to a closed
// or failed journal is refused at once too.
func (j *Journal) AppendAsync(batch []persistence.Record, done func(error)) {
	j.mu.Lock()
	if err := j.refusal(); err != nil {
		j.mu.Unlock()
		done(err)
		return
	}
	if len(batch) == 0 {
		j.mu.Unlock()
		done(nil)
		return
	}
	if err := persistence.CheckBatch(j.subTail.lsn, j.subTail.slot, batch, j.cfg.MaxRecord); err != nil {
		j.mu.Unlock()
		done(err)
		return
	}
	var msgs []*outMsg
	for len(batch) > 0 {
		n, size := 0, 0
		for n < len(batch) && (n == 0 || size+persistence.FrameSize(batch[n]) <= maxMessageBytes) {
			size += persistence.FrameSize(batch[n])
			n++
		}
		recs := batch[:n]
		last := recs[len(recs)-1]
		after := position{lsn: last.LSN, slot: last.Slot}
		m := j.message("batch", after)
		m.Header.Set(hdrFirst, strconv.FormatUint(recs[0].LSN, 10))
		m.Data = persistence.AppendFrames(make([]byte, 0, size), recs)
		id := fmt.Sprintf("%d-%d-%d", j.cfg.Shard, j.cfg.Epoch, recs[0].LSN)
		msgs = append(msgs, &outMsg{msg: m, id: id, expected: j.subSeq, after: after})
		j.subSeq++
		j.subTail = after
		batch = batch[n:]
	}
	msgs[len(msgs)-1].done = done
	j.submit(msgs)
}

// Barrier appends an empty message behind everything submitted, expecting the stream's
// last sequence like a batch (persistence.Barriered): stored, it proves that no other
// writer had appended when it landed; refused, the journal fails as for a batch. A
// replay reads past it (only batch messages hold records).
func (j *Journal) Barrier(done func(error)) {
	j.mu.Lock()
	if err := j.refusal(); err != nil {
		j.mu.Unlock()
		done(err)
		return
	}
	id := fmt.Sprintf("%d-%d-barrier-%d", j.cfg.Shard, j.cfg.Epoch, j.subSeq+1)
	m := &outMsg{msg: j.message("barrier", j.subTail), expected: j.subSeq, after: j.subTail, done: done, id: id}
	j.subSeq++
	j.submit([]*outMsg{m})
}

// refusal is why nothing more is taken (under j.mu): the journal closed or failed.
func (j *Journal) refusal() error {
	if j.closed {
		return persistence.ErrClosed
	}
	return j.failed
}

// submit queues messages for the pipeline (under j.mu, which it unlocks); their done,
// when the queue is full, is called with the refusal.
func (j *Journal) submit(msgs []*outMsg) {
	if j.pipe == nil {
		j.startPipe()
	}
	// Queued under mu, so Close (which sets closed under mu) knows that nothing reaches
	// the pipe after it: what is queued is settled or failed, never left waiting. The
	// shard's window keeps far fewer batches than the queue holds.
	select {
	case j.pipe.in <- msgs:
		j.mu.Unlock()
	default:
		j.mu.Unlock()
		report(msgs, fmt.Errorf("%w: more than %d batches waiting", persistence.ErrFailed, cap(j.pipe.in)))
	}
}

// startPipe starts the pipeline's goroutine (under j.mu).
func (j *Journal) startPipe() {
	j.pipe = &pipe{in: make(chan []*outMsg, 1024), quit: make(chan struct{}), exited: make(chan struct{})}
	window := min(j.cfg.Window, MaxWindow) // a void run is at most a window long (voids.go)
	if window <= 0 {
		window = DefaultWindow
	}
	go j.runPipe(j.pipe, window)
}

func (j *Journal) runPipe(p *pipe, window int) {
	defer close(p.exited)
	var queued, flight []*outMsg
	var failed error
	for {
		// Take what was submitted; with nothing to do, wait for it (or the end).
		if len(queued) == 0 && len(flight) == 0 {
			select {
			case ms := <-p.in:
				queued = append(queued, ms...)
			case <-p.quit:
				p.failQueued()
				return
			}
		}
		for more := true; more; {
			select {
			case ms := <-p.in:
				queued = append(queued, ms...)
			default:
				more = false
			}
		}
		if failed != nil {
			report(queued, failed)
			queued = queued[:0]
			continue
		}
		// Fill the window.
		for len(flight) < window && len(queued) > 0 {
			m := queued[0]
			queued = queued[1:]
			fut, err := j.cfg.JS.PublishMsgAsync(m.msg, m.expectations()...)
			if err == nil {
				m.fut = fut
			}
			flight = append(flight, m)
		}
		// Settle the oldest.
		m := flight[0]
		if ok := j.acked(m); ok {
			j.stored(m.expected+1, m.after)
			flight = flight[1:]
			if m.done != nil {
				m.done(nil)
			}
			continue
		}
		// Unknown: let every message in flight settle (all within one timeout: they were
		// sent together), then go through them in order, each read back or sent again.
		deadline := time.Now().Add(j.cfg.Timeout)
		for _, o := range flight[1:] {
			if o.fut != nil {
				wait(o.fut, max(time.Until(deadline), time.Millisecond))
			}
		}
		for i, o := range flight {
			err := error(nil)
			if i > 0 && j.acked(o) {
				// landed after all
			} else if stored, serr := j.storedAtPatiently(o, time.Now().Add(streamElectionWait)); serr != nil {
				err = serr
			} else if !stored {
				err = j.appendMessage(o)
			}
			if err != nil {
				failed = fmt.Errorf("%w: %w", persistence.ErrFailed, err)
				j.mu.Lock()
				j.failed = failed
				j.mu.Unlock()
				report(flight[i:], failed)
				break
			}
			j.stored(o.expected+1, o.after)
			if o.done != nil {
				o.done(nil)
			}
		}
		flight = flight[:0]
	}
}

// failQueued answers what was queued but not taken when the journal closed.
func (p *pipe) failQueued() {
	for {
		select {
		case ms := <-p.in:
			report(ms, persistence.ErrClosed)
		default:
			return
		}
	}
}

// report gives err to the batches that end among ms.
func report(ms []*outMsg, err error) {
	for _, m := range ms {
		if m.done != nil {
			m.done(err)
		}
	}
}

// acked reports whether m's publish was acknowledged at its expected position (waiting
// up to the journal's timeout for the acknowledgement).
func (j *Journal) acked(m *outMsg) bool {
	if m.fut == nil {
		return false
	}
	ack, err := wait(m.fut, j.cfg.Timeout)
	return err == nil && ack.Sequence == m.expected+1
}

// wait is a publish future's outcome, bounded by d.
func wait(f jetstream.PubAckFuture, d time.Duration) (*jetstream.PubAck, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case ack := <-f.Ok():
		return ack, nil
	case err := <-f.Err():
		return nil, err
	case <-t.C:
		return nil, fmt.Errorf("no acknowledgement within %v", d)
	}
}
