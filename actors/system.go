package actors

import (
	"errors"
	"fmt"
	"log/slog"
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
	want   atomic.Pointer[kernel.Config] // what the shards are asked to run with (Configure)
	as     *actor.ActorSystem
	root   *actor.RootContext
	super  *actor.PID
	hosts  []*host
	stopCh chan struct{}
	wg     sync.WaitGroup
	closed atomic.Bool // Stop has begun: no shard opens again
}

// host is what outlives a shard actor's restarts: its storage, its mailbox accounting,
// and the writer that holds its journal open.
type host struct {
	sys     *System
	shard   uint32
	storage Storage
	pid     atomic.Pointer[actor.PID] // nil while the shard is not open here
	log     *slog.Logger
	queued  atomic.Int64
	halted  atomic.Bool
	refused atomic.Pointer[error] // why recovery refused, at the last start
	gauges  shardGauges
	disp    *shardDispatcher

	// openMu orders this shard's Open, Close and Stop. Per shard: one shard whose load
	// or close hangs on its storage (a journal stream electing a leader) holds up no
	// other shard's.
	openMu sync.Mutex

	mu  sync.Mutex
	gen uint64
	w   *writer

	// pubMu orders the writes of the published position and of the snapshots that must
	// not pass it; pubDurable is the position on disk, only moving forward. A start
	// sets it without pubMu: a write of the shard's previous opening may still hang on
	// its storage, and the new opening must not wait for it.
	pubMu      sync.Mutex
	pubDurable atomic.Uint64
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

// spawnShard asks the supervisor to spawn one shard's actor; it answers with its PID,
// which the System then owns (the future's answer orders the write before every read).
type spawnShard struct{ h *host }

func (s *supervisor) Receive(ctx actor.Context) {
	if m, ok := ctx.Message().(*spawnShard); ok {
		h := m.h
		disp := newShardDispatcher()
		h.disp = disp
		props := actor.PropsFromProducer(func() actor.Actor { return newShard(h) }, actor.WithDispatcher(disp))
		pid, err := ctx.SpawnNamed(props, fmt.Sprintf("shard-%d-%d", h.shard, h.nextGeneration()))
		if err != nil {
			ctx.Respond(err)
			return
		}
		ctx.Respond(pid)
	}
}

// Start starts the shard runtime and, without opts.Ownership, opens every shard. It returns
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
	want := opts.Kernel
	sys.want.Store(&want)
	for i := uint32(0); i < opts.Shards; i++ {
		sys.hosts = append(sys.hosts, &host{sys: sys, shard: i, log: opts.Logger})
	}
	strategy := actor.NewOneForOneStrategy(3, 10*time.Second, func(reason interface{}) actor.Directive {
		opts.Logger.Error("shard actor panicked; restarting from its journal", "reason", fmt.Sprint(reason))
		return actor.RestartDirective
	})
	props := actor.PropsFromProducer(func() actor.Actor { return &supervisor{sys: sys} },
		actor.WithSupervisor(strategy))
	sys.super = sys.root.Spawn(props)
	if opts.Ownership == nil {
		for i := uint32(0); i < opts.Shards; i++ {
			// A shard that refuses to recover stays, answering engine_halted: one bad
			// journal does not stop the process from serving the others.
			if err := sys.Open(i); err != nil && !errors.Is(err, ErrRefused) {
				sys.Stop()
				return nil, err
			}
		}
	}
	sys.wg.Add(1)
	go sys.ticker()
	if opts.Events != nil {
		sys.wg.Add(1)
		go sys.positions()
	}
	return sys, nil
}

// Open starts shard k here: its actor recovers from its storage and serves once Open
// returns (or answers engine_halted if recovery refused). Opening an open shard is a no-op.
func (s *System) Open(k uint32) error {
	h := s.hosts[k]
	h.openMu.Lock()
	defer h.openMu.Unlock()
	if s.closed.Load() {
		return errors.New("actors: system stopped")
	}
	if h.pid.Load() != nil {
		return nil
	}
	st, err := s.opts.Storage(k)
	if err != nil {
		return fmt.Errorf("shard %d storage: %w", k, err)
	}
	h.storage = st
	res, err := s.root.RequestFuture(s.super, &spawnShard{h: h}, time.Minute).Result()
	if err != nil {
		return fmt.Errorf("spawning shard %d: %w", k, err)
	}
	pid, ok := res.(*actor.PID)
	if !ok {
		return fmt.Errorf("spawning shard %d: %v", k, res)
	}
	// Wait until the shard has processed Started (recovery is in Started).
	if _, err := s.root.RequestFuture(pid, &ping{}, 10*time.Minute).Result(); err != nil {
		return fmt.Errorf("shard %d did not start: %w", k, err)
	}
	h.pid.Store(pid)
	if h.halted.Load() {
		reason := errors.New("halted")
		if p := h.refused.Load(); p != nil {
			reason = *p
		}
		if s.opts.Ownership != nil {
			s.closeLocked(h) // a cluster node gives the claim up; another try may succeed
		}
		return fmt.Errorf("%w: shard %d: %w", ErrRefused, k, reason)
	}
	return nil
}

// ErrRefused is Open's error when the shard's recovery refused (a journal or snapshot
// that cannot be read): the shard would only answer engine_halted.
var ErrRefused = errors.New("actors: shard refused to start")

// Close stops shard k here the way Stop does (sequenced entries made durable and
// answered, journal closed); requests sent to it afterwards answer engine_halted.
func (s *System) Close(k uint32) {
	h := s.hosts[k]
	h.openMu.Lock()
	defer h.openMu.Unlock()
	s.closeLocked(h)
}

// RecordPublished makes shard k's published position durable through the shard's
// storage, ordered with the shard's own writes of it (a closed shard's last position, at
// a hand-off): every write of the position goes through one place.
func (s *System) RecordPublished(k uint32, lsn uint64) error {
	h := s.hosts[k]
	h.openMu.Lock()
	st := h.storage
	h.openMu.Unlock()
	if st == nil {
		return fmt.Errorf("shard %d was never opened here", k)
	}
	return h.persistPublished(st, lsn)
}

func (s *System) closeLocked(h *host) {
	pid := h.pid.Swap(nil)
	if pid == nil {
		return
	}
	_ = s.root.PoisonFuture(pid).Wait()
	h.closeWriter()
	h.halted.Store(false) // a closed shard is not served here, neither up nor halted
	if h.disp != nil {
		h.disp.stop()
	}
}

// IsOpen reports whether shard k is served here.
func (s *System) IsOpen(k uint32) bool { return s.hosts[k].pid.Load() != nil }

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
				if pid := h.pid.Load(); pid != nil {
					s.root.Send(pid, &tick{})
				}
			}
		}
	}
}

// Shards is the number of shards.
func (s *System) Shards() uint32 { return s.opts.Shards }

// Config is what the shards are asked to run with: Options.Kernel, or what Configure
// set since.
func (s *System) Config() kernel.Config { return *s.want.Load() }

// Configure changes what the shards run with while they serve: the limits at once for
// the writes each shard admits next, and the shape by a configure entry in each open
// shard's journal (a shard opened later journals it at its start). The slot length
// cannot change.
func (s *System) Configure(cfg kernel.Config) error {
	cfg.Shard = 0
	if cfg.SlotMillis != s.opts.Kernel.SlotMillis {
		return fmt.Errorf("actors: the slot length cannot change (%dms, asked %dms)", s.opts.Kernel.SlotMillis, cfg.SlotMillis)
	}
	if cfg.MaxCommandBytes == 0 {
		cfg.MaxCommandBytes = kernel.DefaultMaxCommandBytes
	}
	if err := cfg.Validate(); err != nil {
		return err
	}
	s.want.Store(&cfg)
	for _, h := range s.hosts {
		if pid := h.pid.Load(); pid != nil {
			s.root.Send(pid, &reconfigureMsg{})
		}
	}
	return nil
}

// Options returns the effective options.
func (s *System) Options() Options { return s.opts }

// Write hands a client command to its shard. reply runs exactly once, on the shard's
// goroutine (or at once here when the shard's queue is full): it must not block.
func (s *System) Write(shard uint32, c *kernel.Command, reply func(*Reply)) {
	s.hand(shard, &writeMsg{cmd: c, reply: reply}, reply)
}

// Read hands a read to its shard; the same rules as Write.
func (s *System) Read(shard uint32, q ReadRequest, reply func(*Reply)) {
	s.hand(shard, &readMsg{req: q, reply: reply}, reply)
}

// hand sends a request to its shard, or answers it here: engine_halted when the shard is
// not open, overloaded past its queue (admit).
func (s *System) hand(shard uint32, msg any, reply func(*Reply)) {
	h := s.hosts[shard]
	pid := h.pid.Load()
	if pid == nil {
		reply(rejection(contract.CodeEngineHalted, notServed, 0))
		return
	}
	if s.admit(h, reply) {
		s.root.Send(pid, msg)
	}
}

// Barrier appends a barrier to shard k's journal behind every batch submitted so far
// and returns once it is stored (barrier.go): nil proves that no other writer appended
// to the journal since this shard claimed it. An error is a halted, closed or stopped
// shard, or a journal that refused the barrier (the shard halts).
func (s *System) Barrier(k uint32) error {
	h := s.hosts[k]
	pid := h.pid.Load()
	if pid == nil {
		return errors.New(notServed)
	}
	done := make(chan *Reply, 1)
	s.root.Send(pid, &barrierMsg{reply: func(r *Reply) { done <- r }})
	if r := <-done; r.Code != contract.CodeOK {
		return fmt.Errorf("shard %d: %s: %s", k, r.Code, r.Message)
	}
	return nil
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

// notServed answers a request for a shard that is not open here: in a cluster it is
// moving between nodes (indefinite; a retry reaches its new owner).
const notServed = "shard not served here (moving between nodes); retry the same operation_id"

// Halted reports whether a shard is halted.
func (s *System) Halted(shard uint32) bool { return s.hosts[shard].halted.Load() }

// QueueDepth is the number of requests admitted to a shard and not yet answered.
func (s *System) QueueDepth(shard uint32) int64 { return s.hosts[shard].queued.Load() }

// Stop drains every shard: sequenced entries are made durable and answered, journals
// are closed. Requests after Stop are not answered.
func (s *System) Stop() {
	if !s.closed.CompareAndSwap(false, true) {
		return
	}
	close(s.stopCh)
	s.wg.Wait()
	for _, h := range s.hosts {
		h.openMu.Lock() // an Open under way ends first
		s.closeLocked(h)
		h.openMu.Unlock()
	}
	_ = s.root.PoisonFuture(s.super).Wait()
	s.as.Shutdown()
}
