package persistence

import (
	"fmt"
	"io"
	"os"
)

// Replay calls fn for every durable record with LSN >= from, in order; see Journal.Replay. It
// re-verifies every frame it reads, so damage that appeared after Open is reported as a
// *CorruptionError rather than handed to the kernel. fn must not call back into the journal
// except Last and Stats.
func (j *FileJournal) Replay(from uint64, fn func(Record) error) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.usable(); err != nil {
		return err
	}
	from = max(from, 1)
	if len(j.segments) > 0 && from < j.segments[0].first {
		return fmt.Errorf("%w: replay from lsn %d, journal starts at lsn %d", ErrCompacted, from, j.segments[0].first)
	}
	for _, seg := range j.segments {
		if seg.last < from || seg.size == 0 {
			continue
		}
		if err := j.replaySegment(seg, from, fn); err != nil {
			return err
		}
	}
	return nil
}

// replaySegment reads seg up to its durable size: bytes after it belong to no completed Append.
func (j *FileJournal) replaySegment(seg segment, from uint64, fn func(Record) error) error {
	f, err := os.Open(seg.path)
	if err != nil {
		return err
	}
	defer f.Close()
	fr := j.reader
	fr.reset(io.NewSectionReader(f, 0, seg.size))
	want := seg.first
	for off := int64(0); off < seg.size; want++ {
		fh, bad, err := fr.next(seg.size - off)
		if err != nil {
			return err
		}
		if bad == "" && fh.lsn != want {
			bad = fmt.Sprintf("lsn %d where lsn %d was written", fh.lsn, want)
		}
		if bad != "" {
			return corrupt(seg.path, off, bad)
		}
		if fh.lsn >= from {
			if err := fn(Record{LSN: fh.lsn, Slot: fh.slot, Payload: fr.payload}); err != nil {
				return err
			}
		}
		off += frameHeaderSize + int64(fh.length)
	}
	return nil
}
