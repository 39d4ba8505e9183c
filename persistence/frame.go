package persistence

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Frame layout, little endian. The checksum covers every header byte before it and the
// payload, so a flipped bit anywhere in a frame, its lsn and length included, is detected.
//
//	offset size field
//	0      4    magic "HFJ1"
//	4      1    version
//	5      3    reserved, zero
//	8      4    payload length
//	12     8    lsn
//	20     8    slot
//	28     4    CRC-32C of bytes 0..27 and the payload
//	32     n    payload
const (
	frameMagic      = "HFJ1"
	frameVersion    = 1
	frameHeaderSize = 32
	frameCRCOffset  = 28
)

// castagnoli is CRC-32C, which has hardware support on amd64 and arm64.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// frameHeader is a decoded frame header; the checksum is verified separately once the payload is read.
type frameHeader struct {
	length uint32
	lsn    uint64
	slot   uint64
	crc    uint32
}

// appendFrame encodes r at the end of dst. Appending into the caller's buffer is what lets
// Append encode a whole batch without allocating per record.
func appendFrame(dst []byte, r Record) []byte {
	start := len(dst)
	dst = append(dst, frameMagic...)
	dst = append(dst, frameVersion, 0, 0, 0)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(r.Payload)))
	dst = binary.LittleEndian.AppendUint64(dst, r.LSN)
	dst = binary.LittleEndian.AppendUint64(dst, r.Slot)
	crc := crc32.Update(0, castagnoli, dst[start:])
	crc = crc32.Update(crc, castagnoli, r.Payload)
	dst = binary.LittleEndian.AppendUint32(dst, crc)
	return append(dst, r.Payload...)
}

// parseHeader decodes h (frameHeaderSize bytes). It returns a non-empty reason when the header
// cannot start a valid frame; the length bound is checked here so that a corrupted length is
// rejected before anything is read or allocated for it.
func parseHeader(h []byte, maxPayload int) (frameHeader, string) {
	if string(h[0:4]) != frameMagic {
		return frameHeader{}, "bad magic"
	}
	if h[4] != frameVersion {
		return frameHeader{}, fmt.Sprintf("unsupported version %d", h[4])
	}
	if h[5]|h[6]|h[7] != 0 {
		return frameHeader{}, "reserved bytes not zero"
	}
	fh := frameHeader{
		length: binary.LittleEndian.Uint32(h[8:12]),
		lsn:    binary.LittleEndian.Uint64(h[12:20]),
		slot:   binary.LittleEndian.Uint64(h[20:28]),
		crc:    binary.LittleEndian.Uint32(h[28:32]),
	}
	if int64(fh.length) > int64(maxPayload) {
		return frameHeader{}, fmt.Sprintf("payload length %d over limit %d", fh.length, maxPayload)
	}
	return fh, ""
}

// checksumOK reports whether the stored checksum matches header h and payload.
func (fh frameHeader) checksumOK(h, payload []byte) bool {
	crc := crc32.Update(0, castagnoli, h[:frameCRCOffset])
	return crc32.Update(crc, castagnoli, payload) == fh.crc
}
