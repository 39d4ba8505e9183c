package persistence

import (
	"errors"
	"fmt"
)

// CorruptionError reports a journal that cannot be trusted. Recovery refuses to open it rather
// than guess, because dropping or reordering a durable command would silently change every
// later result; File and Offset tell the operator where to look.
type CorruptionError struct {
	File   string
	Offset int64
	Reason string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("persistence: corrupt journal %s at offset %d: %s", e.File, e.Offset, e.Reason)
}

var (
	// ErrFailed is wrapped by every error of a journal whose write, fsync or file operation
	// failed: what reached the disk is unknown, so only a reopen (recovery) can continue.
	ErrFailed = errors.New("persistence: journal failed")
	// ErrClosed is returned by calls on a closed journal.
	ErrClosed = errors.New("persistence: journal closed")
	// ErrRecordTooLarge rejects a record whose payload exceeds FileOptions.MaxRecordSize.
	ErrRecordTooLarge = errors.New("persistence: record too large")
	// ErrOutOfOrder rejects a record whose lsn does not follow the last one or whose slot goes back.
	ErrOutOfOrder = errors.New("persistence: record out of order")
	// ErrCompacted means Replay was asked for records older than the journal's first one.
	ErrCompacted = errors.New("persistence: records before the journal start were requested")
)
