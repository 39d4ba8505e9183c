package persistence

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// rec is the record the tests write at lsn: slot and payload derive from lsn, so any record
// read back can be checked on its own, and payload lengths vary so frame offsets are irregular.
func rec(lsn uint64) Record {
	return Record{LSN: lsn, Slot: lsn / 3, Payload: fmt.Appendf(nil, "cmd-%d-%s", lsn, bytes.Repeat([]byte{'x'}, int(lsn%7)))}
}

// recs returns rec(from) .. rec(to).
func recs(from, to uint64) []Record {
	var out []Record
	for lsn := from; lsn <= to; lsn++ {
		out = append(out, rec(lsn))
	}
	return out
}

func mustOpen(t testing.TB, dir string, opts FileOptions) *FileJournal {
	t.Helper()
	j, err := OpenFileJournal(dir, opts)
	if err != nil {
		t.Fatalf("open %s: %v", dir, err)
	}
	return j
}

// appendRange appends rec(from)..rec(to) in batches whose sizes cycle through 1..maxBatch.
func appendRange(t testing.TB, j *FileJournal, from, to uint64, maxBatch int) {
	t.Helper()
	size := 1
	for lsn := from; lsn <= to; {
		end := min(lsn+uint64(size)-1, to)
		if err := j.Append(recs(lsn, end)); err != nil {
			t.Fatalf("append %d..%d: %v", lsn, end, err)
		}
		lsn = end + 1
		size = size%maxBatch + 1
	}
}

// replayAll returns every record with LSN >= from, payloads copied.
func replayAll(t testing.TB, j *FileJournal, from uint64) []Record {
	t.Helper()
	var got []Record
	err := j.Replay(from, func(r Record) error {
		r.Payload = slices.Clone(r.Payload)
		got = append(got, r)
		return nil
	})
	if err != nil {
		t.Fatalf("replay from %d: %v", from, err)
	}
	return got
}

// wantRange fails unless got is exactly rec(from)..rec(to) (empty when to < from).
func wantRange(t testing.TB, got []Record, from, to uint64) {
	t.Helper()
	var want []Record
	if to >= from {
		want = recs(from, to)
	}
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d (lsn %d..%d)", len(got), len(want), from, to)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.LSN != w.LSN || g.Slot != w.Slot || !bytes.Equal(g.Payload, w.Payload) {
			t.Fatalf("record %d: got {%d %d %q}, want {%d %d %q}", i, g.LSN, g.Slot, g.Payload, w.LSN, w.Slot, w.Payload)
		}
	}
}

// wantLast fails unless the journal's tail is rec(lsn) (or empty for lsn 0).
func wantLast(t testing.TB, j *FileJournal, lsn uint64) {
	t.Helper()
	gotLSN, gotSlot := j.Last()
	wantSlot := uint64(0)
	if lsn > 0 {
		wantSlot = rec(lsn).Slot
	}
	if gotLSN != lsn || gotSlot != wantSlot {
		t.Fatalf("Last() = (%d, %d), want (%d, %d)", gotLSN, gotSlot, lsn, wantSlot)
	}
}

// segmentPaths lists the journal files in dir, oldest first.
func segmentPaths(t testing.TB, dir string) []string {
	t.Helper()
	segs, err := listSegments(dir)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, s := range segs {
		paths = append(paths, s.path)
	}
	return paths
}

// frameOffsets returns the offset of every frame in a well-formed segment file, plus where
// its frames end: the file's end, or where the zeros a journal writes ahead begin.
func frameOffsets(t testing.TB, path string) (offsets []int64, end int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off := 0
	for off+frameHeaderSize <= len(data) && string(data[off:off+4]) == frameMagic {
		offsets = append(offsets, int64(off))
		off += frameHeaderSize + int(binary.LittleEndian.Uint32(data[off+8:]))
	}
	return offsets, int64(off)
}

// copyDir copies the regular files of src into a new temporary directory.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// writeFrames writes a segment file by hand, bypassing Append's checks.
func writeFrames(t testing.TB, dir string, name uint64, records ...Record) string {
	t.Helper()
	var buf []byte
	for _, r := range records {
		buf = appendFrame(buf, r)
	}
	path := filepath.Join(dir, segmentName(name))
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// wantCorruption fails unless err is a *CorruptionError at path and offset.
func wantCorruption(t testing.TB, err error, path string, offset int64) *CorruptionError {
	t.Helper()
	var ce *CorruptionError
	if !errors.As(err, &ce) {
		t.Fatalf("got error %v, want *CorruptionError at %s:%d", err, filepath.Base(path), offset)
	}
	if ce.File != path || ce.Offset != offset {
		t.Fatalf("corruption reported at %s:%d (%s), want %s:%d", filepath.Base(ce.File), ce.Offset, ce.Reason, filepath.Base(path), offset)
	}
	return ce
}
