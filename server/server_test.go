package server

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/kernel"
)

func testConfig(dir string) Config {
	k := kernel.DefaultConfig()
	return Config{Data: dir, Shards: 2, Slot: 100 * time.Millisecond, Kernel: k, MetricsListen: "127.0.0.1:0"}
}

// A server starts, answers, stops cleanly, and starts again on the same data directory
// with everything it acknowledged.
func TestStartShutdownRestart(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	srv, err := Start(ctx, testConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	if !srv.Embedded() || !strings.HasPrefix(srv.URL(), "nats://127.0.0.1:") || !strings.HasPrefix(srv.MetricsURL(), "http://127.0.0.1:") {
		t.Fatalf("url %q metrics %q embedded %v", srv.URL(), srv.MetricsURL(), srv.Embedded())
	}
	use := func(url string, f func(*client.Client)) {
		nc, err := nats.Connect(url)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		cl, err := client.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		f(cl)
	}
	use(srv.URL(), func(cl *client.Client) {
		if r, err := cl.CreateResource(ctx, "seat-1"); err != nil || !r.OK() {
			t.Fatalf("create: %v %+v", err, r)
		}
	})
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("second shutdown: %v", err)
	}
	srv, err = Start(ctx, testConfig(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(ctx)
	use(srv.URL(), func(cl *client.Client) {
		if r, err := cl.GetResource(ctx, "seat-1"); err != nil || !r.OK() {
			t.Fatalf("read after restart: %v %+v", err, r)
		}
	})
}

// A start that fails stops what it had started: here the NATS deployment is not there.
func TestStartFailsCleanly(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.NATSURL = "nats://127.0.0.1:1"
	if srv, err := Start(context.Background(), cfg); err == nil || srv != nil || !strings.Contains(err.Error(), "connecting to NATS") {
		t.Fatalf("start against no NATS: %v %v", srv, err)
	}
}

// The metrics listener: liveness, readiness, build info; the profiler only when asked.
func TestMetricsListenerEndpoints(t *testing.T) {
	ctx := context.Background()
	for _, pprofOn := range []bool{false, true} {
		cfg := testConfig(t.TempDir())
		cfg.Pprof = pprofOn
		srv, err := Start(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		get := func(path string) (int, string) { return httpGet(t, srv.MetricsURL()+path) }
		for _, p := range []string{"/livez", "/readyz", "/healthz"} {
			if code, body := get(p); code != 200 || !strings.HasPrefix(body, "ok") {
				t.Fatalf("%s: %d %q", p, code, body)
			}
		}
		if _, body := get("/metrics"); !strings.Contains(body, `holdfast_build_info{go_version="`) {
			t.Fatal("no holdfast_build_info")
		}
		if code, _ := get("/debug/pprof/"); (code == 200) != pprofOn {
			t.Fatalf("pprof %v: /debug/pprof/ answered %d", pprofOn, code)
		}
		srv.Shutdown(ctx)
	}
}

// An embedded NATS reachable from other machines has no authentication: say so.
func TestEmbeddedNATSBeyondLoopbackWarns(t *testing.T) {
	var logs strings.Builder
	cfg := testConfig(t.TempDir())
	cfg.Listen, cfg.MetricsListen = "0.0.0.0:0", ""
	cfg.Logger = slog.New(slog.NewTextHandler(&syncWriter{w: &logs}, nil))
	srv, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv.Shutdown(context.Background())
	if !strings.Contains(logs.String(), "without authentication") {
		t.Fatalf("no warning:\n%s", logs.String())
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// String is what was written so far (the writer must be a fmt.Stringer).
func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.(fmt.Stringer).String()
}

// httpGet gets url and returns the status code and the body.
func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
