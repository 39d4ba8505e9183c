package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/cluster"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/events"
	"github.com/holdfast/holdfast/internal/rafttiming"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/persistence"
)

// Journal kinds (--journal).
const (
	JournalFile      = "file"
	JournalJetStream = "jetstream"
)

// DefaultOwnershipTTL is how long a shard claim lasts without renewal (--ownership-ttl).
const DefaultOwnershipTTL = contract.DefaultOwnershipTTL

// Journal layouts of a new cluster (Config.JournalLayout).
const (
	// LayoutFeed keeps each shard's journal on its subject of the events stream, one
	// replicated append storing a batch and the events before it; the stream's leader is
	// then on every write's path, and losing its server holds every shard for one
	// election of it.
	LayoutFeed = "feed"
	// LayoutStreams keeps a stream per journal, led by the shard's owner, and publishes
	// the events beside it into the events stream: a second replicated write, and a
	// lost server holds only the shards it led.
	LayoutStreams = "streams"
	// LayoutAuto is the feed when its elections are as quick as etcd's (an embedded NATS
	// cluster with --raft-timing faster: under a second), else streams: where an election
	// takes nats-server's 4-9 s, a survivor would wait that long for a lost leader.
	LayoutAuto = "auto"
)

func (c *Config) clusterDefaults() error {
	if c.Journal == "" {
		c.Journal = JournalFile
	}
	switch c.JournalLayout {
	case "":
		c.JournalLayout = LayoutAuto
	case LayoutAuto, LayoutFeed, LayoutStreams:
	default:
		return fmt.Errorf("journal layout %q: want %s, %s or %s", c.JournalLayout, LayoutAuto, LayoutFeed, LayoutStreams)
	}
	if c.Journal != JournalFile && c.Journal != JournalJetStream {
		return fmt.Errorf("journal %q: want %s or %s", c.Journal, JournalFile, JournalJetStream)
	}
	if c.Node == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			host = "holdfast"
		}
		c.Node = host
	}
	if strings.ContainsAny(c.Node, ".*> \t") {
		return fmt.Errorf("node %q: a name without dots, spaces or wildcards", c.Node)
	}
	if c.Replicas == 0 {
		c.Replicas = 1
	}
	if c.Replicas != 1 && c.Replicas != 3 {
		return fmt.Errorf("replicas %d: want 1 or 3", c.Replicas)
	}
	if c.OwnershipTTL == 0 {
		c.OwnershipTTL = DefaultOwnershipTTL
	}
	if c.OwnershipTTL < time.Second || c.OwnershipTTL%time.Second != 0 {
		return fmt.Errorf("ownership ttl %v: whole seconds, at least 1s (JetStream key TTLs are seconds)", c.OwnershipTTL)
	}
	return nil
}

// register records this process for its prefix in the cluster bucket, or refuses to
// serve: a prefix served from one node's data directory is that node's alone. It returns
// the bucket.
func (s *Server) register(ctx context.Context, js jetstream.JetStream) (jetstream.KeyValue, error) {
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	kv, err := cluster.OpenBucket(rctx, js, cluster.NamesFor(s.cfg.Prefix), s.cfg.Replicas)
	if err != nil {
		return nil, err
	}
	reg := cluster.Registration{Journal: s.cfg.Journal, Node: s.cfg.Node, Shards: s.cfg.Shards,
		SlotMillis: uint64(s.cfg.Slot / time.Millisecond), Format: cluster.FeedFormat - 1}
	if s.cfg.Journal == JournalFile {
		if reg.Instance, err = instanceID(s.cfg.Data); err != nil {
			return nil, err
		}
	}
	// A new cluster keeps its journals in the events stream when its layout says so and
	// that stream can hold them; the first node's choice is recorded, and every node
	// follows it.
	if s.clustered() && s.wantFeed() {
		holds, err := events.StreamHoldsJournals(rctx, js)
		if err != nil {
			return nil, err
		}
		if holds {
			reg.Format = cluster.DataFormat
		} else if s.cfg.JournalLayout == LayoutFeed {
			s.log.Warn("the events stream was created by an earlier Holdfast and denies purges, so it cannot hold journals: a new cluster here keeps a stream per journal")
		}
	}
	recorded, err := cluster.Register(rctx, kv, s.cfg.Prefix, reg)
	s.feed = recorded.Feed()
	return kv, err
}

// wantFeed says whether a cluster this process creates keeps its journals in the events
// stream (Config.JournalLayout).
func (s *Server) wantFeed() bool {
	if s.cfg.Events.Disabled {
		return false
	}
	switch s.cfg.JournalLayout {
	case LayoutFeed:
		return true
	case LayoutAuto:
		return s.cfg.NATSCluster.Enabled() && s.cfg.RaftTiming == rafttiming.Faster
	}
	return false
}

// adoptSettings makes this node serve under the cluster's settings: its own when it is
// the first (they are recorded), else the recorded ones, whatever its flags say — one
// node's settings win, so every shard's journal carries one shape whichever node
// journals it. A difference from this node's flags is logged, setting by setting.
func (s *Server) adoptSettings(ctx context.Context, kv jetstream.KeyValue) (cluster.Settings, error) {
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	mine := cluster.Settings{Limits: s.cfg.Kernel.Limits, Shape: s.cfg.Kernel.Shape}
	if mine.Limits.MaxCommandBytes == 0 {
		mine.Limits.MaxCommandBytes = kernel.DefaultMaxCommandBytes
	}
	have, err := cluster.AdoptSettings(actx, kv, mine)
	if err != nil {
		return cluster.Settings{}, err
	}
	if diff := cluster.SettingsDiff(have, mine); len(diff) > 0 {
		s.log.Warn("serving the cluster's settings, not this node's flags (holdfast cluster configure changes them)",
			"cluster", strings.Join(diff, ", "), "revision", have.Shape.Version)
	}
	s.cfg.Kernel.Limits, s.cfg.Kernel.Shape = have.Limits, have.Shape
	return have, nil
}

// configure serves under the cluster's settings as they change: the shards take the
// new limits at once and journal the new shape.
func (s *Server) configure(set cluster.Settings) {
	cfg := s.cfg.Kernel
	cfg.Limits, cfg.Shape = set.Limits, set.Shape
	if err := s.sys.Configure(cfg); err != nil {
		s.log.Error("the cluster's new settings cannot be served", "err", err, "revision", set.Shape.Version)
	}
}

// instanceID names a data directory for good: created once, kept in the directory
// durably (a power loss must not leave it empty: a new name would be refused by the
// registration of the old one).
func instanceID(data string) (string, error) {
	path := filepath.Join(data, "instance")
	b, err := os.ReadFile(path)
	if err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b)), nil
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	var raw [16]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	id := hex.EncodeToString(raw[:])
	if err := os.MkdirAll(data, 0o755); err != nil {
		return "", err
	}
	err = persistence.WriteFile(path, func(f *os.File) error {
		_, err := f.WriteString(id + "\n")
		return err
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// crash stops the process the way a lost machine does as far as the cluster sees it:
// no shard is handed over, claims lapse by their TTL (tests).
func (s *Server) crash() {
	if s.node != nil {
		s.node.Abandon()
	}
	s.runCleanups()
}

// Owners is the cluster's view of live nodes and shard owners ("" none); nil outside a
// cluster.
func (s *Server) Owners(ctx context.Context) (nodes, owners []string, err error) {
	if s.node == nil {
		return nil, nil, nil
	}
	return s.node.Owners(ctx)
}
