package persistence

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Snapshot file layout, little endian: a fixed header, then the payload. The checksum covers
// the header bytes before it and the payload, like a journal frame.
//
//	offset size field
//	0      4    magic "HFS1"
//	4      1    version
//	5      3    reserved, zero
//	8      8    lsn
//	16     8    slot
//	24     8    payload length
//	32     4    CRC-32C of bytes 0..31 and the payload
//	36     n    payload
const (
	snapshotMagic      = "HFS1"
	snapshotVersion    = 1
	snapshotHeaderSize = 36
	snapshotCRCOffset  = 32
	snapshotPrefix     = "snapshot-"
	snapshotSuffix     = ".snap"
	snapshotTempSuffix = ".tmp"
	snapshotsKept      = 2 // the newest plus one to fall back on if it turns out unreadable
)

// Snapshot is a shard's state at a log position.
type Snapshot struct {
	LSN     uint64
	Slot    uint64
	Payload []byte
	// Skipped lists newer snapshot files that were unreadable ("path: reason"), so the caller
	// can log them; loading never fails because of them.
	Skipped []string
}

// WriteSnapshot durably stores payload as the state at lsn and slot, then keeps only the newest
// snapshots. The file appears under its final name only once complete and synced (temp file,
// fsync, rename, directory fsync), so a crash leaves either the old set or the new one.
func WriteSnapshot(dir string, lsn, slot uint64, payload []byte) error {
	if err := ensureDir(dir); err != nil {
		return err
	}
	err := WriteFile(filepath.Join(dir, snapshotName(lsn)), func(f *os.File) error {
		return writeSnapshotFile(f, lsn, slot, payload)
	})
	if err != nil {
		return err
	}
	return pruneSnapshots(dir)
}

// writeSnapshotFile writes header and payload with two writes straight from the caller's
// slice (no buffered copy of a payload that can be hundreds of MB).
func writeSnapshotFile(f *os.File, lsn, slot uint64, payload []byte) error {
	hdr := make([]byte, 0, snapshotHeaderSize)
	hdr = append(hdr, snapshotMagic...)
	hdr = append(hdr, snapshotVersion, 0, 0, 0)
	hdr = binary.LittleEndian.AppendUint64(hdr, lsn)
	hdr = binary.LittleEndian.AppendUint64(hdr, slot)
	hdr = binary.LittleEndian.AppendUint64(hdr, uint64(len(payload)))
	crc := crc32.Update(crc32.Update(0, castagnoli, hdr), castagnoli, payload)
	hdr = binary.LittleEndian.AppendUint32(hdr, crc)
	if _, err := f.Write(hdr); err != nil {
		return err
	}
	_, err := f.Write(payload)
	return err
}

func snapshotName(lsn uint64) string {
	return fmt.Sprintf("%s%020d%s", snapshotPrefix, lsn, snapshotSuffix)
}

// parseSnapshotName returns the lsn in a snapshot file name.
func parseSnapshotName(name string) (uint64, bool) {
	digits, ok := strings.CutPrefix(name, snapshotPrefix)
	if !ok {
		return 0, false
	}
	if digits, ok = strings.CutSuffix(digits, snapshotSuffix); !ok || len(digits) != 20 {
		return 0, false
	}
	lsn, err := strconv.ParseUint(digits, 10, 64)
	return lsn, err == nil
}

// snapshotFile is a snapshot found in a directory.
type snapshotFile struct {
	path string
	lsn  uint64
}

// listSnapshots returns dir's snapshot files, newest first, and its leftover temp files.
func listSnapshots(dir string) (snaps []snapshotFile, temps []string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range entries {
		name := e.Name()
		if lsn, ok := parseSnapshotName(name); ok {
			snaps = append(snaps, snapshotFile{path: filepath.Join(dir, name), lsn: lsn})
		} else if strings.HasPrefix(name, snapshotPrefix) && strings.HasSuffix(name, snapshotTempSuffix) {
			temps = append(temps, filepath.Join(dir, name))
		}
	}
	slices.SortFunc(snaps, func(a, b snapshotFile) int { return cmp.Compare(b.lsn, a.lsn) })
	return snaps, temps, nil
}

// pruneSnapshots deletes all but the newest snapshotsKept snapshots.
func pruneSnapshots(dir string) error {
	snaps, _, err := listSnapshots(dir)
	if err != nil || len(snaps) <= snapshotsKept {
		return err
	}
	for _, s := range snaps[snapshotsKept:] {
		if err := os.Remove(s.path); err != nil {
			return err
		}
	}
	return syncDir(dir)
}
