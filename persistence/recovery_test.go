package persistence

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// buildJournal writes rec(1)..rec(last) with small segments so that recovery has earlier
// segments to walk through, and returns the directory.
func buildJournal(t *testing.T, last uint64, opts FileOptions) string {
	t.Helper()
	dir := t.TempDir()
	j := mustOpen(t, dir, opts)
	appendRange(t, j, 1, last, 4)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func truncate(t *testing.T, path string, size int64) {
	t.Helper()
	if err := os.Truncate(path, size); err != nil {
		t.Fatal(err)
	}
}

// checkTornTailRecovered opens dir, whose last record lsn was torn, and checks that exactly the
// records before it survive and that appending continues at lsn.
func checkTornTailRecovered(t *testing.T, dir string, lsn uint64, opts FileOptions) {
	t.Helper()
	j := mustOpen(t, dir, opts)
	wantLast(t, j, lsn-1)
	wantRange(t, replayAll(t, j, 1), 1, lsn-1)
	appendRange(t, j, lsn, lsn+1, 2)
	j.Close()
	j = mustOpen(t, dir, opts)
	defer j.Close()
	wantRange(t, replayAll(t, j, 1), 1, lsn+1)
}

func TestTornTailAtEveryByte(t *testing.T) {
	const last = 40
	opts := FileOptions{SegmentSize: 256}
	base := buildJournal(t, last, opts)
	paths := segmentPaths(t, base)
	if len(paths) < 3 {
		t.Fatalf("want several segments, got %d", len(paths))
	}
	offsets, size := frameOffsets(t, paths[len(paths)-1])
	start := offsets[len(offsets)-1]
	for cut := start; cut < size; cut++ {
		dir := copyDir(t, base)
		lastSeg := segmentPaths(t, dir)[len(paths)-1]
		truncate(t, lastSeg, cut)
		// Appending after recovery and reopening again proves the torn bytes were cut away:
		// left in place, they would be garbage followed by valid frames, i.e. corruption.
		checkTornTailRecovered(t, dir, last, opts)
	}
}

// TestTornOnlyFrameOfLastSegment tears a segment's first frame: nothing in the file survives,
// so it is removed and the next append recreates it under the same name.
func TestTornOnlyFrameOfLastSegment(t *testing.T) {
	opts := FileOptions{SegmentSize: 1} // one batch per segment
	base := t.TempDir()
	j := mustOpen(t, base, opts)
	appendRange(t, j, 1, 6, 3) // batches 1, 2..3, 4..6
	if err := j.Append(recs(7, 7)); err != nil {
		t.Fatal(err)
	}
	j.Close()
	paths := segmentPaths(t, base)
	_, size := frameOffsets(t, paths[len(paths)-1])
	for cut := int64(0); cut < size; cut++ {
		dir := copyDir(t, base)
		lastSeg := filepath.Join(dir, segmentName(7))
		truncate(t, lastSeg, cut)
		checkTornTailRecovered(t, dir, 7, opts)
	}
}

func TestBadChecksumOnLastFrameIsTorn(t *testing.T) {
	base := buildJournal(t, 20, FileOptions{})
	path := segmentPaths(t, base)[0]
	offsets, size := frameOffsets(t, path)
	for _, at := range []int64{offsets[len(offsets)-1] + 14, size - 1} { // lsn byte, payload byte
		dir := copyDir(t, base)
		flipBit(t, filepath.Join(dir, filepath.Base(path)), at, 0)
		checkTornTailRecovered(t, dir, 20, FileOptions{})
	}
}

// TestZeroedTailIsTorn models a crash after the file grew but before its data reached the disk.
func TestZeroedTailIsTorn(t *testing.T) {
	dir := buildJournal(t, 20, FileOptions{})
	path := segmentPaths(t, dir)[0]
	offsets, size := frameOffsets(t, path)
	last := offsets[len(offsets)-1]
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data = append(data[:last], make([]byte, 3*(size-last))...)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	checkTornTailRecovered(t, dir, 20, FileOptions{})
}

func flipBit(t *testing.T, path string, offset int64, bit uint) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[offset] ^= 1 << bit
	writeFile(t, path, data)
}

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestFlippedBitInMiddleFrame flips every bit of a frame that good frames follow, in the last
// segment (where a torn tail would be forgiven) and in an earlier one: each must be reported
// as corruption at that frame, and the file left untouched.
func TestFlippedBitInMiddleFrame(t *testing.T) {
	opts := FileOptions{SegmentSize: 256}
	dir := buildJournal(t, 30, opts)
	paths := segmentPaths(t, dir)
	for _, path := range []string{paths[len(paths)-1], paths[0]} {
		offsets, _ := frameOffsets(t, path)
		if len(offsets) < 3 {
			t.Fatalf("%s has %d frames, want at least 3", path, len(offsets))
		}
		frame, end := offsets[1], offsets[2]
		good, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for at := frame; at < end; at++ {
			for bit := uint(0); bit < 8; bit++ {
				bad := slices.Clone(good)
				bad[at] ^= 1 << bit
				writeFile(t, path, bad)
				_, err := OpenFileJournal(dir, opts)
				ce := wantCorruption(t, err, path, frame)
				if want := fieldReason(at - frame); want != "" && !strings.Contains(ce.Reason, want) {
					t.Fatalf("byte %d bit %d: reason %q, want it to mention %q", at-frame, bit, ce.Reason, want)
				}
				if after, _ := os.ReadFile(path); !bytes.Equal(after, bad) {
					t.Fatalf("byte %d bit %d: failed open changed the file", at-frame, bit)
				}
			}
		}
		writeFile(t, path, good)
	}
	j := mustOpen(t, dir, opts) // restored, the journal opens again
	defer j.Close()
	wantRange(t, replayAll(t, j, 1), 1, 30)
}

// fieldReason is what a flip at byte i of a frame must be reported as ("" when it depends on
// the new value, as for the length).
func fieldReason(i int64) string {
	switch {
	case i < 4:
		return "magic"
	case i == 4:
		return "version"
	case i < 8:
		return "reserved"
	case i < 12:
		return ""
	default: // lsn, slot, crc, payload
		return "checksum"
	}
}

func TestTruncatedNonLastSegment(t *testing.T) {
	opts := FileOptions{SegmentSize: 256}
	base := buildJournal(t, 30, opts)
	first := segmentPaths(t, base)[0]
	offsets, size := frameOffsets(t, first)
	lastFrame := offsets[len(offsets)-1]

	// Cut inside its last frame: a torn frame where no crash can leave one.
	for _, cut := range []int64{lastFrame + 1, lastFrame + frameHeaderSize, size - 1} {
		dir := copyDir(t, base)
		path := filepath.Join(dir, filepath.Base(first))
		truncate(t, path, cut)
		_, err := OpenFileJournal(dir, opts)
		wantCorruption(t, err, path, lastFrame)
	}
	// Cut at a frame boundary: the next segment no longer follows on.
	dir := copyDir(t, base)
	truncate(t, filepath.Join(dir, filepath.Base(first)), lastFrame)
	_, err := OpenFileJournal(dir, opts)
	wantCorruption(t, err, segmentPaths(t, dir)[1], 0)
}

func TestEmptySegmentFiles(t *testing.T) {
	t.Run("only file", func(t *testing.T) {
		dir := t.TempDir()
		writeFrames(t, dir, 1)
		j := mustOpen(t, dir, FileOptions{})
		defer j.Close()
		wantLast(t, j, 0)
		if n := len(segmentPaths(t, dir)); n != 0 {
			t.Fatalf("empty segment kept: %d files", n)
		}
		appendRange(t, j, 1, 3, 2)
		wantRange(t, replayAll(t, j, 1), 1, 3)
	})
	t.Run("last", func(t *testing.T) {
		dir := t.TempDir()
		writeFrames(t, dir, 1, recs(1, 5)...)
		writeFrames(t, dir, 6)
		checkTornTailRecovered(t, dir, 6, FileOptions{})
	})
	t.Run("not last", func(t *testing.T) {
		dir := t.TempDir()
		writeFrames(t, dir, 1, recs(1, 5)...)
		empty := writeFrames(t, dir, 6)
		writeFrames(t, dir, 7, recs(6, 8)...)
		_, err := OpenFileJournal(dir, FileOptions{})
		wantCorruption(t, err, empty, 0)
	})
}

func TestHandWrittenOrderCorruption(t *testing.T) {
	slot := func(lsn, slot uint64) Record { return Record{LSN: lsn, Slot: slot, Payload: []byte("p")} }
	zero := rec(1)
	zero.LSN = 0
	cases := []struct {
		name    string
		records []Record
		bad     int // index of the frame to be reported
	}{
		{"gap", []Record{rec(1), rec(2), rec(4), rec(5)}, 2},
		{"repeat", []Record{rec(1), rec(2), rec(2), rec(3)}, 2},
		{"decrease", []Record{rec(1), rec(2), rec(3), rec(1)}, 3},
		{"slot back", []Record{slot(1, 5), slot(2, 6), slot(3, 4), slot(4, 7)}, 2},
		{"slot back at tail", []Record{slot(1, 5), slot(2, 6), slot(3, 4)}, 2},
		{"lsn zero", []Record{zero}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			path := writeFrames(t, dir, c.records[0].LSN, c.records...)
			offsets, _ := frameOffsets(t, path)
			_, err := OpenFileJournal(dir, FileOptions{})
			wantCorruption(t, err, path, offsets[c.bad])
		})
	}
	t.Run("name disagrees with first record", func(t *testing.T) {
		dir := t.TempDir()
		path := writeFrames(t, dir, 5, recs(1, 3)...)
		_, err := OpenFileJournal(dir, FileOptions{})
		wantCorruption(t, err, path, 0)
	})
	t.Run("gap between segments", func(t *testing.T) {
		dir := t.TempDir()
		writeFrames(t, dir, 1, recs(1, 3)...)
		path := writeFrames(t, dir, 5, recs(5, 6)...)
		_, err := OpenFileJournal(dir, FileOptions{})
		wantCorruption(t, err, path, 0)
	})
	t.Run("overlapping segments", func(t *testing.T) {
		dir := t.TempDir()
		writeFrames(t, dir, 1, recs(1, 4)...)
		path := writeFrames(t, dir, 3, recs(3, 6)...)
		_, err := OpenFileJournal(dir, FileOptions{})
		wantCorruption(t, err, path, 0)
	})
	t.Run("frame over the size bound", func(t *testing.T) {
		dir := t.TempDir()
		path := writeFrames(t, dir, 1, recs(1, 4)...)
		offsets, _ := frameOffsets(t, path)
		_, err := OpenFileJournal(dir, FileOptions{MaxRecordSize: 8})
		ce := wantCorruption(t, err, path, offsets[2]) // rec(3) has 9 bytes
		if !strings.Contains(ce.Reason, "limit") {
			t.Fatalf("reason %q", ce.Reason)
		}
	})
	t.Run("last frame over the size bound", func(t *testing.T) {
		// Intact but longer than a lowered MaxRecordSize: a durable record, not a torn tail.
		dir := t.TempDir()
		path := writeFrames(t, dir, 1, recs(1, 3)...)
		offsets, size := frameOffsets(t, path)
		_, err := OpenFileJournal(dir, FileOptions{MaxRecordSize: 8})
		wantCorruption(t, err, path, offsets[2])
		if st, _ := os.Stat(path); st.Size() != size {
			t.Fatalf("file cut to %d bytes", st.Size())
		}
	})
}

// TestReplayDetectsDamageAfterOpen: Replay re-verifies frames instead of trusting recovery.
func TestReplayDetectsDamageAfterOpen(t *testing.T) {
	dir := t.TempDir()
	j := mustOpen(t, dir, FileOptions{})
	defer j.Close()
	appendRange(t, j, 1, 10, 3)
	path := segmentPaths(t, dir)[0]
	offsets, _ := frameOffsets(t, path)
	flipBit(t, path, offsets[5]+frameHeaderSize, 2)
	err := j.Replay(1, func(Record) error { return nil })
	wantCorruption(t, err, path, offsets[5])
	if errors.Is(err, ErrFailed) {
		t.Fatal("a read-side error should not fail the journal")
	}
}
