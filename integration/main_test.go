//go:build unix

// Package integration is Holdfast's adversarial harness: it runs the real `holdfast serve`
// process under concurrent clients and a nemesis (kill -9, SIGSTOP, clock jumps, journal
// failures, dropped connections), records every call, reply and event, and checks the
// history against the contract (linearizability with porcupine, no double grant, no
// duplicate execution, no early expiry, fencing, resolved ambiguity, the event stream).
// See docs/reliability.md.
//
//	go test ./integration                                   # short mode: every fault, ~1 min
//	go test ./integration -run Soak -soak 30m -seed 7 -clients 32
//	go test ./integration -run Recheck -recheck FILE        # check a kept history again
package integration

import (
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/holdfast/holdfast/integration/internal/harness"
)

var (
	flagSoak     = flag.Duration("soak", 0, "run TestSoak for this long (0: skip it)")
	flagRound    = flag.Duration("round", time.Minute, "length of one soak round")
	flagSeed     = flag.Int64("seed", 0, "random seed (0: from the clock; printed)")
	flagClients  = flag.Int("clients", 0, "concurrent clients (default 8 short, 32 soak)")
	flagShards   = flag.Int("shards", 3, "server shard count (2..4 recommended)")
	flagHistory  = flag.String("history", "", "keep the history of every run in this file (JSON lines)")
	flagRecheck  = flag.String("recheck", "", "TestRecheck: check this history file again")
	flagFaults   = flag.String("faults", "", "comma-separated fault kinds: kill,pause,clock,journal,conns (soak default: all; short mode: one scenario with these)")
	flagLogs     = flag.String("serverlogs", "", "keep every server's output in this directory")
	flagScenario = flag.Duration("scenario", 0, "short mode: workload length of each scenario (default 6s, mixed 10s)")
)

// binary is the holdfast server built once for this test binary.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	code := func() int {
		if *flagRecheck != "" && *flagSoak == 0 {
			return m.Run() // no server needed
		}
		dir, err := os.MkdirTemp("", "holdfast-integration-bin")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		start := time.Now()
		binary, err = harness.Build(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if testing.Verbose() {
			fmt.Printf("built holdfast in %v\n", time.Since(start).Round(time.Millisecond))
		}
		return m.Run()
	}()
	os.Exit(code)
}

func seed() int64 {
	if *flagSeed != 0 {
		return *flagSeed
	}
	return time.Now().UnixNano() % 1_000_000
}
