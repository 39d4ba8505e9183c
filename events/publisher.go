package events

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/messages"
	"github.com/holdfast/holdfast/wire"
)

// Defaults of Config.
const (
	// DefaultDuplicateWindow covers a restart: a shard records its published position
	// every second, so what a restart republishes twice was published moments before the
	// stop. JetStream holds ~95 bytes per message id in memory for the window (24,000
	// events/s: ~270 MB at 2 min, ~1.4 GB at 10 min), which is why it is not longer.
	DefaultDuplicateWindow = 2 * time.Minute
	MinDuplicateWindow     = 10 * time.Second
	DefaultMaxAge          = 24 * time.Hour
	DefaultMaxBytes        = 16 << 30
	DefaultMaxQueuedEvents = 1 << 16
	DefaultPublishWindow   = 256
	DefaultAckWait         = 10 * time.Second
	// DefaultBatchIdle is how long a shard's event batch may stay quiet before the next
	// event starts a new one: well under nats-server's batch timeout (10 s by default,
	// max_batch_timeout), after which the stream has forgotten the batch (Batches).
	DefaultBatchIdle = 4 * time.Second
)

// Config configures event publishing.
type Config struct {
	// Disabled publishes nothing and creates no stream (the sink drops every event).
	Disabled bool
	// DuplicateWindow of the stream: a republished event within it is stored once.
	// At least MinDuplicateWindow; 0 means DefaultDuplicateWindow.
	DuplicateWindow time.Duration
	// MaxAge and MaxBytes of the stream when the bridge creates it (0: unlimited). An
	// existing stream keeps its limits.
	MaxAge   time.Duration
	MaxBytes int64
	// Replicas of the stream when the bridge creates it (0: 1).
	Replicas int
	// MaxQueuedEvents bounds the events per shard waiting to be published (beyond the
	// ones being published). When a shard's queue would pass it, that shard's events
	// are dropped from then on and its published position stops: the shard republishes
	// them from its journal at the next start.
	MaxQueuedEvents int
	// Window bounds a shard's publishes awaiting their acknowledgement.
	Window int
	// AckWait bounds the wait for one acknowledgement before the event is sent again
	// (with the same message id, so the stream stores it once).
	AckWait time.Duration
	// Serving, in a cluster, says whether this node still serves a shard: a shard's
	// events are published only while it does (nil: always).
	Serving func(shard uint32) bool
	// BatchIdle is the quiet after which a shard's next event starts a new batch; it must
	// be shorter than the NATS server's batch timeout. 0: DefaultBatchIdle.
	BatchIdle time.Duration
	// Plain publishes each event on its own instead of in fast batches, for a NATS server
	// that does not take them (EnsureStream reports it). A shard's events can then be
	// stored out of lsn order when a NATS server is lost (Batches says why).
	Plain bool
}

// WithDefaults fills what c leaves zero.
func (c Config) WithDefaults() Config {
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = DefaultDuplicateWindow
	}
	if c.DuplicateWindow < MinDuplicateWindow {
		c.DuplicateWindow = MinDuplicateWindow
	}
	if c.MaxQueuedEvents <= 0 {
		c.MaxQueuedEvents = DefaultMaxQueuedEvents
	}
	if c.Window <= 0 {
		c.Window = DefaultPublishWindow
	}
	if c.AckWait <= 0 {
		c.AckWait = DefaultAckWait
	}
	if c.BatchIdle <= 0 {
		c.BatchIdle = DefaultBatchIdle
	}
	return c
}

// EventSubjects is the subject filter of the event stream for prefix.
func EventSubjects(prefix string) string { return prefix + ".v1.*.events.>" }

// EnsureStream creates the event stream, or makes an existing one cover the prefix's
// event subjects with a large enough duplicate window (its other settings, e.g.
// replicas or limits chosen by an operator, are left alone).
//
// It also allows fast batch publishing on the stream, and reports whether the stream
// takes it (batched): a NATS server too old for it answers with the setting missing, and
// the publisher must then publish plainly (Config.Plain).
func EnsureStream(ctx context.Context, js jetstream.JetStream, prefix string, cfg Config) (batched bool, err error) {
	err = untilAnswered(ctx, func(actx context.Context) (err error) {
		batched, err = ensureStreamOnce(actx, js, prefix, cfg)
		return err
	})
	return batched, err
}

// untilAnswered runs op in short attempts until it returns anything but silence (a
// timeout, no responders) or ctx ends: a replicated stream being created by another
// process (a cluster starting) may not answer for a while.
func untilAnswered(ctx context.Context, op func(context.Context) error) error {
	for {
		actx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := op(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !(errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrNoResponders)) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func ensureStreamOnce(ctx context.Context, js jetstream.JetStream, prefix string, cfg Config) (bool, error) {
	subject := EventSubjects(prefix)
	for attempt := 0; attempt < 2; attempt++ {
		s, err := js.Stream(ctx, contract.StreamName)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			sc := streamConfig(cfg, subject)
			// An audit trail: nothing is taken out of it but by its limits.
			sc.DenyPurge, sc.AllowBatchPublish = true, true
			created, err := js.CreateStream(ctx, sc)
			if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				continue // created meanwhile by another process: update it
			}
			if err != nil {
				return false, fmt.Errorf("events: creating stream %s for %s: %w", contract.StreamName, subject, err)
			}
			return created.CachedInfo().Config.AllowBatchPublish, nil
		}
		if err != nil {
			return false, fmt.Errorf("events: looking up stream %s: %w", contract.StreamName, err)
		}
		sc := s.CachedInfo().Config
		changed := false
		if !slices.Contains(sc.Subjects, subject) {
			sc.Subjects = append(sc.Subjects, subject)
			changed = true
		}
		if sc.Duplicates < cfg.DuplicateWindow {
			sc.Duplicates = cfg.DuplicateWindow
			changed = true
		}
		if !sc.AllowBatchPublish {
			sc.AllowBatchPublish = true
			changed = true
		}
		// A stream that also holds journals (it allows message TTLs: EnsureFeedStream) must
		// keep allowing the purges that compact them.
		if !sc.DenyDelete || (!sc.DenyPurge && !sc.AllowMsgTTL) {
			sc.DenyDelete, sc.DenyPurge = true, !sc.AllowMsgTTL
			changed = true
		}
		if !changed {
			return true, nil
		}
		updated, err := js.UpdateStream(ctx, sc)
		if err != nil {
			return false, fmt.Errorf("events: updating stream %s (subjects %v, duplicate window %v, batched publishing, deny delete and purge): %w", contract.StreamName, sc.Subjects, sc.Duplicates, err)
		}
		return updated.CachedInfo().Config.AllowBatchPublish, nil
	}
	return false, fmt.Errorf("events: stream %s could be neither created nor found", contract.StreamName)
}

// streamConfig is the events stream as this process creates it, on subjects: limits
// retention, discard old, the configured window and limits, no message deletes.
func streamConfig(cfg Config, subjects ...string) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        contract.StreamName,
		Description: "Holdfast events: <prefix>.v1.<tenant>.events.<object>.<verb>, message id <shard>-<lsn>-<n>",
		Subjects:    subjects,
		Storage:     jetstream.FileStorage,
		Retention:   jetstream.LimitsPolicy,
		Discard:     jetstream.DiscardOld,
		Duplicates:  cfg.DuplicateWindow,
		MaxAge:      cfg.MaxAge,
		MaxBytes:    orUnlimited(cfg.MaxBytes),
		Replicas:    max(cfg.Replicas, 1),
		DenyDelete:  true,
	}
}

func orUnlimited(v int64) int64 {
	if v <= 0 {
		return -1
	}
	return v
}

// Publisher publishes each shard's events in order into the stream, and reports to the
// shard how far its events are acknowledged. A publish carries the reply subject
// <inbox>.<shard>.<seq>; one subscription takes every PubAck and marks its entry in
// the shard's window, so no per-event future, channel or JSON decoding is needed.
type Publisher struct {
	js      jetstream.JetStream
	nc      *nats.Conn
	inbox   string             // acknowledgements come to <inbox>.<shard>.<seq>
	sub     *nats.Subscription // on <inbox>.*.*
	prefix  string
	cfg     Config
	log     *slog.Logger
	metrics Metrics
	shards  []*shardPub
	// positions carries published positions to the shards (actors.EventSink.Positions).
	positions chan actors.Position

	lose func(*nats.Msg) bool // tests: drop this message silently

	closing   chan struct{} // close requested: publish what is queued, then exit
	abort     chan struct{} // give up: stop retrying
	closeOnce sync.Once
	abortOnce sync.Once
	wg        sync.WaitGroup
}

// batch is one sink call: the events of a journal batch and the lsn it ends at.
type batch struct {
	through uint64
	events  []actors.Event
}

type shardPub struct {
	p     *Publisher
	shard uint32
	label string

	mu         sync.Mutex
	waiting    []batch
	queued     int // events in waiting
	overflowed bool
	closed     bool
	// gen counts Drops: a batch taken before a Drop is not published any further.
	gen uint64
	// handed is the last lsn the shard handed over since the last Drop (Flush waits for
	// the acknowledgements to reach it).
	handed atomic.Uint64
	wake   chan struct{}

	// win holds the entries sent and not yet acknowledged, and decides what to send
	// again (Window). The publishing goroutine adds and sends; the
	// acknowledgement handler marks entries and advances it; both under mu.
	win     Window        // plain publishing (Config.Plain)
	bat     Batches       // publishing in fast batches (the default)
	sends   []Send        // Batches.Sendable's result, reused
	ackWake chan struct{} // an acknowledgement or a failure arrived
	timer   *time.Timer   // owned by the publishing goroutine

	acked atomic.Uint64 // every event through this lsn is acknowledged
	// held counts the events handed over and not yet acknowledged (or given up): the
	// shard refuses writes that could take it past its bound (actors.EventSink).
	held     atomic.Int64
	repMu    sync.Mutex
	reported uint64
}

func NewPublisher(js jetstream.JetStream, prefix string, shards uint32, cfg Config, log *slog.Logger, m Metrics) *Publisher {
	p := &Publisher{js: js, nc: js.Conn(), inbox: js.Conn().NewInbox(), prefix: prefix, cfg: cfg, log: log, metrics: m,
		closing: make(chan struct{}), abort: make(chan struct{}), positions: make(chan actors.Position, 64*int(shards))}
	for i := uint32(0); i < shards; i++ {
		label := strconv.FormatUint(uint64(i), 10)
		s := &shardPub{p: p, shard: i, label: label, wake: make(chan struct{}, 1),
			ackWake: make(chan struct{}, 1), win: NewWindow(), timer: time.NewTimer(time.Hour),
			bat: NewBatches(p.inbox[strings.LastIndexByte(p.inbox, '.')+1:]+"s"+label+"b", p.cfg.BatchIdle)}
		s.timer.Stop()
		p.shards = append(p.shards, s)
	}
	return p
}

// Start subscribes to acknowledgements and runs one publishing goroutine per shard.
func (p *Publisher) Start() error {
	// After a reconnect, whatever was sent and not acknowledged may have been lost with
	// the old connection: send it again, in order, before anything newer.
	prev := p.nc.Opts.ReconnectedCB
	p.nc.SetReconnectHandler(func(nc *nats.Conn) {
		for _, s := range p.shards {
			s.mu.Lock()
			if p.cfg.Plain {
				s.win.FailAll()
			} else {
				// End the batch: its answer says what it stored; the gap check keeps
				// anything behind a lost event from being stored meanwhile.
				s.bat.Troubled(s.bat.id)
			}
			s.mu.Unlock()
			select {
			case s.ackWake <- struct{}{}:
			default:
			}
		}
		if prev != nil {
			prev(nc)
		}
	})
	sub, err := p.nc.Subscribe(p.inbox+".>", p.onAck)
	if err != nil {
		return fmt.Errorf("events: subscribing to event acknowledgements: %w", err)
	}
	// Each shard has at most Window acknowledgements outstanding (plus late duplicates
	// of resent ones): room for all of them, so none is dropped as a slow consumer.
	if err := sub.SetPendingLimits(4*len(p.shards)*p.cfg.Window+1024, -1); err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("events: sizing the acknowledgement subscription: %w", err)
	}
	p.sub = sub
	for _, s := range p.shards {
		p.wg.Add(1)
		go s.run()
	}
	return nil
}

// Events queues one batch (actors.EventSink); it runs on the shard's goroutine and
// never blocks.
func (p *Publisher) Events(shard uint32, through uint64, events []actors.Event) {
	if int(shard) >= len(p.shards) {
		p.log.Error("events of an unknown shard dropped", "shard", shard)
		return
	}
	s := p.shards[shard]
	s.mu.Lock()
	switch {
	case s.closed:
		s.mu.Unlock()
		p.log.Warn("events after close dropped; the shard republishes them at its next start", "shard", shard, "through_lsn", through, "events", len(events))
		return
	case s.overflowed:
		s.mu.Unlock()
		p.metrics.EventsDropped(s.label, len(events))
		return
	case s.queued > 0 && s.queued+len(events) > p.cfg.MaxQueuedEvents:
		s.overflowed = true
		s.mu.Unlock()
		p.metrics.EventsDropped(s.label, len(events))
		p.metrics.EventsOverflowed(s.label)
		p.log.Error("event queue full: this shard's events are dropped and its published position stops until restart, which republishes them",
			"shard", shard, "queued", s.queued, "through_lsn", through)
		return
	}
	s.handed.Store(max(s.handed.Load(), through))
	s.held.Add(int64(len(events)))
	if n := len(s.waiting); n > 0 && len(events) == 0 {
		s.waiting[n-1].through = through
	} else {
		s.waiting = append(s.waiting, batch{through: through, events: events})
		s.queued += len(events)
	}
	s.mu.Unlock()
	p.metrics.EventsQueued(s.label, len(events))
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Close publishes what is queued and waits for its acknowledgements, bounded by ctx.
func (p *Publisher) Close(ctx context.Context) error {
	p.closeOnce.Do(func() {
		for _, s := range p.shards {
			s.mu.Lock()
			s.closed = true
			s.mu.Unlock()
		}
		close(p.closing)
	})
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		if p.sub != nil {
			_ = p.sub.Unsubscribe()
		}
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	p.abortOnce.Do(func() { close(p.abort) })
	<-done
	left := 0
	for _, s := range p.shards {
		s.mu.Lock()
		left += s.queued + s.win.Pending() + s.bat.Pending()
		s.mu.Unlock()
	}
	return fmt.Errorf("events: event publishing cut short (%d events unconfirmed; the shards republish them at their next start): %w", left, ctx.Err())
}

// take waits for queued batches; nil when closing and nothing is left.
func (s *shardPub) take() ([]batch, uint64) {
	for {
		s.mu.Lock()
		if len(s.waiting) > 0 {
			b, gen := s.waiting, s.gen
			n := s.queued
			s.waiting, s.queued = nil, 0
			s.mu.Unlock()
			s.p.metrics.EventsQueued(s.label, -n)
			return b, gen
		}
		s.mu.Unlock()
		select {
		case <-s.wake:
		case <-s.p.closing:
			s.mu.Lock()
			empty := len(s.waiting) == 0
			s.mu.Unlock()
			if empty {
				return nil, 0
			}
		case <-s.p.abort:
			return nil, 0
		}
	}
}

func (s *shardPub) run() {
	defer s.p.wg.Done()
	for {
		batches, gen := s.take()
		if batches == nil {
			s.drain(0, false)
			return
		}
		for _, b := range batches {
			for i := range b.events {
				through := uint64(0)
				if i == len(b.events)-1 {
					through = b.through
				}
				if !s.publish(&b.events[i], through, gen) {
					return
				}
			}
			if len(b.events) == 0 {
				s.mu.Lock()
				if s.gen == gen {
					s.addNoEventLocked(b.through)
					s.advanceLocked()
				}
				s.mu.Unlock()
			}
		}
		// Nothing more queued: wait for the acknowledgements (sending again what needs
		// it) until every one is in or more events come.
		if !s.drain(0, true) {
			return
		}
	}
}

// message builds the NATS message of an event.
func (p *Publisher) message(e *actors.Event) (*nats.Msg, error) { return Message(p.prefix, e) }

// Message builds the NATS message of an event of prefix: its contract subject, its
// message id and its JSON payload (docs/api.md §5).
func Message(prefix string, e *actors.Event) (*nats.Msg, error) {
	data, err := messages.MarshalJSON(wire.Event(e))
	if err != nil {
		return nil, err
	}
	msg := nats.NewMsg(prefix + ".v1." + e.Tenant + ".events." + e.Kind.String())
	msg.Data = data
	msg.Header.Set(jetstream.MsgIDHeader, contract.EventMsgID(e.Shard, e.LSN, e.N))
	msg.Header.Set(messages.HeaderContentType, messages.ContentTypeJSON)
	return msg, nil
}

// publish sends one event and keeps it in the window; through is the lsn its batch
// ends at when it is the batch's last event. False when publishing was aborted.
func (s *shardPub) publish(e *actors.Event, through, gen uint64) bool {
	msg, err := s.p.message(e)
	if !s.lockServing(gen) {
		return !s.aborted()
	}
	if err != nil {
		// Views hold validated ASCII ids, so this cannot happen; if it does, the event
		// cannot be published at all and holding the position would stop the shard's
		// snapshots forever.
		s.addNoEventLocked(through)
		s.held.Add(-1)
		s.advanceLocked()
		s.mu.Unlock()
		s.p.metrics.PublishError(s.label)
		s.p.log.Error("event cannot be encoded; skipped", "shard", s.shard, "lsn", e.LSN, "err", err)
		return true
	}
	if !s.p.cfg.Plain {
		s.bat.Add(msg, through)
		s.mu.Unlock()
		s.sendBatched(gen)
		return s.drainBatched(s.p.cfg.Window-1, false)
	}
	seq := s.win.NextSeq()
	msg.Reply = s.p.inbox + "." + s.label + "." + strconv.FormatUint(seq, 10)
	s.win.Add(msg, through, time.Now())
	s.mu.Unlock()
	if err := s.p.send(msg); err != nil {
		s.markFailed(seq, err)
	}
	return s.drain(s.p.cfg.Window-1, false)
}

// addNoEventLocked records a journal batch end with no event to wait for (or one that
// cannot be encoded), in either publishing mode.
func (s *shardPub) addNoEventLocked(through uint64) {
	if s.p.cfg.Plain {
		s.win.Add(nil, through, time.Time{})
	} else {
		s.bat.Add(nil, through)
	}
}

// markFailed records that the send of entry seq failed; the publishing goroutine sends
// it again.
func (s *shardPub) markFailed(seq uint64, err error) {
	s.mu.Lock()
	msg, tries := s.win.Fail(seq)
	s.mu.Unlock()
	if msg == nil {
		return // gone, acknowledged, or already marked
	}
	s.failedLog(msg, tries, err)
	select {
	case s.ackWake <- struct{}{}:
	default:
	}
}

// advanceLocked drops acknowledged entries from the head of the window and reports the
// position they reach.
func (s *shardPub) advanceLocked() {
	done := func(published bool) {
		if published {
			s.held.Add(-1)
		}
		s.p.metrics.EventPublished(s.label, published)
	}
	var through uint64
	if s.p.cfg.Plain {
		through = s.win.Advance(done)
	} else {
		through = s.bat.Advance(done)
	}
	if through > 0 {
		s.acked.Store(through)
		s.p.metrics.PublishedLSN(s.label, through)
		// report takes repMu, never mu: the order mu → repMu is the only one.
		s.report()
	}
}

// onAck handles the stream's answer to one send: a PubAck (also for a duplicate), an
// error, or a no-responders status when no stream takes the subject.
func (p *Publisher) onAck(m *nats.Msg) {
	subj := m.Subject[len(p.inbox)+1:]
	dot := strings.IndexByte(subj, '.')
	if dot < 0 {
		return
	}
	if rest, ok := strings.CutSuffix(subj[dot+1:], ".$FI"); ok {
		// <shard>.<batch>.<flow>.<gap>.<seq>.<op>.$FI
		shard, err := strconv.ParseUint(subj[:dot], 10, 32)
		id, _, _ := strings.Cut(rest, ".")
		if err == nil && shard < uint64(len(p.shards)) {
			p.shards[shard].onBatchReply(id, m)
		}
		return
	}
	shard, err1 := strconv.ParseUint(subj[:dot], 10, 32)
	seq, err2 := strconv.ParseUint(subj[dot+1:], 10, 64)
	if err1 != nil || err2 != nil || shard >= uint64(len(p.shards)) {
		return
	}
	s := p.shards[shard]
	if err := ackError(m); err != nil {
		s.markFailed(seq, err)
		return
	}
	s.mu.Lock()
	if s.win.Ack(seq) {
		s.advanceLocked()
	}
	s.mu.Unlock()
	select {
	case s.ackWake <- struct{}{}:
	default:
	}
}

// ackError is nil for a PubAck, else why the stream did not store the event.
func ackError(m *nats.Msg) error {
	if len(m.Data) == 0 {
		// A status message (nats.go keeps its header names unexported).
		if st := m.Header.Get("Status"); st != "" {
			if st == "503" {
				return errors.New("no responders: no stream takes the event subject")
			}
			return fmt.Errorf("status %s %s", st, m.Header.Get("Description"))
		}
		return errors.New("empty acknowledgement")
	}
	// The common case, {"stream":"HOLDFAST_EVENTS","seq":N[,"duplicate":true]}, is
	// told by a glance; anything mentioning an error is decoded properly.
	if !bytes.Contains(m.Data, []byte(`"error"`)) {
		return nil
	}
	var r struct {
		Error *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return fmt.Errorf("unreadable acknowledgement: %w", err)
	}
	if r.Error != nil {
		return fmt.Errorf("stream refused the event: %s (code %d, err_code %d)", r.Error.Description, r.Error.Code, r.Error.ErrCode)
	}
	return nil
}

// drain waits until at most limit entries are unacknowledged (or, with orWork, until
// more events are queued), sending again what the window plans (Window.Plan: a
// probe after a refusal, the rest in order behind it, an overdue entry on its own), with
// the same message id (the stream stores it once). False when publishing was aborted.
func (s *shardPub) drain(limit int, orWork bool) bool {
	if !s.p.cfg.Plain {
		return s.drainBatched(limit, orWork)
	}
	var work chan struct{}
	if orWork {
		work = s.wake
	}
	for {
		s.mu.Lock()
		if !s.win.Troubled() && (s.win.Pending() <= limit || (orWork && len(s.waiting) > 0)) {
			s.mu.Unlock()
			return true
		}
		redo, tries, wait, overdue := s.win.Plan(time.Now(), s.p.cfg.AckWait)
		var id string
		if overdue != nil {
			id = overdue.Msg.Header.Get(jetstream.MsgIDHeader)
		}
		s.mu.Unlock()
		if overdue != nil {
			s.p.metrics.PublishError(s.label)
			if tries == 1 || tries%50 == 0 {
				s.p.log.Warn("event not acknowledged in time; sending it again", "shard", s.shard,
					"msg_id", id, "attempt", tries+1, "ack_wait", s.p.cfg.AckWait)
			}
		}
		if len(redo) > 0 {
			if tries > 0 && !s.backoff(tries-1) {
				return false
			}
			s.resend(redo)
			continue
		}
		if !s.await(wait, work) {
			return false
		}
	}
}

// await waits up to wait for an acknowledgement, a failure or (work not nil) more queued
// events; false when publishing is aborted.
func (s *shardPub) await(wait time.Duration, work chan struct{}) bool {
	s.timer.Reset(wait)
	select {
	case <-s.ackWake:
		s.timer.Stop()
	case <-s.timer.C:
	case <-work:
		s.timer.Stop() // take finds the queued batches without the wake-up
	case <-s.p.abort:
		s.timer.Stop()
		return false
	}
	return true
}

// resend publishes the entries again, in order, skipping any acknowledged meanwhile.
func (s *shardPub) resend(seqs []uint64) {
	s.mu.Lock()
	gen := s.gen
	s.mu.Unlock()
	for _, seq := range seqs {
		if !s.lockServing(gen) {
			return
		}
		msg := s.win.Resending(seq, time.Now())
		s.mu.Unlock()
		if msg == nil {
			continue // an earlier send made it after all
		}
		if err := s.p.send(msg); err != nil {
			s.markFailed(seq, err)
		}
	}
}

func (s *shardPub) failedLog(msg *nats.Msg, attempt int, err error) {
	s.p.metrics.PublishError(s.label)
	if attempt == 0 || attempt%50 == 0 {
		s.p.log.Warn("event publish failed; retrying", "shard", s.shard, "subject", msg.Subject,
			"msg_id", msg.Header.Get(jetstream.MsgIDHeader), "attempt", attempt+1, "err", err)
	}
}

// backoff waits before attempt+1; false when publishing is aborted.
func (s *shardPub) backoff(attempt int) bool {
	d := time.Duration(min(attempt+1, 20)) * 100 * time.Millisecond
	s.timer.Reset(d)
	select {
	case <-s.timer.C:
		return true
	case <-s.p.abort:
		s.timer.Stop()
		return false
	}
}

// Drop forgets shard k's queued and unacknowledged events: the shard is no longer served
// here, and whoever serves it republishes them from its durable published position. Two
// nodes publishing one shard's events at once could store them out of lsn order.
func (p *Publisher) Drop(k uint32) {
	s := p.shards[k]
	s.mu.Lock()
	s.dropLocked()
	s.mu.Unlock()
}

func (s *shardPub) dropLocked() {
	if n := s.queued; n > 0 {
		s.p.metrics.EventsQueued(s.label, -n)
	}
	s.waiting, s.queued, s.overflowed = nil, 0, false
	s.held.Store(0)
	s.win.Reset()
	s.bat.Reset()
	s.gen++
	s.handed.Store(0)
	s.acked.Store(0)
	s.repMu.Lock()
	s.reported = 0
	s.repMu.Unlock()
}

// Flush waits until every event shard k handed over since it was last dropped is
// acknowledged, bounded by ctx, and returns how far they are (0: none handed over): a
// node handing the shard over records it for the next owner.
func (p *Publisher) Flush(ctx context.Context, k uint32) uint64 {
	s := p.shards[k]
	t := time.NewTicker(5 * time.Millisecond)
	defer t.Stop()
	for s.acked.Load() < s.handed.Load() {
		select {
		case <-ctx.Done():
			return s.acked.Load()
		case <-t.C:
		}
	}
	return s.acked.Load()
}

// serving reports whether shard k's events may be published from here (Config.Serving).
func (p *Publisher) serving(k uint32) bool { return p.cfg.Serving == nil || p.cfg.Serving(k) }

// awaitServing holds the shard's publishing while this node's claim on it is not
// certainly current (a late renewal, a pause, a cut-off): nothing is sent that could land
// behind another owner's events, and nothing is skipped either — when the claim is
// renewed publishing goes on in order, and when the shard is lost Drop ends the wait
// (false). False also when publishing is aborted.
func (s *shardPub) awaitServing(gen uint64) bool {
	for !s.p.serving(s.shard) {
		s.mu.Lock()
		dropped := s.gen != gen
		s.mu.Unlock()
		if dropped {
			return false
		}
		select {
		case <-s.p.abort:
			return false
		case <-time.After(10 * time.Millisecond):
		}
	}
	return true
}

// lockServing waits as awaitServing does and then takes s.mu for generation gen: false,
// with s.mu not held, when publishing was aborted or the shard dropped since gen (its
// owner republishes what is left).
func (s *shardPub) lockServing(gen uint64) bool {
	if !s.awaitServing(gen) {
		return false
	}
	s.mu.Lock()
	if s.gen != gen {
		s.mu.Unlock()
		return false
	}
	return true
}

func (s *shardPub) aborted() bool {
	select {
	case <-s.p.abort:
		return true
	default:
		return false
	}
}

// Unpublished is how many of shard k's events are handed over and not yet acknowledged
// (actors.EventSink).
func (p *Publisher) Unpublished(k uint32) int {
	if int(k) >= len(p.shards) {
		return 0
	}
	return int(p.shards[k].held.Load())
}

// Acked is how far shard k's events are acknowledged by the stream.
func (p *Publisher) Acked(k uint32) uint64 { return p.shards[k].acked.Load() }

// Positions is the other half of actors.EventSink: how far each shard's events are
// acknowledged by the stream.
func (p *Publisher) Positions() <-chan actors.Position { return p.positions }

var _ actors.EventSink = (*Publisher)(nil)

// Metrics is what the publisher reports about itself; the bridge's Prometheus metrics
// implement it.
type Metrics interface {
	EventsQueued(shard string, n int)
	EventsDropped(shard string, n int)
	EventsOverflowed(shard string)
	EventPublished(shard string, real bool)
	PublishError(shard string)
	PublishedLSN(shard string, lsn uint64)
}

// report tells the shard how far its events are acknowledged. It never blocks: when the
// channel is full the position is sent with the next acknowledgement instead.
func (s *shardPub) report() {
	s.repMu.Lock()
	defer s.repMu.Unlock()
	if a := s.acked.Load(); a > s.reported {
		select {
		case s.p.positions <- actors.Position{Shard: s.shard, LSN: a}:
			s.reported = a
		default:
		}
	}
}

// send publishes m on the events connection. lose, set by tests, drops a message as a
// NATS server going down can: silently.
func (p *Publisher) send(m *nats.Msg) error {
	if p.lose != nil && p.lose(m) {
		return nil
	}
	return p.nc.PublishMsg(m)
}
