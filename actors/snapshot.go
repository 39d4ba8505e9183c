package actors

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/holdfast/holdfast/persistence"
)

// maybeSnapshot copies the kernel state every SnapshotEvery entries. The copy is the
// only time writes wait; the file is written beside the actor.
func (s *shard) maybeSnapshot() {
	every := s.h.sys.opts.SnapshotEvery
	if every <= 0 || s.sinceSnapshot < every || s.snapshotting || s.snapBytes != nil {
		return
	}
	s.snapBytes = s.k.Snapshot(nil)
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
	if s.snapBytes == nil || s.snapshotting {
		return
	}
	events := s.h.sys.opts.Events != nil
	if events && s.published < s.snapLSN {
		return
	}
	bytes, lsn, slot, pub, gen := s.snapBytes, s.snapLSN, s.snapSlot, s.published, s.gen
	s.snapBytes = nil
	s.snapshotting = true
	dir, root, pid := s.h.dir, s.h.sys.root, s.h.pid
	go func() {
		var err error
		if events {
			err = writePublished(dir, pub)
		}
		if err == nil {
			err = persistence.WriteSnapshot(dir, lsn, slot, bytes)
		}
		root.Send(pid, &snapshotDone{gen: gen, lsn: lsn, err: err})
	}()
}

const publishedFile = "published"

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
