package persistence

import "os"

// Compact deletes the oldest segments whose records all have LSN <= upTo, i.e. are covered by a
// snapshot. The last segment is never deleted, so the journal always knows its own tail.
// Segments go oldest first, so a crash in the middle leaves a contiguous journal.
func (j *FileJournal) Compact(upTo uint64) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.usable(); err != nil {
		return err
	}
	removed := 0
	var err error
	for removed < len(j.segments)-1 && j.segments[removed].last <= upTo {
		if err = os.Remove(j.segments[removed].path); err != nil {
			break
		}
		removed++
	}
	j.segments = append(j.segments[:0], j.segments[removed:]...)
	if err == nil && removed > 0 {
		err = syncDir(j.dir)
	}
	if err != nil {
		return j.fail(err)
	}
	return nil
}
