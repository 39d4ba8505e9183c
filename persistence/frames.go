package persistence

import (
	"fmt"
)

// AppendFrames encodes a batch as consecutive journal frames at the end of dst: the form
// a record has in a segment file, and in a message of a JetStream journal, so that every
// journal checks the same checksums on replay.
func AppendFrames(dst []byte, batch []Record) []byte {
	for i := range batch {
		dst = appendFrame(dst, batch[i])
	}
	return dst
}

// FrameSize is the encoded size of a record.
func FrameSize(r Record) int { return frameHeaderSize + len(r.Payload) }

// ParseFrames calls fn for each frame of data, in order, verifying each checksum; the
// Record's Payload aliases data. Anything that is not a whole valid frame is corruption:
// a message is stored whole or not at all, so unlike a file it has no torn tail.
func ParseFrames(data []byte, maxPayload int, fn func(Record) error) error {
	for off := 0; off < len(data); {
		if len(data)-off < frameHeaderSize {
			return fmt.Errorf("%d bytes at offset %d are not a frame header", len(data)-off, off)
		}
		h := data[off : off+frameHeaderSize]
		fh, bad := parseHeader(h, maxPayload)
		if bad != "" {
			return fmt.Errorf("frame at offset %d: %s", off, bad)
		}
		end := off + frameHeaderSize + int(fh.length)
		if end > len(data) {
			return fmt.Errorf("frame at offset %d: payload of %d bytes runs past the message", off, fh.length)
		}
		payload := data[off+frameHeaderSize : end]
		if !fh.checksumOK(h, payload) {
			return fmt.Errorf("frame at offset %d (lsn %d): checksum mismatch", off, fh.lsn)
		}
		if err := fn(Record{LSN: fh.lsn, Slot: fh.slot, Payload: payload}); err != nil {
			return err
		}
		off = end
	}
	return nil
}

// CheckBatch rejects a batch that cannot follow a log ending at lastLSN and lastSlot, or
// that holds a record over maxRecord bytes — the rule every journal applies before it
// writes anything (ErrOutOfOrder, ErrRecordTooLarge).
func CheckBatch(lastLSN, lastSlot uint64, batch []Record, maxRecord int) error {
	tail := position{lsn: lastLSN, slot: lastSlot}
	for i := range batch {
		r := &batch[i]
		if len(r.Payload) > maxRecord {
			return fmt.Errorf("%w: lsn %d has %d bytes, limit %d", ErrRecordTooLarge, r.LSN, len(r.Payload), maxRecord)
		}
		if problem := orderProblem(tail, r.LSN, r.Slot); problem != "" {
			return fmt.Errorf("%w: %s", ErrOutOfOrder, problem)
		}
		tail = position{lsn: r.LSN, slot: r.Slot}
	}
	return nil
}
