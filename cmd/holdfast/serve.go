package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/bridge"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/events"
	"github.com/holdfast/holdfast/internal/rafttiming"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/natsconn"
	"github.com/holdfast/holdfast/persistence"
	"github.com/holdfast/holdfast/server"
)

// Bounds of the serve flags beyond what kernel.Config.Validate checks.
const (
	serveMaxShards = 1024
	// maxSnapshotEvery bounds the journal a restart or a failover replays.
	maxSnapshotEvery = 10_000_000
	serveLayoutFile  = "holdfast.json"
	serveLayoutV1    = 1
)

// serveConfig is the parsed command line of `holdfast serve`.
type serveConfig struct {
	data       string
	listen     string
	natsURL    string
	natsOpts   []nats.Option     // credentials and TLS of an external NATS
	raftTiming rafttiming.Timing // --raft-timing (zero: nats-server's)
	// natsCluster clusters the embedded NATS server (--cluster, --routes, --cluster_name).
	natsCluster server.EmbeddedCluster
	prefix      string
	shards      uint32
	slot        time.Duration
	kernel      kernel.Config
	// maxMemory is the retention memory of the whole process, split evenly over the shards
	// once their count is known (the data directory may fix it); explicit table bounds win.
	maxMemory      uint64
	explicitBounds map[string]bool // also says whether --shards and --slot were given
	dedupeWindow   time.Duration
	historyWindow  time.Duration
	metricsListen  string
	logLevel       slog.Level
	logJSON        bool
	events         events.Config
	listenExplicit bool
	testHooksDir   string
	journal        string
	node           string
	replicas       int
	ownershipTTL   time.Duration
	snapshotEvery  int
	journalWindow  int
	journalLayout  string
	pprof          bool
	holders        bridge.Holders
}

// serveCmd is the command line of `holdfast serve`. Every flag but --test-hooks-dir can
// also come from HOLDFAST_<FLAG> (upper case, '-' as '_': HOLDFAST_MAX_MEMORY=16GiB), as a
// container or a systemd unit configures a service; the command line wins (serveEnv).
type serveCmd struct {
	Data                  string        `name:"data" default:"./holdfast-data" placeholder:"DIR" help:"Data directory: journals, snapshots, the embedded JetStream store."`
	Listen                string        `name:"listen" default:"127.0.0.1:4222" placeholder:"HOST:PORT" help:"Embedded NATS client listener (port 0: any free port)."`
	NATS                  string        `name:"nats" placeholder:"URL" help:"Connect to this existing NATS deployment (URLs, comma-separated) instead of embedding one; it must have JetStream."`
	Cluster               string        `name:"cluster" placeholder:"URL" help:"Cluster the embedded NATS server: this node's route listener, nats://HOST:PORT (nats-server's --cluster). The journal is then jetstream."`
	Routes                string        `name:"routes" placeholder:"URLS" help:"With --cluster: the route listeners of the cluster's nodes, comma-separated (nats-server's --routes; this node's own may be among them)."`
	ClusterName           string        `name:"cluster_name" placeholder:"NAME" help:"With --cluster: the cluster's name, the same on every node (default holdfast)."`
	Prefix                string        `name:"prefix" default:"${prefix}" help:"Subject prefix: requests on <prefix>.v1.<tenant>.<object>.<verb>."`
	Shards                uint          `name:"shards" default:"8" placeholder:"COUNT" help:"Shard count, fixed when the data directory is created."`
	Slot                  time.Duration `name:"slot" default:"100ms" help:"Slot length: the unit of logical time (whole milliseconds)."`
	MaxTTL                time.Duration `name:"max-ttl" default:"1h" help:"Largest ttl_ms accepted, at most 1h."`
	DedupeWindow          time.Duration `name:"dedupe-window" default:"10m" help:"How long an operation_id's outcome is remembered."`
	HistoryWindow         time.Duration `name:"history-window" default:"10m" help:"How long an ended lease stays readable."`
	MaxMemory             byteSize      `name:"max-memory" default:"${max_memory}" placeholder:"BYTES" help:"Bytes the shards' operation and lease tables may hold, over all shards (e.g. 8GiB); sizes --max-operations and --max-leases unless they are given."`
	MaxResources          int           `name:"max-resources" default:"${max_resources}" help:"Resources per shard."`
	MaxLeases             int           `name:"max-leases" default:"${max_leases}" help:"Leases per shard, live and ended within the history window (also sizes the member table, the expiry index and the range value table); default from --max-memory."`
	MaxBundle             int           `name:"max-bundle" default:"${max_bundle}" help:"Members per lease."`
	MaxOperations         int           `name:"max-operations" default:"${max_operations}" help:"Remembered operation outcomes per shard; default from --max-memory."`
	MaxPools              int           `name:"max-pools" default:"${max_pools}" help:"Pools per shard."`
	MaxRanges             int           `name:"max-ranges" default:"${max_ranges}" help:"Value ranges per shard."`
	MetricsListen         string        `name:"metrics-listen" default:"127.0.0.1:9464" placeholder:"HOST:PORT" help:"Prometheus /metrics, /livez and /readyz (also /healthz) (empty: no metrics listener)."`
	Pprof                 bool          `name:"pprof" help:"Also serve Go's profiler (/debug/pprof) on the metrics listener."`
	LogLevel              string        `name:"log-level" default:"info" placeholder:"LEVEL" help:"Log level: debug, info, warn or error."`
	LogFormat             string        `name:"log-format" default:"text" placeholder:"FORMAT" help:"Log format: text or json."`
	EventsMaxAge          time.Duration `name:"events-max-age" default:"${events_max_age}" help:"Max age of the HOLDFAST_EVENTS stream when this process creates it (0: unlimited)."`
	EventsMaxBytes        byteSize      `name:"events-max-bytes" default:"${events_max_bytes}" placeholder:"BYTES" help:"Max bytes of the HOLDFAST_EVENTS stream when this process creates it (0: unlimited)."`
	EventsDuplicateWindow time.Duration `name:"events-duplicate-window" default:"${events_duplicate_window}" help:"Duplicate window of the HOLDFAST_EVENTS stream (at least 10s): a restart republishes what may not have been stored, and the stream drops the copies within it, so it should cover a restart."`
	Journal               string        `name:"journal" placeholder:"KIND" help:"Where shard journals and snapshots live: file (this process's --data; the default with an embedded NATS) or jetstream (replicated in JetStream, shared by a cluster of processes; the default with --nats)."`
	Node                  string        `name:"node" placeholder:"NAME" help:"This process's name in a cluster (default: the host name)."`
	Replicas              int           `name:"replicas" default:"1" help:"JetStream replicas of journals, snapshots and the cluster bucket: 1 or 3."`
	SnapshotEvery         int           `name:"snapshot-every" default:"${snapshot_every}" placeholder:"COUNT" help:"Entries a shard journals between snapshots; its journal is compacted below each, and a restart or failover replays at most this many."`
	JournalLayout         string        `name:"journal-layout" default:"auto" enum:"auto,feed,streams" help:"How a cluster this node creates keeps its journals (--journal jetstream; recorded, so only the first node's counts): feed (each shard's journal on its subject of HOLDFAST_EVENTS, one replicated write storing a batch and its events; losing the server that leads the stream holds every shard for one election), streams (a stream per journal, the events published beside it: a second replicated write, and a lost server holds only its own shards), or auto (feed with --cluster and --raft-timing faster, where an election takes under a second; else streams)."`
	JournalWindow         int           `name:"journal-window" default:"${journal_window}" placeholder:"COUNT" help:"Batches a shard keeps in flight on a replicated journal (--journal jetstream): 1 gathers bigger batches, more pipelines appends where a quorum round is long."`
	OwnershipTTL          time.Duration `name:"ownership-ttl" default:"${ownership_ttl}" help:"How long a node's claim on a shard lasts without renewal (whole seconds); a node stops serving a shard before it lapses."`
	RaftTiming            string        `name:"raft-timing" default:"default" enum:"default,fast,faster" help:"Raft timing of the embedded NATS server (with --cluster): default (nats-server's: elections after 4-9 s without a leader's heartbeat), fast (1.5-3.5 s, heartbeats every 50 ms) or faster (0.4-0.9 s, heartbeats every 50 ms; for disks whose fsync stays well under 400 ms): a lost machine's journals, bucket and events stream take writes again sooner. Every node should say the same."`
	Holders               string        `name:"holders" default:"names" enum:"names,bound" help:"names: a holder_id is a name, and whoever gives it acts as that holder; bound: a holder_id belongs to the calling NATS user (its name, or one under <user>/), read from the Nats-Request-Info header of a service import with share: true, and views show a holder only to it and to --operators."`
	Operators             []string      `name:"operators" placeholder:"USERS" sep:"," help:"With --holders bound: NATS users (user or ACCOUNT/user, comma-separated) that act for any holder and see every holder."`
	authFlags
	TestHooksDir string `name:"test-hooks-dir" placeholder:"DIR" hidden:"" help:"TESTS ONLY: a directory whose files move the clock and fail journal writes (see testhooks.go)."`
}

func (serveCmd) Help() string {
	return `Runs the Holdfast service. With no flags it embeds a NATS server with JetStream
(stored under --data), listens for NATS clients on 127.0.0.1:4222, and logs one
line with the word "ready" and the NATS URL clients should use once it serves.
SIGINT or SIGTERM stops it cleanly. Every flag can also be set as HOLDFAST_<FLAG>
(HOLDFAST_MAX_MEMORY=16GiB); the command line wins.`
}

// flagDefaults are the defaults the flag declarations name as ${...}: the packages' own.
func flagDefaults() kong.Vars {
	def := kernel.DefaultConfig()
	mem := byteSize(defaultMaxMemory)
	evb := byteSize(events.DefaultMaxBytes)
	return kong.Vars{
		"prefix":                  contract.DefaultPrefix,
		"max_memory":              mem.String(),
		"max_resources":           strconv.Itoa(def.MaxResources),
		"max_leases":              strconv.Itoa(def.MaxLeases),
		"max_bundle":              strconv.Itoa(def.MaxBundle),
		"max_operations":          strconv.Itoa(def.MaxOperations),
		"max_pools":               strconv.Itoa(def.MaxPools),
		"max_ranges":              strconv.Itoa(def.MaxRanges),
		"events_max_age":          events.DefaultMaxAge.String(),
		"events_max_bytes":        evb.String(),
		"events_duplicate_window": events.DefaultDuplicateWindow.String(),
		"ownership_ttl":           server.DefaultOwnershipTTL.String(),
		"snapshot_every":          strconv.Itoa(actors.DefaultSnapshotEvery),
		"journal_window":          strconv.Itoa(actors.DefaultJournalWindow),
	}
}

// serveEnv gives every serve flag its environment variable (one rule, applied to the
// parsed declarations rather than written into each tag), except the test hooks.
func serveEnv(app *kong.Application) {
	for _, n := range app.Children {
		if n.Name != "serve" {
			continue
		}
		for _, f := range n.Flags {
			if f.Name == "test-hooks-dir" || f.Name == "help" {
				continue
			}
			f.Envs = []string{serveEnvVar(f.Name)}
			f.Tag.Envs = f.Envs
		}
	}
}

// serveEnvVar is the environment variable of a serve flag.
func serveEnvVar(flagName string) string {
	return "HOLDFAST_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// config checks the flags (explicit: the ones given) and builds the configuration.
func (f *serveCmd) config(explicit map[string]bool) (*serveConfig, error) {
	def := kernel.DefaultConfig()
	auth := f.authFlags.settings()
	c := &serveConfig{data: f.Data, listen: f.Listen, natsURL: f.NATS, prefix: f.Prefix,
		listenExplicit: explicit["listen"], metricsListen: f.MetricsListen,
		events:       events.Config{MaxAge: f.EventsMaxAge, MaxBytes: int64(min(uint64(f.EventsMaxBytes), 1<<62)), DuplicateWindow: f.EventsDuplicateWindow},
		testHooksDir: f.TestHooksDir, maxMemory: uint64(f.MaxMemory), explicitBounds: explicit}
	if c.data == "" {
		return nil, errors.New("--data: must not be empty")
	}
	c.journal, c.node, c.replicas, c.ownershipTTL, c.pprof = f.Journal, f.Node, f.Replicas, f.OwnershipTTL, f.Pprof
	if err := c.natsFrom(f, auth); err != nil {
		return nil, err
	}
	if f.SnapshotEvery < 1 || f.SnapshotEvery > maxSnapshotEvery {
		return nil, fmt.Errorf("--snapshot-every: between 1 and %d entries, got %d", maxSnapshotEvery, f.SnapshotEvery)
	}
	c.snapshotEvery = f.SnapshotEvery
	if f.JournalWindow < 1 || f.JournalWindow > actors.MaxJournalWindow {
		return nil, fmt.Errorf("--journal-window: between 1 and %d batches, got %d", actors.MaxJournalWindow, f.JournalWindow)
	}
	c.journalWindow = f.JournalWindow
	c.journalLayout = f.JournalLayout
	if f.RaftTiming != "default" {
		if !c.natsCluster.Enabled() {
			return nil, fmt.Errorf("--raft-timing %s: only for an embedded NATS server clustered with --cluster (a NATS deployment's timing is its servers')", f.RaftTiming)
		}
		c.raftTiming = map[string]rafttiming.Timing{"fast": rafttiming.Fast, "faster": rafttiming.Faster}[f.RaftTiming]
	}
	c.holders = bridge.Holders{Bound: f.Holders == "bound", Operators: f.Operators}
	if len(f.Operators) > 0 && !c.holders.Bound {
		return nil, fmt.Errorf("--operators: only with --holders bound")
	}
	if c.holders.Bound && c.natsURL == "" {
		return nil, fmt.Errorf("--holders bound: needs --nats, a NATS deployment with accounts whose service imports share their callers; the embedded server has no accounts and names no caller")
	}
	if err := c.timesFrom(f); err != nil {
		return nil, err
	}
	k := def
	k.MaxTTLMillis = uint64(f.MaxTTL / time.Millisecond)
	c.dedupeWindow, c.historyWindow = f.DedupeWindow, f.HistoryWindow
	k.MaxResources, k.MaxBundle, k.MaxOperations = f.MaxResources, f.MaxBundle, f.MaxOperations
	k.MaxPools, k.MaxRanges = f.MaxPools, f.MaxRanges
	if f.MaxLeases < 1 || f.MaxOperations < 1 {
		return nil, fmt.Errorf("table bounds: --max-leases and --max-operations must be at least 1")
	}
	if c.maxMemory < 1<<20 {
		return nil, fmt.Errorf("--max-memory: at least 1MiB, got %v", &f.MaxMemory)
	}
	c.kernel = k
	c.setSlot(c.slot)
	if err := c.sizeTables(c.shards, f.MaxLeases, f.MaxOperations); err != nil {
		return nil, err
	}
	if err := c.logFrom(f); err != nil {
		return nil, err
	}
	return c, nil
}

// natsFrom takes the NATS server to use and how the journal is kept: an external NATS
// (with its credentials), or the embedded one, clustered or not.
func (c *serveConfig) natsFrom(f *serveCmd, auth natsconn.Settings) error {
	// An external NATS is named by --nats, NATS_URL or a nats context given by --context
	// or NATS_CONTEXT; its credentials come from the flags or the context.
	if c.natsURL != "" || os.Getenv("NATS_URL") != "" || auth.Context != "" || os.Getenv("NATS_CONTEXT") != "" {
		auth.URL = c.natsURL
		u, opts, err := auth.Resolve("")
		if err != nil {
			return fmt.Errorf("--nats: %w", err)
		}
		if u == "" {
			return errors.New("--nats: the nats context names no server URL")
		}
		c.natsURL, c.natsOpts = u, opts
	} else if auth != (natsconn.Settings{}) {
		return errors.New("--creds, --nkey, --user, --password, --token and --tls* are for an external NATS (--nats); the embedded one takes no credentials")
	}
	if f.Cluster != "" || f.Routes != "" || f.ClusterName != "" {
		if c.natsURL != "" {
			return errors.New("--cluster, --routes and --cluster_name cluster the embedded NATS server: not with --nats")
		}
		c.natsCluster = server.EmbeddedCluster{Listen: f.Cluster, Name: f.ClusterName}
		for _, r := range strings.Split(f.Routes, ",") {
			if r = strings.TrimSpace(r); r != "" {
				c.natsCluster.Routes = append(c.natsCluster.Routes, r)
			}
		}
		if err := c.natsCluster.Check(); err != nil {
			return err
		}
	}
	if c.journal == "" {
		c.journal = server.JournalFile
		if c.natsURL != "" || c.natsCluster.Enabled() {
			c.journal = server.JournalJetStream
		}
	}
	if c.journal != server.JournalFile && c.journal != server.JournalJetStream {
		return fmt.Errorf("--journal: file or jetstream, got %q", c.journal)
	}
	if c.replicas != 1 && c.replicas != 3 {
		return fmt.Errorf("--replicas: 1 or 3, got %d", c.replicas)
	}
	return nil
}

// timesFrom checks the prefix, the shard count and the flags that are times: ownership,
// slot, the longest TTL, the windows.
func (c *serveConfig) timesFrom(f *serveCmd) error {
	if c.ownershipTTL < time.Second || c.ownershipTTL%time.Second != 0 {
		return fmt.Errorf("--ownership-ttl: whole seconds, at least 1s, got %v", c.ownershipTTL)
	}
	if err := contract.ValidPrefix(c.prefix); err != nil {
		return fmt.Errorf("--prefix: %w", err)
	}
	if f.Shards < 1 || f.Shards > serveMaxShards {
		return fmt.Errorf("--shards: must be between 1 and %d, got %d", serveMaxShards, f.Shards)
	}
	c.shards = uint32(f.Shards)
	if f.Slot < time.Millisecond || f.Slot%time.Millisecond != 0 {
		return fmt.Errorf("--slot: must be a whole number of milliseconds, at least 1ms, got %v", f.Slot)
	}
	c.slot = f.Slot
	if f.MaxTTL > kernel.MaxTTLMillisLimit*time.Millisecond {
		return fmt.Errorf("--max-ttl: at most 1h, got %v", f.MaxTTL)
	}
	if f.MaxTTL < time.Millisecond || f.MaxTTL%time.Millisecond != 0 {
		return fmt.Errorf("--max-ttl: must be a whole number of milliseconds, at least 1ms, got %v", f.MaxTTL)
	}
	for _, w := range []struct {
		name string
		d    time.Duration
	}{{"dedupe-window", f.DedupeWindow}, {"history-window", f.HistoryWindow}} {
		if w.d < c.slot {
			return fmt.Errorf("--%s: must be at least one slot (%v), got %v", w.name, c.slot, w.d)
		}
	}
	if f.EventsDuplicateWindow < events.MinDuplicateWindow {
		return fmt.Errorf("--events-duplicate-window: at least %v, got %v", events.MinDuplicateWindow, f.EventsDuplicateWindow)
	}
	if f.EventsMaxAge != 0 && f.EventsMaxAge < f.EventsDuplicateWindow {
		return fmt.Errorf("--events-max-age: must not be shorter than the duplicate window (%v), got %v", f.EventsDuplicateWindow, f.EventsMaxAge)
	}
	return nil
}

// logFrom takes the log's level and format.
func (c *serveConfig) logFrom(f *serveCmd) error {
	switch strings.ToLower(f.LogLevel) {
	case "debug":
		c.logLevel = slog.LevelDebug
	case "info":
		c.logLevel = slog.LevelInfo
	case "warn", "warning":
		c.logLevel = slog.LevelWarn
	case "error":
		c.logLevel = slog.LevelError
	default:
		return fmt.Errorf("--log-level: debug, info, warn or error, got %q", f.LogLevel)
	}
	switch f.LogFormat {
	case "text":
	case "json":
		c.logJSON = true
	default:
		return fmt.Errorf("--log-format: text or json, got %q", f.LogFormat)
	}
	return nil
}

// defaultMaxMemory is --max-memory's default: kernel.DefaultShardMemory for each of the
// default 8 shards.
const defaultMaxMemory = 8 * kernel.DefaultShardMemory

// sizeTables sets the rate-driven table bounds for shards shards: from --max-memory split
// evenly, except the bounds given explicitly. The tables that grow with leases keep their
// default proportions to --max-leases.
func (c *serveConfig) sizeTables(shards uint32, maxLeases, maxOperations int) error {
	k := &c.kernel
	k.SizeForMemory(c.maxMemory / uint64(shards))
	sizeLeaseTables(&k.Shape, c.explicitBounds, maxLeases, maxOperations)
	if err := k.Validate(); err != nil {
		return fmt.Errorf("table bounds: %w", err)
	}
	return nil
}

// sizeLeaseTables applies an explicit --max-leases (with the tables that grow with leases,
// in the default proportions) and --max-operations over what --max-memory sized.
func sizeLeaseTables(s *kernel.Shape, explicit map[string]bool, maxLeases, maxOperations int) {
	if explicit["max-leases"] {
		s.MaxLeases = maxLeases
		s.MaxExpirations = maxLeases
		s.MaxMembers = min(4*maxLeases, 1<<30)
		s.MaxRangeValues = min(2*maxLeases, 1<<30)
	}
	if explicit["max-operations"] {
		s.MaxOperations = maxOperations
	}
}

// setSlot sets the slot length and what is counted in slots.
func (c *serveConfig) setSlot(slot time.Duration) {
	c.slot = slot
	c.kernel.SlotMillis = uint64(slot / time.Millisecond)
	c.kernel.DedupeWindowSlots = slotsCeil(c.dedupeWindow, slot)
	c.kernel.HistoryWindowSlots = slotsCeil(c.historyWindow, slot)
}

func slotsCeil(d, slot time.Duration) uint64 {
	return uint64((d + slot - 1) / slot)
}

// serveLayout is what the data directory remembers about how it was created: the
// settings fixed for its life (docs/api.md §6) — the shard count, which routes every
// request, and the slot length, which every journal's slots count in. The settings that
// may change are journaled by each shard (configure entries), not kept here.
type serveLayout struct {
	Format int    `json:"format"`
	Shards uint32 `json:"shards"`
	// SlotMillis is absent in directories from before it was recorded: their first start
	// since records the --slot it runs with.
	SlotMillis uint64 `json:"slot_ms,omitempty"`
}

var serveShardDir = regexp.MustCompile(`^shard-[0-9]{3,}$`)

// ensureLayout fixes the settings a data directory cannot change: the first start
// records them, later starts adopt them, and an explicit different --shards or --slot is
// refused before anything is served. (A replay under another slot length would give
// every journaled ttl another deadline, and journaled expiries would miss.)
func ensureLayout(dir string, want serveLayout, explicit map[string]bool) (serveLayout, error) {
	l, record, err := planLayout(dir, want, explicit)
	if err == nil && record {
		err = writeLayout(dir, l)
	}
	return l, err
}

// planLayout is ensureLayout without the write: the layout to serve with, and whether it
// is still to be recorded. serve records it only once its listeners are up, so a start
// that fails on a taken port fixes nothing on disk and a retry may choose another
// --shards. (A start that dies after serving and before recording leaves its shard
// directories, which tell the count as they do for a directory from before the file.)
func planLayout(dir string, want serveLayout, explicit map[string]bool) (serveLayout, bool, error) {
	path := filepath.Join(dir, serveLayoutFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		var l serveLayout
		if err := json.Unmarshal(b, &l); err != nil || l.Format < serveLayoutV1 || l.Shards == 0 {
			return serveLayout{}, false, fmt.Errorf("%s: not a Holdfast layout file (%v)", path, err)
		}
		if l.Format > serveLayoutV1 {
			return serveLayout{}, false, fmt.Errorf("%s: layout format %d, and this build reads format %d: the data directory was written by a newer Holdfast", path, l.Format, serveLayoutV1)
		}
		if explicit["shards"] && l.Shards != want.Shards {
			return serveLayout{}, false, fmt.Errorf("data directory %s was created with --shards %d; the shard count of a data directory cannot change (got --shards %d)", dir, l.Shards, want.Shards)
		}
		if l.SlotMillis == 0 { // recorded before --slot was: the journal was written with this one
			l.SlotMillis = want.SlotMillis
			return l, true, nil
		}
		if explicit["slot"] && l.SlotMillis != want.SlotMillis {
			return serveLayout{}, false, fmt.Errorf("data directory %s was created with --slot %v; the slot length of a data directory cannot change (got --slot %v)",
				dir, time.Duration(l.SlotMillis)*time.Millisecond, time.Duration(want.SlotMillis)*time.Millisecond)
		}
		return l, false, nil
	case !errors.Is(err, os.ErrNotExist):
		return serveLayout{}, false, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return serveLayout{}, false, err
	}
	// A directory from before the layout file: its shard directories tell the count.
	entries, err := os.ReadDir(dir)
	if err != nil {
		return serveLayout{}, false, err
	}
	found := uint32(0)
	for _, e := range entries {
		if e.IsDir() && serveShardDir.MatchString(e.Name()) {
			found++
		}
	}
	l := serveLayout{Format: serveLayoutV1, Shards: want.Shards, SlotMillis: want.SlotMillis}
	if found > 0 && found != want.Shards {
		if explicit["shards"] {
			return serveLayout{}, false, fmt.Errorf("data directory %s holds %d shards; the shard count of a data directory cannot change (got --shards %d)", dir, found, want.Shards)
		}
		l.Shards = found
	}
	return l, true, nil
}

// writeLayout records l durably (persistence.WriteFile).
func writeLayout(dir string, l serveLayout) error {
	path := filepath.Join(dir, serveLayoutFile)
	data, _ := json.Marshal(l)
	err := persistence.WriteFile(path, func(f *os.File) error {
		_, err := f.Write(append(data, '\n'))
		return err
	})
	if err != nil {
		return fmt.Errorf("recording the layout in %s: %w", path, err)
	}
	return nil
}

// adopt serves with the data directory's shard count and slot length where the flags
// left them to it.
func (c *serveConfig) adopt(layout serveLayout, log *slog.Logger) error {
	if layout.Shards != c.shards {
		log.Info("using the data directory's shard count", "shards", layout.Shards, "data", c.data)
		c.shards = layout.Shards
		if err := c.sizeTables(layout.Shards, c.kernel.MaxLeases, c.kernel.MaxOperations); err != nil {
			return err
		}
	}
	if slot := time.Duration(layout.SlotMillis) * time.Millisecond; slot != c.slot {
		log.Info("using the data directory's slot length", "slot", slot, "data", c.data)
		c.setSlot(slot)
		if err := c.kernel.Validate(); err != nil {
			return fmt.Errorf("with the data directory's slot length %v: %w", slot, err)
		}
	}
	return nil
}

// serveNATSLog routes the embedded server's log into slog.

func (f *serveCmd) Run(e *env, kctx *kong.Context) error {
	c, err := f.config(explicitFlags(kctx))
	if err != nil {
		fmt.Fprintf(e.stderr, "holdfast serve: %v\n", err)
		return exitCode(exitUsage)
	}
	return exitCode(serve(e.ctx, c, e.stderr))
}

// serve runs the configured service until ctx is done, logging to stderr; it returns the
// process exit code.
func serve(ctx context.Context, c *serveConfig, stderr io.Writer) int {
	opts := &slog.HandlerOptions{Level: c.logLevel}
	var h slog.Handler = slog.NewTextHandler(stderr, opts)
	if c.logJSON {
		h = slog.NewJSONHandler(stderr, opts)
	}
	log := slog.New(h)
	if err := runServe(ctx, c, log); err != nil {
		log.Error("holdfast serve failed", "err", err)
		return 1
	}
	log.Info("stopped")
	return 0
}

// runServe wires NATS, the bridge and the shards, serves until ctx is done, and stops
// in order: requests drained, shards stopped (journals flushed), events flushed, NATS
// shut down.
func runServe(ctx context.Context, c *serveConfig, log *slog.Logger) (err error) {
	var cleanups []func()
	defer func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}()
	layout, record, err := planLayout(c.data, serveLayout{Shards: c.shards, SlotMillis: c.kernel.SlotMillis}, c.explicitBounds)
	if err != nil {
		return err
	}
	unlock, err := lockDataDir(c.data)
	if err != nil {
		return err
	}
	cleanups = append(cleanups, unlock)
	if err := c.adopt(layout, log); err != nil {
		return err
	}
	// Before the embedded NATS server, the bridge and the shards start: all of them run
	// under it.
	procs := serveProcs(c.shards)
	if c.natsURL != "" && c.listenExplicit {
		log.Warn("--listen is ignored with --nats")
	}
	cfg := server.Config{Data: c.data, Shards: c.shards, Slot: c.slot, Kernel: c.kernel, Prefix: c.prefix,
		NATSURL: c.natsURL, NATSOptions: c.natsOpts, NATSCluster: c.natsCluster, Listen: c.listen, MetricsListen: c.metricsListen,
		Events: c.events, Logger: log,
		Journal: c.journal, Node: c.node, Replicas: c.replicas, OwnershipTTL: c.ownershipTTL, Pprof: c.pprof,
		SnapshotEvery: c.snapshotEvery, JournalWindow: c.journalWindow, JournalLayout: c.journalLayout, Holders: c.holders, RaftTiming: c.raftTiming}
	if c.testHooksDir != "" {
		hooks := startTestHooks(c.testHooksDir)
		cleanups = append(cleanups, hooks.close)
		cfg.Clock, cfg.Faults, cfg.BundleStep = hooks, hooks.faults(), hooks.bundleStep
		log.Warn("test hooks enabled: the clock, journal failures and kills at bundle steps are driven from files", "dir", c.testHooksDir)
	}
	log.Info("starting", "data", c.data, "shards", c.shards, "gomaxprocs", procs)
	srv, err := server.Start(ctx, cfg)
	if err != nil {
		return err
	}
	if record {
		if err := writeLayout(c.data, layout); err != nil {
			_ = srv.Shutdown(context.Background())
			return err
		}
	}
	console := ""
	if srv.MetricsURL() != "" {
		console = srv.MetricsURL() + "/"
	}
	log.Info("ready", "nats", natsconn.Redact(srv.URL()), "prefix", c.prefix, "shards", c.shards, "data", c.data,
		"embedded_nats", srv.Embedded(), "metrics", srv.MetricsURL(), "version", bridge.Version, "journal", c.journal,
		"console", console)

	<-ctx.Done()
	log.Info("stopping: draining requests")
	_ = srv.Shutdown(context.Background()) // it logs what did not finish
	return nil
}
