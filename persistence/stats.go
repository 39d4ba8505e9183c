package persistence

import (
	"sync/atomic"
	"time"
)

// JournalStats are cumulative counters for metrics. Each field is read atomically on its own;
// together they are a near, not exact, snapshot.
type JournalStats struct {
	Batches      uint64        // successful Appends
	Records      uint64        // records in them
	BytesWritten uint64        // frame bytes made durable
	Syncs        uint64        // fsyncs of segment files
	LastSync     time.Duration // duration of the most recent segment fsync
}

// journalCounters are updated by the writer and read by metrics without taking the journal's lock.
type journalCounters struct {
	batches, records, bytes, syncs atomic.Uint64
	lastSync                       atomic.Int64
}

// Stats returns the journal's counters. It is cheap and safe to call from any goroutine.
func (j *FileJournal) Stats() JournalStats {
	c := &j.stats
	return JournalStats{
		Batches:      c.batches.Load(),
		Records:      c.records.Load(),
		BytesWritten: c.bytes.Load(),
		Syncs:        c.syncs.Load(),
		LastSync:     time.Duration(c.lastSync.Load()),
	}
}
