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
