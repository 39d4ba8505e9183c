package persistence

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestRoundTripAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	j := mustOpen(t, dir, FileOptions{})
	wantLast(t, j, 0)
	appendRange(t, j, 1, 200, 17)
	wantLast(t, j, 200)
	wantRange(t, replayAll(t, j, 1), 1, 200)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	j = mustOpen(t, dir, FileOptions{})
	defer j.Close()
	wantLast(t, j, 200)
	wantRange(t, replayAll(t, j, 0), 1, 200)
	wantRange(t, replayAll(t, j, 1), 1, 200)
	wantRange(t, replayAll(t, j, 117), 117, 200)
	wantRange(t, replayAll(t, j, 200), 200, 200)
	wantRange(t, replayAll(t, j, 201), 1, 0)
	appendRange(t, j, 201, 210, 4)
	wantRange(t, replayAll(t, j, 195), 195, 210)
}

func TestRotationAcrossSegments(t *testing.T) {
	dir := t.TempDir()
	opts := FileOptions{SegmentSize: 400}
	j := mustOpen(t, dir, opts)
	appendRange(t, j, 1, 300, 5)
	j.Close()

	paths := segmentPaths(t, dir)
	if len(paths) < 10 {
		t.Fatalf("got %d segments, want many with SegmentSize 400", len(paths))
	}
	j = mustOpen(t, dir, opts)
	defer j.Close()
	wantRange(t, replayAll(t, j, 1), 1, 300)
	// Each segment is named for its first record, and rotation only happens at batch boundaries.
	for _, s := range j.segments {
		var first Record
		if err := j.replaySegment(s, 0, func(r Record) error {
			if first.LSN == 0 {
				first = r
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if first.LSN != s.first || filepath.Base(s.path) != segmentName(first.LSN) {
			t.Fatalf("segment %s starts with lsn %d", s.path, first.LSN)
		}
	}
	mid := j.segments[len(j.segments)/2]
	from := mid.first + (mid.last-mid.first)/2
	wantRange(t, replayAll(t, j, from), from, 300)
	appendRange(t, j, 301, 400, 7)
	wantRange(t, replayAll(t, j, 250), 250, 400)
}

func TestCompact(t *testing.T) {
	dir := t.TempDir()
	opts := FileOptions{SegmentSize: 200}
	j := mustOpen(t, dir, opts)
	appendRange(t, j, 1, 200, 8)
	before := append([]segment(nil), j.segments...)
	if len(before) < 6 {
		t.Fatalf("want several segments, got %d", len(before))
	}

	const upTo = 120 // the snapshot point
	if err := j.Compact(upTo); err != nil {
		t.Fatal(err)
	}
	for _, s := range before {
		_, err := os.Stat(s.path)
		gone := errors.Is(err, os.ErrNotExist)
		if shouldGo := s.last <= upTo; gone != shouldGo {
			t.Fatalf("segment %d..%d: removed=%v, want %v", s.first, s.last, gone, shouldGo)
		}
	}
	if first := j.segments[0].first; first > upTo+1 || first == 1 {
		t.Fatalf("first kept segment starts at %d", first)
	}
	wantRange(t, replayAll(t, j, upTo+1), upTo+1, 200)
	if err := j.Replay(1, func(Record) error { return nil }); !errors.Is(err, ErrCompacted) {
		t.Fatalf("Replay(1) after compact = %v, want ErrCompacted", err)
	}
	j.Close()

	j = mustOpen(t, dir, opts)
	defer j.Close()
	wantLast(t, j, 200)
	wantRange(t, replayAll(t, j, upTo+1), upTo+1, 200)

	// Compacting past the end keeps the active segment, so the journal still knows its tail.
	if err := j.Compact(1 << 62); err != nil {
		t.Fatal(err)
	}
	if n := len(segmentPaths(t, dir)); n != 1 {
		t.Fatalf("%d segments after compacting everything, want the active one", n)
	}
	wantLast(t, j, 200)
	appendRange(t, j, 201, 205, 2)
	wantRange(t, replayAll(t, j, 201), 201, 205)
}

func TestAppendRejectsWithoutWriting(t *testing.T) {
	dir := t.TempDir()
	j := mustOpen(t, dir, FileOptions{MaxRecordSize: 64})
	defer j.Close()
	if err := j.Append([]Record{{LSN: 0, Slot: 1}}); !errors.Is(err, ErrOutOfOrder) {
		t.Fatalf("lsn 0: %v", err)
	}
	appendRange(t, j, 1, 10, 3)
	size := func() int64 {
		st, err := os.Stat(segmentPaths(t, dir)[0])
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	want := size()

	big := rec(11)
	big.Payload = make([]byte, 65)
	slotBack := rec(12)
	slotBack.Slot = rec(11).Slot - 1
	cases := []struct {
		name  string
		batch []Record
		err   error
	}{
		{"gap", []Record{rec(12)}, ErrOutOfOrder},
		{"repeat", []Record{rec(10)}, ErrOutOfOrder},
		{"decrease", []Record{rec(5)}, ErrOutOfOrder},
		{"gap inside batch", []Record{rec(11), rec(13)}, ErrOutOfOrder},
		{"repeat inside batch", []Record{rec(11), rec(11)}, ErrOutOfOrder},
		{"slot back", []Record{rec(11), slotBack}, ErrOutOfOrder},
		{"slot back from tail", []Record{{LSN: 11, Slot: rec(10).Slot - 1}}, ErrOutOfOrder},
		{"too large", []Record{big}, ErrRecordTooLarge},
		{"too large after good", []Record{rec(11), rec(12), {LSN: 13, Slot: 99, Payload: make([]byte, 100)}}, ErrRecordTooLarge},
	}
	for _, c := range cases {
		if err := j.Append(c.batch); !errors.Is(err, c.err) || errors.Is(err, ErrFailed) {
			t.Fatalf("%s: Append = %v, want %v", c.name, err, c.err)
		}
		if got := size(); got != want {
			t.Fatalf("%s: file grew from %d to %d bytes", c.name, want, got)
		}
		wantLast(t, j, 10)
	}
	// A rejected batch does not halt the journal.
	appendRange(t, j, 11, 12, 2)
	wantRange(t, replayAll(t, j, 1), 1, 12)
	if err := j.Append(nil); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
}

func TestFirstRecordMayStartAnywhere(t *testing.T) {
	dir := t.TempDir()
	j := mustOpen(t, dir, FileOptions{})
	appendRange(t, j, 101, 110, 4) // e.g. after a snapshot at lsn 100
	j.Close()
	if _, err := os.Stat(filepath.Join(dir, segmentName(101))); err != nil {
		t.Fatalf("segment not named for its first record: %v", err)
	}
	j = mustOpen(t, dir, FileOptions{})
	defer j.Close()
	wantLast(t, j, 110)
	wantRange(t, replayAll(t, j, 101), 101, 110)
	if err := j.Replay(1, func(Record) error { return nil }); !errors.Is(err, ErrCompacted) {
		t.Fatalf("Replay(1) = %v, want ErrCompacted: records 1..100 are not here", err)
	}
}

func TestMissingAndEmptyDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	j := mustOpen(t, dir, FileOptions{})
	wantLast(t, j, 0)
	wantRange(t, replayAll(t, j, 1), 1, 0)
	j.Close()
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		t.Fatalf("directory not created: %v", err)
	}
	j = mustOpen(t, dir, FileOptions{})
	defer j.Close()
	wantLast(t, j, 0)
	appendRange(t, j, 1, 3, 3)
	wantRange(t, replayAll(t, j, 1), 1, 3)
}

func TestOtherFilesInDirectoryIgnored(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"snapshot-00000000000000000005.snap", "notes.txt", "123.journal"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("not a journal"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	j := mustOpen(t, dir, FileOptions{})
	defer j.Close()
	appendRange(t, j, 1, 5, 2)
	wantRange(t, replayAll(t, j, 1), 1, 5)
}

func TestCallsAfterClose(t *testing.T) {
	j := mustOpen(t, t.TempDir(), FileOptions{})
	appendRange(t, j, 1, 3, 3)
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := j.Append(recs(4, 4)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v", err)
	}
	if err := j.Replay(1, func(Record) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Replay after Close: %v", err)
	}
	if err := j.Compact(1); !errors.Is(err, ErrClosed) {
		t.Fatalf("Compact after Close: %v", err)
	}
	wantLast(t, j, 3)
}

func TestReplayStopsOnCallbackError(t *testing.T) {
	j := mustOpen(t, t.TempDir(), FileOptions{})
	defer j.Close()
	appendRange(t, j, 1, 10, 3)
	stop := errors.New("stop")
	n := 0
	err := j.Replay(1, func(r Record) error {
		n++
		if r.LSN == 4 {
			return stop
		}
		return nil
	})
	if err != stop || n != 4 {
		t.Fatalf("Replay = %v after %d records, want stop after 4", err, n)
	}
	appendRange(t, j, 11, 11, 1) // a callback error does not fail the journal
}

// TestLastDuringAppend reads Last while batches are appended (run with -race): it must never
// go back, and lsn and slot must always belong to the same record.
func TestLastDuringAppend(t *testing.T) {
	j := mustOpen(t, t.TempDir(), FileOptions{})
	defer j.Close()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var prev uint64
		for {
			select {
			case <-done:
				return
			default:
			}
			lsn, slot := j.Last()
			if lsn < prev || (lsn > 0 && slot != rec(lsn).Slot) {
				t.Errorf("Last() = (%d, %d) after lsn %d", lsn, slot, prev)
				return
			}
			prev = lsn
			_ = j.Stats()
		}
	}()
	appendRange(t, j, 1, 300, 9)
	close(done)
	wg.Wait()
}

func TestStats(t *testing.T) {
	j := mustOpen(t, t.TempDir(), FileOptions{})
	defer j.Close()
	batch := recs(1, 4)
	if err := j.Append(batch); err != nil {
		t.Fatal(err)
	}
	if err := j.Append(recs(5, 5)); err != nil {
		t.Fatal(err)
	}
	var bytes uint64
	for _, r := range recs(1, 5) {
		bytes += uint64(frameHeaderSize + len(r.Payload))
	}
	s := j.Stats()
	if s.Batches != 2 || s.Records != 5 || s.Syncs != 2 || s.BytesWritten != bytes || s.LastSync <= 0 {
		t.Fatalf("Stats() = %+v, want 2 batches, 5 records, 2 syncs, %d bytes", s, bytes)
	}
}

// TestAppendDoesNotAllocate holds the group-commit path to its promise: encoding reuses one
// buffer, so a steady-state Append allocates nothing, however many records it carries.
func TestAppendDoesNotAllocate(t *testing.T) {
	j := mustOpen(t, t.TempDir(), FileOptions{})
	defer j.Close()
	batch := make([]Record, 64)
	payload := make([]byte, 64)
	next := uint64(1)
	fill := func() {
		for i := range batch {
			batch[i] = Record{LSN: next, Slot: next, Payload: payload}
			next++
		}
	}
	fill()
	if err := j.Append(batch); err != nil { // grows the buffer once
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(20, func() {
		fill()
		if err := j.Append(batch); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Append of 64 records allocates %.1f times, want 0", allocs)
	}
}

func TestInvalidOptions(t *testing.T) {
	for _, o := range []FileOptions{{SegmentSize: -1}, {MaxRecordSize: -1}, {MaxRecordSize: maxRecordLimit + 1}} {
		if _, err := OpenFileJournal(t.TempDir(), o); err == nil {
			t.Fatalf("OpenFileJournal accepted %+v", o)
		}
	}
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenFileJournal(path, FileOptions{}); err == nil {
		t.Fatal("OpenFileJournal accepted a regular file as its directory")
	}
}
