// Package bridge is Holdfast's NATS face: a micro service named "holdfast" with one
// endpoint per verb on `<prefix>.v1.<tenant>.<object>.<verb>`, the JSON and protobuf
// codec of the wire contract, and validation and routing of requests to their shard. It
// only serves requests: the composition root (server.Start) owns the event publisher
// (events) and the metrics (metrics), and hands the bridge the small Metrics interface
// it reports requests and forwards through.
//
// Life cycle:
//
//	br, err := bridge.New(ctx, bridge.Config{Conn: nc, Prefix: "holdfast", Shards: 8, Metrics: m, Logger: log})
//	err = br.Start(sys)  // endpoints answer from here on
//	...
//	br.Drain(ctx)        // stop taking requests, answer those in flight; then stop the shards
//
// Request path. An endpoint subscription runs its handler one message at a time, so the handler
// only hands the message to a bounded queue served by a pool of workers (answering
// overloaded at once when the queue is full). A worker decodes, validates, maps the
// request to a kernel command or read, and hands it to its shard with a callback. The
// callback runs on the shard's goroutine and, for a request of one shard, encodes the
// reply and publishes it right there (a hand-off fewer). A lease.list gathers every
// shard's part; the last part passes the call back to the workers through a channel that
// always has room (its capacity is the bound on requests in flight), and a worker merges,
// encodes and publishes. A timeout is answered the same way by the timer's goroutine.
package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/messages"
)

// ServiceName is the micro service name every Holdfast process registers.
const ServiceName = "holdfast"

// Version is the micro service version a bridge announces unless Config.Version says
// otherwise.
const Version = "0.1.0"

// QueueGroup is the queue group of every endpoint: the processes of one deployment
// share the requests of a subject.
const QueueGroup = "holdfast"

// Defaults of Config.
const (
	DefaultMaxRequestBytes = 128 << 10
	DefaultMaxInFlight     = 65536
	DefaultQueueLen        = 4096
)

// Metrics is what the bridge reports: each answered request, each forward; the
// process's metrics (metrics.Metrics) implement it.
type Metrics interface {
	Request(v contract.Verb, c contract.Code, took time.Duration)
	Forward(result string)
}

// noMetrics reports nothing (a bridge configured without Metrics).
type noMetrics struct{}

func (noMetrics) Request(contract.Verb, contract.Code, time.Duration) {}
func (noMetrics) Forward(string)                                      {}

// Config configures a bridge. Conn and Shards are required.
type Config struct {
	Conn *nats.Conn
	// Metrics receives the requests and forwards (nothing is reported when nil).
	Metrics Metrics
	// ReplyConns, when set, carry the replies: shard i answers on ReplyConns[i%len]. The
	// NATS server reads each connection on one goroutine, so spreading the replies (and
	// keeping JetStream on a connection of its own) keeps one connection's read loop from
	// becoming the service's bottleneck. Empty: replies go out on Conn.
	ReplyConns []*nats.Conn
	Prefix     string // subject prefix; contract.DefaultPrefix when empty
	Shards     uint32 // must equal the shard count of the actors.System given to Start
	Logger     *slog.Logger
	Version    string // micro service version; Version when empty

	// Workers serve decoding, validation, routing and reply encoding (default: two per
	// CPU; more only add hand-offs, and a server may run with more Ps than CPUs).
	// QueueLen bounds the requests waiting for a worker; past it a request
	// is answered overloaded at once.
	Workers  int
	QueueLen int
	// MaxInFlight bounds the requests handed to shards and not yet answered, over all
	// shards; past it: overloaded.
	MaxInFlight int
	// MaxRequestBytes bounds a request payload; past it: command_too_large.
	MaxRequestBytes int
	// Timing gives the request bound (reads add their wait_ms; past it the request is
	// answered timeout, indefinite, and a late answer is dropped), the forward retry and
	// the drain of a shard handed over (contract.Timing); NewTiming's defaults when zero.
	Timing contract.Timing

	// Node names this process in cluster.status; Status, in a cluster, is the cluster's
	// view (nil: this process serves every shard).
	Node   string
	Status StatusSource
	// Routing, in a cluster, forwards requests for shards served elsewhere (forward.go);
	// nil: this process serves every shard.
	Routing *Routing
	// Holders says whose a holder_id is (holders.go): a name by default, or bound to the
	// calling NATS user.
	Holders Holders
}

func (c *Config) withDefaults() (Config, error) {
	o := *c
	if o.Conn == nil {
		return o, errors.New("bridge: a NATS connection is required")
	}
	if o.Shards == 0 {
		return o, errors.New("bridge: shard count must be at least 1")
	}
	if o.Prefix == "" {
		o.Prefix = contract.DefaultPrefix
	}
	if err := contract.ValidPrefix(o.Prefix); err != nil {
		return o, err
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Version == "" {
		o.Version = Version
	}
	if o.Workers <= 0 {
		o.Workers = runtime.NumCPU() * 2
	}
	if o.QueueLen <= 0 {
		o.QueueLen = DefaultQueueLen
	}
	if o.MaxInFlight <= 0 {
		o.MaxInFlight = DefaultMaxInFlight
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = DefaultMaxRequestBytes
	}
	if o.Timing == (contract.Timing{}) {
		o.Timing = contract.NewTiming(0, 0)
	}
	if err := o.Timing.Validate(); err != nil {
		return o, err
	}
	if o.Metrics == nil {
		o.Metrics = noMetrics{}
	}
	return o, nil
}

// shardSystem is what the bridge needs of the shards; *actors.System provides it.
type shardSystem interface {
	Write(shard uint32, c *kernel.Command, reply func(*actors.Reply))
	Read(shard uint32, q actors.ReadRequest, reply func(*actors.Reply))
	Stats(shard uint32) actors.ShardStats
	Halted(shard uint32) bool
	IsOpen(shard uint32) bool
	Shards() uint32
	Options() actors.Options
}

// Bridge is one process's NATS service.
type Bridge struct {
	cfg     Config
	log     *slog.Logger
	nc      *nats.Conn
	metrics Metrics

	sys        shardSystem
	slotMillis uint64
	svc        *microService
	specs      []*verbSpec
	intake     chan *job
	// replies carries finished lease.list calls back to the workers. Its capacity
	// exceeds MaxInFlight, and only calls holding an in-flight slot send on it, once
	// each: a send never blocks a shard's goroutine.
	replies  chan *call
	inflight atomic.Int64
	// pending counts requests accepted by a handler and not yet answered; received
	// counts handler invocations. Drain waits on both.
	pending  atomic.Int64
	received atomic.Uint64
	quit     chan struct{}
	workers  sync.WaitGroup

	mu        sync.Mutex
	shardSubs map[uint32]*nats.Subscription // cluster: the shards served here
	started   bool
	drained   bool
	closed    bool
}

// New checks the configuration; Start serves the endpoints.
func New(_ context.Context, cfg Config) (*Bridge, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Bridge{cfg: c, log: c.Logger, nc: c.Conn, metrics: c.Metrics, quit: make(chan struct{})}, nil
}

// Start serves the endpoints over sys, which must have the configured shard count.
func (b *Bridge) Start(sys *actors.System) error {
	if sys == nil {
		return errors.New("bridge: Start needs the actors system")
	}
	return b.start(sys)
}

func (b *Bridge) start(sys shardSystem) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started {
		return errors.New("bridge: already started")
	}
	if sys.Shards() != b.cfg.Shards {
		return fmt.Errorf("bridge: configured for %d shards, the system has %d", b.cfg.Shards, sys.Shards())
	}
	b.sys = sys
	b.slotMillis = sys.Options().Kernel.SlotMillis
	// The specs are complete before the service exists: $SRV.STATS reads them.
	b.specs = verbSpecs()
	for _, s := range b.specs {
		s.bind(b.cfg.Prefix)
	}
	b.intake = make(chan *job, b.cfg.QueueLen)
	b.replies = make(chan *call, b.cfg.MaxInFlight+b.cfg.Workers+1)
	for i := 0; i < b.cfg.Workers; i++ {
		b.workers.Add(1)
		go b.worker()
	}
	svc, err := startMicroService(b.nc, b.log, microConfig{
		name:        ServiceName,
		version:     b.cfg.Version,
		description: "Holdfast lease service, wire contract v1",
		queueGroup:  QueueGroup,
		prefix:      b.cfg.Prefix,
		metadata: map[string]string{
			"prefix":  b.cfg.Prefix,
			"shards":  strconv.FormatUint(uint64(b.cfg.Shards), 10),
			"api":     "v1",
			"slot_ms": strconv.FormatUint(b.slotMillis, 10), // clients turn slots into times
			"routing": b.routingMetadata(),
		},
	}, b.specs, b.handle, b.noSuchVerb)
	if err != nil {
		close(b.quit)
		b.workers.Wait()
		return fmt.Errorf("bridge: starting the micro service: %w", err)
	}
	b.svc = svc
	// A round trip: once Start returns, the server knows every endpoint.
	if err := b.nc.Flush(); err != nil {
		_ = svc.stop()
		close(b.quit)
		b.workers.Wait()
		return fmt.Errorf("bridge: flushing the endpoint subscriptions: %w", err)
	}
	b.started = true
	return nil
}

// Drain stops taking requests (the micro service's subscriptions are drained), waits
// until every accepted request is answered (bounded by ctx), stops the workers and
// stops reporting published positions to the shards. Call it before stopping the
// shards.
func (b *Bridge) Drain(ctx context.Context) error {
	b.mu.Lock()
	if !b.started || b.drained {
		b.mu.Unlock()
		return nil
	}
	b.drained = true
	b.mu.Unlock()
	var firstErr error
	if err := b.svc.stop(); err != nil {
		firstErr = fmt.Errorf("bridge: stopping the micro service: %w", err)
	}
	// After a round trip the server has processed the unsubscribes: every request
	// that will still reach a handler is already in the client's pending queues.
	if err := b.nc.FlushWithContext(ctx); err != nil && firstErr == nil && !errors.Is(err, nats.ErrConnectionClosed) {
		firstErr = err
	}
	last := b.received.Load()
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	quiet := 0
	for quiet < 3 {
		select {
		case <-ctx.Done():
			if firstErr == nil {
				firstErr = fmt.Errorf("bridge: %d requests still unanswered: %w", b.pending.Load(), ctx.Err())
			}
			quiet = 3
			continue
		case <-t.C:
		}
		now := b.received.Load()
		if now == last && b.pending.Load() == 0 {
			quiet++
		} else {
			quiet = 0
		}
		last = now
	}
	close(b.quit)
	b.workers.Wait()
	return firstErr
}

// Close drains the bridge if it is not drained yet (Drain), for a start that failed
// half-way.
func (b *Bridge) Close(ctx context.Context) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	return b.Drain(ctx)
}

// job is a request accepted by an endpoint handler, waiting for a worker.
type job struct {
	spec      *verbSpec
	subject   string
	reply     string
	data      []byte
	header    nats.Header
	proto     bool
	forwarded bool   // sent to this shard's owner: never forwarded again
	part      uint32 // k+1: another node's lease.list asks for shard k's part only; 0: none
	start     time.Time
	// budget is what is left of the request's bound when another node forwarded it here
	// (0: the whole bound, Timing.Request): the owner answers within the front door's wait.
	budget time.Duration
}

// bound is how long the request may take here before it is answered timeout: the
// request bound, plus a read's wait_ms; for a forwarded request no more than the front
// door has left.
func (b *Bridge) bound(j *job, c *call) time.Duration {
	full := b.cfg.Timing.Request
	if c.op.kind != opWrite {
		full += c.op.read.Wait
	}
	if j.budget > 0 {
		return min(j.budget, full)
	}
	return full
}

// handle runs on the endpoint's subscription goroutine: it only queues the request.
func (b *Bridge) handle(spec *verbSpec, m *nats.Msg) {
	j := &job{spec: spec, subject: m.Subject, reply: m.Reply, data: m.Data,
		proto: isProtobuf(m.Header), start: time.Now()}
	if b.cfg.Routing != nil || b.cfg.Holders.Bound {
		j.header = m.Header // forwarded with the request; the caller's identity
	}
	b.handleJob(j)
}

// handleJob queues a request for the workers, or answers overloaded at once.
func (b *Bridge) handleJob(j *job) {
	spec := j.spec
	b.received.Add(1)
	b.pending.Add(1)
	select {
	case b.intake <- j:
	default:
		c := &call{b: b, spec: spec, reply: j.reply, proto: j.proto, start: j.start, forwarded: j.forwarded,
			res: rejectReply(contract.CodeOverloaded, "the service's request queue is full; retry later")}
		b.respond(c)
	}
}

// isProtobuf reports whether the request asks for the protobuf encoding.
func isProtobuf(h nats.Header) bool {
	v := h.Get(headerContentType)
	if v == "" {
		for k, vs := range h {
			if strings.EqualFold(k, headerContentType) && len(vs) > 0 {
				v = vs[0]
				break
			}
		}
	}
	if v == "" {
		return false
	}
	if i := strings.IndexByte(v, ';'); i >= 0 {
		v = v[:i]
	}
	return strings.EqualFold(strings.TrimSpace(v), contentTypeProtobuf)
}

func (b *Bridge) worker() {
	defer b.workers.Done()
	for {
		// Answers first: they hold in-flight slots and clients are waiting on them.
		select {
		case c := <-b.replies:
			b.respond(c)
			continue
		default:
		}
		select {
		case c := <-b.replies:
			b.respond(c)
		case j := <-b.intake:
			b.serve(j)
		case <-b.quit:
			// Answer what is already queued before leaving.
			for {
				select {
				case c := <-b.replies:
					b.respond(c)
				case j := <-b.intake:
					b.serve(j)
				default:
					return
				}
			}
		}
	}
}

// call is one request between a worker and its answer.
type call struct {
	b      *Bridge
	spec   *verbSpec
	reply  string
	proto  bool
	tenant string
	start  time.Time
	bound  time.Duration // how long it may take from start (Bridge.bound)
	op     op

	forwarded bool // another node's request: that node's $SRV.STATS counts it

	done   atomic.Bool // the first of answer and timeout wins
	timer  *time.Timer
	slot   bool // holds an in-flight slot
	res    *actors.Reply
	parts  []*actors.Reply // the listings and bulk verbs over every shard: each shard's part
	next   string          // a listing's next position (sealed with scope into next_cursor)
	scope  string          // a listing's cursor scope (cursor.go)
	caller caller          // who sent it, with bound holders (holders.go)
	status *messages.Reply // cluster.status, built whole by serveStatus
	left   atomic.Int32
}

// serve decodes, validates and routes one request.
func (b *Bridge) serve(j *job) {
	c := &call{b: b, spec: j.spec, reply: j.reply, proto: j.proto, start: j.start, forwarded: j.forwarded}
	if rej := b.prepare(c, j); rej != nil {
		c.res = rejectReply(rej.Code, rej.Message)
		b.respond(c)
		return
	}
	if j.part > 0 {
		b.servePart(j, c)
		return
	}
	forward := b.mustForward(j, c)
	if b.inflight.Add(1) > int64(b.cfg.MaxInFlight) {
		b.inflight.Add(-1)
		c.res = rejectReply(contract.CodeOverloaded, "too many requests in flight; retry later")
		b.respond(c)
		return
	}
	c.slot = true
	if forward {
		// A forward holds its in-flight slot for its round trip, so forwards are bounded
		// with everything else.
		go b.forward(j, c)
		return
	}
	if c.op.kind == opList || c.op.kind == opFan {
		// Before the timer: its expire reads whether the call has parts.
		c.parts = make([]*actors.Reply, b.cfg.Shards)
		c.left.Store(int32(b.cfg.Shards))
	}
	c.bound = b.bound(j, c)
	c.timer = time.AfterFunc(c.bound, c.expire)
	switch c.op.kind {
	case opWrite:
		b.sys.Write(c.op.shard, c.op.cmd, c.answer)
	case opRead:
		b.sys.Read(c.op.shard, c.op.read, c.answer)
	case opStatus:
		go b.serveStatus(c, j)
	case opList, opFan:
		for i := 0; i < int(b.cfg.Shards); i++ {
			if b.cfg.Routing != nil && !b.sys.IsOpen(uint32(i)) {
				go b.remotePart(j, uint32(i), c.part(i))
				continue
			}
			c.op.servePart(b.sys, uint32(i), c.part(i))
		}
	}
}

// answer is the shard's reply callback: it runs on the shard's goroutine, where enqueue
// publishes the reply.
func (c *call) answer(r *actors.Reply) {
	if !c.settle() {
		return // timed out already: the late answer is dropped
	}
	if r.Elsewhere && c.b.cfg.Routing != nil {
		go c.b.leaseVerbAtHome(c, r)
		return
	}
	c.res = r
	c.b.enqueue(c)
}

// settle claims the call's one answer for the caller, against its timer (which it stops):
// false when the timer has answered already. Whoever answers a call settles it first.
func (c *call) settle() bool {
	if !c.done.CompareAndSwap(false, true) {
		return false
	}
	c.timer.Stop()
	return true
}

// part is the callback of one shard's part of a lease.list.
func (c *call) part(i int) func(*actors.Reply) {
	return func(r *actors.Reply) {
		c.parts[i] = r
		if c.left.Add(-1) != 0 {
			return
		}
		if !c.settle() {
			return
		}
		c.b.enqueue(c)
	}
}

// expire answers timeout when the shard has not answered within the bound.
func (c *call) expire() {
	if !c.done.CompareAndSwap(false, true) {
		return
	}
	// Late parts of a lease.list may still land in c.parts; a rejection never reads them.
	c.res = rejectReply(contract.CodeTimeout, "no answer from the shard in time; retry the same operation_id to learn the outcome")
	c.b.enqueue(c)
}

func (b *Bridge) enqueue(c *call) {
	if c.parts == nil {
		// One shard's answer: encode and publish right here, on the shard's goroutine.
		// The encoders are append-based and take well under a microsecond, and a publish
		// only copies into the connection's buffer, so the shard replies itself and
		// saves a goroutine hand-off per request. lease.list merges several shards'
		// answers and goes through the workers.
		b.respond(c)
		return
	}
	select {
	case b.replies <- c:
	default:
		// Unreachable while the capacity invariant holds; never block a shard.
		go func() { b.replies <- c }()
	}
}

// respond encodes the call's result, publishes it to the reply subject and accounts
// for it.
func (b *Bridge) respond(c *call) {
	defer b.settled(c)
	if c.res == nil && c.parts != nil {
		c.res, c.next = c.op.merge(c.spec.verb, c.parts)
	}
	code := c.res.Code
	took := time.Since(c.start)
	b.metrics.Request(c.spec.verb, code, took)
	if !c.forwarded {
		rejected := ""
		if code.IsRejection() {
			rejected = code.String()
		}
		c.spec.stats.record(rejected, took)
	}
	if c.reply == "" {
		return // a publish without a reply subject: executed, nobody to answer
	}
	body, err := encodeReply(c)
	if err != nil {
		// Views hold validated ASCII ids, so encoding cannot fail; say so if it does.
		b.log.Error("encoding a reply", "verb", c.spec.verb.String(), "err", err)
		c.res = rejectReply(contract.CodeInvalidRequest, "the reply could not be encoded")
		code = c.res.Code
		body, _ = encodeReply(c)
	}
	nc := b.nc
	if n := len(b.cfg.ReplyConns); n > 0 {
		nc = b.cfg.ReplyConns[int(c.op.shard)%n]
	}
	if err := nc.PublishMsg(replyMsg(c.reply, c.proto, code, body)); err != nil {
		b.log.Debug("publishing a reply", "verb", c.spec.verb.String(), "err", err)
	}
}

// settled accounts for an answered call: no longer pending, its in-flight slot free.
func (b *Bridge) settled(c *call) {
	b.pending.Add(-1)
	if c.slot {
		b.inflight.Add(-1)
	}
}

// replyMsg is the NATS message of a reply: its content type, and for a rejection the
// micro error headers (the code and its HTTP status).
func replyMsg(subject string, proto bool, code kernel.Code, body []byte) *nats.Msg {
	msg := &nats.Msg{Subject: subject, Data: body, Header: nats.Header{}}
	if proto {
		msg.Header.Set(headerContentType, contentTypeProtobuf)
	} else {
		msg.Header.Set(headerContentType, contentTypeJSON)
	}
	if code.IsRejection() {
		msg.Header.Set(micro.ErrorHeader, code.String())
		msg.Header.Set(micro.ErrorCodeHeader, strconv.Itoa(code.HTTPStatus()))
	}
	return msg
}

// rejectReply is a rejection found by the bridge itself.
func rejectReply(code kernel.Code, msg string) *actors.Reply {
	return &actors.Reply{Code: code, Message: msg, MemberIndex: -1}
}

// routingMetadata says how clients may route (the service's metadata "routing"): "direct"
// when shard owners take requests on their shard subjects (a cluster), "" otherwise.
func (b *Bridge) routingMetadata() string {
	if b.cfg.Routing != nil {
		return "direct"
	}
	return ""
}
