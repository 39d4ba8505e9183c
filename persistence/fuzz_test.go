package persistence

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRecoverSegment feeds arbitrary bytes to recovery as the only segment. Whatever they are,
// opening must either fail with a *CorruptionError or yield a journal whose records replay in
// order and which accepts the next record.
func FuzzRecoverSegment(f *testing.F) {
	var valid []byte
	for _, r := range recs(1, 4) {
		valid = appendFrame(valid, r)
	}
	f.Add(valid)
	f.Add(valid[:len(valid)-3])
	f.Add(append(valid[:40:40], valid[60:]...))
	f.Add([]byte(frameMagic))
	f.Add(make([]byte, 100))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, segmentName(1)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		j, err := OpenFileJournal(dir, FileOptions{MaxRecordSize: 1 << 10})
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("open failed without a CorruptionError: %v", err)
			}
			return
		}
		defer j.Close()
		next := uint64(1)
		err = j.Replay(1, func(r Record) error {
			if r.LSN != next {
				t.Fatalf("replayed lsn %d, want %d", r.LSN, next)
			}
			next++
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if last, _ := j.Last(); last != next-1 {
			t.Fatalf("Last() = %d after replaying up to %d", last, next-1)
		}
		_, slot := j.Last()
		if err := j.Append([]Record{{LSN: next, Slot: slot}}); err != nil {
			t.Fatalf("append after recovery: %v", err)
		}
	})
}

// FuzzLoadSnapshot feeds arbitrary bytes to the snapshot loader as its only file: it must
// load them or skip them, never fail or panic.
func FuzzLoadSnapshot(f *testing.F) {
	dir := f.TempDir()
	if err := WriteSnapshot(dir, 1, 2, []byte("state")); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(dir, snapshotName(1)))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(good[:snapshotHeaderSize])
	f.Add([]byte(snapshotMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, snapshotName(1)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		s, ok, err := LoadLatestSnapshot(dir)
		if err != nil {
			t.Fatal(err)
		}
		if ok == (len(s.Skipped) == 1) {
			t.Fatalf("ok=%v but skipped %q", ok, s.Skipped)
		}
	})
}
