package actors

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// System is the shards of one process under one protoactor system, and the router that
// hands each request to its shard's actor without waiting.
type System struct {
	opts   Options
	as     *actor.ActorSystem
	root   *actor.RootContext
	super  *actor.PID
	hosts  []*host
	stopCh chan struct{}
	wg     sync.WaitGroup
}

// host is what outlives a shard actor's restarts: its directory, its mailbox accounting,
// and the writer that holds its journal open.
type host struct {
	sys    *System
	shard  uint32
	dir    string
	pid    *actor.PID
	log    *slog.Logger
	queued atomic.Int64
	halted atomic.Bool
	gauges shardGauges
	disp   *shardDispatcher

	mu  sync.Mutex
	gen uint64
	w   *writer

	pubMu      sync.Mutex
	pubDurable uint64 // published position on disk
}

func (h *host) nextGeneration() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.gen++
	return h.gen
}

// closeWriter stops a predecessor's writer, if a restarted actor left one behind.
func (h *host) closeWriter() {
	h.mu.Lock()
	w := h.w
	h.w = nil
	h.mu.Unlock()
	if w != nil {
		_ = w.stop()
	}
}

func (h *host) setWriter(w *writer) {
	h.mu.Lock()
	h.w = w
	h.mu.Unlock()
}

// supervisor spawns the shard actors and restarts one that panics. A restarted shard
// recovers from its journal; a shard that keeps panicking (a deterministic kernel panic
// replays the same way) is stopped and its requests answer engine_halted.
type supervisor struct{ sys *System }

// spawnShards asks the supervisor to spawn the shard actors; it answers with their PIDs,
// which the System then owns (the future's answer orders the write before every read).
type spawnShards struct{}

func (s *supervisor) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*spawnShards); ok {
		pids := make([]*actor.PID, len(s.sys.hosts))
		for i, h := range s.sys.hosts {
			disp := newShardDispatcher()
			h.disp = disp
			props := actor.PropsFromProducer(func() actor.Actor { return newShard(h) }, actor.WithDispatcher(disp))
			pid, err := ctx.SpawnNamed(props, fmt.Sprintf("shard-%d", h.shard))
			if err != nil {
				panic(err)
			}
			pids[i] = pid
		}
		ctx.Respond(pids)
	}
}

// Start opens (or creates) every shard under opts.Dir and starts their actors. It returns
// once every shard has recovered or refused to (a refused shard answers engine_halted).
func Start(opts Options) (*System, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	as := actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	sys := &System{opts: opts, as: as, root: as.Root, stopCh: make(chan struct{})}
	for i := uint32(0); i < opts.Shards; i++ {
		dir := filepath.Join(opts.Dir, fmt.Sprintf("shard-%03d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		sys.hosts = append(sys.hosts, &host{sys: sys, shard: i, dir: dir, log: opts.Logger})
	}
	strategy := actor.NewOneForOneStrategy(3, 10*time.Second, func(reason interface{}) actor.Directive {
		opts.Logger.Error("shard actor panicked; restarting from its journal", "reason", fmt.Sprint(reason))
		return actor.RestartDirective
	})
	props := actor.PropsFromProducer(func() actor.Actor { return &supervisor{sys: sys} },
		actor.WithSupervisor(strategy))
	sys.super = sys.root.Spawn(props)
	res, err := sys.root.RequestFuture(sys.super, &spawnShards{}, time.Minute).Result()
	if err != nil {
		return nil, fmt.Errorf("spawning shards: %w", err)
	}
	for i, pid := range res.([]*actor.PID) {
		sys.hosts[i].pid = pid
	}
	// Wait until every shard has processed Started (recovery is in Started).
	for _, h := range sys.hosts {
		f := sys.root.RequestFuture(h.pid, &ping{}, 10*time.Minute)
		if _, err := f.Result(); err != nil {
			return nil, fmt.Errorf("shard %d did not start: %w", h.shard, err)
		}
	}
	sys.wg.Add(1)
	go sys.ticker()
	return sys, nil
}

// ping is answered once a shard has finished Started.
type ping struct{}

func (s *System) ticker() {
	defer s.wg.Done()
	t := time.NewTicker(s.opts.Slot)
	defer t.Stop()
	for {
		select {
		case <-s.stopCh:
			return
		case <-t.C:
			for _, h := range s.hosts {
				s.root.Send(h.pid, &tick{})
			}
		}
	}
}

// Shards is the number of shards.
func (s *System) Shards() uint32 { return s.opts.Shards }

// Options returns the effective options.
func (s *System) Options() Options { return s.opts }

// Write hands a client command to its shard. reply runs exactly once, on the shard's
// goroutine (or at once here when the shard's queue is full): it must not block.
func (s *System) Write(shard uint32, c *kernel.Command, reply func(*Reply)) {
	h := s.hosts[shard]
	if !s.admit(h, reply) {
		return
	}
	s.root.Send(h.pid, &writeMsg{cmd: c, reply: reply})
}

// Read hands a read to its shard; the same rules as Write.
func (s *System) Read(shard uint32, q ReadRequest, reply func(*Reply)) {
	h := s.hosts[shard]
	if !s.admit(h, reply) {
		return
	}
	s.root.Send(h.pid, &readMsg{req: q, reply: reply})
}

// admit applies backpressure: a bounded number of requests per shard in the system.
func (s *System) admit(h *host, reply func(*Reply)) bool {
	if h.queued.Add(1) > int64(s.opts.MaxQueue) {
		h.queued.Add(-1)
		reply(rejection(contract.CodeOverloaded, "shard queue full; retry later", 0))
		return false
	}
	return true
}

// Published tells a shard that its events through lsn are durably published, so its
// snapshots may move past them.
func (s *System) Published(shard uint32, lsn uint64) {
	s.root.Send(s.hosts[shard].pid, &published{lsn: lsn})
}

// Halted reports whether a shard is halted.
func (s *System) Halted(shard uint32) bool { return s.hosts[shard].halted.Load() }

// QueueDepth is the number of requests admitted to a shard and not yet answered.
func (s *System) QueueDepth(shard uint32) int64 { return s.hosts[shard].queued.Load() }

// Stop drains every shard: sequenced entries are made durable and answered, journals
// are closed. Requests after Stop are not answered.
func (s *System) Stop() {
	close(s.stopCh)
	s.wg.Wait()
	for _, h := range s.hosts {
		_ = s.root.PoisonFuture(h.pid).Wait()
	}
	_ = s.root.PoisonFuture(s.super).Wait()
	for _, h := range s.hosts {
		h.closeWriter()
		if h.disp != nil {
			h.disp.stop()
		}
	}
	s.as.Shutdown()
}
