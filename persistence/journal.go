package persistence

// Record is one journal entry: the shard's command bytes at a log position.
type Record struct {
	// LSN is the log sequence number; records are strictly consecutive.
	LSN uint64
	// Slot is the request slot (logical time) stamped by the shard; it never decreases.
	Slot uint64
	// Payload is the encoded command, opaque to the journal.
	Payload []byte
}

// Journal is the shard's log: a segmented file here, a replicated JetStream stream
// appended with an expected last sequence in cluster.Journal — so it stays this small.
type Journal interface {
	// Append writes the batch and makes it durable (one fsync for the whole batch) before
	// returning. A batch that breaks the log's order (ErrOutOfOrder) or holds a record over
	// the size bound (ErrRecordTooLarge) is rejected before anything is written and leaves the
	// journal usable. Any other error leaves the journal failed: every later call returns an
	// error wrapping ErrFailed (the shard halts).
	Append(batch []Record) error
	// Last returns the lsn and slot of the last durable record (0,0 when empty and no base).
	// It is safe to call from any goroutine.
	Last() (lsn, slot uint64)
	// Replay calls fn for every record with LSN >= from, in order. Record.Payload is only
	// valid until fn returns: copy it to keep it. It returns ErrCompacted when records at or
	// after from are no longer (or never were) in the journal, and fn's error unchanged.
	Replay(from uint64, fn func(Record) error) error
	// Compact removes whole segments all of whose records have LSN <= upTo (covered by a snapshot).
	Compact(upTo uint64) error
	Close() error
}

// Barriered is a Journal that can prove it is still its writer's: Barrier's done is
// called with nil once a barrier, ordered after every batch submitted before it, is
// stored in the journal as this writer's — no other writer has appended since this one
// claimed it (cluster.Journal: an empty message expecting the stream's last sequence).
// An error fails the journal as a failed append does. A shard whose owner cannot renew
// its claim answers what does not append only after a barrier (actors.Fenced).
type Barriered interface {
	Journal
	Barrier(done func(error))
}

// Pipelined is a Journal that takes the next batch before the last is durable
// (cluster.Journal, on a replicated stream): the shard keeps a window of batches in
// flight (actors.Options.JournalWindow) and applies them as they are reported, in order.
type Pipelined interface {
	Journal
	// AppendAsync queues batch behind the ones in flight; done is called once it is
	// durable (nil) or cannot be. Successes are reported in submission order, and a
	// failure fails every batch behind it too; a batch refused when it is submitted (the
	// journal closed or failed, a batch out of order) is reported at once, which may be
	// before batches submitted earlier are.
	AppendAsync(batch []Record, done func(error))
}
