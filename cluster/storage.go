package cluster

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/persistence"
)

// snapshotsKept is how many snapshots of a shard the object store keeps: the newest and
// one to fall back on.
const snapshotsKept = 2

// Storage is a shard's actors.Storage in JetStream: the journal in its stream, snapshots
// in the object store, the published position in the cluster bucket. Any node can open
// it; the journal's claim at Epoch decides which one can write.
type Storage struct {
	JS       jetstream.JetStream
	Names    Names
	Shard    uint32
	Replicas int
	Node     string
	Epoch    uint64
	Objects  jetstream.ObjectStore
	Bucket   jetstream.KeyValue
	Timeout  time.Duration
	// JournalCall bounds each JetStream call of the journal, and a write of the published
	// position (contract.Timing); 2 s when 0.
	JournalCall time.Duration
	// Valid, when set, says whether the claim at Epoch is not known lost: the journal is
	// not claimed on a lost claim (its shard is another node's by now).
	Valid func() bool
	// Logger gets the journal's news (nil: none).
	Logger *slog.Logger
	// Ctx, when set, ends the shard's loading (the journal's claim and replay, the
	// snapshot's read): a node that stops does not wait out a load JetStream cannot
	// answer (a cluster without quorum).
	Ctx context.Context
	// Feed, when set, keeps the journal on the shard's subject of the events stream.
	Feed *FeedLayout
}

var _ actors.Storage = (*Storage)(nil)

func (s *Storage) ctx() (context.Context, context.CancelFunc) {
	t := s.Timeout
	if t == 0 {
		t = 30 * time.Second
	}
	parent := s.Ctx
	if parent == nil {
		parent = context.Background()
	}
	return context.WithTimeout(parent, t)
}

// callCtx bounds one call made while the shard serves (JournalCall; the journal's own
// default when 0).
func (s *Storage) callCtx() (context.Context, context.CancelFunc) {
	return within(s.JournalCall, openCall)
}

// within is a context ending after t, or after def when t is 0.
func within(t, def time.Duration) (context.Context, context.CancelFunc) {
	if t == 0 {
		t = def
	}
	return context.WithTimeout(context.Background(), t)
}

// OpenJournal claims the shard's journal at the storage's epoch.
func (s *Storage) OpenJournal() (persistence.Journal, error) {
	if s.Valid != nil && !s.Valid() {
		return nil, fmt.Errorf("the claim on shard %d at epoch %d was lost before its journal was claimed", s.Shard, s.Epoch)
	}
	ctx, cancel := s.ctx()
	defer cancel()
	cfg := JournalConfig{JS: s.JS, Names: s.Names, Shard: s.Shard, Replicas: s.Replicas,
		Node: s.Node, Epoch: s.Epoch, Timeout: s.JournalCall, Logger: s.Logger, Ctx: s.Ctx}
	if s.Feed != nil {
		return OpenFeed(ctx, FeedConfig{JournalConfig: cfg, Stream: s.Feed.Stream, Encode: s.Feed.Encode, Metrics: s.Feed.Metrics})
	}
	return OpenJournal(ctx, cfg)
}

func (s *Storage) snapshotPrefix() string { return fmt.Sprintf("shard-%d/", s.Shard) }

// snapshotName sorts by lsn.
func (s *Storage) snapshotName(lsn uint64) string {
	return fmt.Sprintf("%s%020d", s.snapshotPrefix(), lsn)
}

// snapshots lists this shard's snapshot objects, newest first; with deleted, also the
// markers that removed ones left behind.
func (s *Storage) snapshots(ctx context.Context, deleted bool) ([]*jetstream.ObjectInfo, error) {
	var opts []jetstream.ListObjectsOpt
	if deleted {
		opts = append(opts, jetstream.ListObjectsShowDeleted())
	}
	var all []*jetstream.ObjectInfo
	err := attempts(ctx, func(actx context.Context) (err error) {
		all, err = s.Objects.List(actx, opts...)
		return err
	})
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var mine []*jetstream.ObjectInfo
	for _, o := range all {
		if (deleted || !o.Deleted) && strings.HasPrefix(o.Name, s.snapshotPrefix()) {
			mine = append(mine, o)
		}
	}
	sort.Slice(mine, func(a, b int) bool { return mine[a].Name > mine[b].Name })
	return mine, nil
}

// LoadSnapshot reads the newest snapshot; one that cannot be read or does not check out
// is skipped for the one before it (the object store verifies its digest).
func (s *Storage) LoadSnapshot() (persistence.Snapshot, bool, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	objs, err := s.snapshots(ctx, false)
	if err != nil {
		return persistence.Snapshot{}, false, fmt.Errorf("listing snapshots of shard %d: %w", s.Shard, err)
	}
	var skipped []string
	for _, o := range objs {
		lsn, err1 := strconv.ParseUint(o.Metadata["lsn"], 10, 64)
		slot, err2 := strconv.ParseUint(o.Metadata["slot"], 10, 64)
		if err1 != nil || err2 != nil {
			skipped = append(skipped, o.Name+": no lsn and slot")
			continue
		}
		data, err := s.Objects.GetBytes(ctx, o.Name)
		if err != nil {
			skipped = append(skipped, o.Name+": "+err.Error())
			continue
		}
		return persistence.Snapshot{LSN: lsn, Slot: slot, Payload: data, Skipped: skipped}, true, nil
	}
	return persistence.Snapshot{Skipped: skipped}, false, nil
}

// WriteSnapshot stores the state at lsn, then removes all but the newest snapshotsKept. A
// stale owner's snapshot is older than the current owner's and is never the newest.
func (s *Storage) WriteSnapshot(lsn, slot uint64, payload []byte) error {
	ctx, cancel := s.ctx()
	defer cancel()
	_, err := s.Objects.Put(ctx, jetstream.ObjectMeta{Name: s.snapshotName(lsn),
		Metadata: map[string]string{"lsn": strconv.FormatUint(lsn, 10), "slot": strconv.FormatUint(slot, 10),
			"node": s.Node, "epoch": strconv.FormatUint(s.Epoch, 10)}}, bytes.NewReader(payload))
	if err != nil {
		return fmt.Errorf("storing snapshot of shard %d at lsn %d: %w", s.Shard, lsn, err)
	}
	objs, err := s.snapshots(ctx, true)
	if err != nil {
		return nil // the snapshot is stored; old ones are removed next time
	}
	kept := 0
	for _, o := range objs {
		if !o.Deleted && kept < snapshotsKept {
			kept++
			continue
		}
		if err := s.removeSnapshot(ctx, o); err != nil {
			return nil // removed next time
		}
	}
	return nil
}

// removeSnapshot deletes a snapshot and then its name from the store. An object store's
// delete purges the chunks but leaves a marker under the name for good (a meta message
// per name), and snapshots are named by lsn: without purging the markers the store, and
// every listing of it, would grow by one per snapshot forever. The meta subject is
// $O.<bucket>.M.<name in URL-safe base64>, the object store's layout (ADR-20).
func (s *Storage) removeSnapshot(ctx context.Context, o *jetstream.ObjectInfo) error {
	if !o.Deleted {
		if err := s.Objects.Delete(ctx, o.Name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return err
		}
	}
	stream, err := s.JS.Stream(ctx, "OBJ_"+s.Names.Snapshots())
	if err != nil {
		return err
	}
	meta := "$O." + s.Names.Snapshots() + ".M." + base64.URLEncoding.EncodeToString([]byte(o.Name))
	return stream.Purge(ctx, jetstream.WithPurgeSubject(meta))
}

func (s *Storage) publishedKey() string {
	return "published." + strconv.FormatUint(uint64(s.Shard), 10)
}

// ReadPublished reads the shard's published position from the cluster bucket.
func (s *Storage) ReadPublished() (uint64, error) {
	ctx, cancel := s.ctx()
	defer cancel()
	var e jetstream.KeyValueEntry
	err := attempts(ctx, func(actx context.Context) (err error) {
		e, err = s.Bucket.Get(actx, s.publishedKey())
		return err
	})
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(string(e.Value()), 10, 64)
}

// WritePublished records the shard's published position in the cluster bucket. The
// position only moves forward: a lower one (a former owner's, late) is not written. It
// is written while the shard serves, so it is bounded like a journal call: a bucket that
// does not answer (electing a leader) fails the write, and the shard's next one, a
// second later, tries again.
func (s *Storage) WritePublished(lsn uint64) error {
	ctx, cancel := s.callCtx()
	defer cancel()
	val := []byte(strconv.FormatUint(lsn, 10))
	for attempt := 0; attempt < 5; attempt++ {
		e, err := s.Bucket.Get(ctx, s.publishedKey())
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			if _, err = s.Bucket.Create(ctx, s.publishedKey(), val); errors.Is(err, jetstream.ErrKeyExists) {
				continue
			}
			return err
		case err != nil:
			return err
		}
		if have, perr := strconv.ParseUint(string(e.Value()), 10, 64); perr == nil && have >= lsn {
			return nil
		}
		if _, err = s.Bucket.Update(ctx, s.publishedKey(), val, e.Revision()); errors.Is(err, jetstream.ErrKeyExists) || isWrongLast(err) {
			continue // written meanwhile: compare again
		}
		return err
	}
	return nil
}
