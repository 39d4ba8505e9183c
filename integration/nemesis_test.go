//go:build unix

package integration

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast/integration/internal/check"
	"github.com/holdfast/holdfast/integration/internal/harness"
	"github.com/holdfast/holdfast/integration/internal/history"
)

// newServer starts a fresh server in the test's temporary directory.
func newServer(t testing.TB, shards int, extra ...string) *harness.Server {
	t.Helper()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "server.log")
	if *flagLogs != "" {
		logPath = filepath.Join(*flagLogs, strings.NewReplacer("/", "-").Replace(t.Name())+".log")
	}
	srv, err := harness.NewServer(harness.ServerConfig{Bin: binary, DataDir: filepath.Join(dir, "data"),
		HooksDir: filepath.Join(dir, "hooks"), LogPath: logPath, Shards: shards, Extra: extra})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	return srv
}

func newRecorder(t testing.TB, name string) *history.Recorder {
	t.Helper()
	path := *flagHistory
	if path != "" && name != "" {
		path = strings.TrimSuffix(path, ".jsonl") + "-" + strings.NewReplacer("/", "-", " ", "_").Replace(name) + ".jsonl"
	}
	rec, err := history.NewRecorder(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rec.Close(); err != nil {
			t.Errorf("history file: %v", err)
		}
		if path != "" {
			t.Logf("history kept in %s (re-check: go test ./integration -run Recheck -recheck %s)", path, path)
		}
	})
	return rec
}

// scenario runs one round with the given faults and checks it.
func scenario(t *testing.T, faults []string, dur time.Duration, doctor bool, serverArgs ...string) {
	every := 800 * time.Millisecond
	if len(faults) > 1 {
		every = 500 * time.Millisecond
	}
	if *flagScenario > 0 {
		dur = *flagScenario
	}
	s := seed()
	clients := *flagClients
	if clients == 0 {
		clients = 8
	}
	t.Logf("seed %d, %d clients, %d shards, faults %v, %v", s, clients, *flagShards, faults, dur)
	srv := newServer(t, *flagShards, serverArgs...)
	rec := newRecorder(t, t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := harness.RunRound(ctx, srv, rec, harness.RoundConfig{ID: 1, Shards: uint32(*flagShards), Clients: clients, Keys: 4,
		Duration: dur, Seed: s, Faults: faults, Every: every, Proto: 0.15, StopWait: 3 * time.Second, Logf: t.Logf})
	if err != nil {
		t.Fatalf("round: %v\nserver log tail:\n%s", err, srv.LogTail())
	}
	for _, p := range res.Problems {
		t.Errorf("harness: %s", p)
	}
	start := time.Now()
	rep := check.Round(rec.Records(1), check.Options{})
	t.Logf("checked in %v\n%s  committed codes: %s", time.Since(start).Round(time.Millisecond), rep, check.FmtCounts(rep.Stats.Codes))
	if !rep.OK() {
		t.Errorf("%d violations (seed %d)", len(rep.Violations), s)
	} else if doctor {
		doctorRealHistory(t, rec.Records(1))
	}
	injected := 0
	for _, f := range faults {
		if res.Faults[f] > 0 {
			injected++
		} else {
			t.Logf("fault %s was never injected", f)
		}
	}
	// A short round may not fit every kind of a mix (the deck deals each once per cycle).
	if want := min(len(faults), 3); injected < want && dur >= 4*time.Second {
		t.Errorf("only %d of the fault kinds %v were injected", injected, faults)
	}
	if t.Failed() {
		t.Logf("server log tail:\n%s", srv.LogTail())
	}
}

// TestFaults is the short mode: one round per fault kind, and one that mixes them all.
func TestFaults(t *testing.T) {
	if *flagFaults != "" {
		t.Run("custom", func(t *testing.T) { scenario(t, strings.Split(*flagFaults, ","), 10*time.Second, false) })
		return
	}
	for _, f := range harness.AllFaults {
		t.Run(f, func(t *testing.T) { scenario(t, []string{f}, 5*time.Second, false) })
	}
	t.Run("mixed", func(t *testing.T) { scenario(t, harness.MixedFaults, 8*time.Second, true) })
	// Small tables and a short history window: *_table_full answers, terminal leases
	// retiring (lease_retired) while clocks jump and the process dies.
	t.Run("tables", func(t *testing.T) {
		scenario(t, []string{harness.FaultKill, harness.FaultClock}, 5*time.Second, false,
			"--max-leases", "40", "--history-window", "300ms")
	})
}
