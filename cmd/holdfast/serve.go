package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"github.com/nats-io/nats.go"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/holdfast/holdfast/bridge"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/events"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/natsconn"
	"github.com/holdfast/holdfast/server"
)

func init() {
	register("serve", "run the Holdfast service (embeds NATS with JetStream unless --nats is given)", func(args []string) int {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return serveMain(ctx, args, os.Stderr)
	})
}

// Bounds of the serve flags beyond what kernel.Config.Validate checks.
const (
	serveMaxShards  = 1024
	serveLayoutFile = "holdfast.json"
	serveLayoutV1   = 1
)

// serveConfig is the parsed command line of `holdfast serve`.
type serveConfig struct {
	data     string
	listen   string
	natsURL  string
	natsOpts []nats.Option // credentials and TLS of an external NATS
	prefix   string
	shards   uint32
	slot     time.Duration
	kernel   kernel.Config
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
	pprof          bool
}

// flagsFromEnv sets every flag the command line left alone from its environment variable,
// HOLDFAST_<FLAG> (upper case, '-' as '_': HOLDFAST_MAX_MEMORY=16GiB), as a container or
// a systemd unit configures a service. The command line wins; test hooks are not read.
func flagsFromEnv(fs *flag.FlagSet, explicit map[string]bool) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || explicit[f.Name] || f.Name == "test-hooks-dir" {
			return
		}
		name := serveEnvVar(f.Name)
		v, ok := os.LookupEnv(name)
		if !ok {
			return
		}
		if e := fs.Set(f.Name, v); e != nil {
			err = fmt.Errorf("%s=%q: %v", name, v, e)
			return
		}
		explicit[f.Name] = true
	})
	return err
}

// serveEnvVar is the environment variable of a serve flag.
func serveEnvVar(flagName string) string {
	return "HOLDFAST_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// serveHelpOut is where `holdfast serve --help` prints (tests redirect it).
var serveHelpOut io.Writer = os.Stdout

// parseServeFlags parses and checks the flags; the error is for the user.
func parseServeFlags(args []string) (*serveConfig, error) {
	def := kernel.DefaultConfig()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // serveMain reports the error, once
	// -h prints the help on stdout (help is not an error); a bad flag gets one line and
	// a hint, not the whole usage.
	fs.Usage = func() {}
	printUsage := func(out io.Writer) {
		fs.SetOutput(out)
		defer fs.SetOutput(io.Discard)
		fmt.Fprint(out, "usage: holdfast serve [flags]\n\n"+
			"Runs the Holdfast service. With no flags it embeds a NATS server with JetStream\n"+
			"(stored under --data), listens for NATS clients on 127.0.0.1:4222, and logs one\n"+
			"line with the word \"ready\" and the NATS URL clients should use once it serves.\n"+
			"SIGINT or SIGTERM stops it cleanly.\n\nflags:\n")
		fs.PrintDefaults()
	}
	data := fs.String("data", "./holdfast-data", "data `directory`: journals, snapshots, the embedded JetStream store")
	listen := fs.String("listen", "127.0.0.1:4222", "embedded NATS client listener `host:port` (port 0: any free port)")
	natsURL := fs.String("nats", "", "connect to this existing NATS deployment (`URL`s, comma-separated) instead of embedding one; it must have JetStream")
	prefix := fs.String("prefix", contract.DefaultPrefix, "subject `prefix`: requests on <prefix>.v1.<tenant>.<object>.<verb>")
	shards := fs.Uint("shards", 8, "shard `count`, fixed when the data directory is created")
	slot := fs.Duration("slot", 100*time.Millisecond, "slot length: the unit of logical time (whole milliseconds)")
	maxTTL := fs.Duration("max-ttl", time.Hour, "largest ttl_ms accepted, at most 1h")
	dedupe := fs.Duration("dedupe-window", 10*time.Minute, "how long an operation_id's outcome is remembered")
	history := fs.Duration("history-window", 10*time.Minute, "how long an ended lease stays readable")
	maxMemory := byteSize(defaultMaxMemory)
	fs.Var(&maxMemory, "max-memory", "`bytes` the shards' operation and lease tables may hold, over all shards (e.g. 8GiB); sizes --max-operations and --max-leases unless they are given")
	maxResources := fs.Int("max-resources", def.MaxResources, "resources per shard")
	maxLeases := fs.Int("max-leases", def.MaxLeases, "leases per shard, live and ended within the history window (also sizes the member table, the expiry index and the range value table); default from --max-memory")
	maxBundle := fs.Int("max-bundle", def.MaxBundle, "members per lease")
	maxOperations := fs.Int("max-operations", def.MaxOperations, "remembered operation outcomes per shard; default from --max-memory")
	maxPools := fs.Int("max-pools", def.MaxPools, "pools per shard")
	maxRanges := fs.Int("max-ranges", def.MaxRanges, "value ranges per shard")
	metricsListen := fs.String("metrics-listen", "127.0.0.1:9464", "Prometheus /metrics, /livez and /readyz (also /healthz) `host:port` (empty: no metrics listener)")
	pprofOn := fs.Bool("pprof", false, "also serve Go's profiler (/debug/pprof) on the metrics listener")
	logLevel := fs.String("log-level", "info", "log `level`: debug, info, warn or error")
	logFormat := fs.String("log-format", "text", "log `format`: text or json")
	eventsMaxAge := fs.Duration("events-max-age", events.DefaultMaxAge, "max age of the HOLDFAST_EVENTS stream when this process creates it (0: unlimited)")
	eventsMaxBytes := byteSize(events.DefaultMaxBytes)
	fs.Var(&eventsMaxBytes, "events-max-bytes", "max `bytes` of the HOLDFAST_EVENTS stream when this process creates it (0: unlimited)")
	testHooksDir := fs.String("test-hooks-dir", "", "TESTS ONLY: a `directory` whose files move the clock and fail journal writes (see testhooks.go)")
	eventsDup := fs.Duration("events-duplicate-window", events.DefaultDuplicateWindow, "duplicate window of the HOLDFAST_EVENTS stream (at least 10s): a restart republishes what may not have been stored, and the stream drops the copies within it, so it should cover a restart")
	var auth natsconn.Settings
	registerAuthFlags(fs, &auth)
	journal := fs.String("journal", "", "where shard journals and snapshots live: `file` (this process's --data; the default with an embedded NATS) or jetstream (replicated in JetStream, shared by a cluster of processes; the default with --nats)")
	node := fs.String("node", "", "this process's `name` in a cluster (default: the host name)")
	replicas := fs.Int("replicas", 1, "JetStream replicas of journals, snapshots and the cluster bucket: 1 or 3")
	ownershipTTL := fs.Duration("ownership-ttl", server.DefaultOwnershipTTL, "how long a node's claim on a shard lasts without renewal (whole seconds); a node stops serving a shard before it lapses")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printUsage(serveHelpOut)
		} else if hint := flagHint(fs, err); hint != "" {
			err = fmt.Errorf("%w (%s)", err, hint)
		}
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	explicit := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { explicit[f.Name] = true })
	if err := flagsFromEnv(fs, explicit); err != nil {
		return nil, err
	}

	c := &serveConfig{data: *data, listen: *listen, natsURL: *natsURL, prefix: *prefix,
		listenExplicit: explicit["listen"], metricsListen: *metricsListen,
		events:       events.Config{MaxAge: *eventsMaxAge, MaxBytes: int64(min(uint64(eventsMaxBytes), 1<<62)), DuplicateWindow: *eventsDup},
		testHooksDir: *testHooksDir, maxMemory: uint64(maxMemory), explicitBounds: explicit}
	if c.data == "" {
		return nil, errors.New("--data: must not be empty")
	}
	c.journal, c.node, c.replicas, c.ownershipTTL, c.pprof = *journal, *node, *replicas, *ownershipTTL, *pprofOn
	// An external NATS is named by --nats, NATS_URL or a nats context given by --context
	// or NATS_CONTEXT; its credentials come from the flags or the context.
	if c.natsURL != "" || os.Getenv("NATS_URL") != "" || auth.Context != "" || os.Getenv("NATS_CONTEXT") != "" {
		auth.URL = c.natsURL
		u, opts, err := auth.Resolve("")
		if err != nil {
			return nil, fmt.Errorf("--nats: %w", err)
		}
		if u == "" {
			return nil, errors.New("--nats: the nats context names no server URL")
		}
		c.natsURL, c.natsOpts = u, opts
	} else if auth != (natsconn.Settings{}) {
		return nil, errors.New("--creds, --nkey, --user, --password, --token and --tls* are for an external NATS (--nats); the embedded one takes no credentials")
	}
	if c.journal == "" {
		c.journal = server.JournalFile
		if c.natsURL != "" {
			c.journal = server.JournalJetStream
		}
	}
	if c.journal != server.JournalFile && c.journal != server.JournalJetStream {
		return nil, fmt.Errorf("--journal: file or jetstream, got %q", c.journal)
	}
	if c.replicas != 1 && c.replicas != 3 {
		return nil, fmt.Errorf("--replicas: 1 or 3, got %d", c.replicas)
	}
	if c.ownershipTTL < time.Second || c.ownershipTTL%time.Second != 0 {
		return nil, fmt.Errorf("--ownership-ttl: whole seconds, at least 1s, got %v", c.ownershipTTL)
	}
	if err := contract.ValidPrefix(c.prefix); err != nil {
		return nil, fmt.Errorf("--prefix: %w", err)
	}
	if *shards < 1 || *shards > serveMaxShards {
		return nil, fmt.Errorf("--shards: must be between 1 and %d, got %d", serveMaxShards, *shards)
	}
	c.shards = uint32(*shards)
	if *slot < time.Millisecond || *slot%time.Millisecond != 0 {
		return nil, fmt.Errorf("--slot: must be a whole number of milliseconds, at least 1ms, got %v", *slot)
	}
	c.slot = *slot
	if *maxTTL > kernel.MaxTTLMillisLimit*time.Millisecond {
		return nil, fmt.Errorf("--max-ttl: at most 1h, got %v", *maxTTL)
	}
	if *maxTTL < time.Millisecond || *maxTTL%time.Millisecond != 0 {
		return nil, fmt.Errorf("--max-ttl: must be a whole number of milliseconds, at least 1ms, got %v", *maxTTL)
	}
	for _, w := range []struct {
		name string
		d    time.Duration
	}{{"dedupe-window", *dedupe}, {"history-window", *history}} {
		if w.d < c.slot {
			return nil, fmt.Errorf("--%s: must be at least one slot (%v), got %v", w.name, c.slot, w.d)
		}
	}
	if *eventsDup < events.MinDuplicateWindow {
		return nil, fmt.Errorf("--events-duplicate-window: at least %v, got %v", events.MinDuplicateWindow, *eventsDup)
	}
	if *eventsMaxAge != 0 && *eventsMaxAge < *eventsDup {
		return nil, fmt.Errorf("--events-max-age: must not be shorter than the duplicate window (%v), got %v", *eventsDup, *eventsMaxAge)
	}
	k := def
	k.MaxTTLMillis = uint64(*maxTTL / time.Millisecond)
	c.dedupeWindow, c.historyWindow = *dedupe, *history
	k.MaxResources, k.MaxBundle, k.MaxOperations = *maxResources, *maxBundle, *maxOperations
	k.MaxPools, k.MaxRanges = *maxPools, *maxRanges
	if *maxLeases < 1 || *maxOperations < 1 {
		return nil, fmt.Errorf("table bounds: --max-leases and --max-operations must be at least 1")
	}
	if c.maxMemory < 1<<20 {
		return nil, fmt.Errorf("--max-memory: at least 1MiB, got %v", &maxMemory)
	}
	c.kernel = k
	c.setSlot(c.slot)
	if err := c.sizeTables(c.shards, *maxLeases, *maxOperations); err != nil {
		return nil, err
	}
	switch strings.ToLower(*logLevel) {
	case "debug":
		c.logLevel = slog.LevelDebug
	case "info":
		c.logLevel = slog.LevelInfo
	case "warn", "warning":
		c.logLevel = slog.LevelWarn
	case "error":
		c.logLevel = slog.LevelError
	default:
		return nil, fmt.Errorf("--log-level: debug, info, warn or error, got %q", *logLevel)
	}
	switch *logFormat {
	case "text":
	case "json":
		c.logJSON = true
	default:
		return nil, fmt.Errorf("--log-format: text or json, got %q", *logFormat)
	}
	return c, nil
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
	if c.explicitBounds["max-leases"] {
		k.MaxLeases = maxLeases
		k.MaxExpirations = maxLeases
		k.MaxMembers = min(4*maxLeases, 1<<30)
		k.MaxRangeValues = min(2*maxLeases, 1<<30)
	}
	if c.explicitBounds["max-operations"] {
		k.MaxOperations = maxOperations
	}
	if err := k.Validate(); err != nil {
		return fmt.Errorf("table bounds: %w", err)
	}
	return nil
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
// settings that decide what its journals mean (docs/api.md §6).
type serveLayout struct {
	Format int    `json:"format"`
	Shards uint32 `json:"shards"`
	// SlotMillis is absent in directories from before it was recorded: their first start
	// since records the --slot it runs with.
	SlotMillis uint64 `json:"slot_ms,omitempty"`
}

var serveShardDir = regexp.MustCompile(`^shard-[0-9]{3,}$`)

// ensureLayout fixes the settings a data directory's journals depend on: the first start
// records them, later starts adopt them, and an explicit different --shards or --slot is
// refused before anything is served. (A replay under another slot length would give
// every journaled ttl another deadline, and journaled expiries would miss.)
func ensureLayout(dir string, want serveLayout, explicit map[string]bool) (serveLayout, error) {
	path := filepath.Join(dir, serveLayoutFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		var l serveLayout
		if err := json.Unmarshal(b, &l); err != nil || l.Format != serveLayoutV1 || l.Shards == 0 {
			return serveLayout{}, fmt.Errorf("%s: not a Holdfast layout file (%v)", path, err)
		}
		if explicit["shards"] && l.Shards != want.Shards {
			return serveLayout{}, fmt.Errorf("data directory %s was created with --shards %d; the shard count of a data directory cannot change (got --shards %d)", dir, l.Shards, want.Shards)
		}
		if l.SlotMillis == 0 { // recorded before --slot was: the journal was written with this one
			l.SlotMillis = want.SlotMillis
			return l, writeLayout(dir, l)
		}
		if explicit["slot"] && l.SlotMillis != want.SlotMillis {
			return serveLayout{}, fmt.Errorf("data directory %s was created with --slot %v; the slot length of a data directory cannot change (got --slot %v)",
				dir, time.Duration(l.SlotMillis)*time.Millisecond, time.Duration(want.SlotMillis)*time.Millisecond)
		}
		return l, nil
	case !errors.Is(err, os.ErrNotExist):
		return serveLayout{}, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return serveLayout{}, err
	}
	// A directory from before the layout file: its shard directories tell the count.
	entries, err := os.ReadDir(dir)
	if err != nil {
		return serveLayout{}, err
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
			return serveLayout{}, fmt.Errorf("data directory %s holds %d shards; the shard count of a data directory cannot change (got --shards %d)", dir, found, want.Shards)
		}
		l.Shards = found
	}
	return l, writeLayout(dir, l)
}

// writeLayout records l durably: a temporary file, fsync, rename, fsync of the directory.
func writeLayout(dir string, l serveLayout) error {
	path := filepath.Join(dir, serveLayoutFile)
	data, _ := json.Marshal(l)
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	_, err = f.Write(append(data, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncServeDir(dir)
	}
	if err != nil {
		return fmt.Errorf("recording the layout in %s: %w", path, err)
	}
	return nil
}

func syncServeDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// serveNATSLog routes the embedded server's log into slog.

// serveMain runs the service until ctx is done; it returns the process exit code.
func serveMain(ctx context.Context, args []string, stderr io.Writer) int {
	c, err := parseServeFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "holdfast serve: %v\n", err)
		return 2
	}
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
	layout, err := ensureLayout(c.data, serveLayout{Shards: c.shards, SlotMillis: c.kernel.SlotMillis}, c.explicitBounds)
	if err != nil {
		return err
	}
	unlock, err := lockDataDir(c.data)
	if err != nil {
		return err
	}
	cleanups = append(cleanups, unlock)
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
	// Before the embedded NATS server, the bridge and the shards start: all of them run
	// under it.
	procs := serveProcs(c.shards)
	if c.natsURL != "" && c.listenExplicit {
		log.Warn("--listen is ignored with --nats")
	}
	cfg := server.Config{Data: c.data, Shards: c.shards, Slot: c.slot, Kernel: c.kernel, Prefix: c.prefix,
		NATSURL: c.natsURL, NATSOptions: c.natsOpts, Listen: c.listen, MetricsListen: c.metricsListen, Events: c.events, Logger: log,
		Journal: c.journal, Node: c.node, Replicas: c.replicas, OwnershipTTL: c.ownershipTTL, Pprof: c.pprof}
	if c.testHooksDir != "" {
		hooks := startTestHooks(c.testHooksDir)
		cleanups = append(cleanups, hooks.close)
		cfg.Clock, cfg.Faults = hooks, hooks.faults()
		log.Warn("test hooks enabled: the clock and journal failures are driven from files", "dir", c.testHooksDir)
	}
	log.Info("starting", "data", c.data, "shards", c.shards, "gomaxprocs", procs)
	srv, err := server.Start(ctx, cfg)
	if err != nil {
		return err
	}
	log.Info("ready", "nats", natsconn.Redact(srv.URL()), "prefix", c.prefix, "shards", c.shards, "data", c.data,
		"embedded_nats", srv.Embedded(), "metrics", srv.MetricsURL(), "version", bridge.Version, "journal", c.journal)

	<-ctx.Done()
	log.Info("stopping: draining requests")
	_ = srv.Shutdown(context.Background()) // it logs what did not finish
	return nil
}
