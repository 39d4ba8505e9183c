//go:build unix

package integration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast/integration/internal/check"
	"github.com/holdfast/holdfast/integration/internal/harness"
)

// TestSoak is the long mode: rounds of -round against one server and one data directory
// for -soak in total, every fault mixed in, every round checked as it ends.
//
//	go test ./integration -run Soak -soak 30m -seed 7 -clients 32 -v
func TestSoak(t *testing.T) {
	if *flagSoak == 0 {
		t.Skip("long mode: go test ./integration -run Soak -soak 30m [-seed N] [-clients 32] [-history FILE]")
	}
	s := seed()
	clients := *flagClients
	if clients == 0 {
		clients = 32
	}
	faults := harness.MixedFaults
	if *flagFaults != "" {
		faults = strings.Split(*flagFaults, ",")
	}
	t.Logf("soak: %v in rounds of %v, seed %d, %d clients, %d shards, faults %v", *flagSoak, *flagRound, s, clients, *flagShards, faults)
	srv := newServer(t, *flagShards)
	rec := newRecorder(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), *flagSoak+30*time.Minute)
	defer cancel()
	var (
		start       = time.Now()
		ops         int64
		rounds      int
		violations  int
		faultCounts = map[string]int{}
		indefinite  = map[string]int{}
		checked     = map[string]int{}
		events      int
		problems    []string
	)
	for round := 1; time.Since(start) < *flagSoak; round++ {
		dur := min(*flagRound, max(10*time.Second, *flagSoak-time.Since(start)))
		res, err := harness.RunRound(ctx, srv, rec, harness.RoundConfig{ID: round, Shards: uint32(*flagShards), Clients: clients, Keys: 6,
			Duration: dur, Seed: s + int64(round), Faults: faults, Every: 2 * time.Second, Proto: 0.15, Think: 5 * time.Millisecond,
			StopWait: 40 * time.Second, Logf: t.Logf})
		if err != nil {
			t.Fatalf("round %d: %v\nserver log tail:\n%s", round, err, srv.LogTail())
		}
		rounds++
		ops += res.Ops
		for k, v := range res.Faults {
			faultCounts[k] += v
		}
		for _, p := range res.Problems {
			problems = append(problems, fmt.Sprintf("round %d: %s", round, p))
			t.Errorf("round %d: harness: %s", round, p)
		}
		cstart := time.Now()
		rep := check.Round(rec.Records(round), check.Options{Lin: check.LinOptions{Timeout: 5 * time.Minute}})
		rec.Drop(round)
		if err := rec.Flush(); err != nil {
			t.Errorf("history file: %v", err)
		}
		t.Logf("round %d checked in %v\n%s", round, time.Since(cstart).Round(time.Millisecond), rep)
		violations += len(rep.Violations)
		events += rep.Stats.Events
		for k, v := range rep.Stats.Indefinite {
			indefinite[k] += v
		}
		for k, v := range rep.Checked {
			checked[k] += v
		}
		if !rep.OK() {
			t.Errorf("round %d: %d violations", round, len(rep.Violations))
		}
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "SOAK SUMMARY seed=%d clients=%d shards=%d duration=%v rounds=%d\n", s, clients, *flagShards, time.Since(start).Round(time.Second), rounds)
	fmt.Fprintf(&sb, "  operations: %d (%.0f/s), events: %d\n", ops, float64(ops)/time.Since(start).Seconds(), events)
	fmt.Fprintf(&sb, "  faults injected: %s\n", check.FmtCounts(faultCounts))
	fmt.Fprintf(&sb, "  indefinite outcomes (all resolved unless a violation says otherwise): %s\n", check.FmtCounts(indefinite))
	for _, c := range check.AllCheckers {
		fmt.Fprintf(&sb, "  %-18s %d checked\n", c, checked[c])
	}
	fmt.Fprintf(&sb, "  violations: %d, harness problems: %d\n", violations, len(problems))
	t.Log(sb.String())
	fmt.Print(sb.String())
}

// TestRecheck checks a kept history file again, offline (no server).
//
//	go test ./integration -run Recheck -recheck /tmp/run.jsonl -v
func TestRecheck(t *testing.T) {
	if *flagRecheck == "" {
		t.Skip("give a history file with -recheck FILE")
	}
	reps, err := check.File(*flagRecheck, check.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, rep := range reps {
		t.Log(rep.String())
		if !rep.OK() {
			t.Errorf("round %d: %d violations", rep.Round, len(rep.Violations))
		}
	}
}
