// Package backup takes a consistent copy of a running Holdfast service and keeps it in
// one file (docs/operations.md "Backup and restore"): what `holdfast snapshot save`,
// `status` and `restore` are made of.
//
// A copy is taken over the service's shard subjects, `<prefix>._shard.<k>.backup`, which
// only the service's own account can reach: every shard holds its bundle steps back
// (one-shard writes go on), then each gives its state, then each lets them go and says
// whether it held throughout — a copy whose holds did not all last is taken again
// (docs/design.md "Backups" says why this cut is consistent across shards).
package backup

import (
	"github.com/holdfast/holdfast/contract"
)

// Subject is where shard k's owner answers the copy's requests.
func Subject(prefix string, k uint32) string { return contract.ShardSubject(prefix, k) + ".backup" }

// The requests' operations.
const (
	OpHold    = "hold"    // hold bundle steps for the copy, for TTLMillis at most
	OpCapture = "capture" // take the shard's state (the shard must be holding)
	OpRelease = "release" // end the hold: Whole says whether it lasted
	OpRead    = "read"    // a chunk of the captured state from Offset (raw bytes)
	OpDone    = "done"    // forget the captured state
)

// Request is one request of a copy to one shard.
type Request struct {
	Op        string `json:"op"`
	Copy      string `json:"copy"`
	TTLMillis int64  `json:"ttl_ms,omitempty"`
	Offset    int64  `json:"offset,omitempty"`
}

// Reply is a shard's answer (a read's answer is the chunk's bytes instead, or this with
// Error set when the header ErrorHeader says so).
type Reply struct {
	Error string `json:"error,omitempty"`
	LSN   uint64 `json:"lsn,omitempty"`
	Slot  uint64 `json:"slot,omitempty"`
	Size  int64  `json:"size,omitempty"`
	CRC   uint32 `json:"crc32c,omitempty"`
	Whole bool   `json:"whole,omitempty"`
}

// ErrorHeader marks a read's answer that is a Reply with an error, not bytes.
const ErrorHeader = "Holdfast-Backup-Error"

// SizeHeader is, on a read's answer, the whole captured state's size: the reader has it
// all when it has read that many bytes.
const SizeHeader = "Holdfast-Backup-Size"

// ChunkSize is the most bytes one read answers with: under NATS's default 1 MiB payload.
const ChunkSize = 512 << 10
