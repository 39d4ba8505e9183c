package cluster

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// A journal message must outlive the events stream's limits until a snapshot covers it.
// The age limit cannot take it (its TTL is "never"), but a byte or message limit
// discards the stream's oldest messages whatever they are: a shard whose journal starts
// far back in the stream — one that went quiet, its last message left behind as the
// other shards' events pile up — would lose it. So each feed watches where its oldest
// message stands; once the stream is more than half full and that message is in its
// older half, the journal is refreshed before the limit reaches it: the shard is asked
// for a snapshot (Stale), which lets compaction take the records, and a journal whose
// only message left is its tail appends the tail again and purges the old one. What this
// needs is that the stream does not take in half its limit between two checks plus a
// snapshot's write.

// feedRetentionEvery is how often a feed checks its place in the stream.
var feedRetentionEvery = 5 * time.Second // a variable for a test

// Stale reports, once per check that found it so, that the journal's oldest message is
// at risk of the events stream's limits: a snapshot now (and compaction up to it) keeps
// the journal whole (actors.Feed).
func (f *Feed) Stale() bool { return f.stale.Swap(false) }

// retention checks the journal's place in the stream every period until the feed ends.
func (f *Feed) retention(every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-f.exited:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), f.cfg.Timeout)
		info, err := f.stream.Info(ctx)
		cancel()
		if err != nil {
			continue // checked again next time
		}
		f.mu.Lock()
		risk := atRisk(info, f.oldest)
		if risk && f.oldest >= f.lastSeq && f.covered >= f.tail.lsn {
			f.refresh = true // the tail alone is left, a snapshot covers it: append it again
			f.signal()
		}
		f.mu.Unlock()
		if risk {
			f.stale.Store(true)
		}
	}
}

// atRisk says whether the message at seq is in the older half of a stream more than
// half full by its byte or message limit.
func atRisk(info *jetstream.StreamInfo, seq uint64) bool {
	c, s := info.Config, info.State
	full := (c.MaxBytes > 0 && s.Bytes > uint64(c.MaxBytes)/2) || (c.MaxMsgs > 0 && s.Msgs > uint64(c.MaxMsgs)/2)
	return full && seq < s.FirstSeq+(s.LastSeq-s.FirstSeq)/2
}

// refreshed purges the journal's messages before seq, its tail appended again there.
func (f *Feed) refreshed(seq uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.Timeout)
	defer cancel()
	if err := f.stream.Purge(ctx, jetstream.WithPurgeSubject(f.subject), jetstream.WithPurgeSequence(seq)); err != nil {
		return // the old tail stays; the next check finds it again
	}
	f.mu.Lock()
	f.oldest = max(f.oldest, seq)
	f.index = f.index[:0]
	f.index = append(f.index, stored{seq: seq, lastLSN: f.tail.lsn})
	f.mu.Unlock()
}
