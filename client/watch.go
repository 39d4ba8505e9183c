package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/messages"
)

// WatchOptions selects the events a Watcher follows.
type WatchOptions struct {
	// Filter narrows the events by the subject part after "events.", e.g.
	// "lease.>" or "lease.expired"; empty means every event (">").
	Filter string
	// AllTenants follows every tenant instead of the client's.
	AllTenants bool

	// Replay: any of the following reads the JetStream stream (an ordered
	// consumer) from that point, then keeps following it live. With none set,
	// the watcher follows live events only (a core NATS subscription), from
	// the moment Watch returns.

	// FromStart replays the whole stream.
	FromStart bool
	// StartSeq replays from this stream sequence.
	StartSeq uint64
	// StartTime replays from the first event stored at or after it.
	StartTime time.Time
	// Stream is the stream name (default HOLDFAST_EVENTS).
	Stream string

	// Buffer is the capacity of the event channel (default 256).
	Buffer int
}

func (o WatchOptions) replay() bool {
	return o.FromStart || o.StartSeq > 0 || !o.StartTime.IsZero()
}

// Event is one decoded event.
type Event struct {
	// Event is the payload: Event.Event is the name ("lease.reserved", ...),
	// then tenant, shard, lsn, slot and the view after the change.
	*messages.Event
	// Subject is the NATS subject it came on.
	Subject string
	// Sequence is its stream sequence when replaying from JetStream (0 for
	// live events).
	Sequence uint64
	// Stored is when the stream stored it (zero for live events).
	Stored time.Time
	// CaughtUp marks the last event of a replay: the stream had nothing more for the
	// watch when it was delivered; what follows is live.
	CaughtUp bool
}

// Watcher delivers events on a channel until its context ends, Stop is
// called, or it fails.
type Watcher struct {
	events chan Event
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	err    error
	// empty is closed when a replay found nothing to replay (no event carries
	// CaughtUp then); never for a live watch.
	empty chan struct{}
}

// Empty is closed when a replaying watcher found no event to replay: it is live at once.
func (w *Watcher) Empty() <-chan struct{} { return w.empty }

// Events returns the channel of events. It is closed when the watcher ends;
// then Err tells why.
func (w *Watcher) Events() <-chan Event { return w.events }

// Err returns the error that ended the watcher, or nil when it ended because
// its context ended or Stop was called. Call it after Events is closed.
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Stop ends the watcher and waits until its channel is closed.
func (w *Watcher) Stop() {
	w.cancel()
	<-w.done
}

func (w *Watcher) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

// EventsSubject returns the subject of events: <prefix>.v1.<tenant>.events.<filter>,
// with tenant "*" when allTenants.
func (c *Client) EventsSubject(filter string, allTenants bool) string {
	tenant := c.cfg.tenant
	if allTenants {
		tenant = "*"
	}
	if filter == "" {
		filter = ">"
	}
	return c.cfg.prefix + ".v1." + tenant + ".events." + filter
}

// Watch starts following events. Live watchers are subscribed when Watch
// returns: every event published after that is delivered. Replaying watchers
// read the stream from the chosen point and go on live.
func (c *Client) Watch(ctx context.Context, opts WatchOptions) (*Watcher, error) {
	subject := c.EventsSubject(opts.Filter, opts.AllTenants)
	buf := opts.Buffer
	if buf <= 0 {
		buf = 256
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &Watcher{events: make(chan Event, buf), cancel: cancel, done: make(chan struct{}), empty: make(chan struct{})}
	var err error
	if opts.replay() {
		err = c.watchStream(wctx, w, subject, opts)
	} else {
		err = c.watchLive(wctx, w, subject)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return w, nil
}

func (c *Client) watchLive(ctx context.Context, w *Watcher, subject string) error {
	sub, err := c.nc.SubscribeSync(subject)
	if err != nil {
		return fmt.Errorf("holdfast watch: subscribe %s: %w", subject, err)
	}
	// Make sure the server has the subscription before returning.
	fctx, cancel := context.WithTimeout(ctx, c.cfg.timeout)
	defer cancel()
	if err := c.nc.FlushWithContext(fctx); err != nil {
		_ = sub.Unsubscribe()
		return fmt.Errorf("holdfast watch: subscribe %s: %w", subject, err)
	}
	go func() {
		defer close(w.done)
		defer close(w.events)
		defer func() { _ = sub.Unsubscribe() }()
		for {
			m, err := sub.NextMsgWithContext(ctx)
			if err != nil {
				if ctx.Err() == nil {
					w.fail(fmt.Errorf("holdfast watch: %w", err))
				}
				return
			}
			ev, err := decodeEvent(m.Data, m.Header)
			if err != nil {
				w.fail(fmt.Errorf("holdfast watch: event on %s: %w", m.Subject, err))
				return
			}
			select {
			case w.events <- Event{Event: ev, Subject: m.Subject}:
			case <-ctx.Done():
				return
			}
		}
	}()
	return nil
}

func (c *Client) watchStream(ctx context.Context, w *Watcher, subject string, opts WatchOptions) error {
	js, err := jetstream.New(c.nc)
	if err != nil {
		return fmt.Errorf("holdfast watch: %w", err)
	}
	stream := opts.Stream
	if stream == "" {
		stream = EventsStream
	}
	cons, err := js.OrderedConsumer(ctx, stream, consumerConfig(subject, opts))
	if err != nil {
		return fmt.Errorf("holdfast watch: stream %s: %w", stream, err)
	}
	caughtUp := false
	if info, err := cons.Info(ctx); err == nil && info.NumPending == 0 {
		caughtUp = true
		close(w.empty)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("holdfast watch: stream %s: %w", stream, err)
	}
	go func() {
		<-ctx.Done()
		it.Stop()
	}()
	go func() {
		defer close(w.done)
		defer close(w.events)
		for {
			m, err := it.Next()
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					w.fail(fmt.Errorf("holdfast watch: %w", err))
				}
				return
			}
			ev, err := decodeEvent(m.Data(), m.Headers())
			if err != nil {
				w.fail(fmt.Errorf("holdfast watch: event on %s: %w", m.Subject(), err))
				return
			}
			out := Event{Event: ev, Subject: m.Subject()}
			if md, err := m.Metadata(); err == nil {
				out.Sequence = md.Sequence.Stream
				out.Stored = md.Timestamp
				if !caughtUp && md.NumPending == 0 {
					caughtUp, out.CaughtUp = true, true
				}
			}
			select {
			case w.events <- out:
			case <-ctx.Done():
				return
			}
		}
	}()
	return nil
}

// consumerConfig is the ordered consumer of a watch: its subject, from where opts say.
func consumerConfig(subject string, opts WatchOptions) jetstream.OrderedConsumerConfig {
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}}
	switch {
	case opts.StartSeq > 0:
		cfg.DeliverPolicy = jetstream.DeliverByStartSequencePolicy
		cfg.OptStartSeq = opts.StartSeq
	case !opts.StartTime.IsZero():
		t := opts.StartTime
		cfg.DeliverPolicy = jetstream.DeliverByStartTimePolicy
		cfg.OptStartTime = &t
	default:
		cfg.DeliverPolicy = jetstream.DeliverAllPolicy
	}
	return cfg
}

// DecodeEvent decodes an event payload: JSON (the contract's form), or
// protobuf when its header says so.
func DecodeEvent(data []byte, h nats.Header) (*messages.Event, error) { return decodeEvent(data, h) }

func decodeEvent(data []byte, h nats.Header) (*messages.Event, error) {
	ev := &messages.Event{}
	if h.Get(messages.HeaderContentType) == messages.ContentTypeProtobuf {
		return ev, messages.UnmarshalProtoTolerant(data, ev)
	}
	return ev, messages.UnmarshalJSONTolerant(data, ev)
}
