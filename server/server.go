// Package server is Holdfast's composition root: it owns the wiring of one serving
// process — NATS (embedded or external), the bridge, the shards, the metrics listener —
// and the order in which they start and stop, in one place. cmd/holdfast parses flags and
// fixes the data directory's layout; tests and examples start a Holdfast in-process here.
//
// Start runs in stages (start.go): connect (NATS, the connections, JetStream answering),
// provision (the registry; in a cluster its settings), the metrics, join (a cluster node
// becomes a member), events (the stream and the publisher the shards' recovery already
// feeds), the shards (each recovers its journal, or in a cluster opens as it is claimed),
// the bridge, serve (the metrics listener and console, the endpoints, the node's rounds).
// Shutdown runs it backwards: requests drained and answered, shards stopped (journals
// flushed), queued events published, connections and the embedded server shut.
package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/bridge"
	"github.com/holdfast/holdfast/cluster"
	"github.com/holdfast/holdfast/console"
	"github.com/holdfast/holdfast/events"
	"github.com/holdfast/holdfast/internal/rafttiming"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/metrics"
	"github.com/holdfast/holdfast/persistence"
)

// StopTimeout bounds each stage of Shutdown that waits on the network: a cluster node's
// hand-over of its shards, draining the requests, publishing the queued events.
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
	// RaftTiming, when set, is the embedded NATS server's raft timing (rafttiming.Fast:
	// elections after 1.5-3.5 s; rafttiming.Faster: 0.4-0.9 s; nats-server's own: 4-9 s):
	// a lost server's raft groups — the journals it led, the cluster bucket, the events
	// stream — take writes again sooner. Process-wide; every node of a cluster should say
	// the same. Zero: nats-server's.
	RaftTiming rafttiming.Timing
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
	// JournalWindow is the batches a shard keeps in flight on a replicated journal (0:
	// the shard runtime's default, actors.DefaultJournalWindow).
	JournalWindow int
	// JournalLayout is how a new cluster keeps its journals (cluster.FeedFormat):
	// LayoutFeed, LayoutStreams, or LayoutAuto ("" too). Only the node that creates the
	// cluster chooses; the registry records it for every other.
	JournalLayout string

	// Holders says whose a holder_id is (--holders, --operators; bridge.Holders).
	Holders bridge.Holders

	// Tests only: the slot clock and journal faults.
	Clock  actors.Clock
	Faults *persistence.Faults
	// BundleStep is called at each step of a bundle across shards (actors.Options.BundleStep;
	// tests only: the fault harness kills a node exactly there).
	BundleStep func(step string, shard uint32)
}

// Server is a started Holdfast process.
type Server struct {
	cfg        Config
	log        *slog.Logger
	url        string
	metricsURL string
	embedded   bool
	metrics    *metrics.Metrics
	pub        *events.Publisher // nil with events disabled, or kept by the journals (feed)
	feed       bool              // the cluster's journals live in the events stream (cluster.FeedFormat)
	br         *bridge.Bridge
	sys        *actors.System
	node       *cluster.Node
	peers      *peerLink     // a cluster node's bundle messages to and from the other nodes
	backups    *backupLink   // copies of the shards this process serves (holdfast snapshot save)
	natsOpts   []nats.Option // every connection's options (dial adds its name)

	mu       sync.Mutex
	cleanups []func() // run backwards by Shutdown
	stopped  bool
}

// nodeHost is what a cluster node drives: the shards, the bridge's routing and the
// events of each shard, composed here so that the node opens and closes a shard in one
// call each.
type nodeHost struct {
	sys     *actors.System
	br      *bridge.Bridge
	peers   *peerLink
	backups *backupLink
	pub     *events.Publisher // nil with events disabled
	log     *slog.Logger
}

func (h nodeHost) Open(k uint32) error { return h.sys.Open(k) }
func (h nodeHost) Accept(k uint32) error {
	if err := h.peers.Accept(k); err != nil {
		return err
	}
	if err := h.backups.Accept(k); err != nil {
		return err
	}
	return h.br.Accept(k)
}
func (h nodeHost) Halted(k uint32) bool   { return h.sys.Halted(k) }
func (h nodeHost) Confirm(k uint32) error { return h.sys.Barrier(k) }

// Close stops routing shard k here, answers what it took and closes it. Handing over,
// it first waits (up to 5 s) for the shard's events to be published and records how far
// they are through the shard's storage, for the next owner; either way the events not
// published here are forgotten (the next owner publishes them from the position).
func (h nodeHost) Close(k uint32, handOver bool) {
	h.br.Release(k)
	h.peers.Release(k)
	h.backups.Release(k)
	h.sys.Close(k)
	if h.pub == nil {
		return
	}
	if handOver {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		published := h.pub.Flush(ctx, k)
		cancel()
		if published > 0 {
			if err := h.sys.RecordPublished(k, published); err != nil {
				h.log.Warn("recording the published position at hand-off", "shard", k, "err", err)
			}
		}
	}
	h.pub.Drop(k)
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
