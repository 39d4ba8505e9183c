package persistence

import (
	"fmt"
	"io"
	"os"
)

// recoverJournal scans every segment in dir, oldest first, and returns the segments that hold
// records and the position of the last one. It repairs the one thing a crash can leave behind,
// a torn tail in the last segment (truncated away, or the whole file removed when nothing in
// it survives; the zeros written ahead of the next batch, fillAhead, read as one), and
// returns a *CorruptionError for anything else that does not check out.
func recoverJournal(dir string, fr *frameReader) ([]segment, position, error) {
	files, err := listSegments(dir)
	if err != nil {
		return nil, position{}, err
	}
	var tail position
	segs := make([]segment, 0, len(files))
	for i, seg := range files {
		isLast := i == len(files)-1
		seg, tail, err = recoverSegment(fr, seg, tail, isLast)
		if err != nil {
			return nil, position{}, err
		}
		if seg.size == 0 {
			// Only the last segment can get here: a crash after creating it, or in its first write.
			if err := os.Remove(seg.path); err != nil {
				return nil, position{}, err
			}
			if err := syncDir(dir); err != nil {
				return nil, position{}, err
			}
			continue
		}
		segs = append(segs, seg)
	}
	return segs, tail, nil
}

// recoverSegment scans one segment that must continue tail and returns it with last and size
// filled in, and the new tail.
func recoverSegment(fr *frameReader, seg segment, tail position, isLast bool) (segment, position, error) {
	f, err := os.Open(seg.path)
	if err != nil {
		return seg, tail, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return seg, tail, err
	}
	size := st.Size()
	end, records, bad, tail, err := scanSegment(fr, f, seg, size, tail)
	if err != nil {
		return seg, tail, err
	}
	if bad != "" {
		if !isLast {
			// A crash can only tear the segment being written, which is always the last one.
			return seg, tail, corrupt(seg.path, end, bad+" in a segment that is not the last")
		}
		// Searching from end itself catches an intact frame that is only over the configured bound.
		at, found, err := findValidFrame(f, end, size, tail.lsn)
		if err != nil {
			return seg, tail, err
		}
		if found {
			return seg, tail, corrupt(seg.path, end, fmt.Sprintf("%s, yet a valid frame is found at offset %d", bad, at))
		}
		if records > 0 {
			if err := truncateFile(seg.path, end); err != nil {
				return seg, tail, err
			}
		}
	}
	if records == 0 && !isLast {
		return seg, tail, corrupt(seg.path, 0, "empty segment that is not the last")
	}
	seg.last, seg.size, seg.length = tail.lsn, end, end
	return seg, tail, nil
}

// scanSegment reads seg's frames up to the first one that is unreadable (reported as bad, at
// offset end) or to the end of the file, checking each record's order against the one before.
func scanSegment(fr *frameReader, f *os.File, seg segment, size int64, tail position) (end int64, records int, bad string, _ position, err error) {
	fr.reset(io.NewSectionReader(f, 0, size))
	for end < size {
		fh, bad, err := fr.next(size - end)
		if err != nil || bad != "" {
			return end, records, bad, tail, err
		}
		if records == 0 && fh.lsn != seg.first {
			return end, records, "", tail, corrupt(seg.path, end, fmt.Sprintf("segment named for lsn %d starts with lsn %d", seg.first, fh.lsn))
		}
		if problem := orderProblem(tail, fh.lsn, fh.slot); problem != "" {
			return end, records, "", tail, corrupt(seg.path, end, problem)
		}
		tail = position{lsn: fh.lsn, slot: fh.slot}
		records++
		end += frameHeaderSize + int64(fh.length)
	}
	return end, records, "", tail, nil
}

// truncateFile cuts a torn tail off path and makes the new length durable before anything is
// appended after it.
func truncateFile(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func corrupt(path string, offset int64, reason string) error {
	return &CorruptionError{File: path, Offset: offset, Reason: reason}
}
