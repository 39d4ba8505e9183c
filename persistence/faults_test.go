package persistence

import (
	"errors"
	"os"
	"testing"
)

var errInjected = errors.New("injected disk failure")

// failOn returns a hook that fails its n-th call and every call after it.
func failOn(n int) func() error {
	calls := 0
	return func() error {
		calls++
		if calls >= n {
			return errInjected
		}
		return nil
	}
}

// wantHalted checks that every call on a failed journal errors and that Last still reports
// the last durable record.
func wantHalted(t *testing.T, j *FileJournal, last uint64) {
	t.Helper()
	if err := j.Append(recs(last+1, last+1)); !errors.Is(err, ErrFailed) {
		t.Fatalf("Append on failed journal: %v", err)
	}
	if err := j.Replay(1, func(Record) error { return nil }); !errors.Is(err, ErrFailed) {
		t.Fatalf("Replay on failed journal: %v", err)
	}
	if err := j.Compact(0); !errors.Is(err, ErrFailed) {
		t.Fatalf("Compact on failed journal: %v", err)
	}
	wantLast(t, j, last)
	if err := j.Close(); !errors.Is(err, ErrFailed) {
		t.Fatalf("Close on failed journal: %v", err)
	}
}

func TestFailWriteHalts(t *testing.T) {
	dir := t.TempDir()
	j := mustOpen(t, dir, FileOptions{Faults: &Faults{FailWrite: failOn(3)}})
	appendRange(t, j, 1, 3, 2) // two batches: 1, 2..3
	err := j.Append(recs(4, 6))
	if !errors.Is(err, errInjected) || !errors.Is(err, ErrFailed) {
		t.Fatalf("Append = %v, want the injected error wrapped in ErrFailed", err)
	}
	wantHalted(t, j, 3)

	j = mustOpen(t, dir, FileOptions{})
	defer j.Close()
	wantRange(t, replayAll(t, j, 1), 1, 3) // nothing of the failed batch was written
	appendRange(t, j, 4, 6, 3)
	wantRange(t, replayAll(t, j, 1), 1, 6)
}

func TestFailSyncHalts(t *testing.T) {
	dir := t.TempDir()
	j := mustOpen(t, dir, FileOptions{Faults: &Faults{FailSync: failOn(3)}})
	appendRange(t, j, 1, 3, 2)
	if err := j.Append(recs(4, 6)); !errors.Is(err, errInjected) || !errors.Is(err, ErrFailed) {
		t.Fatalf("Append = %v, want the injected error wrapped in ErrFailed", err)
	}
	wantHalted(t, j, 3) // written but not durable: not reported by Last

	// The batch reached the file but was never synced: recovery may keep it or not, but must
	// keep all of it or none of it.
	j = mustOpen(t, dir, FileOptions{})
	defer j.Close()
	last, _ := j.Last()
	if last != 3 && last != 6 {
		t.Fatalf("recovered up to lsn %d, want 3 or 6", last)
	}
	wantRange(t, replayAll(t, j, 1), 1, last)
	appendRange(t, j, last+1, 8, 2)
	wantRange(t, replayAll(t, j, 1), 1, 8)
}

// TestTornWriteRecoversWholeRecords cuts a batch write around and inside every frame:
// recovery keeps exactly the complete frames that reached the file, never a partial one.
// (TestTornTailAtEveryByte covers every byte of one frame.)
func TestTornWriteRecoversWholeRecords(t *testing.T) {
	batch := recs(4, 6)
	var ends []int // frame ends within the encoded batch
	var cuts []int
	var enc []byte
	for _, r := range batch {
		start := len(enc)
		enc = appendFrame(enc, r)
		ends = append(ends, len(enc))
		cuts = append(cuts, start, start+1, start+frameHeaderSize-1, start+frameHeaderSize, len(enc)-1)
	}
	base := t.TempDir()
	j := mustOpen(t, base, FileOptions{})
	appendRange(t, j, 1, 3, 3)
	j.Close()

	for _, cut := range cuts {
		dir := copyDir(t, base)
		j := mustOpen(t, dir, FileOptions{Faults: &Faults{TornWrite: func(int) int { return cut }}})
		if err := j.Append(batch); !errors.Is(err, ErrFailed) {
			t.Fatalf("cut %d: Append = %v, want a failure", cut, err)
		}
		j.Close()

		whole := 0
		for _, end := range ends {
			if end <= cut {
				whole++
			}
		}
		j = mustOpen(t, dir, FileOptions{})
		wantLast(t, j, 3+uint64(whole))
		wantRange(t, replayAll(t, j, 1), 1, 3+uint64(whole))
		appendRange(t, j, 4+uint64(whole), 7, 4)
		wantRange(t, replayAll(t, j, 1), 1, 7)
		j.Close()
	}
}

// TestFailedFirstWriteOfNewSegment: rotation created the file, the write failed; recovery
// removes the empty segment and appending recreates it.
func TestFailedFirstWriteOfNewSegment(t *testing.T) {
	dir := t.TempDir()
	opts := FileOptions{SegmentSize: 1, Faults: &Faults{FailWrite: failOn(3)}}
	j := mustOpen(t, dir, opts)
	appendRange(t, j, 1, 3, 2)
	if err := j.Append(recs(4, 4)); !errors.Is(err, ErrFailed) {
		t.Fatalf("Append = %v", err)
	}
	j.Close()
	if n := len(segmentPaths(t, dir)); n != 3 {
		t.Fatalf("%d segment files, want 3 (the last one empty)", n)
	}
	j = mustOpen(t, dir, FileOptions{SegmentSize: 1})
	defer j.Close()
	if n := len(segmentPaths(t, dir)); n != 2 {
		t.Fatalf("%d segment files after recovery, want 2", n)
	}
	appendRange(t, j, 4, 5, 1)
	wantRange(t, replayAll(t, j, 1), 1, 5)
	if _, err := os.Stat(j.segments[2].path); err != nil {
		t.Fatal(err)
	}
}
