package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/holdfast/holdfast/contract"
)

// benchSample is one line of a long run's table: what the server holds at a moment, read
// from its /metrics, its events stream and (optionally) its data directory, beside what
// the clients saw since the previous line.
type benchSample struct {
	Elapsed     time.Duration      `json:"elapsed_ns"`
	RequestsPS  float64            `json:"requests_per_s"`
	RSS         float64            `json:"rss_bytes"`
	Heap        float64            `json:"heap_inuse_bytes"`
	Tables      map[string]float64 `json:"table_max_utilization"` // table → max over shards
	Operations  float64            `json:"operations"`            // remembered, all shards
	Leases      float64            `json:"leases"`                // live and retained, all shards
	StreamBytes uint64             `json:"stream_bytes"`
	StreamMsgs  uint64             `json:"stream_msgs"`
	DataBytes   int64              `json:"data_bytes,omitempty"`
	TableFull   uint64             `json:"table_full"` // *_table_full answers in the interval
	Bystander   uint64             `json:"bystander_refused,omitempty"`
	Err         string             `json:"error,omitempty"`
}

// sampler takes a benchSample every interval while a load phase runs.
type sampler struct {
	cfg     *benchConfig
	js      jetstream.JetStream
	live    *liveCounters
	out     io.Writer
	samples []benchSample
	mu      sync.Mutex
}

func newSampler(cfg *benchConfig, nc *nats.Conn, live *liveCounters, out io.Writer) *sampler {
	js, _ := jetstream.New(nc)
	return &sampler{cfg: cfg, js: js, live: live, out: out}
}

// run samples until ctx ends, printing each line as it is taken.
func (s *sampler) run(ctx context.Context) {
	start := time.Now()
	t := time.NewTicker(s.cfg.sample)
	defer t.Stop()
	fmt.Fprintf(s.out, "%8s %10s %9s %9s %7s %7s %11s %11s %10s %10s %6s %6s\n",
		"minute", "req/s", "rss_MB", "heap_MB", "ops%", "lease%", "operations", "leases", "stream_MB", "data_MB", "full", "other")
	var lastReq, lastFull, lastBy uint64
	last := start
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			if ctx.Err() != nil {
				return // the phase ended with this tick
			}
			req := s.live.reserves.Load() + s.live.releases.Load()
			full, by := s.live.tableFull.Load(), s.live.bystanderRefused.Load()
			smp := s.take()
			if ctx.Err() != nil {
				return // the phase ended while sampling: not a sample of the load
			}
			smp.Elapsed = now.Sub(start)
			smp.RequestsPS = float64(req-lastReq) / now.Sub(last).Seconds()
			smp.TableFull, smp.Bystander = full-lastFull, by-lastBy
			lastReq, lastFull, lastBy, last = req, full, by, now
			s.mu.Lock()
			s.samples = append(s.samples, smp)
			s.mu.Unlock()
			s.print(smp)
		}
	}
}

func (s *sampler) print(m benchSample) {
	mb := func(v float64) float64 { return v / (1 << 20) }
	line := fmt.Sprintf("%8.2f %10.0f %9.0f %9.0f %6.1f%% %6.1f%% %11.0f %11.0f %10.0f %10.0f %6d %6d",
		m.Elapsed.Minutes(), m.RequestsPS, mb(m.RSS), mb(m.Heap), 100*m.Tables["operations"], 100*m.Tables["leases"],
		m.Operations, m.Leases, mb(float64(m.StreamBytes)), mb(float64(m.DataBytes)), m.TableFull, m.Bystander)
	if m.Err != "" {
		line += "  (" + m.Err + ")"
	}
	fmt.Fprintln(s.out, line)
}

func (s *sampler) result() []benchSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// take reads the server's metrics, the events stream and the data directory.
func (s *sampler) take() benchSample {
	ctx := context.Background()
	m := benchSample{Tables: map[string]float64{}}
	var errs []string
	if err := s.scrape(ctx, &m); err != nil {
		errs = append(errs, "metrics: "+err.Error())
	}
	if s.js != nil {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := s.js.Stream(sctx, contract.StreamName)
		cancel()
		if err != nil {
			errs = append(errs, "stream: "+err.Error())
		} else {
			m.StreamBytes, m.StreamMsgs = st.CachedInfo().State.Bytes, st.CachedInfo().State.Msgs
		}
	}
	if s.cfg.dataDir != "" {
		n, err := dirBytes(s.cfg.dataDir)
		if err != nil {
			errs = append(errs, "data: "+err.Error())
		}
		m.DataBytes = n
	}
	m.Err = strings.Join(errs, "; ")
	return m
}

func (s *sampler) scrape(ctx context.Context, m *benchSample) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.metricsURL, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return err
	}
	value := func(name string) float64 {
		if f := families[name]; f != nil && len(f.Metric) > 0 {
			if g := f.Metric[0].GetGauge(); g != nil {
				return g.GetValue()
			}
		}
		return 0
	}
	m.RSS = value("process_resident_memory_bytes")
	m.Heap = value("go_memstats_heap_inuse_bytes")
	if f := families["holdfast_shard_table_utilization"]; f != nil {
		for _, metric := range f.Metric {
			for _, l := range metric.Label {
				if l.GetName() == "table" {
					m.Tables[l.GetValue()] = max(m.Tables[l.GetValue()], metric.GetGauge().GetValue())
				}
			}
		}
	}
	if f := families["holdfast_shard_table_entries"]; f != nil {
		for _, metric := range f.Metric {
			for _, l := range metric.Label {
				switch {
				case l.GetName() == "table" && l.GetValue() == "operations":
					m.Operations += metric.GetGauge().GetValue()
				case l.GetName() == "table" && l.GetValue() == "leases":
					m.Leases += metric.GetGauge().GetValue()
				}
			}
		}
	}
	return nil
}

// dirBytes is the size of the files under dir.
func dirBytes(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file removed while walking (a compacted segment)
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n, err
}
