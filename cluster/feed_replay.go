package cluster

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/persistence"
)

// Replay reads the shard's subject from its first message through the claim and calls
// fn for every record with LSN >= from (persistence.Journal), as Journal.Replay does for
// a stream of its own.
func (f *Feed) Replay(from uint64, fn func(persistence.Record) error) error {
	f.mu.Lock()
	through, tailLSN := f.claimSeq, f.tail.lsn
	f.mu.Unlock()
	index, first, err := replayJournal(f.cfg.JournalConfig, through, from, tailLSN, func(ctx context.Context, c jetstream.OrderedConsumerConfig) (jetstream.Consumer, error) {
		c.FilterSubjects = []string{f.subject}
		return f.stream.OrderedConsumer(ctx, c)
	}, fn)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.index = append(index, f.index...)
	if first != 0 {
		f.oldest = min(f.oldest, first)
	}
	f.mu.Unlock()
	return nil
}

// replayJournal reads a journal's messages in order, from its first through stream
// sequence through, with an ordered consumer open makes, and calls fn for every record
// with LSN >= from. It returns the batch messages read (for compaction) and the sequence
// of the first message, or persistence.ErrCompacted when records at or after from are no
// longer there (tailLSN: where the journal ends).
func replayJournal(cfg JournalConfig, through, from, tailLSN uint64,
	open func(context.Context, jetstream.OrderedConsumerConfig) (jetstream.Consumer, error), fn func(persistence.Record) error) ([]stored, uint64, error) {
	parent := cfg.Ctx
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	// The ordered consumer remakes itself after a lost pull, by default without end (a
	// stream without a quorum held a load, and the node's stop behind it, for the
	// shard's whole 10-minute start bound): a few tries, and a watchdog that stops the
	// read when no message came for replayStall.
	cons, err := open(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy, MaxResetAttempts: 3})
	if err != nil {
		return nil, 0, fmt.Errorf("reading journal of shard %d: %w", cfg.Shard, err)
	}
	// Short pulls with frequent heartbeats: a pull the server loses (a new stream's or
	// consumer's first moments) is noticed after two missed heartbeats and the ordered
	// consumer is made again; with the defaults (5 s heartbeats) a new owner's replay
	// stalled 10 s that way (measured: replay=10.005s for an empty journal on R3).
	it, err := cons.Messages(jetstream.PullExpiry(2*time.Second), jetstream.PullHeartbeat(500*time.Millisecond))
	if err != nil {
		return nil, 0, err
	}
	defer it.Stop()
	defer context.AfterFunc(parent, it.Stop)() // the node stops: the load ends
	var stalled atomic.Bool
	watchdog := time.AfterFunc(time.Hour, func() { stalled.Store(true); it.Stop() })
	defer watchdog.Stop()
	var tail position
	seen := false
	var index []stored
	var first uint64
	var voids Voids
	for {
		watchdog.Reset(replayStall) // times the wait for the next message, not its apply
		msg, err := it.Next(jetstream.NextMaxWait(replayStall))
		watchdog.Stop()
		switch {
		case stalled.Load():
			return nil, 0, fmt.Errorf("reading journal of shard %d: no message for %v", cfg.Shard, replayStall)
		case parent.Err() != nil:
			return nil, 0, fmt.Errorf("reading journal of shard %d: %w", cfg.Shard, parent.Err())
		case err != nil:
			return nil, 0, fmt.Errorf("reading journal of shard %d: %w", cfg.Shard, err)
		}
		md, err := msg.Metadata()
		if err != nil {
			return nil, 0, err
		}
		seq := md.Sequence.Stream
		if seq > through {
			break // written after our claim: cannot happen, as only we append now
		}
		if first == 0 {
			first = seq
		}
		if !voids.Void(msg.Headers()) && msg.Headers().Get(hdrKind) == "batch" {
			var last uint64
			err := persistence.ParseFrames(msg.Data(), cfg.MaxRecord, func(r persistence.Record) error {
				if seen && (r.LSN != tail.lsn+1 || r.Slot < tail.slot) {
					return fmt.Errorf("journal of shard %d, stream sequence %d: lsn %d slot %d cannot follow lsn %d slot %d",
						cfg.Shard, seq, r.LSN, r.Slot, tail.lsn, tail.slot)
				}
				if !seen && r.LSN > from && from > 0 {
					return fmt.Errorf("%w: the journal starts at lsn %d, lsn %d was asked for", persistence.ErrCompacted, r.LSN, from)
				}
				seen, tail, last = true, position{lsn: r.LSN, slot: r.Slot}, r.LSN
				if r.LSN >= from {
					return fn(r)
				}
				return nil
			})
			if err != nil {
				return nil, 0, err
			}
			index = append(index, stored{seq: seq, lastLSN: last})
		}
		if seq == through {
			break
		}
	}
	if !seen && from > 0 && from <= tailLSN {
		return nil, 0, fmt.Errorf("%w: no records left, lsn %d was asked for", persistence.ErrCompacted, from)
	}
	return index, first, nil
}

// Compact purges the shard's subject messages all of whose records are at or below upTo,
// except the subject's newest: it says where the journal ends and how far its events
// are stored, and the next owner's claim reads both there.
func (f *Feed) Compact(upTo uint64) error {
	f.mu.Lock()
	below, n := compactable(f.index, upTo, f.lastSeq)
	f.covered = max(f.covered, upTo)
	if below == 0 {
		f.mu.Unlock()
		return nil
	}
	f.index = append(f.index[:0], f.index[n:]...)
	f.oldest = max(f.oldest, below)
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.Timeout)
	defer cancel()
	return f.stream.Purge(ctx, jetstream.WithPurgeSubject(f.subject), jetstream.WithPurgeSequence(below))
}
