package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/bridge"
	"github.com/holdfast/holdfast/cluster"
	"github.com/holdfast/holdfast/console"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/events"
	"github.com/holdfast/holdfast/internal/rafttiming"
	"github.com/holdfast/holdfast/metrics"
	"github.com/holdfast/holdfast/natsconn"
)

// Start starts a Holdfast process and returns once its endpoints answer. It runs the
// stages in order — connect, provision, start the bridge, join, start the shards, serve
// — each adding what it started to the cleanups, so that on an error everything started
// so far is stopped again, backwards.
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
	c, err := s.connect(ctx)
	if err != nil {
		return nil, err
	}
	settings, err := s.provision(ctx, c.js)
	if err != nil {
		return nil, err
	}
	// The process's metrics first: every stage after reports through them.
	s.metrics = metrics.New(s.cfg.Shards, c.nc, bridge.Version)
	if err := s.join(ctx, c, settings); err != nil {
		return nil, err
	}
	if err := s.startEvents(ctx, c); err != nil {
		return nil, err
	}
	if err := s.startShards(c, timing); err != nil {
		return nil, err
	}
	if err := s.startBridge(ctx, c, timing); err != nil {
		return nil, err
	}
	if err := s.serve(metricsLn); err != nil {
		return nil, err
	}
	return s, nil
}

// conns are the process's NATS connections, each with one job: the NATS server reads a
// connection on one goroutine, and one connection carrying requests, replies and events
// measured as the service's bottleneck (docs/benchmarks.md).
type conns struct {
	nc      *nats.Conn          // requests (the endpoints), forwards, the cluster bucket's watch
	replies []*nats.Conn        // replies, spread by shard
	js      jetstream.JetStream // journals, snapshots, the cluster bucket
	events  jetstream.JetStream // events, on a connection without a reconnect buffer
}

// connect starts the embedded NATS server (without --nats), opens the connections and
// waits for JetStream to answer.
func (s *Server) connect(ctx context.Context) (*conns, error) {
	if s.cfg.NATSURL == "" {
		if t := s.cfg.RaftTiming; t != (rafttiming.Timing{}) {
			rafttiming.Set(t)
			s.log.Info("embedded NATS raft timing", "heartbeat", t.Heartbeat, "election_min", t.ElectionMin, "election_max", t.ElectionMax)
		}
		ns, u, err := startEmbeddedNATS(s.cfg.Listen, s.cfg.Data, s.cfg.Node, s.cfg.NATSCluster, s.log.With("component", "nats"))
		if err != nil {
			return nil, err
		}
		s.add(func() { stopEmbeddedNATS(ns, s.cfg.NATSCluster.Enabled()) })
		// The service connects over loopback TCP rather than nats.InProcessServer: the
		// in-process transport is a synchronous net.Pipe, and under load it measured
		// about a third slower than TCP here (docs/benchmarks.md).
		s.url, s.embedded = u, true
	} else {
		s.url = s.cfg.NATSURL
		s.natsOpts = append(s.natsOpts, nats.MaxReconnects(-1))
		s.natsOpts = append(s.natsOpts, s.cfg.NATSOptions...)
	}
	s.natsOpts = append(s.natsOpts, nats.Name("holdfast-serve"),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				s.log.Warn("NATS disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { s.log.Info("NATS reconnected", "url", nc.ConnectedUrlRedacted()) }))
	c := &conns{}
	var err error
	if c.nc, err = s.dial("holdfast-serve"); err != nil {
		return nil, err
	}
	for i := 0; i < 2; i++ {
		rc, err := s.dial(fmt.Sprintf("holdfast-serve-replies-%d", i))
		if err != nil {
			return nil, err
		}
		c.replies = append(c.replies, rc)
	}
	jsConn, err := s.dial("holdfast-serve-jetstream")
	if err != nil {
		return nil, err
	}
	if c.js, err = jetstream.New(jsConn); err != nil {
		return nil, err
	}
	// Events go on a connection of their own with no reconnect buffer: a publish made
	// while disconnected fails at once and is sent again by the publisher — which first
	// checks the shard is still served here — instead of being replayed on reconnect,
	// possibly after another node has published the shard's later events.
	evConn, err := s.dial("holdfast-serve-events", nats.ReconnectBufSize(-1))
	if err != nil {
		return nil, err
	}
	if c.events, err = jetstream.New(evConn); err != nil {
		return nil, err
	}
	return c, s.awaitJetStream(ctx, c.js)
}

// dial opens one of the process's connections, closed (after a flush) at shutdown.
func (s *Server) dial(name string, extra ...nats.Option) (*nats.Conn, error) {
	opts := append(append(s.natsOpts[:len(s.natsOpts):len(s.natsOpts)], nats.Name(name)), extra...)
	nc, err := nats.Connect(s.url, opts...)
	if err != nil {
		return nil, fmt.Errorf("connecting to NATS at %s: %s", natsconn.Redact(s.url), natsconn.RedactError(err, s.url))
	}
	s.add(func() {
		_ = nc.FlushTimeout(2 * time.Second)
		nc.Close()
	})
	return nc, nil
}

// awaitJetStream waits for JetStream to answer: a JetStream cluster that is still
// electing its meta leader does not answer at all, or answers "temporarily unavailable"
// (10008), so it asks in short attempts for up to 30 s.
func (s *Server) awaitJetStream(ctx context.Context, js jetstream.JetStream) error {
	var err error
	for deadline, said := time.Now().Add(30*time.Second), false; ; {
		actx, cancel := context.WithTimeout(ctx, 3*time.Second)
		_, err = js.AccountInfo(actx)
		cancel()
		if !(errors.Is(err, context.DeadlineExceeded) || cluster.JetStreamForming(err)) || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		if cluster.JetStreamForming(err) {
			if !said {
				s.log.Info("waiting for JetStream to elect its meta leader", "err", err)
				said = true
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return fmt.Errorf("NATS at %s has no JetStream for this account; Holdfast needs it for the %s stream (enable JetStream, or run without --nats to embed a NATS server)", natsconn.Redact(s.url), contract.StreamName)
	}
	if err != nil {
		return fmt.Errorf("checking JetStream at %s: %s", natsconn.Redact(s.url), natsconn.RedactError(err, s.url))
	}
	return nil
}

// provision records this process in the cluster's registry (or checks it against what
// is recorded) and, in a cluster, adopts the cluster's settings, which then shape the
// shards instead of this node's flags.
func (s *Server) provision(ctx context.Context, js jetstream.JetStream) (cluster.Settings, error) {
	kv, err := s.register(ctx, js)
	if err != nil || !s.clustered() {
		return cluster.Settings{}, err
	}
	settings, err := s.adoptSettings(ctx, kv)
	if err != nil {
		return cluster.Settings{}, err
	}
	return settings, nil
}

func (s *Server) clustered() bool { return s.cfg.Journal == JournalJetStream }

// startEvents creates or updates the events stream and starts its publisher, which the
// shards' recovery already feeds (what a crash left unpublished); in a cluster it
// publishes a shard's events only while the node serves it.
func (s *Server) startEvents(ctx context.Context, c *conns) error {
	ev := s.cfg.Events
	ev.Replicas = s.cfg.Replicas
	ev = ev.WithDefaults()
	if s.feed {
		// The journals store the events (cluster.Feed): the stream holds both, and no
		// publisher runs.
		ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return events.EnsureFeedStream(ectx, c.js, s.cfg.Prefix, cluster.NamesFor(s.cfg.Prefix).JournalSubjects(), ev)
	}
	if ev.Disabled {
		return nil
	}
	if s.node != nil {
		ev.Serving = s.node.Serving
	}
	ectx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	batched, err := events.EnsureStream(ectx, c.events, s.cfg.Prefix, ev)
	if err != nil {
		return err
	}
	if !batched {
		ev.Plain = true
		s.log.Warn("the NATS server does not take batched publishes: events are published one by one, and a shard's events may be stored out of lsn order when a NATS server is lost (use nats-server 2.14 or later)")
	}
	s.pub = events.NewPublisher(c.events, s.cfg.Prefix, s.cfg.Shards, ev, s.log.With("component", "events"), s.metrics)
	if err := s.pub.Start(); err != nil {
		return err
	}
	// Run after the shards stop (cleanups run backwards): their last events are in.
	s.addBounded("event publishing did not finish", s.pub.Close)
	return nil
}

// addBounded registers a stop that may wait on the network, bounded by StopTimeout; a
// stop that does not finish is logged as what.
func (s *Server) addBounded(what string, stop func(context.Context) error) {
	s.add(func() {
		ctx, cancel := context.WithTimeout(context.Background(), StopTimeout)
		defer cancel()
		if err := stop(ctx); err != nil {
			s.log.Warn(what, "err", err)
		}
	})
}

// startBridge creates the bridge over the started shards: the endpoints, which answer
// once serve starts it.
func (s *Server) startBridge(ctx context.Context, c *conns, timing contract.Timing) error {
	var routing *bridge.Routing
	var status bridge.StatusSource
	if s.clustered() {
		routing = &bridge.Routing{ShardSubject: cluster.NamesFor(s.cfg.Prefix).ShardSubject}
		status = func(ctx context.Context) ([]bridge.NodeStatus, []string, error) {
			states, owners, err := s.node.Status(ctx)
			nodes := make([]bridge.NodeStatus, len(states))
			for i, st := range states {
				nodes[i] = bridge.NodeStatus{Node: st.Node, RenewalAge: st.RenewalAge, Lapsing: st.Lapsing}
			}
			for _, l := range s.node.Lost() {
				if !slices.ContainsFunc(nodes, func(n bridge.NodeStatus) bool { return n.Node == l.Node }) {
					nodes = append(nodes, bridge.NodeStatus{Node: l.Node, Lost: true, LostAgo: time.Since(l.At), Held: l.Held})
				}
			}
			return nodes, owners, err
		}
	}
	var err error
	s.br, err = bridge.New(ctx, bridge.Config{Conn: c.nc, ReplyConns: c.replies, Metrics: s.metrics, Prefix: s.cfg.Prefix,
		Shards: s.cfg.Shards, Logger: s.log.With("component", "bridge"), Routing: routing,
		Node: s.cfg.Node, Status: status, Timing: timing, Holders: s.cfg.Holders})
	if err != nil {
		return err
	}
	s.addBounded("draining requests", s.br.Close)
	return nil
}

// join makes this process a live member of the cluster (a cluster only); it claims no
// shard until serve runs it.
func (s *Server) join(ctx context.Context, c *conns, settings cluster.Settings) error {
	if !s.clustered() {
		return nil
	}
	jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var err error
	var feed *cluster.FeedLayout
	if s.feed {
		feed = &cluster.FeedLayout{Stream: contract.StreamName, Metrics: s.metrics}
		if prefix := s.cfg.Prefix; !s.cfg.Events.Disabled {
			feed.Encode = func(e *actors.Event) (*nats.Msg, error) { return events.Message(prefix, e) }
		}
	}
	s.node, err = cluster.Join(jctx, cluster.Config{NC: c.nc, JS: c.js, Names: cluster.NamesFor(s.cfg.Prefix), Node: s.cfg.Node,
		Shards: s.cfg.Shards, Replicas: s.cfg.Replicas, OwnershipTTL: s.cfg.OwnershipTTL, Logger: s.log.With("component", "cluster"),
		Metrics: s.metrics, Settings: settings, OnSettings: s.configure, StopTimeout: StopTimeout,
		ServersGoWithNodes: s.embedded, Feed: feed})
	if err != nil {
		return err
	}
	s.add(s.node.Stop)
	return nil
}

// startShards starts the shard runtime: a single process recovers every shard from its
// journal now; a cluster node opens each shard as it claims it.
func (s *Server) startShards(c *conns, timing contract.Timing) error {
	s.log.Info("recovering shards", "data", s.cfg.Data, "shards", s.cfg.Shards)
	opts := actors.Options{Dir: s.cfg.Data, Shards: s.cfg.Shards, Slot: s.cfg.Slot, Kernel: s.cfg.Kernel,
		Observer: s.metrics, Logger: s.log.With("component", "actors"),
		Clock: s.cfg.Clock, Faults: s.cfg.Faults, SnapshotEvery: s.cfg.SnapshotEvery, BundleStep: s.cfg.BundleStep,
		JournalWindow: s.cfg.JournalWindow,
		WaitBound:     timing.Request - timing.ForwardRetry} // a shard's timeout reaches the bridge before its own
	if s.node != nil {
		opts.Storage, opts.Ownership = s.node.Storage, s.node
		s.peers = &peerLink{nc: c.nc, names: cluster.NamesFor(s.cfg.Prefix), log: s.log.With("component", "peers")}
		opts.Peers = s.peers
	}
	if s.pub != nil || s.feed {
		// A shard hands the publisher (or its journal) at most half its queue of client
		// writes' events; the rest is room for the entries it writes itself
		// (actors.Options.MaxUnpublished).
		opts.MaxUnpublished = s.cfg.Events.WithDefaults().MaxQueuedEvents / 2
	}
	if s.pub != nil {
		opts.Events = s.pub
	}
	var err error
	if s.sys, err = actors.Start(opts); err != nil {
		return fmt.Errorf("starting the shards: %w", err)
	}
	s.add(s.sys.Stop)
	if s.peers != nil {
		s.peers.sys = s.sys
	}
	s.metrics.Attach(s.sys, s.sys.Options().Kernel.SlotMillis)
	for i := uint32(0); i < s.cfg.Shards; i++ {
		if s.sys.Halted(i) {
			s.log.Error("shard halted at start; it answers engine_halted until its journal is repaired", "shard", i)
		}
	}
	return nil
}

// serve opens the metrics listener with the console, the endpoints, and in a cluster the
// node's rounds (claims, renewals, balancing).
func (s *Server) serve(metricsLn net.Listener) error {
	if metricsLn != nil {
		// The console's lookups and events tail go on a connection of their own: a
		// page left open never shares one with the request path.
		cc, err := s.dial("holdfast-serve-console")
		if err != nil {
			return err
		}
		page, err := console.New(console.Config{Conn: cc, Prefix: s.cfg.Prefix, Node: s.cfg.Node, Cluster: s.node != nil,
			Version: bridge.Version, Shards: s.sys, SlotMs: s.sys.Options().Kernel.SlotMillis, Rest: s.metrics.Handler()})
		if err != nil {
			return err
		}
		s.serveMetrics(metricsLn, page)
	}
	if err := s.br.Start(s.sys); err != nil {
		return err
	}
	// Copies are read out in chunks of up to 512 KiB: on a connection of their own, never
	// queued behind (or ahead of) the request path.
	bc, err := s.dial("holdfast-serve-backup")
	if err != nil {
		return err
	}
	s.backups = &backupLink{nc: bc, prefix: s.cfg.Prefix, sys: s.sys}
	if s.node != nil {
		s.node.Run(nodeHost{sys: s.sys, br: s.br, peers: s.peers, backups: s.backups, pub: s.pub, log: s.log.With("component", "cluster")})
		return nil
	}
	for k := range s.cfg.Shards { // a single process serves every shard
		if err := s.backups.Accept(k); err != nil {
			return err
		}
	}
	return nil
}
