package persistence

import (
	"errors"
	"os"
	"path/filepath"
	"time"
)

// errTornWrite is what a Faults.TornWrite hook makes a partial write fail with.
var errTornWrite = errors.New("persistence: injected torn write")

// Append writes the batch as one write followed by one fsync (group commit) and returns once it
// is durable. See Journal.Append for which errors fail the journal.
func (j *FileJournal) Append(batch []Record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := j.usable(); err != nil {
		return err
	}
	if len(batch) == 0 {
		return nil
	}
	if err := j.check(batch); err != nil {
		return err
	}
	if err := j.write(batch); err != nil {
		return j.fail(err)
	}
	return nil
}

// check rejects a batch that must not reach the log, before any byte is written, so that a bad
// caller gets an error without halting the shard.
func (j *FileJournal) check(batch []Record) error {
	return CheckBatch(j.tail.lsn, j.tail.slot, batch, j.opts.MaxRecordSize)
}

// write encodes, writes and syncs a checked batch; any error it returns fails the journal.
func (j *FileJournal) write(batch []Record) error {
	if j.active == nil || j.segments[len(j.segments)-1].size >= j.opts.SegmentSize {
		if err := j.rotate(batch[0].LSN); err != nil {
			return err
		}
	}
	j.buf = j.buf[:0]
	for i := range batch {
		j.buf = appendFrame(j.buf, batch[i])
	}
	if err := j.fillAhead(len(j.buf)); err != nil {
		return err
	}
	if err := j.writeBuf(); err != nil {
		return err
	}
	if f := j.opts.Faults; f != nil && f.FailSync != nil {
		if err := f.FailSync(); err != nil {
			return err
		}
	}
	start := time.Now()
	if err := j.active.Sync(); err != nil {
		return err
	}
	j.stats.lastSync.Store(int64(time.Since(start)))
	j.stats.syncs.Add(1)

	seg := &j.segments[len(j.segments)-1]
	seg.size += int64(len(j.buf))
	seg.last = batch[len(batch)-1].LSN
	j.publish(position{lsn: seg.last, slot: batch[len(batch)-1].Slot})
	j.stats.batches.Add(1)
	j.stats.records.Add(uint64(len(batch)))
	j.stats.bytes.Add(uint64(len(j.buf)))
	return nil
}

// writeBuf writes the encoded batch in one call, honouring the write fault hooks.
func (j *FileJournal) writeBuf() error {
	buf := j.buf
	var injected error
	if f := j.opts.Faults; f != nil {
		if f.FailWrite != nil {
			if err := f.FailWrite(); err != nil {
				return err
			}
		}
		if f.TornWrite != nil {
			if n := f.TornWrite(len(buf)); n >= 0 && n < len(buf) {
				buf, injected = buf[:n], errTornWrite
			}
		}
	}
	seg := &j.segments[len(j.segments)-1]
	if _, err := j.active.WriteAt(buf, seg.size); err != nil {
		return err
	}
	seg.length = max(seg.length, seg.size+int64(len(buf)))
	return injected
}

// rotate starts a new segment named for the batch about to be written into it. The directory
// is synced before the first write so the file cannot vanish after its records are durable;
// the previous segment was synced by the Append that filled it.
func (j *FileJournal) rotate(first uint64) error {
	path := filepath.Join(j.dir, segmentName(first))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if err := syncDir(j.dir); err != nil {
		f.Close()
		return err
	}
	if j.active != nil {
		if err := j.active.Close(); err != nil {
			f.Close()
			return err
		}
	}
	j.active = f
	j.segments = append(j.segments, segment{path: path, first: first, last: first - 1})
	return nil
}
