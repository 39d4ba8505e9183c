package persistence

import (
	"bufio"
	"io"
)

// frameReader reads frames sequentially from the start of a segment. Recovery and Replay share
// it so that both judge a frame by exactly the same rules; its buffers are reused across
// frames and segments so reading a long journal does not allocate per record.
type frameReader struct {
	maxPayload int
	br         *bufio.Reader
	hdr        [frameHeaderSize]byte
	payload    []byte
}

func newFrameReader(maxPayload int) *frameReader {
	return &frameReader{maxPayload: maxPayload, br: bufio.NewReaderSize(nil, 256<<10)}
}

// reset starts reading r, which holds exactly the segment's bytes that may be read.
func (fr *frameReader) reset(r io.Reader) { fr.br.Reset(r) }

// next reads the frame that starts where the previous one ended, remaining bytes before the
// end of what may be read. A frame that is cut short or does not check out is reported as a
// reason rather than an error, because whether it is a torn tail or corruption depends on
// where it is; err is kept for I/O failures. On success the payload is in fr.payload.
func (fr *frameReader) next(remaining int64) (fh frameHeader, bad string, err error) {
	if remaining < frameHeaderSize {
		return fh, "truncated frame header", nil
	}
	if _, err := io.ReadFull(fr.br, fr.hdr[:]); err != nil {
		return fh, "", err
	}
	fh, bad = parseHeader(fr.hdr[:], fr.maxPayload)
	if bad != "" {
		return fh, bad, nil
	}
	if remaining-frameHeaderSize < int64(fh.length) {
		return fh, "truncated frame payload", nil
	}
	if cap(fr.payload) < int(fh.length) {
		fr.payload = make([]byte, fh.length)
	}
	fr.payload = fr.payload[:fh.length]
	if _, err := io.ReadFull(fr.br, fr.payload); err != nil {
		return fh, "", err
	}
	if !fh.checksumOK(fr.hdr[:], fr.payload) {
		return fh, "checksum mismatch", nil
	}
	return fh, "", nil
}
