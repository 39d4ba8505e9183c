package persistence

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
)

// LoadLatestSnapshot returns the newest readable snapshot in dir. A newer file that is damaged
// (say, by a disk error after it was written) is skipped in favour of an older one and listed
// in Snapshot.Skipped; ok is false when no snapshot is readable. Leftover temp files of
// interrupted writes are removed, so call it at startup, not while WriteSnapshot runs.
func LoadLatestSnapshot(dir string) (Snapshot, bool, error) {
	snaps, temps, err := listSnapshots(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return Snapshot{}, false, nil
	}
	if err != nil {
		return Snapshot{}, false, err
	}
	for _, t := range temps {
		if err := os.Remove(t); err != nil {
			return Snapshot{}, false, err
		}
	}
	var skipped []string
	for _, sf := range snaps {
		s, bad, err := readSnapshot(sf)
		if err != nil {
			return Snapshot{}, false, err
		}
		if bad != "" {
			skipped = append(skipped, sf.path+": "+bad)
			continue
		}
		s.Skipped = skipped
		return s, true, nil
	}
	return Snapshot{Skipped: skipped}, false, nil
}

// readSnapshot reads and verifies one snapshot file. A file that does not check out is
// reported as a reason, an I/O failure as an error. The payload is read with one allocation,
// sized from the file rather than trusted from the header.
func readSnapshot(sf snapshotFile) (Snapshot, string, error) {
	f, err := os.Open(sf.path)
	if err != nil {
		return Snapshot{}, "", err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Snapshot{}, "", err
	}
	var hdr [snapshotHeaderSize]byte
	if st.Size() < snapshotHeaderSize {
		return Snapshot{}, "truncated header", nil
	}
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return Snapshot{}, "", err
	}
	s, length, bad := parseSnapshotHeader(hdr[:])
	switch {
	case bad != "":
		return Snapshot{}, bad, nil
	case s.LSN != sf.lsn:
		return Snapshot{}, fmt.Sprintf("file named for lsn %d holds lsn %d", sf.lsn, s.LSN), nil
	case length != uint64(st.Size()-snapshotHeaderSize):
		return Snapshot{}, fmt.Sprintf("payload length %d but %d bytes follow the header", length, st.Size()-snapshotHeaderSize), nil
	}
	s.Payload = make([]byte, length)
	if _, err := io.ReadFull(f, s.Payload); err != nil {
		return Snapshot{}, "", err
	}
	crc := crc32.Update(crc32.Update(0, castagnoli, hdr[:snapshotCRCOffset]), castagnoli, s.Payload)
	if crc != binary.LittleEndian.Uint32(hdr[snapshotCRCOffset:]) {
		return Snapshot{}, "checksum mismatch", nil
	}
	return s, "", nil
}

// parseSnapshotHeader decodes a snapshot header; bad is non-empty when it is not one.
func parseSnapshotHeader(h []byte) (s Snapshot, length uint64, bad string) {
	switch {
	case string(h[0:4]) != snapshotMagic:
		return s, 0, "bad magic"
	case h[4] != snapshotVersion:
		return s, 0, fmt.Sprintf("unsupported version %d", h[4])
	case h[5]|h[6]|h[7] != 0:
		return s, 0, "reserved bytes not zero"
	}
	s.LSN = binary.LittleEndian.Uint64(h[8:16])
	s.Slot = binary.LittleEndian.Uint64(h[16:24])
	return s, binary.LittleEndian.Uint64(h[24:32]), ""
}
