// Package server is Holdfast's composition root: it owns the wiring of one serving
// process — NATS (embedded or external), the bridge, the shards, the metrics listener —
// and the order in which they start and stop, in one place. cmd/holdfast parses flags and
// fixes the data directory's layout; tests and examples start a Holdfast in-process here.
//
// Start order: NATS, connections, the bridge (whose event publisher the shards' recovery
// already feeds), the shards (each recovers its journal), the metrics listener, then the
// endpoints answer. Shutdown runs it backwards: requests drained and answered, metrics
// closed, shards stopped (journals flushed), queued events published, connections and
// the embedded server shut.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/bridge"
	"github.com/holdfast/holdfast/cluster"
	"github.com/holdfast/holdfast/console"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/events"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/natsconn"
	"github.com/holdfast/holdfast/persistence"
)

// StopTimeout bounds each stage of Shutdown that waits on the network: draining the
// requests, publishing the queued events.
const StopTimeout = 30 * time.Second

// Config is one Holdfast process. Data, Shards and Kernel are final: the caller has fixed
// the data directory's layout (cmd/holdfast does, from flags and holdfast.json).
type Config struct {
	Data   string        // data directory: shard journals and snapshots, the embedded JetStream store
	Shards uint32        // shard count
	Slot   time.Duration // slot length; Kernel.SlotMillis agrees
	Kernel kernel.Config // per-shard bounds and windows
	Prefix string        // subject prefix; contract.DefaultPrefix when empty

	// NATSURL connects to an existing NATS deployment (JetStream required). Empty: embed a
	// NATS server listening on Listen ("127.0.0.1:0" when empty) with its store under Data.
	NATSURL string
	// NATSOptions carry the external NATS's credentials and TLS settings (natsconn).
	NATSOptions []nats.Option
	Listen      string
	// NATSCluster clusters the embedded NATS server with the other nodes' (nats-server's
	// --cluster, --routes, --cluster_name): JetStream then spans them, and journals and
	// snapshots with Replicas 3 survive the loss of one. Zero: a standalone server.
	NATSCluster EmbeddedCluster
	// MetricsListen serves /metrics, /livez, /readyz (= /healthz), and with Pprof
	// /debug/pprof; empty: none.
	MetricsListen string
	Pprof         bool // Go's profiler on the metrics listener (off: it is not for whoever scrapes metrics)
	Events        events.Config
	Logger        *slog.Logger

	// Cluster (API §7). Journal "file" (the default) keeps shard state in Data and makes
	// this process the only one that may serve Prefix; "jetstream" keeps it in JetStream
	// and joins the cluster of every process serving Prefix on the same NATS.
	Journal      string
	Node         string        // this process's name in the cluster; the host name when empty
	Replicas     int           // JetStream replicas of journals, snapshots and the cluster bucket (1 or 3)
	OwnershipTTL time.Duration // how long a shard claim lasts without renewal; 5s when 0
	// ClientAttempt is the client attempt the service answers within: every request is
	// answered, or answered timeout, within three quarters of it (contract.Timing, which
	// derives every other timeout from it and OwnershipTTL); contract.DefaultAttempt when 0.
	ClientAttempt time.Duration

	// SnapshotEvery is the entries between a shard's snapshots (0: the shard runtime's
	// default).
	SnapshotEvery int

	// Tests only: the slot clock and journal faults.
	Clock  actors.Clock
	Faults *persistence.Faults
}

// Server is a started Holdfast process.
type Server struct {
	cfg        Config
	log        *slog.Logger
	url        string
	metricsURL string
	embedded   bool
	br         *bridge.Bridge
	sys        *actors.System
	node       *cluster.Node

	mu       sync.Mutex
	cleanups []func() // run backwards by Shutdown
	stopped  bool
}

// Start starts a Holdfast process and returns once its endpoints answer. On an error
// everything started so far is stopped again.
func Start(ctx context.Context, cfg Config) (_ *Server, err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = contract.DefaultPrefix
	}
	if err := cfg.clusterDefaults(); err != nil {
		return nil, err
	}
	timing := contract.NewTiming(cfg.OwnershipTTL, cfg.ClientAttempt)
	if err := timing.Validate(); err != nil {
		return nil, err
	}
	// s is never assigned again: the cleanups refer to it, and a failed Start, which
	// returns a nil *Server, runs them. (With s the named result, a failure after the
	// bridge started — a metrics port in use — ran them on a nil s and panicked.)
	s := &Server{cfg: cfg, log: cfg.Logger}
	defer func() {
		if err != nil {
			s.runCleanups()
		}
	}()
	// The metrics listener's address is taken first, so that one in use fails the start
	// at once, before the shards recover; it serves once the bridge exists.
	var metricsLn net.Listener
	if cfg.MetricsListen != "" {
		if metricsLn, err = net.Listen("tcp", cfg.MetricsListen); err != nil {
			return nil, fmt.Errorf("--metrics-listen %s: %w", cfg.MetricsListen, err)
		}
		s.add(func() { metricsLn.Close() })
	}
	var conn []nats.Option
	if cfg.NATSURL == "" {
		ns, u, err := startEmbeddedNATS(cfg.Listen, cfg.Data, cfg.Node, cfg.NATSCluster, s.log.With("component", "nats"))
		if err != nil {
			return nil, err
		}
		s.add(func() { stopEmbeddedNATS(ns, cfg.NATSCluster.Enabled()) })
		// The service connects over loopback TCP rather than nats.InProcessServer: the
		// in-process transport is a synchronous net.Pipe, and under load it measured
		// about a third slower than TCP here (docs/benchmarks.md).
		s.url, s.embedded = u, true
	} else {
		s.url = cfg.NATSURL
		conn = append(conn, nats.MaxReconnects(-1))
		conn = append(conn, cfg.NATSOptions...)
	}
	conn = append(conn, nats.Name("holdfast-serve"),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				s.log.Warn("NATS disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { s.log.Info("NATS reconnected", "url", nc.ConnectedUrlRedacted()) }))
	connect := func(name string) (*nats.Conn, error) {
		nc, err := nats.Connect(s.url, append(conn[:len(conn):len(conn)], nats.Name(name))...)
		if err != nil {
			return nil, fmt.Errorf("connecting to NATS at %s: %s", natsconn.Redact(s.url), natsconn.RedactError(err, s.url))
		}
		s.add(func() {
			_ = nc.FlushTimeout(2 * time.Second)
			nc.Close()
		})
		return nc, nil
	}
	nc, err := connect("holdfast-serve")
	if err != nil {
		return nil, err
	}
	// Replies and JetStream publishing each get connections of their own: the NATS
	// server reads a connection on one goroutine, and one connection carrying requests,
	// replies and events measured as the service's bottleneck (docs/benchmarks.md).
	var replyConns []*nats.Conn
	for i := 0; i < 2; i++ {
		rc, err := connect(fmt.Sprintf("holdfast-serve-replies-%d", i))
		if err != nil {
			return nil, err
		}
		replyConns = append(replyConns, rc)
	}
	jsConn, err := connect("holdfast-serve-jetstream")
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(jsConn)
	if err != nil {
		return nil, err
	}
	// Events go on a connection of their own with no reconnect buffer: a publish made
	// while disconnected fails at once and is sent again by the publisher — which first
	// checks the shard is still served here — instead of being replayed on reconnect,
	// possibly after another node has published the shard's later events.
	evConn, err := nats.Connect(s.url, append(conn[:len(conn):len(conn)], nats.Name("holdfast-serve-events"), nats.ReconnectBufSize(-1))...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %s", natsconn.Redact(s.url), natsconn.RedactError(err, s.url))
	}
	s.add(func() {
		_ = evConn.FlushTimeout(2 * time.Second)
		evConn.Close()
	})
	evJS, err := jetstream.New(evConn)
	if err != nil {
		return nil, err
	}
	// A JetStream cluster that is still electing its meta leader does not answer at all,
	// or answers "temporarily unavailable" (10008): ask in short attempts for up to 30 s.
	for deadline, said := time.Now().Add(30*time.Second), false; ; {
		actx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err = js.AccountInfo(actx)
		cancel()
		if !(errors.Is(err, context.DeadlineExceeded) || jetStreamForming(err)) || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		if jetStreamForming(err) {
			if !said {
				s.log.Info("waiting for JetStream to elect its meta leader", "err", err)
				said = true
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return nil, fmt.Errorf("NATS at %s has no JetStream for this account; Holdfast needs it for the %s stream (enable JetStream, or run without --nats to embed a NATS server)", natsconn.Redact(s.url), contract.StreamName)
	}
	if err != nil {
		return nil, fmt.Errorf("checking JetStream at %s: %s", natsconn.Redact(s.url), natsconn.RedactError(err, s.url))
	}

	kv, err := s.register(ctx, js)
	if err != nil {
		return nil, err
	}
	clustered := s.cfg.Journal == JournalJetStream
	var settings cluster.Settings
	if clustered {
		if settings, err = s.adoptSettings(ctx, kv); err != nil {
			return nil, err
		}
		cfg.Kernel = s.cfg.Kernel
	}
	names := cluster.NamesFor(cfg.Prefix)
	var routing *bridge.Routing
	var status bridge.StatusSource
	if clustered {
		routing = &bridge.Routing{ShardSubject: names.ShardSubject}
		status = func(ctx context.Context) ([]bridge.NodeStatus, []string, error) {
			states, owners, err := s.node.Status(ctx)
			nodes := make([]bridge.NodeStatus, len(states))
			for i, st := range states {
				nodes[i] = bridge.NodeStatus{Node: st.Node, RenewalAge: st.RenewalAge, Lapsing: st.Lapsing}
			}
			return nodes, owners, err
		}
	}
	cfg.Events.Replicas = s.cfg.Replicas
	var node atomic.Pointer[cluster.Node] // set once joined; events of a shard are published only while it is served here
	if clustered {
		cfg.Events.Serving = func(k uint32) bool {
			n := node.Load()
			return n != nil && n.Serving(k)
		}
	}
	bctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	s.br, err = bridge.New(bctx, bridge.Config{Conn: nc, ReplyConns: replyConns, JetStream: evJS, Prefix: cfg.Prefix,
		Shards: cfg.Shards, Logger: s.log.With("component", "bridge"), Events: cfg.Events, Routing: routing,
		Node: s.cfg.Node, Status: status, Timing: timing})
	cancel()
	if err != nil {
		return nil, err
	}
	s.add(func() {
		sctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
		defer cancel()
		if err := s.br.Close(sctx); err != nil {
			s.log.Warn("event publishing did not finish", "err", err)
		}
	})
	if clustered {
		jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		s.node, err = cluster.Join(jctx, cluster.Config{NC: nc, JS: js, Names: names, Node: s.cfg.Node, Shards: cfg.Shards,
			Replicas: s.cfg.Replicas, OwnershipTTL: s.cfg.OwnershipTTL, Logger: s.log.With("component", "cluster"),
			Metrics: s.br.Metrics(), Settings: settings, OnSettings: s.configure})
		cancel()
		if err != nil {
			return nil, err
		}
		s.add(s.node.Stop)
		node.Store(s.node)
	}

	s.log.Info("recovering shards", "data", cfg.Data, "shards", cfg.Shards)
	opts := actors.Options{Dir: cfg.Data, Shards: cfg.Shards, Slot: cfg.Slot, Kernel: cfg.Kernel,
		Events: s.br, Observer: s.br.Observer(), Logger: s.log.With("component", "actors"),
		Clock: cfg.Clock, Faults: cfg.Faults, SnapshotEvery: cfg.SnapshotEvery}
	if s.node != nil {
		opts.Lazy, opts.Storage, opts.Serving, opts.OnHalt = true, s.node.Storage, s.node.Serving, s.node.ShardHalted
	}
	s.sys, err = actors.Start(opts)
	if err != nil {
		return nil, fmt.Errorf("starting the shards: %w", err)
	}
	s.add(s.sys.Stop)
	for i := uint32(0); i < cfg.Shards; i++ {
		if s.sys.Halted(i) {
			s.log.Error("shard halted at start; it answers engine_halted until its journal is repaired", "shard", i)
		}
	}
	if metricsLn != nil {
		// The console's lookups and events tail go on a connection of their own: a
		// page left open never shares one with the request path.
		cc, err := connect("holdfast-serve-console")
		if err != nil {
			return nil, err
		}
		page, err := console.New(console.Config{Conn: cc, Prefix: cfg.Prefix, Node: s.cfg.Node, Cluster: s.node != nil,
			Version: bridge.Version, Shards: s.sys, SlotMs: s.sys.Options().Kernel.SlotMillis, Rest: s.br.MetricsHandler()})
		if err != nil {
			return nil, err
		}
		s.serveMetrics(metricsLn, page)
	}
	if err := s.br.Start(s.sys); err != nil {
		return nil, err
	}
	if s.node != nil {
		s.node.Run(nodeHost{sys: s.sys, br: s.br})
	}
	return s, nil
}

// nodeHost is what a cluster node drives: the shards and the bridge's routing.
type nodeHost struct {
	sys *actors.System
	br  *bridge.Bridge
}

func (h nodeHost) Open(k uint32) error   { return h.sys.Open(k) }
func (h nodeHost) Close(k uint32)        { h.sys.Close(k) }
func (h nodeHost) Accept(k uint32) error { return h.br.Accept(k) }
func (h nodeHost) Release(k uint32)      { h.br.Release(k) }
func (h nodeHost) DropEvents(k uint32)   { h.br.DropEvents(k) }
func (h nodeHost) Halted(k uint32) bool  { return h.sys.Halted(k) }

// FlushEvents waits up to 5 s for a closed shard's events to be published.
func (h nodeHost) FlushEvents(k uint32) uint64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return h.br.FlushEvents(ctx, k)
}

// serveMetrics runs the metrics listener: Prometheus, liveness and readiness, the
// console (the operator's page, at /), and with Pprof Go's profiler (how a slow server
// is diagnosed; opt-in, since whoever can reach the listener could profile the process).
func (s *Server) serveMetrics(ln net.Listener, page *console.Console) {
	mux := http.NewServeMux()
	mux.Handle("/", page.Handler()) // the page, and the metrics handler's paths behind it
	if s.cfg.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics listener", "err", err)
		}
	}()
	s.add(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	s.metricsURL = "http://" + ln.Addr().String()
}

// URL is the NATS URL clients use: the embedded server's, or the deployment's.
func (s *Server) URL() string { return s.url }

// MetricsURL is the metrics listener's base URL ("" without one).
func (s *Server) MetricsURL() string { return s.metricsURL }

// Embedded reports whether the process runs its own NATS server.
func (s *Server) Embedded() bool { return s.embedded }

// Shutdown stops taking requests and answers those in flight (bounded by ctx and
// StopTimeout), then stops everything Start started, backwards: the metrics listener,
// the shards (journals flushed and closed), event publishing (queued events published),
// the connections, the embedded NATS server. It is safe to call more than once.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.stopped {
		s.mu.Unlock()
		return nil
	}
	s.mu.Unlock()
	if s.node != nil {
		s.node.Stop() // hand the shards over while the endpoints still forward to their new owners
	}
	dctx, cancel := context.WithTimeout(ctx, StopTimeout)
	err := s.br.Drain(dctx)
	cancel()
	if err != nil {
		s.log.Warn("draining requests", "err", err)
	}
	s.runCleanups()
	return err
}

func (s *Server) add(f func()) {
	s.mu.Lock()
	s.cleanups = append(s.cleanups, f)
	s.mu.Unlock()
}

func (s *Server) runCleanups() {
	s.mu.Lock()
	cleanups := s.cleanups
	s.cleanups, s.stopped = nil, true
	s.mu.Unlock()
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
}

// jetStreamForming is JetStream's "temporarily unavailable" (10008): a cluster without
// a meta leader yet, as when its servers have just started together.
func jetStreamForming(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == 10008
}
