package actors

import (
	"sync/atomic"
	"time"
)

// maybeSnapshot captures the kernel state every SnapshotEvery entries. The capture is
// the only time writes wait: it encodes the tables that change in place and freezes the
// append-only retention queues, which are encoded with the file written, beside the actor.
func (s *shard) maybeSnapshot() {
	every := s.h.sys.opts.SnapshotEvery
	if every <= 0 || s.sinceSnapshot < every || s.snapshotting || s.snapCapture != nil {
		return
	}
	s.snapCapture = s.k.Capture(nil)
	s.snapLSN = s.k.LastLSN()
	s.snapSlot = s.k.LastSlot()
	s.sinceSnapshot = 0
	s.maybeWriteSnapshot()
}

// keepJournal acts on a journal whose oldest records are at risk of its stream's limits
// (Feed.Stale): a snapshot ahead of the cadence when entries came after the newest one,
// else compaction up to the newest one (not only to the one before it: the records
// between the two would be lost to the limits otherwise, and a snapshot of the stream's
// object store is as replicated as the journal).
func (s *shard) keepJournal() {
	if s.feed == nil || s.snapshotting || s.snapCapture != nil || s.w == nil || !s.feed.Stale() {
		return
	}
	if s.k.LastLSN() > s.fallbackLSN {
		s.sinceSnapshot = max(s.sinceSnapshot, s.h.sys.opts.SnapshotEvery)
		s.maybeSnapshot()
		return
	}
	s.w.jobs <- writeJob{compact: s.fallbackLSN, gen: s.gen}
}

// maybeWriteSnapshot writes the held snapshot once its events are published: recovery
// re-derives unpublished events by replaying the journal after the snapshot, so a
// snapshot must never pass the durable published position. The published position is
// made durable first, then the snapshot, then the journal below it is compacted.
func (s *shard) maybeWriteSnapshot() {
	if s.snapCapture == nil || s.snapshotting {
		return
	}
	events := s.eventsOn()
	if events && s.published < s.snapLSN {
		return
	}
	capture, lsn, slot, pub, gen, feed := s.snapCapture, s.snapLSN, s.snapSlot, s.published, s.gen, s.feed != nil
	s.snapCapture = nil
	s.snapshotting = true
	h, store, root, pid := s.h, s.h.storage, s.h.sys.root, s.self
	go func() {
		var err error
		if events && !feed {
			err = h.persistPublished(store, pub)
		}
		if err == nil {
			err = store.WriteSnapshot(lsn, slot, capture.AppendTo(make([]byte, 0, capture.Size())))
		}
		root.Send(pid, &snapshotDone{gen: gen, lsn: lsn, err: err})
	}()
}

// snapshotStored takes a snapshot's write: the journal below the one kept to fall back
// on is compacted, and this one is kept to fall back on.
func (s *shard) snapshotStored(m *snapshotDone) {
	s.snapshotting = false
	if m.err != nil {
		s.h.log.Error("snapshot failed", "shard", s.h.shard, "lsn", m.lsn, "err", m.err)
	} else if m.gen == s.gen && s.w != nil {
		if s.fallbackLSN > 0 {
			s.w.jobs <- writeJob{compact: s.fallbackLSN, gen: s.gen}
		}
		s.fallbackLSN = m.lsn
	}
}

// publishedEvery is how often the published position is made durable between
// snapshots, so a restart republishes at most about this much (JetStream drops the
// duplicates by message id within its window).
const publishedEvery = time.Second

// maybePersistPublished makes the published position durable on a cadence, beside the
// actor.
func (s *shard) maybePersistPublished() {
	if s.feed != nil {
		return // the journal records it with the events
	}
	if s.pubWriting || s.published <= s.pubWritten || time.Since(s.pubWrittenAt) < publishedEvery {
		return
	}
	s.pubWriting = true
	h, store, lsn, root, pid := s.h, s.h.storage, s.published, s.h.sys.root, s.self
	go func() {
		err := h.persistPublished(store, lsn)
		root.Send(pid, &publishedWritten{lsn: lsn, err: err})
	}()
}

// publishedWritten reports a durable write of the published position.
type publishedWritten struct {
	lsn uint64
	err error
}

// publishedStored takes a write of the published position: a failure is said once, and
// its end.
func (s *shard) publishedStored(m *publishedWritten) {
	s.pubWriting = false
	switch {
	case m.err != nil && !s.pubFailing:
		// Said once: the cluster bucket electing a leader fails every try for seconds,
		// and the position is only a hint for the next owner's republishing.
		s.h.log.Warn("recording the published position failed; trying again each second", "shard", s.h.shard, "err", m.err)
	case m.err == nil && s.pubFailing:
		s.h.log.Info("recording the published position again", "shard", s.h.shard, "lsn", m.lsn)
	}
	s.pubFailing = m.err != nil
	if m.err == nil {
		s.pubWritten = max(s.pubWritten, m.lsn)
	}
	s.pubWrittenAt = time.Now()
}

// persistPublished writes the published position if it is ahead of what is durable.
// One mutex orders the cadence writes and the snapshot's write, and the position on disk
// only ever moves forward: a snapshot at lsn S is written only after a position >= S is.
// store is the shard's storage when the write was decided (a later opening has its own).
func (h *host) persistPublished(store Storage, lsn uint64) error {
	h.pubMu.Lock()
	defer h.pubMu.Unlock()
	if lsn <= h.pubDurable.Load() {
		return nil
	}
	if err := store.WritePublished(lsn); err != nil {
		return err
	}
	raise(&h.pubDurable, lsn)
	return nil
}

// raise moves v up to at least x (a start may set v while a write is under way).
func raise(v *atomic.Uint64, x uint64) {
	for have := v.Load(); have < x; have = v.Load() {
		if v.CompareAndSwap(have, x) {
			return
		}
	}
}
