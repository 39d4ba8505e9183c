package persistence

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// FileJournal is a Journal kept in segment files in one directory.
//
// Append, Replay, Compact and Close serialise on one mutex (a shard calls them from its
// writer; Compact may come from a snapshot goroutine). Last and Stats never wait for an fsync
// in progress and may be called from any goroutine.
type FileJournal struct {
	dir  string
	opts FileOptions

	mu       sync.Mutex
	segments []segment // oldest first; the last one is the one appended to
	active   *os.File  // the last segment, open for appending; nil when there is none
	tail     position  // last durable record
	buf      []byte    // batch encoding, reused so steady-state appends do not allocate
	reader   *frameReader
	err      error // sticky: set by the first failure, returned by every later call
	closed   bool

	lastMu sync.Mutex
	last   position // copy of tail published for Last

	stats journalCounters
}

var _ Journal = (*FileJournal)(nil)

// OpenFileJournal opens the journal in dir, creating the directory if needed, and recovers it:
// a torn tail left by a crash is truncated, and any other damage is reported as a
// *CorruptionError without changing anything.
func OpenFileJournal(dir string, opts FileOptions) (*FileJournal, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := ensureDir(dir); err != nil {
		return nil, err
	}
	reader := newFrameReader(opts.MaxRecordSize)
	segs, tail, err := recoverJournal(dir, reader)
	if err != nil {
		return nil, err
	}
	j := &FileJournal{dir: dir, opts: opts, segments: segs, tail: tail, last: tail, reader: reader}
	if len(segs) > 0 {
		// Recovery left the file ending exactly at its last good frame; batches are written
		// at the segment's size (WriteAt), after which fillAhead adds zeros.
		j.active, err = os.OpenFile(segs[len(segs)-1].path, os.O_WRONLY, 0)
		if err != nil {
			return nil, err
		}
	}
	return j, nil
}

// ensureDir creates dir when it is missing and makes its entry in the parent durable, so a
// journal created just before a crash is not lost with its directory.
func ensureDir(dir string) error {
	st, err := os.Stat(dir)
	if err == nil {
		if !st.IsDir() {
			return fmt.Errorf("persistence: %s is not a directory", dir)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return syncDir(filepath.Dir(filepath.Clean(dir)))
}

// Last returns the lsn and slot of the last durable record, (0,0) when the journal is empty.
func (j *FileJournal) Last() (lsn, slot uint64) {
	j.lastMu.Lock()
	defer j.lastMu.Unlock()
	return j.last.lsn, j.last.slot
}

// Close releases the active segment. On a failed journal it still releases it, and returns the failure.
func (j *FileJournal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.closed {
		return nil
	}
	j.closed = true
	var err error
	if j.active != nil {
		err = j.active.Close()
		j.active = nil
	}
	if j.err != nil {
		return j.err
	}
	return err
}

// usable returns the error every call on a closed or failed journal gets. Callers hold j.mu.
func (j *FileJournal) usable() error {
	if j.err != nil {
		return j.err
	}
	if j.closed {
		return ErrClosed
	}
	return nil
}

// fail makes the journal failed for good: after a write or fsync error the state of the file
// is unknown, and only recovery on reopen can tell what reached the disk. Callers hold j.mu.
func (j *FileJournal) fail(err error) error {
	j.err = fmt.Errorf("%w: %w", ErrFailed, err)
	return j.err
}

// publish makes the new durable tail visible to Last. Callers hold j.mu.
func (j *FileJournal) publish(tail position) {
	j.tail = tail
	j.lastMu.Lock()
	j.last = tail
	j.lastMu.Unlock()
}
