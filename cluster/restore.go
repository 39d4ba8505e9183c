package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/contract"
)

// RestoredShard is one shard's state of a copy (holdfast snapshot restore): the kernel's
// snapshot encoding at lsn and slot.
type RestoredShard struct {
	LSN, Slot uint64
	State     []byte
}

// Restore writes a copy into the JetStream of a NATS where no Holdfast of the prefix has
// run yet, for nodes with journal jetstream to start from: the registry (the copy's shard
// count and slot length), each shard's state as its newest snapshot and its published
// position at the copy's lsn (nothing before it is published again), and no journal —
// the node that claims a shard starts its journal after the snapshot. A prefix that
// already has a registry or a journal is refused: a copy never lands on a live state.
//
// format is the data format to record (DataFormat, or FeedFormat-1 when the events
// stream cannot hold journals: events.StreamHoldsJournals).
func Restore(ctx context.Context, js jetstream.JetStream, prefix string, replicas int, slotMillis uint64, format uint32, shards []RestoredShard) error {
	names := NamesFor(prefix)
	events, err := js.Stream(ctx, contract.StreamName)
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return fmt.Errorf("looking for the events stream: %w", err)
	}
	for k := range shards {
		_, err := js.Stream(ctx, names.JournalStream(uint32(k)))
		switch {
		case err == nil:
			return fmt.Errorf("prefix %q already has a journal for shard %d: restore into a prefix no Holdfast has served", prefix, k)
		case !errors.Is(err, jetstream.ErrStreamNotFound):
			return fmt.Errorf("looking for shard %d's journal: %w", k, err)
		}
		if events == nil {
			continue
		}
		switch _, err := events.GetLastMsgForSubject(ctx, names.JournalSubject(uint32(k))); {
		case err == nil:
			return fmt.Errorf("prefix %q already has a journal for shard %d in %s: restore into a prefix no Holdfast has served", prefix, k, contract.StreamName)
		case !errors.Is(err, jetstream.ErrMsgNotFound):
			return fmt.Errorf("looking for shard %d's journal: %w", k, err)
		}
	}
	kv, err := OpenBucket(ctx, js, names, replicas)
	if err != nil {
		return err
	}
	if _, err := kv.Get(ctx, registryKey); err == nil {
		return fmt.Errorf("prefix %q is registered already: restore into a prefix no Holdfast has served", prefix)
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("reading the registry: %w", err)
	}
	obs, err := openSnapshots(ctx, js, names, replicas)
	if err != nil {
		return err
	}
	for k, sh := range shards {
		st := &Storage{JS: js, Names: names, Shard: uint32(k), Replicas: replicas, Node: "restore", Objects: obs, Bucket: kv,
			Ctx: ctx, Timeout: 2 * time.Minute}
		if err := st.WriteSnapshot(sh.LSN, sh.Slot, sh.State); err != nil {
			return err
		}
		if err := st.WritePublished(sh.LSN); err != nil {
			return fmt.Errorf("the published position of shard %d: %w", k, err)
		}
	}
	// The registry last: a prefix without it is not taken for a restored one.
	_, err = Register(ctx, kv, prefix, Registration{Journal: "jetstream", Node: "restore", Shards: uint32(len(shards)), SlotMillis: slotMillis,
		Format: format})
	return err
}
