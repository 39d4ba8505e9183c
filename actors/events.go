package actors

// EventSink is the loop between the shards and event publishing, defined here so that
// actors depends on no publisher: applied events go up through Events, and how far each
// shard's events are durably published comes back down on Positions, which the System
// reads and hands to the shard (a snapshot never passes the published position, since
// recovery re-derives unpublished events from the journal after it). events.Publisher
// implements it; the composition root (server) wires it in.
type EventSink interface {
	// Events takes a shard's applied events through throughLSN, in lsn order per shard.
	// It runs on the shard's goroutine and must not block; the sink keeps the slice.
	Events(shard uint32, throughLSN uint64, events []Event)
	// Positions delivers published positions. A sink that cannot deliver one at once
	// may drop it and send a later one: positions only move forward.
	Positions() <-chan Position
	// Unpublished is how many of shard's events the sink holds (handed over, not yet
	// published). A shard bounds it with the events its sequenced entries may add
	// (Options.MaxUnpublished); it may be read from the shard's goroutine at any time.
	Unpublished(shard uint32) int
}

// eventsOn says whether the shard derives its events: for its journal (a Feed) or for
// the System's sink.
func (s *shard) eventsOn() bool { return s.feed != nil || s.h.sys.opts.Events != nil }

// handOn gives the events of the entries through the shard's last lsn to its journal or
// the System's sink, which keeps the slice.
func (s *shard) handOn(events []Event) {
	if s.feed != nil {
		s.feed.Carry(s.k.LastLSN(), events)
	} else if sink := s.h.sys.opts.Events; sink != nil {
		sink.Events(s.h.shard, s.k.LastLSN(), events)
	}
}

// unpublished is how many of the shard's events its journal or the sink holds.
func (s *shard) unpublished() int {
	if s.feed != nil {
		return s.feed.Held()
	}
	return s.h.sys.opts.Events.Unpublished(s.h.shard)
}

// Position says that a shard's events through LSN are durably published.
type Position struct {
	Shard uint32
	LSN   uint64
}

// positions hands published positions from the sink to the shards until the System stops.
func (s *System) positions() {
	defer s.wg.Done()
	ch := s.opts.Events.Positions()
	for {
		select {
		case <-s.stopCh:
			return
		case p := <-ch:
			if p.Shard < uint32(len(s.hosts)) {
				if pid := s.hosts[p.Shard].pid.Load(); pid != nil {
					s.root.Send(pid, &published{lsn: p.LSN})
				}
			}
		}
	}
}

// Feed is a journal that stores its shard's events itself, with its appends (a
// cluster's journal in the events stream: cluster.Feed, data format 3). A shard whose
// journal is a Feed hands its events to it rather than to Options.Events, and learns
// from it how far they are stored: the batch that stores an event also records that it
// is, so the position needs no write of its own (Storage.WritePublished is not called).
type Feed interface {
	// Carry takes the events of the applied entries through lsn, in lsn order; they are
	// stored with the journal's next append. It runs on the shard's goroutine, must not
	// block, and keeps the slice. Events the journal has stored already are dropped.
	Carry(through uint64, events []Event)
	// Stored is how far the events were stored when the journal was opened: every event
	// of the entries through the lsn it returns.
	Stored() uint64
	// Watch has fn called with each new position through which events are stored.
	Watch(fn func(lsn uint64))
	// Held is how many events were handed over and are not yet stored.
	Held() int
	// Stale reports (once each time it finds it so) that the journal's oldest records
	// are at risk of the stream's limits: the shard takes a snapshot ahead of its
	// cadence and compacts up to it.
	Stale() bool
}
