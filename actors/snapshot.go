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

// maybeWriteSnapshot writes the held snapshot once its events are published: recovery
// re-derives unpublished events by replaying the journal after the snapshot, so a
// snapshot must never pass the durable published position. The published position is
// made durable first, then the snapshot, then the journal below it is compacted.
func (s *shard) maybeWriteSnapshot() {
	if s.snapCapture == nil || s.snapshotting {
		return
	}
	events := s.h.sys.opts.Events != nil
	if events && s.published < s.snapLSN {
		return
	}
	capture, lsn, slot, pub, gen := s.snapCapture, s.snapLSN, s.snapSlot, s.published, s.gen
	s.snapCapture = nil
	s.snapshotting = true
	h, store, root, pid := s.h, s.h.storage, s.h.sys.root, s.self
	go func() {
		var err error
		if events {
			err = h.persistPublished(store, pub)
		}
		if err == nil {
			err = store.WriteSnapshot(lsn, slot, capture.AppendTo(make([]byte, 0, capture.Size())))
		}
		root.Send(pid, &snapshotDone{gen: gen, lsn: lsn, err: err})
	}()
}

// publishedEvery is how often the published position is made durable between
// snapshots, so a restart republishes at most about this much (JetStream drops the
// duplicates by message id within its window).
const publishedEvery = time.Second

// maybePersistPublished makes the published position durable on a cadence, beside the
// actor.
func (s *shard) maybePersistPublished() {
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
