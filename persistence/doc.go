// Package persistence keeps a shard's commands durable: an append-only journal of opaque
// records and the snapshot files that bound how much of it recovery has to replay.
//
// Commands, not results, are stored, so replaying the journal through the kernel rebuilds the
// same state. Nothing is applied before it is in the journal, which is why Append returns
// only after one fsync covers the whole batch (group commit), and why recovery fails closed
// with a *CorruptionError instead of guessing when a frame that is not the torn tail of the
// last segment is unreadable.
package persistence
