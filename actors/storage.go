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

// Storage is everything of one shard that outlives its process: the journal, the
// snapshots that bound its replay, and the position through which its events are
// published. A single process keeps them in files under its data directory; a cluster
// keeps them in JetStream so that any node can take the shard over (package cluster).
type Storage interface {
	// OpenJournal opens the shard's journal; the shard replays it and appends to it.
	OpenJournal() (persistence.Journal, error)
	// LoadSnapshot returns the newest readable snapshot (ok false when there is none).
	LoadSnapshot() (snap persistence.Snapshot, ok bool, err error)
	// WriteSnapshot durably stores the state at lsn. It runs beside the shard, never
	// concurrently with itself. Once it returns, the journal is compacted below the
	// previous snapshot (kept to fall back on), never below lsn itself.
	WriteSnapshot(lsn, slot uint64, payload []byte) error
	// ReadPublished returns the durable published position (0 when never written).
	ReadPublished() (uint64, error)
	// WritePublished durably records that events through lsn are published.
	WritePublished(lsn uint64) error
}

// Anchored is implemented by a journal whose owner's slot clock must not run ahead of
// the journal's own time: a cluster journal answers the time its claim was stored at (the
// JetStream server's clock), and the shard's clock then advances from there by the
// monotonic time elapsed since, so a node whose wall clock runs ahead never expires a
// lease early after it takes a shard over.
type Anchored interface {
	Anchor() (claimed, local int64) // claim time (Unix ns) and the local monotonic reading then
}

// FileStorage keeps a shard's journal, snapshots and published position in a directory.
type FileStorage struct {
	Dir     string
	Journal persistence.FileOptions
}

// OpenJournal opens the file journal in the directory.
func (f FileStorage) OpenJournal() (persistence.Journal, error) {
	return persistence.OpenFileJournal(f.Dir, f.Journal)
}

// LoadSnapshot loads the newest readable snapshot file.
func (f FileStorage) LoadSnapshot() (persistence.Snapshot, bool, error) {
	return persistence.LoadLatestSnapshot(f.Dir)
}

// WriteSnapshot writes a snapshot file (temp file, fsync, rename).
func (f FileStorage) WriteSnapshot(lsn, slot uint64, payload []byte) error {
	return persistence.WriteSnapshot(f.Dir, lsn, slot, payload)
}

const publishedFile = "published"

// WritePublished durably records how far the shard's events are published.
func (f FileStorage) WritePublished(lsn uint64) error {
	return persistence.WriteFile(filepath.Join(f.Dir, publishedFile), func(fh *os.File) error {
		_, err := fh.WriteString(strconv.FormatUint(lsn, 10) + "\n")
		return err
	})
}

// ReadPublished returns the durable published position (0 when never written).
func (f FileStorage) ReadPublished() (uint64, error) {
	b, err := os.ReadFile(filepath.Join(f.Dir, publishedFile))
	if os.IsNotExist(err) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Join(f.Dir, publishedFile), err)
	}
	return v, nil
}

// processStart anchors monoNow: time.Since reads the monotonic clock.
var processStart = time.Now()

// monoNow is a monotonic reading in nanoseconds (since the process started); a wall
// clock step does not move it.
func monoNow() int64 { return int64(time.Since(processStart)) }

// MonoNow is monoNow for storages that implement Anchored.
func MonoNow() int64 { return monoNow() }
