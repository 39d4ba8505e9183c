package persistence

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func snapPayload(lsn uint64, n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(uint64(i)*31 + lsn)
	}
	return p
}

func mustWriteSnapshot(t *testing.T, dir string, lsn uint64, payload []byte) {
	t.Helper()
	if err := WriteSnapshot(dir, lsn, lsn*10, payload); err != nil {
		t.Fatalf("WriteSnapshot(%d): %v", lsn, err)
	}
}

func mustLoad(t *testing.T, dir string) (Snapshot, bool) {
	t.Helper()
	s, ok, err := LoadLatestSnapshot(dir)
	if err != nil {
		t.Fatalf("LoadLatestSnapshot: %v", err)
	}
	return s, ok
}

func wantSnapshot(t *testing.T, s Snapshot, ok bool, lsn uint64, payload []byte) {
	t.Helper()
	if !ok || s.LSN != lsn || s.Slot != lsn*10 || !bytes.Equal(s.Payload, payload) {
		t.Fatalf("loaded ok=%v lsn=%d slot=%d (%d bytes), want lsn %d slot %d (%d bytes)", ok, s.LSN, s.Slot, len(s.Payload), lsn, lsn*10, len(payload))
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "snaps")
	if _, ok := mustLoad(t, dir); ok {
		t.Fatal("snapshot found in a missing directory")
	}
	big := snapPayload(7, 8<<20+3)
	mustWriteSnapshot(t, dir, 7, big)
	s, ok := mustLoad(t, dir)
	wantSnapshot(t, s, ok, 7, big)
	if len(s.Skipped) != 0 {
		t.Fatalf("skipped %v", s.Skipped)
	}
	mustWriteSnapshot(t, dir, 9, nil)
	s, ok = mustLoad(t, dir)
	wantSnapshot(t, s, ok, 9, []byte{})
}

func TestSnapshotEmptyDirectory(t *testing.T) {
	if s, ok := mustLoad(t, t.TempDir()); ok || len(s.Skipped) != 0 {
		t.Fatalf("got %+v, %v from an empty directory", s, ok)
	}
}

func TestSnapshotKeepsNewestTwo(t *testing.T) {
	dir := t.TempDir()
	for _, lsn := range []uint64{5, 10, 15, 20} {
		mustWriteSnapshot(t, dir, lsn, snapPayload(lsn, 100))
	}
	snaps, _, err := listSnapshots(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 2 || snaps[0].lsn != 20 || snaps[1].lsn != 15 {
		t.Fatalf("kept %+v, want lsn 20 and 15", snaps)
	}
	s, ok := mustLoad(t, dir)
	wantSnapshot(t, s, ok, 20, snapPayload(20, 100))
}

// TestSnapshotNewestInvalidFallsBack damages the newest snapshot in each way a file can be
// damaged; loading must return the older one and name the skipped file.
func TestSnapshotNewestInvalidFallsBack(t *testing.T) {
	damage := map[string]func([]byte) []byte{
		"payload bit":      func(b []byte) []byte { b[len(b)-5] ^= 0x10; return b },
		"slot bit":         func(b []byte) []byte { b[17] ^= 1; return b },
		"crc bit":          func(b []byte) []byte { b[snapshotCRCOffset] ^= 0x80; return b },
		"magic":            func(b []byte) []byte { b[0] = 'X'; return b },
		"version":          func(b []byte) []byte { b[4] = 9; return b },
		"lsn":              func(b []byte) []byte { b[8] ^= 1; return b },
		"truncated body":   func(b []byte) []byte { return b[:len(b)-1] },
		"truncated header": func(b []byte) []byte { return b[:snapshotHeaderSize-1] },
		"empty":            func(b []byte) []byte { return nil },
		"trailing bytes":   func(b []byte) []byte { return append(b, 0) },
	}
	for name, f := range damage {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			mustWriteSnapshot(t, dir, 10, snapPayload(10, 1000))
			mustWriteSnapshot(t, dir, 20, snapPayload(20, 1000))
			newest := filepath.Join(dir, snapshotName(20))
			data, err := os.ReadFile(newest)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(newest, f(data), 0o644); err != nil {
				t.Fatal(err)
			}
			s, ok := mustLoad(t, dir)
			wantSnapshot(t, s, ok, 10, snapPayload(10, 1000))
			if len(s.Skipped) != 1 || !strings.HasPrefix(s.Skipped[0], newest+": ") {
				t.Fatalf("Skipped = %q, want %s", s.Skipped, newest)
			}
		})
	}
	t.Run("all invalid", func(t *testing.T) {
		dir := t.TempDir()
		mustWriteSnapshot(t, dir, 10, snapPayload(10, 10))
		mustWriteSnapshot(t, dir, 20, snapPayload(20, 10))
		for _, lsn := range []uint64{10, 20} {
			if err := os.Truncate(filepath.Join(dir, snapshotName(lsn)), 20); err != nil {
				t.Fatal(err)
			}
		}
		if s, ok := mustLoad(t, dir); ok || len(s.Skipped) != 2 {
			t.Fatalf("got ok=%v skipped=%q, want none loaded and both skipped", ok, s.Skipped)
		}
	})
}

func TestSnapshotTempFilesRemoved(t *testing.T) {
	dir := t.TempDir()
	mustWriteSnapshot(t, dir, 3, snapPayload(3, 10))
	leftover := filepath.Join(dir, "snapshot-123456.tmp")
	if err := os.WriteFile(leftover, []byte("half a snapshot"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "00000000000000000001.journal")
	if err := os.WriteFile(other, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s, ok := mustLoad(t, dir)
	wantSnapshot(t, s, ok, 3, snapPayload(3, 10))
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Fatalf("temp file still there: %v", err)
	}
	if _, err := os.Stat(other); err != nil {
		t.Fatalf("unrelated file removed: %v", err)
	}
	// WriteSnapshot itself leaves no temp file behind.
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), snapshotTempSuffix) {
			t.Fatalf("temp file %s left by WriteSnapshot", e.Name())
		}
	}
}
