// Package metrics holds the process's Prometheus metrics in their own registry, and its
// /metrics, /livez and /readyz (= /healthz) endpoints. The composition root
// (server.Start) builds it first and hands each part of the process the small interface
// it reports through: the shard runtime's actors.Observer, the event publisher's
// events.Metrics, the cluster node's cluster.Metrics, the bridge's bridge.Metrics
// (requests and forwards). Nothing here serves requests or publishes events.
package metrics

import (
	"fmt"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/wire"
)

// Metrics holds the process's Prometheus metrics in their own registry. It is the
// actors.Observer of the shard runtime and reads shard gauges at scrape time (Attach).
type Metrics struct {
	reg    *prometheus.Registry
	shards uint32
	nc     *nats.Conn
	sys    atomic.Pointer[sysBox]

	batchSize     []prometheus.Observer
	appendLatency []prometheus.Observer
	lateness      []prometheus.Observer // per shard: lease expiry lateness

	requests *prometheus.CounterVec
	reqCache [32][64]atomic.Pointer[counterBox]
	duration [contract.VerbCount]prometheus.Observer

	published     *prometheus.CounterVec
	publishErrors *prometheus.CounterVec
	dropped       *prometheus.CounterVec
	overflowed    *prometheus.GaugeVec
	queued        *prometheus.GaugeVec
	publishedLSNs *prometheus.GaugeVec

	renewals     *prometheus.CounterVec
	claimsLost   prometheus.Counter
	acquisitions prometheus.Counter
	handoffs     prometheus.Counter
	shardsOwned  prometheus.Gauge
	forwarded    *prometheus.CounterVec
}

// Shards is what the metrics read of the shard runtime at scrape time; *actors.System
// provides it.
type Shards interface {
	Stats(shard uint32) actors.ShardStats
	Halted(shard uint32) bool
	IsOpen(shard uint32) bool
}

type sysBox struct {
	sys        Shards
	slotMillis uint64
}

type counterBox struct{ c prometheus.Counter }

// New builds the metrics of a process of shards shards, of build version, whose requests
// come on nc (its connection state is part of /readyz).
func New(shards uint32, nc *nats.Conn, version string) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), shards: shards, nc: nc}
	m.shardMetrics()
	m.requestMetrics()
	m.eventMetrics()
	m.clusterMetrics()
	m.processMetrics(version)
	m.reg.MustRegister(&shardCollector{m: m})
	return m
}

// shardMetrics: per shard, journal batches, append latency and expiry lateness.
func (m *Metrics) shardMetrics() {
	batch := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "holdfast_shard_batch_entries",
		Help:    "Entries per journal append (group commit batch size).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 12),
	}, []string{"shard"})
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "holdfast_shard_append_duration_seconds",
		Help:    "Duration of one journal append including its fsync.",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16),
	}, []string{"shard"})
	late := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "holdfast_lease_expiry_lateness_seconds",
		Help: "How late after its deadline a lease's expiry was committed (expired, or a keep-alive lease " +
			"moved to revoking): holds end late, never early. Its _count counts the expiries.",
		Buckets: []float64{0, 0.01, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60},
	}, []string{"shard"})
	for i := uint32(0); i < m.shards; i++ {
		l := strconv.FormatUint(uint64(i), 10)
		m.batchSize = append(m.batchSize, batch.WithLabelValues(l))
		m.appendLatency = append(m.appendLatency, latency.WithLabelValues(l))
		m.lateness = append(m.lateness, late.WithLabelValues(l))
	}
	m.reg.MustRegister(batch, latency, late)
}

// requestMetrics: requests by verb and code, their durations, forwards.
func (m *Metrics) requestMetrics() {
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "holdfast_requests_total",
		Help: "Requests answered, by verb and result code.",
	}, []string{"verb", "code"})
	dur := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "holdfast_request_duration_seconds",
		Help:    "Time from a request's arrival to its reply, by verb.",
		Buckets: prometheus.ExponentialBuckets(100e-6, 2, 18),
	}, []string{"verb"})
	for _, v := range contract.Verbs() {
		m.duration[v] = dur.WithLabelValues(v.String())
	}
	m.forwarded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "holdfast_forwarded_requests_total",
		Help: "Requests forwarded to the node serving their shard, by result (answered, no_owner).",
	}, []string{"result"})
	for _, r := range []string{"answered", "no_owner"} {
		m.forwarded.WithLabelValues(r)
	}
	m.reg.MustRegister(m.requests, dur, m.forwarded)
}

// eventMetrics: the event publisher's, per shard. Every series an alert or a dashboard
// reads exists from the start, at zero: a rate() over a series that appears only with its
// first error misses that error.
func (m *Metrics) eventMetrics() {
	perShard := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"shard"})
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, []string{"shard"})
	}
	m.published = perShard("holdfast_events_published_total", "Events acknowledged by the HOLDFAST_EVENTS stream.")
	m.publishErrors = perShard("holdfast_events_publish_errors_total", "Failed event publishes (each is retried with the same message id).")
	m.dropped = perShard("holdfast_events_dropped_total", "Events dropped because the shard's event queue overflowed; republished at the next start.")
	m.overflowed = gauge("holdfast_events_overflowed", "1 when the shard's event queue overflowed and its published position is stopped until restart.")
	m.queued = gauge("holdfast_events_queued", "Events waiting to be published.")
	m.publishedLSNs = gauge("holdfast_events_published_lsn", "Every event of the shard through this lsn is acknowledged by the stream.")
	for i := uint32(0); i < m.shards; i++ {
		l := strconv.FormatUint(uint64(i), 10)
		m.published.WithLabelValues(l)
		m.publishErrors.WithLabelValues(l)
		m.dropped.WithLabelValues(l)
		m.overflowed.WithLabelValues(l)
		m.queued.WithLabelValues(l)
		m.publishedLSNs.WithLabelValues(l)
	}
	m.reg.MustRegister(m.published, m.publishErrors, m.dropped, m.overflowed, m.queued, m.publishedLSNs)
}

// clusterMetrics: a cluster node's claims and hand-offs.
func (m *Metrics) clusterMetrics() {
	m.renewals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "holdfast_cluster_claim_renewals_total",
		Help: "Renewals of this node's shard claims, by result (ok, failed).",
	}, []string{"result"})
	for _, r := range []string{"ok", "failed"} {
		m.renewals.WithLabelValues(r)
	}
	m.claimsLost = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "holdfast_cluster_claims_lost_total",
		Help: "Shard claims this node gave up without a hand-off (taken by another node, or gone and not made again).",
	})
	m.acquisitions = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "holdfast_cluster_shards_acquired_total",
		Help: "Shards this node claimed and opened.",
	})
	m.handoffs = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "holdfast_cluster_handoffs_total",
		Help: "Shards this node handed over in order (balance, stop).",
	})
	m.shardsOwned = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "holdfast_cluster_shards_owned",
		Help: "Shards this node serves.",
	})
	m.reg.MustRegister(m.renewals, m.claimsLost, m.acquisitions, m.handoffs, m.shardsOwned)
}

// processMetrics: the build, the NATS connection, Go's and the process's own.
func (m *Metrics) processMetrics(version string) {
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "holdfast_build_info",
		Help:        "1, labelled with the running build.",
		ConstLabels: prometheus.Labels{"version": version, "go_version": runtime.Version()},
	})
	buildInfo.Set(1)
	m.reg.MustRegister(buildInfo, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if nc := m.nc; nc != nil {
		m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "holdfast_nats_connected",
			Help: "1 while the service's NATS connection is connected, 0 while it is reconnecting or closed.",
		}, func() float64 {
			if nc.IsConnected() {
				return 1
			}
			return 0
		}))
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "holdfast_nats_reconnects_total",
			Help: "Reconnects of the service's NATS connection.",
		}, func() float64 { return float64(nc.Stats().Reconnects) }))
	}
}

// Attach makes the shard gauges and /readyz read sys, whose slots are slotMillis long.
func (m *Metrics) Attach(sys Shards, slotMillis uint64) {
	m.sys.Store(&sysBox{sys: sys, slotMillis: slotMillis})
}

// Expired implements actors.Observer.
func (m *Metrics) Expired(shard uint32, late time.Duration) {
	if shard < m.shards {
		m.lateness[shard].Observe(late.Seconds())
	}
}

// Batch implements actors.Observer.
func (m *Metrics) Batch(shard uint32, entries int, took time.Duration) {
	if shard >= m.shards {
		return
	}
	m.batchSize[shard].Observe(float64(entries))
	m.appendLatency[shard].Observe(took.Seconds())
}

// Request counts one answered request of verb v with code c, and how long it took
// (bridge.Metrics).
func (m *Metrics) Request(v contract.Verb, c contract.Code, took time.Duration) {
	if int(v) >= len(m.reqCache) || int(c) >= len(m.reqCache[0]) {
		m.requests.WithLabelValues(v.String(), c.String()).Inc()
		return
	}
	p := &m.reqCache[v][c]
	box := p.Load()
	if box == nil {
		box = &counterBox{c: m.requests.WithLabelValues(v.String(), c.String())}
		p.Store(box)
	}
	box.c.Inc()
	if d := m.duration[v]; d != nil {
		d.Observe(took.Seconds())
	}
}

func (m *Metrics) EventPublished(shard string, real bool) {
	if real {
		m.published.WithLabelValues(shard).Inc()
	}
}

func (m *Metrics) PublishError(shard string) { m.publishErrors.WithLabelValues(shard).Inc() }

func (m *Metrics) EventsDropped(shard string, n int) {
	m.dropped.WithLabelValues(shard).Add(float64(n))
}

func (m *Metrics) EventsOverflowed(shard string) { m.overflowed.WithLabelValues(shard).Set(1) }

func (m *Metrics) EventsQueued(shard string, n int) { m.queued.WithLabelValues(shard).Add(float64(n)) }

func (m *Metrics) PublishedLSN(shard string, lsn uint64) {
	m.publishedLSNs.WithLabelValues(shard).Set(float64(lsn))
}

// shardCollector reads every shard's gauges at scrape time.
type shardCollector struct{ m *Metrics }

var (
	descApplied = prometheus.NewDesc("holdfast_shard_applied_lsn",
		"Last applied (durable) log position of the shard.", []string{"shard"}, nil)
	descQueue = prometheus.NewDesc("holdfast_shard_queue_depth",
		"Requests admitted to the shard and not yet answered.", []string{"shard"}, nil)
	descBacklog = prometheus.NewDesc("holdfast_shard_expiry_backlog",
		"Leases whose deadline has come and whose expiry is not yet applied.", []string{"shard"}, nil)
	descSlotLag = prometheus.NewDesc("holdfast_shard_slot_lag",
		"Clock slot minus the slot of the shard's last applied entry (grows while the shard is idle).", []string{"shard"}, nil)
	descExpiryLag = prometheus.NewDesc("holdfast_shard_expiry_lag_seconds",
		"How far past its deadline the shard's most overdue lease is, not yet expired (0 when none is due): "+
			"alert when it stays above a few slots.", []string{"shard"}, nil)
	descServing = prometheus.NewDesc("holdfast_shard_serving",
		"1 when this process serves the shard (in a cluster: owns it), 0 otherwise; summed over a cluster's nodes, "+
			"0 is a shard without an owner.", []string{"shard"}, nil)
	descHalted = prometheus.NewDesc("holdfast_shard_halted",
		"1 when the shard is halted (journal failure or refused recovery).", []string{"shard"}, nil)
	descEntries = prometheus.NewDesc("holdfast_shard_table_entries",
		"Entries in one of the shard's bounded tables (a deleted object counts until its slot is free: one history window).", []string{"shard", "table"}, nil)
	descCapacity = prometheus.NewDesc("holdfast_shard_table_capacity",
		"Configured bound of one of the shard's tables.", []string{"shard", "table"}, nil)
	descLeases = prometheus.NewDesc("holdfast_leases",
		"Live leases of the shard by state (reserved, active, revoking).", []string{"shard", "state"}, nil)
	descRangeFill = prometheus.NewDesc("holdfast_range_fill_ratio",
		"Allocated values over the values a range hands out (excluded ones left out), for its shard's fullest ranges (at most 10 per shard, refreshed every second).",
		[]string{"shard", "tenant", "range"}, nil)
	descPoolFill = prometheus.NewDesc("holdfast_pool_fill_ratio",
		"Reserved, active and consumed units over the capacity, for its shard's fullest pools (at most 10 per shard, refreshed every second).",
		[]string{"shard", "tenant", "pool"}, nil)
	descUtil = prometheus.NewDesc("holdfast_shard_table_utilization",
		"Fill of one of the shard's tables, 0 to 1; at 1 the table answers its *_table_full code.", []string{"shard", "table"}, nil)
)

func (c *shardCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descApplied, descServing, descQueue, descBacklog, descSlotLag, descExpiryLag, descHalted, descEntries,
		descCapacity, descUtil, descLeases, descRangeFill, descPoolFill} {
		ch <- d
	}
}

func (c *shardCollector) Collect(ch chan<- prometheus.Metric) {
	box := c.m.sys.Load()
	if box == nil {
		return
	}
	for i := uint32(0); i < c.m.shards; i++ {
		l := strconv.FormatUint(uint64(i), 10)
		st := box.sys.Stats(i)
		ch <- prometheus.MustNewConstMetric(descApplied, prometheus.GaugeValue, float64(st.AppliedLSN), l)
		serving := 0.0
		if box.sys.IsOpen(i) {
			serving = 1
		}
		ch <- prometheus.MustNewConstMetric(descServing, prometheus.GaugeValue, serving, l)
		ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(st.QueueDepth), l)
		ch <- prometheus.MustNewConstMetric(descBacklog, prometheus.GaugeValue, float64(st.ExpiryBacklog), l)
		for _, ls := range []struct {
			state string
			n     int
		}{{"reserved", st.Tables.Reserved}, {"active", st.Tables.Active}, {"revoking", st.Tables.Revoking}} {
			ch <- prometheus.MustNewConstMetric(descLeases, prometheus.GaugeValue, float64(ls.n), l, ls.state)
		}
		ch <- prometheus.MustNewConstMetric(descSlotLag, prometheus.GaugeValue, float64(st.ClockSlot)-float64(st.AppliedSlot), l)
		lag := 0.0
		if d := st.Tables.NextDeadline; d != 0 && st.ClockSlot > d {
			lag = float64(st.ClockSlot-d) * float64(box.slotMillis) / 1000
		}
		ch <- prometheus.MustNewConstMetric(descExpiryLag, prometheus.GaugeValue, lag, l)
		halted := 0.0
		if st.Halted {
			halted = 1
		}
		ch <- prometheus.MustNewConstMetric(descHalted, prometheus.GaugeValue, halted, l)
		if f := st.Fullest; f != nil {
			for _, o := range f.Ranges {
				ch <- prometheus.MustNewConstMetric(descRangeFill, prometheus.GaugeValue, wire.Fill(o), l, o.Tenant, o.ID)
			}
			for _, o := range f.Pools {
				ch <- prometheus.MustNewConstMetric(descPoolFill, prometheus.GaugeValue, wire.Fill(o), l, o.Tenant, o.ID)
			}
		}
		for _, tb := range st.Tables.Tables() {
			ch <- prometheus.MustNewConstMetric(descEntries, prometheus.GaugeValue, float64(tb.Entries), l, tb.Name)
			ch <- prometheus.MustNewConstMetric(descCapacity, prometheus.GaugeValue, float64(tb.Bound), l, tb.Name)
			util := 0.0
			if tb.Bound > 0 {
				util = float64(tb.Entries) / float64(tb.Bound)
			}
			ch <- prometheus.MustNewConstMetric(descUtil, prometheus.GaugeValue, util, l, tb.Name)
		}
	}
}

// Registry is the process's registry (not Prometheus's global one).
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves /metrics (Prometheus), /livez, and /healthz and /readyz: 200 when every
// shard is up and not halted and NATS is connected, 503 otherwise, the body saying which.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg}))
	mux.HandleFunc("/healthz", m.healthz)
	mux.HandleFunc("/readyz", m.healthz)
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) {
		// Alive is all a liveness probe may ask: a halted shard or a NATS outage is not
		// cured by a restart loop (they show on /readyz).
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		fmt.Fprintln(w, "ok: alive")
	})
	return mux
}

// healthz answers 200 when every shard is up and not halted and NATS is connected.
func (m *Metrics) healthz(w http.ResponseWriter, _ *http.Request) {
	var problems []string
	up := 0
	box := m.sys.Load()
	if box == nil {
		problems = append(problems, "shards: not started")
	} else {
		for i := uint32(0); i < m.shards; i++ {
			if box.sys.IsOpen(i) {
				up++ // in a cluster, a node serves only its own shards
			}
			if box.sys.Halted(i) {
				problems = append(problems, fmt.Sprintf("shard %d: halted", i))
			}
		}
	}
	if m.nc != nil && m.nc.Status() != nats.CONNECTED {
		problems = append(problems, "nats: "+m.nc.Status().String())
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if len(problems) > 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, strings.Join(problems, "\n"))
		return
	}
	fmt.Fprintf(w, "ok: %d shards up\n", up)
}

// ClaimRenewed counts a claim renewal (cluster.Metrics).
func (m *Metrics) ClaimRenewed(ok bool) {
	if ok {
		m.renewals.WithLabelValues("ok").Inc()
	} else {
		m.renewals.WithLabelValues("failed").Inc()
	}
}

// ClaimLost counts a shard given up without a hand-off (cluster.Metrics).
func (m *Metrics) ClaimLost() { m.claimsLost.Inc() }

// ShardAcquired counts a shard claimed and opened (cluster.Metrics).
func (m *Metrics) ShardAcquired() { m.acquisitions.Inc() }

// ShardHandedOff counts a shard handed over (cluster.Metrics).
func (m *Metrics) ShardHandedOff() { m.handoffs.Inc() }

// ShardsOwned sets how many shards this node serves (cluster.Metrics).
func (m *Metrics) ShardsOwned(n int) { m.shardsOwned.Set(float64(n)) }

// Forward counts a request forwarded to its shard's owner, by result (bridge.Metrics).
func (m *Metrics) Forward(result string) { m.forwarded.WithLabelValues(result).Inc() }
