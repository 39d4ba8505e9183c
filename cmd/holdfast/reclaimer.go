package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/holdfast/holdfast/client"
)

// reclaimerCmd runs the external observer of keep-alive leases (client.Reclaimer).
type reclaimerCmd struct {
	Grace         time.Duration `name:"grace" default:"30s" help:"How long after a keep-alive lapsed its lease is reclaimed: the time a holder that stopped renewing has to stop using what it held."`
	AllTenants    bool          `name:"all-tenants" help:"Reclaim for every tenant, not only --tenant."`
	Since         time.Duration `name:"since" default:"24h" help:"How far back the events are read at start (lapses from before a restart are reclaimed too)."`
	MetricsListen string        `name:"metrics-listen" placeholder:"HOST:PORT" help:"Serve the reclaimer's Prometheus /metrics here (empty: none)."`
	connFlags
}

func (reclaimerCmd) Help() string {
	return `An active lease with a keep-alive (lease reserve --activate --keepalive D, or lease
activate --keepalive D) whose holder stops renewing moves to revoking: the holder is
fenced out, and what it held stays held — Holdfast never hands it to someone else on a
timer, since a holder cut off by a partition may still be using it. The reclaimer is the
observer that decides: it follows the lease.revoking events whose reason is
keepalive_lapsed and reclaims each lease --grace after its keep-alive lapsed, so that what
a dead holder held comes back, as with an etcd lease. Leases an operator revoked are left
to the operator. Each decision is a log line on stderr, and each reclaim a lease.revoked
event in the stream. Runs until interrupted; run one per deployment (two do no harm: a
reclaim is idempotent by the lease's id).

Example:
  holdfast reclaimer --grace 30s --all-tenants --metrics-listen 127.0.0.1:9470`
}

func (c *reclaimerCmd) Run(e *env) error {
	if c.Grace < 0 || c.Since < 0 {
		return usageError(e, "--grace and --since must not be negative")
	}
	nc, cl, code, err := c.connect("reclaimer")
	if err != nil {
		e.errorf("%v", err)
		return exitCode(code)
	}
	defer nc.Close()
	log := slog.New(slog.NewTextHandler(e.stderr, nil))
	rc, err := cl.NewReclaimer(client.ReclaimerConfig{Grace: c.Grace, AllTenants: c.AllTenants, Since: c.Since, Logger: log})
	if err != nil {
		return usageError(e, "%v", err)
	}
	if c.MetricsListen != "" {
		ln, err := net.Listen("tcp", c.MetricsListen)
		if err != nil {
			e.errorf("--metrics-listen %s: %v", c.MetricsListen, err)
			return exitCode(exitUsage)
		}
		srv := &http.Server{Handler: reclaimerMetrics(rc), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("metrics listener", "err", err)
			}
		}()
		defer srv.Close()
	}
	scope := "tenant " + cl.Tenant()
	if c.AllTenants {
		scope = "every tenant"
	}
	log.Info("reclaimer running", "scope", scope, "grace", c.Grace, "since", c.Since)
	if err := rc.Run(e.ctx); err != nil {
		e.errorf("%v", err)
		return exitCode(exitDomain)
	}
	st := rc.Stats()
	fmt.Fprintf(e.stdout, "reclaimer stopped: %d lapses seen, %d reclaimed, %d already gone, %d failed, %d pending\n",
		st.Seen, st.Reclaimed, st.Gone, st.Failed, st.Pending)
	return nil
}

// reclaimerMetrics serves the reclaimer's counts as Prometheus metrics.
func reclaimerMetrics(rc *client.Reclaimer) http.Handler {
	reg := prometheus.NewRegistry()
	for _, c := range []struct {
		name, help string
		v          func(client.ReclaimerStats) uint64
	}{
		{"holdfast_reclaimer_lapses_total", "Keep-alive lapses seen (lease.revoking events with reason keepalive_lapsed).",
			func(s client.ReclaimerStats) uint64 { return s.Seen }},
		{"holdfast_reclaimer_reclaimed_total", "Leases reclaimed after their grace.",
			func(s client.ReclaimerStats) uint64 { return s.Reclaimed }},
		{"holdfast_reclaimer_gone_total", "Lapsed leases already reclaimed or retired when their grace passed.",
			func(s client.ReclaimerStats) uint64 { return s.Gone }},
		{"holdfast_reclaimer_failed_total", "Reclaims that failed (retried at the next start).",
			func(s client.ReclaimerStats) uint64 { return s.Failed }},
		{"holdfast_reclaimer_dropped_total", "Lapses not queued because too many were waiting (taken at the next start).",
			func(s client.ReclaimerStats) uint64 { return s.Dropped }},
		{"holdfast_reclaimer_operator_revokes_total", "lease.revoking events of an operator's revoke, left to the operator.",
			func(s client.ReclaimerStats) uint64 { return s.Skipped }},
	} {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: c.name, Help: c.help},
			func() float64 { return float64(c.v(rc.Stats())) }))
	}
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "holdfast_reclaimer_pending",
		Help: "Lapsed leases waiting for their grace."}, func() float64 { return float64(rc.Stats().Pending) }))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return mux
}
