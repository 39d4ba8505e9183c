package actors

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast/holdfast/persistence"
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
	h, dir, root, pid := s.h, s.h.dir, s.h.sys.root, s.self
	go func() {
		var err error
		if events {
			err = h.persistPublished(pub)
		}
		if err == nil {
			err = persistence.WriteSnapshot(dir, lsn, slot, capture.AppendTo(make([]byte, 0, capture.Size())))
		}
		root.Send(pid, &snapshotDone{gen: gen, lsn: lsn, err: err})
	}()
}

const publishedFile = "published"

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
	h, lsn, root, pid := s.h, s.published, s.h.sys.root, s.self
	go func() {
		err := h.persistPublished(lsn)
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
func (h *host) persistPublished(lsn uint64) error {
	h.pubMu.Lock()
	defer h.pubMu.Unlock()
	if lsn <= h.pubDurable {
		return nil
	}
	if err := writePublished(h.dir, lsn); err != nil {
		return err
	}
	h.pubDurable = lsn
	return nil
}

// writePublished durably records how far the shard's events are published.
func writePublished(dir string, lsn uint64) error {
	tmp := filepath.Join(dir, publishedFile+".tmp")
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err = f.WriteString(strconv.FormatUint(lsn, 10) + "\n"); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, publishedFile)); err != nil {
		return err
	}
	return syncDir(dir)
}

// readPublished returns the durable published position (0 when never written).
func readPublished(dir string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, publishedFile))
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Join(dir, publishedFile), err)
	}
	return v, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
