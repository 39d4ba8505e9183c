package persistence

import (
	"os"
	"testing"
)

func fileLength(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// TestAppendsOverwriteZerosWrittenAhead: the segment being written is filled with zeros
// ahead of its frames, so the appends after the first change neither its length nor its
// blocks (the cheap fsync), and a reopen cuts the zeros off and goes on where the frames end.
func TestAppendsOverwriteZerosWrittenAhead(t *testing.T) {
	dir := t.TempDir()
	j := mustOpen(t, dir, FileOptions{})
	appendRange(t, j, 1, 1, 1)
	path := segmentPaths(t, dir)[0]
	length := fileLength(t, path)
	if _, end := frameOffsets(t, path); length < end+zeroAhead {
		t.Fatalf("file %d bytes, frames end at %d: want zeros written %d bytes ahead", length, end, zeroAhead)
	}
	appendRange(t, j, 2, 200, 7)
	if got := fileLength(t, path); got != length {
		t.Fatalf("appends grew the file from %d to %d bytes", length, got)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	j = mustOpen(t, dir, FileOptions{})
	defer j.Close()
	_, end := frameOffsets(t, path)
	if got := fileLength(t, path); got != end {
		t.Fatalf("after reopen the file is %d bytes, its frames end at %d", got, end)
	}
	appendRange(t, j, 201, 260, 5)
	wantRange(t, replayAll(t, j, 1), 1, 260)
}

// TestLeftSegmentsEndAtTheirLastFrame: a segment the journal rotated away from has no zeros
// after its frames, so recovery's rule for every segment but the last (no unreadable bytes)
// holds; and the zeros never run past the segment's size bound.
func TestLeftSegmentsEndAtTheirLastFrame(t *testing.T) {
	dir := t.TempDir()
	opts := FileOptions{SegmentSize: 64 << 10}
	j := mustOpen(t, dir, opts)
	for lsn := uint64(1); lsn <= 40; lsn++ {
		r := rec(lsn)
		r.Payload = make([]byte, 4000)
		if err := j.Append([]Record{r}); err != nil {
			t.Fatal(err)
		}
	}
	paths := segmentPaths(t, dir)
	if len(paths) < 2 {
		t.Fatalf("%d segments, want several", len(paths))
	}
	for i, path := range paths {
		_, end := frameOffsets(t, path)
		length := fileLength(t, path)
		if i < len(paths)-1 && length != end {
			t.Fatalf("segment %d left with %d bytes, its frames end at %d", i, length, end)
		}
		if length > max(end, opts.SegmentSize) {
			t.Fatalf("segment %d is %d bytes, past its bound %d", i, length, opts.SegmentSize)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j = mustOpen(t, dir, opts)
	defer j.Close()
	if got := replayAll(t, j, 1); len(got) != 40 {
		t.Fatalf("replayed %d records, want 40", len(got))
	}
}
