package bridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"
	"github.com/nats-io/nuid"
)

// microService is the bridge's NATS micro service: the endpoint subscriptions (queue
// group holdfast) and the answers to the micro protocol's PING, INFO and STATS on
// $SRV.<VERB>, $SRV.<VERB>.holdfast and $SRV.<VERB>.holdfast.<id>, in micro's own types, so
// `nats micro ls|info|stats` read it as they read any micro service.
//
// Why not micro.AddService: micro counts a request, its time and its error around the
// endpoint handler, and a Holdfast handler only queues the request — the reply goes out
// later, from a worker or a shard's goroutine. With micro's service, $SRV.STATS said 0
// errors after any number of rejections and an average time of 1–2 µs (the hand-off).
// Here each endpoint's numbers are recorded when its reply is published
// (endpointStats.record), so num_errors counts the rejections and processing_time is the
// time from receipt to reply.
type microService struct {
	nc       *nats.Conn
	log      *slog.Logger
	identity micro.ServiceIdentity
	desc     string
	group    string // the endpoints' queue group
	started  time.Time
	specs    []*verbSpec

	mu        sync.Mutex
	endpoints *nats.Subscription // every verb's requests: <prefix>.v1.*.*.*
	control   []*nats.Subscription
	stopped   bool
}

// microConfig is what a bridge announces about itself.
type microConfig struct {
	name, version, description, queueGroup string
	prefix                                 string
	metadata                               map[string]string
}

// startMicroService subscribes the endpoints of specs (each message to handle, a subject
// that names no verb to unknown) and the control subjects. On an error nothing stays
// subscribed.
//
// The endpoints are one subscription, <prefix>.v1.*.*.* (tenant, object, action), and
// the verb is looked up by the subject's last two tokens: a request for a verb that does
// not exist (a typo, a newer client) then reaches the service, which says so and names
// the nearest verb, where with one subscription per verb NATS would answer "no
// responders", as it does for a stopped server. Events (<prefix>.v1.<tenant>.events.
// <object>.<verb>) have a token more and never match. $SRV.INFO still lists each verb as
// its own endpoint.
func startMicroService(nc *nats.Conn, log *slog.Logger, cfg microConfig, specs []*verbSpec, handle func(*verbSpec, *nats.Msg), unknown func(*nats.Msg)) (*microService, error) {
	ms := &microService{
		nc:  nc,
		log: log,
		identity: micro.ServiceIdentity{Name: cfg.name, ID: nuid.Next(), Version: cfg.version,
			Metadata: maps.Clone(cfg.metadata)},
		desc:    cfg.description,
		group:   cfg.queueGroup,
		started: time.Now().UTC(),
		specs:   specs,
	}
	fail := func(err error) (*microService, error) {
		_ = ms.stop()
		return nil, err
	}
	byVerb := make(map[string]*verbSpec, len(specs))
	for _, s := range specs {
		byVerb[s.verb.String()] = s
	}
	sub, err := nc.QueueSubscribe(cfg.prefix+".v1.*.*.*", cfg.queueGroup, func(m *nats.Msg) {
		if spec := byVerb[verbOf(m.Subject)]; spec != nil {
			handle(spec, m)
			return
		}
		unknown(m)
	})
	if err != nil {
		return fail(fmt.Errorf("subscribing the endpoints %s.v1.*.*.*: %w", cfg.prefix, err))
	}
	// One subscription holds what the verbs' own held: room for each verb's default.
	_ = sub.SetPendingLimits(nats.DefaultSubPendingMsgsLimit, 4*nats.DefaultSubPendingBytesLimit)
	ms.endpoints = sub
	ping, _ := json.Marshal(micro.Ping{ServiceIdentity: ms.identity, Type: micro.PingResponseType})
	for _, v := range []struct {
		verb   micro.Verb
		answer func() []byte
	}{
		{micro.PingVerb, func() []byte { return ping }},
		{micro.InfoVerb, ms.info},
		{micro.StatsVerb, ms.stats},
	} {
		for _, subj := range []struct{ kind, id string }{{"", ""}, {cfg.name, ""}, {cfg.name, ms.identity.ID}} {
			subject, err := micro.ControlSubject(v.verb, subj.kind, subj.id)
			if err != nil {
				return fail(err)
			}
			answer := v.answer
			sub, err := nc.Subscribe(subject, func(m *nats.Msg) {
				if m.Reply == "" {
					return
				}
				if err := m.Respond(answer()); err != nil {
					ms.log.Debug("answering a micro control request", "subject", m.Subject, "err", err)
				}
			})
			if err != nil {
				return fail(fmt.Errorf("subscribing %s: %w", subject, err))
			}
			ms.control = append(ms.control, sub)
		}
	}
	prev := nc.ErrorHandler()
	nc.SetErrorHandler(func(c *nats.Conn, sub *nats.Subscription, err error) {
		ms.asyncError(sub, err)
		if prev != nil {
			prev(c, sub, err)
		}
	})
	return ms, nil
}

// asyncError counts an async error of an endpoint subscription (a slow consumer: the
// process fell behind and NATS dropped requests) as micro does, and logs it.
func (ms *microService) asyncError(sub *nats.Subscription, err error) {
	if sub == nil {
		return
	}
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.stopped || sub != ms.endpoints {
		return
	}
	// Which verbs lost requests is not known: every endpoint's errors count it.
	for _, s := range ms.specs {
		s.stats.fail(err.Error())
	}
	ms.log.Error("endpoint subscription", "subject", sub.Subject, "err", err)
}

// verbOf is the object.action of a request subject (its last two tokens).
func verbOf(subject string) string {
	i := strings.LastIndexByte(subject, '.')
	if i <= 0 {
		return ""
	}
	j := strings.LastIndexByte(subject[:i], '.')
	return subject[j+1:]
}

// info is the INFO answer: the endpoints, their subjects, queue group and metadata.
func (ms *microService) info() []byte {
	eps := make([]micro.EndpointInfo, 0, len(ms.specs))
	for _, s := range ms.specs {
		eps = append(eps, micro.EndpointInfo{Name: s.endpointName(), Subject: s.subject, QueueGroup: ms.group,
			Metadata: s.endpointMetadata()})
	}
	b, _ := json.Marshal(micro.Info{ServiceIdentity: ms.identity, Type: micro.InfoResponseType,
		Description: ms.desc, Endpoints: eps})
	return b
}

// stats is the STATS answer: each endpoint's requests, errors and processing time.
func (ms *microService) stats() []byte {
	eps := make([]*micro.EndpointStats, 0, len(ms.specs))
	for _, s := range ms.specs {
		e := s.stats.snapshot()
		e.Name, e.Subject, e.QueueGroup = s.endpointName(), s.subject, ms.group
		eps = append(eps, e)
	}
	b, _ := json.Marshal(micro.Stats{ServiceIdentity: ms.identity, Type: micro.StatsResponseType,
		Started: ms.started, Endpoints: eps})
	return b
}

// stop drains the endpoint subscriptions (the requests already delivered to this client
// are still handled) and removes the control subscriptions.
func (ms *microService) stop() error {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.stopped {
		return nil
	}
	ms.stopped = true
	var errs []error
	if sub := ms.endpoints; sub != nil {
		if err := sub.Drain(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			errs = append(errs, fmt.Errorf("draining %s: %w", sub.Subject, err))
		}
	}
	for _, sub := range ms.control {
		if err := sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
			errs = append(errs, fmt.Errorf("unsubscribing %s: %w", sub.Subject, err))
		}
	}
	return errors.Join(errs...)
}

// endpointStats is one endpoint's numbers for $SRV.STATS, recorded when a reply is
// published.
type endpointStats struct {
	requests  atomic.Int64
	errs      atomic.Int64
	nanos     atomic.Int64
	lastError atomic.Pointer[string]
}

// record counts one answered request that took d; code is the rejection's code name
// ("" for ok). Only the code is kept as last_error: a message names the caller's
// objects, and $SRV.STATS is read across tenants.
func (s *endpointStats) record(code string, d time.Duration) {
	s.requests.Add(1)
	s.nanos.Add(int64(d))
	if code != "" {
		s.fail(code)
	}
}

func (s *endpointStats) fail(what string) {
	s.errs.Add(1)
	s.lastError.Store(&what)
}

func (s *endpointStats) snapshot() *micro.EndpointStats {
	e := &micro.EndpointStats{
		NumRequests:    int(s.requests.Load()),
		NumErrors:      int(s.errs.Load()),
		ProcessingTime: time.Duration(s.nanos.Load()),
	}
	if p := s.lastError.Load(); p != nil {
		e.LastError = *p
	}
	if e.NumRequests > 0 {
		e.AverageProcessingTime = e.ProcessingTime / time.Duration(e.NumRequests)
	}
	return e
}

// endpointName is the endpoint's micro name: lease_reserve.
func (s *verbSpec) endpointName() string { return s.verb.Object() + "_" + s.verb.Action() }

// endpointMetadata names the endpoint's verb and whether it writes.
func (s *verbSpec) endpointMetadata() map[string]string {
	kind := "read"
	if s.verb.IsWrite() {
		kind = "write"
	}
	return map[string]string{"verb": s.verb.String(), "kind": kind}
}
