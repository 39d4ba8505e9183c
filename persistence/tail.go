package persistence

import (
	"bytes"
	"hash/crc32"
	"io"
)

// findValidFrame looks for a complete, checksummed frame starting anywhere in [from, size) of
// the last segment whose lsn is after afterLSN. It is what separates a torn tail from
// corruption: a crash leaves only garbage (often zeros) after the last good frame, while a
// damaged frame in the middle of the log is followed by good ones, including when the damage
// hit a length field and frame boundaries can no longer be followed.
//
// Frames are judged against the format's hard limit, not FileOptions.MaxRecordSize: a frame
// that is intact but longer than the configured bound is still a durable record, and cutting
// it off because of a lowered option would lose it. Frames with older lsns are not evidence (a
// file system may expose stale blocks after a crash). It runs only when recovery met an
// unreadable frame, and reads in chunks so memory stays bounded whatever the file holds.
func findValidFrame(f io.ReaderAt, from, size int64, afterLSN uint64) (int64, bool, error) {
	const chunk = 64 << 10
	magic := []byte(frameMagic)
	buf := make([]byte, chunk+len(magic)-1) // overlap so a magic across chunks is seen
	scratch := make([]byte, 32<<10)
	for pos := from; pos < size; pos += chunk {
		n := min(int64(len(buf)), size-pos)
		if _, err := f.ReadAt(buf[:n], pos); err != nil {
			return 0, false, err
		}
		window := buf[:n]
		for i := 0; ; i++ {
			k := bytes.Index(window[i:], magic)
			if k < 0 || i+k >= chunk {
				break
			}
			i += k
			ok, err := validFrameAt(f, pos+int64(i), size, afterLSN, scratch)
			if err != nil || ok {
				return pos + int64(i), ok, err
			}
		}
	}
	return 0, false, nil
}

// validFrameAt reports whether a valid frame with lsn after afterLSN starts at off. The
// checksum is computed while streaming the payload through scratch, so a garbage length
// cannot make it allocate.
func validFrameAt(f io.ReaderAt, off, size int64, afterLSN uint64, scratch []byte) (bool, error) {
	if size-off < frameHeaderSize {
		return false, nil
	}
	var hdr [frameHeaderSize]byte
	if _, err := f.ReadAt(hdr[:], off); err != nil {
		return false, err
	}
	fh, bad := parseHeader(hdr[:], maxRecordLimit)
	if bad != "" || fh.lsn <= afterLSN || size-off-frameHeaderSize < int64(fh.length) {
		return false, nil
	}
	h := crc32.New(castagnoli)
	h.Write(hdr[:frameCRCOffset])
	payload := io.NewSectionReader(f, off+frameHeaderSize, int64(fh.length))
	if _, err := io.CopyBuffer(h, payload, scratch); err != nil {
		return false, err
	}
	return h.Sum32() == fh.crc, nil
}
