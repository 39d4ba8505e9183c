package actors

import (
	"fmt"
	"time"

	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/persistence"
)

type recovered struct {
	kernel      *kernel.Kernel
	journal     persistence.Journal
	published   uint64
	snapshotLSN uint64  // the snapshot recovered from (0: none)
	events      []Event // events of entries after the published position, to republish
}

// recoverShard rebuilds a shard: the newest valid snapshot, then every journal entry
// after it, applied exactly as the first time. Any inconsistency refuses to start.
func recoverShard(h *host, cfg kernel.Config) (*recovered, error) {
	h.closeWriter() // a restarted actor must not share the journal with its predecessor
	start := time.Now()
	snap, ok, err := h.storage.LoadSnapshot()
	if err != nil {
		return nil, err
	}
	for _, s := range snap.Skipped {
		h.log.Warn("skipped unreadable snapshot", "shard", h.shard, "snapshot", s)
	}
	var k *kernel.Kernel
	if ok {
		if k, err = kernel.Restore(cfg, snap.Payload); err != nil {
			return nil, fmt.Errorf("snapshot at lsn %d: %w", snap.LSN, err)
		}
		if k.LastLSN() != snap.LSN {
			return nil, fmt.Errorf("snapshot file says lsn %d, its state says %d", snap.LSN, k.LastLSN())
		}
	} else if k, err = kernel.New(cfg); err != nil {
		return nil, err
	}
	loaded := time.Now()
	j, err := h.storage.OpenJournal()
	if err != nil {
		return nil, err
	}
	opened := time.Now()
	from := k.LastLSN()
	events, published, err := h.published(j, from)
	if err != nil {
		j.Close()
		return nil, err
	}
	rec := &recovered{kernel: k, journal: j, published: published, snapshotLSN: from}
	var cmd kernel.Command
	var out kernel.Output
	err = j.Replay(k.LastLSN()+1, func(r persistence.Record) error {
		if r.LSN != k.LastLSN()+1 {
			return fmt.Errorf("journal entry %d does not follow the state at lsn %d (missing snapshot or segment)", r.LSN, k.LastLSN())
		}
		if err := kernel.DecodeCommand(r.Payload, &cmd); err != nil {
			return fmt.Errorf("entry %d: %w", r.LSN, err)
		}
		k.Apply(kernel.Entry{LSN: r.LSN, Slot: r.Slot, Cmd: &cmd}, &out)
		if events && r.LSN > published {
			rec.events = appendEvents(rec.events, 0, h.shard, kernel.Entry{LSN: r.LSN, Slot: r.Slot, Cmd: &cmd}, &out)
		}
		cmd.Members, cmd.Labels, cmd.Imports = nil, nil, nil // applied entries keep no reference to the decode buffer
		return nil
	})
	if err != nil {
		j.Close()
		return nil, err
	}
	if last, _ := j.Last(); last > k.LastLSN() {
		j.Close()
		return nil, fmt.Errorf("journal ends at lsn %d but replay reached %d", last, k.LastLSN())
	}
	// Where a slow load spent its time: the snapshot (and published position), the
	// journal's open (in a cluster: its claim), the replay.
	h.log.Debug("shard recovered", "shard", h.shard, "snapshot_lsn", from, "entries_replayed", k.LastLSN()-from,
		"snapshot", loaded.Sub(start).Round(time.Millisecond), "open", opened.Sub(loaded).Round(time.Millisecond),
		"replay", time.Since(opened).Round(time.Millisecond))
	return rec, nil
}

// published says whether the shard derives events and where they stand: a journal that
// stores them says so itself (a snapshot never passes it, and a copy restored without a
// journal starts at its snapshot, at lsn from); otherwise the storage's published
// position.
func (h *host) published(j persistence.Journal, from uint64) (events bool, published uint64, err error) {
	if feed, ok := j.(Feed); ok {
		return true, max(feed.Stored(), from), nil
	}
	if h.sys.opts.Events == nil {
		return false, 0, nil
	}
	published, err = h.storage.ReadPublished()
	return true, published, err
}
