//go:build unix

package integration

import (
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"

	"github.com/holdfast/holdfast/integration/internal/harness"
	"github.com/holdfast/holdfast/internal/natstest"
	"github.com/holdfast/holdfast/internal/rafttiming"
)

var flagRaftFast = flag.Bool("raft-fast", false, "TestClusterPartitionsChecked: rafttiming.Fast (elections after 1.5-3.5 s) instead of Faster")

var flagRaftDefault = flag.Bool("raft-default", false, "TestClusterPartitionsChecked: keep nats-server's default raft timing")

var flagPartitionLayout = flag.String("partition-layout", "streams", "TestClusterPartitionsChecked: the nodes' --journal-layout (streams, where eight appends in flight make void batches; or feed)")

var flagNATSLogs = flag.String("natslogs", "", "TestClusterPartitionsChecked: write each NATS server's log, with debug lines (raft elections), to this directory")

var flagPartitions = flag.Duration("partitions", 0, "TestClusterPartitionsChecked's workload length (0: 30 s); a long soak: -partitions 10m")

// Partitions: three nodes, each on its own NATS server of a JetStream cluster whose
// routes go through a network the nemesis cuts (natstest.Net): one server isolated (a
// 2/1 split), two cut from each other while both reach the third (a bridge), one
// server's bytes to another stalled (one way), and one cut and healed over and over
// (flap), each held past the 1 s ownership TTL. Clients sit on every server, so some are
// on the minority side of each cut. The history is checked by every checker of the
// harness: linearizability per object (porcupine), no double grant, fencing, no
// duplicate execution, ambiguity resolved, events one-to-one with the committed history
// — and after the heal every acknowledged write is read back.
func TestClusterPartitionsChecked(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster partitions")
	}
	if *flagRaftDefault {
		t.Log("nats-server's default raft timing")
	} else {
		// serve --raft-timing faster: elections after 0.4–0.9 s, not 4–9 s
		// (internal/rafttiming), so the majority takes the cut-off node's shards once their
		// claims lapse (the 1 s TTL) and their journals have elected a leader meanwhile.
		timing := rafttiming.Faster
		if *flagRaftFast {
			timing = rafttiming.Fast
		}
		prev := rafttiming.Set(timing)
		t.Cleanup(func() { rafttiming.Set(prev) }) // after the servers' own cleanup
	}
	var natsOpts []func(*natsserver.Options)
	if *flagNATSLogs != "" {
		natsOpts = append(natsOpts, func(o *natsserver.Options) {
			o.NoLog, o.Debug, o.Logtime = false, true, true
			o.LogFile = filepath.Join(*flagNATSLogs, "nats-"+o.ServerName+".log")
		})
	}
	ns, nw := natstest.StartPartitionable(t, 3, natsOpts...)
	dir := t.TempDir()
	var cfgs []harness.ServerConfig
	var urls []string
	for i := 1; i <= 3; i++ {
		d := filepath.Join(dir, fmt.Sprintf("n%d", i))
		cfgs = append(cfgs, harness.ServerConfig{Bin: binary, DataDir: filepath.Join(d, "data"), HooksDir: filepath.Join(d, "hooks"),
			LogPath: logPath(d, fmt.Sprintf("partitions-n%d.log", i)), Shards: 3,
			// Eight appends in flight: the partitions are where a lost message and a claim
			// behind it make void batches (docs/design.md, "Pipelined appends"); the
			// cluster round runs the default window of one.
			Extra: []string{"--replicas", "3", "--ownership-ttl", "1s", "--snapshot-every", "100", "--journal-window", "8",
				"--journal-layout", *flagPartitionLayout}})
		urls = append(urls, ns.ServerURL(i-1))
	}
	cl, err := harness.NewClusterOn(ns.URL(), urls, cfgs)
	if err != nil {
		t.Fatal(err)
	}
	cl.Net, cl.ClientURLs = nw, urls
	defer func() {
		for _, n := range cl.Nodes {
			n.Close()
		}
	}()
	if err := cl.Start(); err != nil {
		t.Fatal(err)
	}
	run := 30 * time.Second
	if *flagPartitions > 0 {
		run = *flagPartitions
	}
	checkClusterRound(t, cl, harness.RoundConfig{Clients: 9, Duration: run, Faults: partitionFaults(), Every: 1500 * time.Millisecond})
	checkJournals(t, ns.URL(), 3)
}

// partitionFaults are the partition nemeses, or those -faults names.
func partitionFaults() []string {
	if *flagFaults != "" {
		return strings.Split(*flagFaults, ",")
	}
	return harness.PartitionFaults
}

// logPath is a node's log: in -serverlogs when it is set (kept), else in dir.
func logPath(dir, name string) string {
	if *flagLogs != "" {
		return filepath.Join(*flagLogs, name)
	}
	return filepath.Join(dir, "server.log")
}
