package persistence

// zeroAhead is how far past the batch being written a segment is filled with zeros. A write
// into blocks the file already has changes no metadata, so its fsync flushes data alone; an
// append that grows the file also commits the file's new size and blocks to the file
// system's journal, about 20 µs more per fsync on the disk of docs/benchmarks.md ("A lone
// request and the disk"). PostgreSQL zero-fills its WAL segments for the same reason.
// fallocate does not do it: its extents are marked unwritten, and the first write to them is
// a metadata change again. One extension costs one write of this many zeros, riding on the
// fsync of the batch that needed it, once per zeroAhead bytes of journal.
const zeroAhead = 1 << 20

// zeros is the source of every zero fill.
var zeros = make([]byte, 64<<10)

// fillAhead makes sure the active segment's file reaches past the end of a batch of n bytes,
// filling what it adds with zeros, so that the batch overwrites blocks the file already
// holds. The fill is made durable by the batch's fsync. It never goes past the segment's
// size bound, and a segment is left only once its frames reach that bound (write), so a
// segment the journal rotated away from ends at its last frame, as recovery requires of
// every segment but the last; the last one's zeros recovery cuts off (recoverSegment).
func (j *FileJournal) fillAhead(n int) error {
	seg := &j.segments[len(j.segments)-1]
	end := seg.size + int64(n)
	if end <= seg.length {
		return nil
	}
	target := min(alignPage(end)+zeroAhead, j.opts.SegmentSize)
	for off := seg.length; off < target; {
		k, err := j.active.WriteAt(zeros[:min(int64(len(zeros)), target-off)], off)
		if err != nil {
			return err
		}
		off += int64(k)
		seg.length = off
	}
	return nil
}

func alignPage(n int64) int64 {
	const page = 4096
	return (n + page - 1) &^ (page - 1)
}
