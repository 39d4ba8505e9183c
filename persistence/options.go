package persistence

import "fmt"

const (
	// DefaultSegmentSize keeps segment files few while letting Compact free space in useful steps.
	DefaultSegmentSize = 64 << 20
	// DefaultMaxRecordSize bounds one command; recovery relies on the bound to reject garbage lengths.
	DefaultMaxRecordSize = 1 << 20
	// maxRecordLimit caps MaxRecordSize so one frame always fits the u32 length field with room
	// to spare and a corrupted length can never make recovery allocate gigabytes.
	maxRecordLimit = 1 << 30
)

// FileOptions configures a FileJournal. The zero value is usable.
type FileOptions struct {
	// SegmentSize is the size after which the next batch starts a new segment file (rotation
	// happens at batch boundaries, so a segment can exceed it by one batch). Segments are the
	// unit of Compact. Default DefaultSegmentSize.
	SegmentSize int64
	// MaxRecordSize bounds one record's payload in bytes. Default DefaultMaxRecordSize. Recovery
	// treats longer frames as corruption, so never lower it below what a journal already holds.
	MaxRecordSize int
	// Faults injects write and fsync failures in tests; nil in production.
	Faults *Faults
}

// Faults lets tests (here and in the packages above) make the disk fail at the two points
// where a real one can: the write and the fsync. Every hook may be nil.
type Faults struct {
	// FailWrite runs before a batch is written; a non-nil error fails the Append with nothing written.
	FailWrite func() error
	// TornWrite, if set, is called with the encoded batch size and returns how many bytes of it
	// to write. Fewer than all of them fails the Append after a partial write, like a crash in
	// the middle of write(2).
	TornWrite func(size int) int
	// FailSync runs after the write, before the fsync; a non-nil error fails the Append with
	// the batch written but not made durable.
	FailSync func() error
}

// withDefaults fills zero fields and rejects values no journal can work with.
func (o FileOptions) withDefaults() (FileOptions, error) {
	if o.SegmentSize == 0 {
		o.SegmentSize = DefaultSegmentSize
	}
	if o.MaxRecordSize == 0 {
		o.MaxRecordSize = DefaultMaxRecordSize
	}
	if o.SegmentSize < 0 {
		return o, fmt.Errorf("persistence: SegmentSize %d is negative", o.SegmentSize)
	}
	if o.MaxRecordSize < 0 || o.MaxRecordSize > maxRecordLimit {
		return o, fmt.Errorf("persistence: MaxRecordSize %d outside [0, %d]", o.MaxRecordSize, maxRecordLimit)
	}
	return o, nil
}
