package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// Registration is what a serving process records for its prefix before it serves: where
// the state lives, and the settings fixed when the cluster is created — the shard count
// (which routes every request) and the slot length (which every journal's slots count
// in). The settings that may change are journaled (Settings, configure entries).
type Registration struct {
	Journal    string `json:"journal"`            // "file" or "jetstream"
	Node       string `json:"node"`               // the node holding the data directory (file)
	Instance   string `json:"instance,omitempty"` // that data directory's identity (file)
	Shards     uint32 `json:"shards"`
	SlotMillis uint64 `json:"slot_ms"`
	// Format is the newest form of the prefix's data (journal entries, snapshots, the
	// messages between nodes) that its nodes may have written: DataFormat of the build
	// that created the registry, raised by a later build when it first writes what an
	// earlier one cannot read. A node whose build reads less refuses to join, naming both.
	// 0: recorded before it was (format 1).
	Format uint32 `json:"format,omitempty"`
}

// Feed says whether the prefix's journals live in the events stream (FeedFormat).
func (r Registration) Feed() bool { return r.Journal == "jetstream" && r.Format >= FeedFormat }

// DataFormat is the newest form of a prefix's data this build writes and reads: 2 since
// bundles across shards (journal command format 6, snapshot format 9, peer messages), 3
// since a cluster's journals live in the events stream (FeedFormat). Builds before 2
// record nothing (format 1) and do not check.
const DataFormat = 3

// FeedFormat is the first format whose cluster keeps each shard's journal on its subject
// of the events stream, appended with its events (Feed); a cluster recorded at an earlier
// format keeps a stream per shard's journal and publishes its events beside it. A prefix
// is recorded at FeedFormat when its cluster is created and the events stream can hold
// journals, and at FeedFormat-1 otherwise (a journal in a file, events disabled, or an
// events stream an earlier build created): the format names what its nodes write.
const FeedFormat = 3

const registryKey = "registry"

// Register records reg for the prefix, or checks it against what is recorded: a prefix
// whose state lives in one node's data directory (journal file) is served by that node
// alone, also after it has died; a prefix whose state lives in JetStream is served by
// nodes with journal jetstream only; and every node agrees on shards and slot. The
// error says what is recorded and by whom.
//
// It returns the registration recorded: reg when this process is the first, else the
// first process's, whose format says how the prefix's journals are kept.
func Register(ctx context.Context, kv jetstream.KeyValue, prefix string, reg Registration) (Registration, error) {
	val, _ := json.Marshal(reg)
	for {
		var e jetstream.KeyValueEntry
		err := attempts(ctx, func(actx context.Context) (err error) { // a bucket just created may not answer yet
			e, err = kv.Get(actx, registryKey)
			return err
		})
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			err := attempts(ctx, func(actx context.Context) error {
				_, err := kv.Create(actx, registryKey, val)
				return err
			})
			if errors.Is(err, jetstream.ErrKeyExists) {
				continue // another node registered first: check against it
			}
			if err != nil {
				return Registration{}, fmt.Errorf("registering prefix %q: %w", prefix, err)
			}
			return reg, nil
		}
		if err != nil {
			return Registration{}, fmt.Errorf("reading the registry of prefix %q: %w", prefix, err)
		}
		var have Registration
		if err := json.Unmarshal(e.Value(), &have); err != nil {
			return Registration{}, fmt.Errorf("registry of prefix %q is unreadable: %w", prefix, err)
		}
		return have, compatible(prefix, have, reg)
	}
}

func compatible(prefix string, have, want Registration) error {
	switch {
	case max(have.Format, 1) > DataFormat:
		return fmt.Errorf("prefix %q holds data of format %d, written by a newer Holdfast, and this build reads format %d at most: run the newer build, or use another --prefix",
			prefix, have.Format, DataFormat)
	case have.Journal == "file" && (want.Journal != "file" || want.Instance != have.Instance):
		return fmt.Errorf("prefix %q is served by node %q from its own data directory (--journal file): no other process may serve it, also after that node has stopped; use another --prefix, or run that node with its data directory", prefix, have.Node)
	case have.Journal == "jetstream" && want.Journal != "jetstream":
		return fmt.Errorf("prefix %q is served by a cluster whose journals live in JetStream: join it with --journal jetstream, or use another --prefix", prefix)
	case have.Shards != want.Shards:
		return fmt.Errorf("prefix %q was created with --shards %d; this process has %d", prefix, have.Shards, want.Shards)
	case have.SlotMillis != want.SlotMillis:
		return fmt.Errorf("prefix %q was created with --slot %dms; this process has %dms", prefix, have.SlotMillis, want.SlotMillis)
	}
	return nil
}

// LoadRegistration reads what is recorded for the prefix (jetstream.ErrKeyNotFound: no
// process has served it yet).
func LoadRegistration(ctx context.Context, kv jetstream.KeyValue) (Registration, error) {
	actx, cancel := context.WithTimeout(ctx, attemptTimeout)
	defer cancel()
	e, err := kv.Get(actx, registryKey)
	if err != nil {
		return Registration{}, err
	}
	var reg Registration
	if err := json.Unmarshal(e.Value(), &reg); err != nil {
		return Registration{}, fmt.Errorf("the registry is unreadable: %w", err)
	}
	return reg, nil
}
