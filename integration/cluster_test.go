//go:build unix

package integration

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/integration/internal/check"
	"github.com/holdfast/holdfast/integration/internal/harness"
	"github.com/holdfast/holdfast/internal/eventstest"
	"github.com/holdfast/holdfast/internal/natstest"
	"github.com/holdfast/holdfast/messages"
)

var flagClusterRun = 30 * time.Second

// clusterNode is one `holdfast serve` process of a cluster test.
type clusterNode struct {
	name, dir, url string
	hooks          string // --test-hooks-dir, when set
	layout         string // --journal-layout, when set
	t              *testing.T
	mu             sync.Mutex
	cmd            *exec.Cmd
	log            strings.Builder
	ready          chan struct{}
	exited         chan struct{}
}

func (n *clusterNode) start() {
	n.t.Helper()
	cmd := exec.Command(binary, "serve", "--nats", n.url, "--node", n.name, "--data", n.dir, "--journal", "jetstream",
		"--replicas", "3", "--ownership-ttl", "1s", "--shards", "4", "--metrics-listen", "",
		// Snapshots and compaction of the journals happen all through the faults, so a
		// failover can land on a journal compacted to its end.
		"--snapshot-every", "100")
	if n.hooks != "" {
		cmd.Args = append(cmd.Args, "--test-hooks-dir", n.hooks)
	}
	if n.layout != "" {
		cmd.Args = append(cmd.Args, "--journal-layout", n.layout)
	}
	out, err := cmd.StderrPipe()
	if err != nil {
		n.t.Fatal(err)
	}
	cmd.Stdout = cmd.Stderr
	ready := make(chan struct{})
	if err := harness.StartProcess(cmd); err != nil {
		n.t.Fatal(err)
	}
	exited := make(chan struct{})
	n.mu.Lock()
	n.cmd, n.ready, n.exited = cmd, ready, exited
	n.mu.Unlock()
	go func() {
		sc := bufio.NewScanner(out)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			n.mu.Lock()
			if n.log.Len() < 1<<20 {
				n.log.WriteString(line + "\n")
			}
			n.mu.Unlock()
			if strings.Contains(line, " msg=ready") {
				once.Do(func() { close(ready) })
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	go func() { _ = cmd.Wait(); close(exited) }()
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		n.t.Fatalf("node %s not ready:\n%s", n.name, n.logTail())
	}
}

// wait waits for the process to exit (after a SIGTERM: a clean stop).
func (n *clusterNode) wait(t *testing.T, within time.Duration) {
	n.mu.Lock()
	done := n.exited
	n.mu.Unlock()
	select {
	case <-done:
	case <-time.After(within):
		t.Fatalf("node %s did not stop within %v:\n%s", n.name, within, n.logTail())
	}
}

func (n *clusterNode) signal(sig syscall.Signal) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd != nil && n.cmd.Process != nil {
		_ = n.cmd.Process.Signal(sig)
	}
}

func (n *clusterNode) logTail() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.log.String()
	if len(s) > 4000 {
		s = s[len(s)-4000:]
	}
	return s
}

// grant is one lease a client was told it holds.
type grant struct {
	seat, lease, holder string
	reserveLSN          uint64
	releaseLSN          uint64 // from the release's reply; 0 when not acknowledged
}

// Three `holdfast serve` processes on a JetStream cluster of three NATS servers
// (replicas 3), under clients that reserve and release seats through any node, while a
// nemesis kills owners with SIGKILL, pauses them with SIGSTOP for longer than the
// ownership TTL (their claims pass to other nodes; when they resume, the journal refuses
// their appends), stops them with SIGTERM (a hand-off) and stops one NATS server of three
// for 3 s. Afterwards: every acknowledged reserve and release is in the state, on every
// seat the granted leases never overlap in the shard's log order, and the event stream
// holds every event once, per shard in lsn order.
func TestClusterSurvivesKillsAndPauses(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster fault test")
	}
	ns := natstest.Start(t, 3)
	url := ns.URL()
	nodes := make([]*clusterNode, 3)
	for i := range nodes {
		nodes[i] = &clusterNode{name: fmt.Sprintf("n%d", i+1), dir: filepath.Join(t.TempDir(), fmt.Sprint(i)), url: url, t: t}
		nodes[i].start()
	}
	defer func() {
		for _, n := range nodes {
			n.signal(syscall.SIGCONT)
			n.signal(syscall.SIGKILL)
		}
	}()
	newClient := func() *client.Client {
		nc, err := nats.Connect(url, nats.MaxReconnects(-1))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		cl, err := client.New(nc, client.WithTimeout(2*time.Second), client.WithRetry(40, 100*time.Millisecond, time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	ctx := context.Background()
	setup := newClient()
	const seats = 12
	for i := 0; i < seats; i++ {
		if r, err := setup.CreateResource(ctx, fmt.Sprintf("seat-%d", i), client.WithOperationID(fmt.Sprintf("create-%d", i))); err != nil || !r.OK() {
			t.Fatalf("create seat-%d: %v %+v", i, err, r)
		}
	}

	var (
		mu      sync.Mutex
		grants  []*grant
		unknown int
		stats   = map[string]int{}
	)
	runCtx, stop := context.WithTimeout(ctx, flagClusterRun)
	defer stop()
	var wg sync.WaitGroup
	for c := 0; c < 8; c++ {
		cl := newClient()
		holder := fmt.Sprintf("h%d", c)
		rng := rand.New(rand.NewSource(int64(c)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; runCtx.Err() == nil; i++ {
				seat := fmt.Sprintf("seat-%d", rng.Intn(seats))
				res, err := cl.Reserve(ctx, client.ReserveRequest{Holder: holder, TTL: 10 * time.Minute,
					Members: []*messages.Member{client.Resource(seat)}}, client.WithOperationID(fmt.Sprintf("%s-r%d", holder, i)))
				mu.Lock()
				switch {
				case err != nil:
					unknown++
					stats["reserve unknown"]++
				default:
					stats["reserve "+res.Code]++
				}
				mu.Unlock()
				if err != nil || !res.OK() {
					continue
				}
				g := &grant{seat: seat, lease: res.Fence().LeaseID, holder: holder, reserveLSN: res.Reply.GetLsn()}
				mu.Lock()
				grants = append(grants, g)
				mu.Unlock()
				rel, err := cl.Release(ctx, holder, res.Fence(), client.WithOperationID(fmt.Sprintf("%s-x%d", holder, i)))
				mu.Lock()
				if err != nil {
					stats["release unknown"]++
				} else {
					stats["release "+rel.Code]++
					if rel.OK() {
						g.releaseLSN = rel.Reply.GetLsn()
					}
				}
				mu.Unlock()
			}
		}()
	}

	// The nemesis, in turn: kill -9 and restart, pause past the ownership TTL, SIGTERM and
	// restart, stop a NATS server.
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	faults := 0
	for runCtx.Err() == nil {
		time.Sleep(2500 * time.Millisecond)
		if runCtx.Err() != nil {
			break
		}
		n := nodes[rng.Intn(len(nodes))]
		faults++
		switch faults % 4 {
		case 1:
			t.Logf("%s kill -9 %s", time.Now().Format("15:04:05.000"), n.name)
			n.signal(syscall.SIGKILL)
			time.Sleep(500 * time.Millisecond)
			n.start()
		case 2:
			t.Logf("%s pause %s for 2.5s", time.Now().Format("15:04:05.000"), n.name)
			n.signal(syscall.SIGSTOP)
			time.Sleep(2500 * time.Millisecond)
			n.signal(syscall.SIGCONT)
		case 3:
			t.Logf("%s SIGTERM %s (hands its shards over), then start it again", time.Now().Format("15:04:05.000"), n.name)
			n.signal(syscall.SIGTERM)
			n.wait(t, 30*time.Second)
			n.start()
		case 0:
			k := rng.Intn(3)
			t.Logf("%s stop NATS server %d of 3 for 3s", time.Now().Format("15:04:05.000"), k)
			ns.Stop(k)
			time.Sleep(3 * time.Second)
			ns.Restart(k)
		}
	}
	wg.Wait()
	t.Logf("%d faults; %d grants; %v", faults, len(grants), stats)
	if len(grants) == 0 {
		t.Fatal("no seat was ever granted")
	}

	// Every acknowledged write is in the state; the authoritative end of each grant is
	// its lease's released_lsn.
	check := newClient()
	bySeat := map[string][]*grant{}
	for _, g := range grants {
		r, err := check.GetLease(ctx, g.lease)
		if err != nil || !r.OK() {
			for _, n := range nodes {
				t.Logf("node %s:\n%s", n.name, n.logTail())
			}
			t.Fatalf("acknowledged lease %s of %s on %s not readable: %v %+v", g.lease, g.holder, g.seat, err, r)
		}
		if r.Lease.GetHolderId() != g.holder || r.Lease.GetCreatedLsn() != g.reserveLSN {
			t.Fatalf("lease %s: holder %s created_lsn %d, acknowledged to %s at %d", g.lease, r.Lease.GetHolderId(), r.Lease.GetCreatedLsn(), g.holder, g.reserveLSN)
		}
		if g.releaseLSN != 0 && (r.Lease.GetState() != "released" || r.Lease.GetReleasedLsn() != g.releaseLSN) {
			t.Fatalf("lease %s: acknowledged release at %d, state %s released_lsn %d", g.lease, g.releaseLSN, r.Lease.GetState(), r.Lease.GetReleasedLsn())
		}
		g.releaseLSN = r.Lease.GetReleasedLsn()
		bySeat[g.seat] = append(bySeat[g.seat], g)
	}
	checkClusterEvents(t, url, grants, func() {
		// The whole logs, kept past the test for the investigation.
		for _, n := range nodes {
			n.mu.Lock()
			path := filepath.Join(os.TempDir(), "holdfast-cluster-"+n.name+".log")
			if err := os.WriteFile(path, []byte(n.log.String()), 0o644); err == nil {
				t.Logf("node %s's log: %s", n.name, path)
			}
			n.mu.Unlock()
		}
	})
	for seat, gs := range bySeat {
		sort.Slice(gs, func(a, b int) bool { return gs[a].reserveLSN < gs[b].reserveLSN })
		for i := 1; i < len(gs); i++ {
			prev := gs[i-1]
			if prev.releaseLSN == 0 || prev.releaseLSN > gs[i].reserveLSN {
				t.Fatalf("%s granted twice: %s (lsn %d, released at %d) and %s (lsn %d)", seat,
					prev.lease, prev.reserveLSN, prev.releaseLSN, gs[i].lease, gs[i].reserveLSN)
			}
		}
	}
}

// checkClusterEvents reads the whole events stream: every message id once, per shard in
// lsn order, and for every grant exactly one lease.reserved event and, when it ended by a
// release, exactly one lease.released event — across every failover and hand-off.
func checkClusterEvents(t *testing.T, url string, grants []*grant, logs func()) {
	t.Helper()
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	want := 0
	for _, g := range grants {
		want++
		if g.releaseLSN != 0 {
			want++
		}
	}
	var reserved, released map[string]int
	var seen map[string]bool
	var events int
	for attempt := 0; ; attempt++ {
		reserved, released, seen = map[string]int{}, map[string]int{}, map[string]bool{}
		lastLSN := map[uint32]uint64{}
		recent := map[uint32][]string{}
		events = 0
		eventstest.Consume(ctx, t, js, func(msg jetstream.Msg, e *messages.Event) {
			events++
			id := msg.Headers().Get(nats.MsgIdHdr)
			if seen[id] {
				t.Fatalf("event %s stored twice", id)
			}
			seen[id] = true
			md, _ := msg.Metadata()
			recent[e.GetShard()] = append(recent[e.GetShard()], fmt.Sprintf("lsn %d seq %d at %s", e.GetLsn(), md.Sequence.Stream, md.Timestamp.Format("15:04:05.000000")))
			if r := recent[e.GetShard()]; len(r) > 40 {
				recent[e.GetShard()] = r[len(r)-40:]
			}
			if e.GetLsn() < lastLSN[e.GetShard()] {
				logs()
				t.Logf("shard %d's events up to here:\n%s", e.GetShard(), strings.Join(recent[e.GetShard()], "\n"))
				t.Fatalf("shard %d: event at lsn %d (stream seq %d, stored %s) after lsn %d", e.GetShard(), e.GetLsn(),
					md.Sequence.Stream, md.Timestamp.Format("15:04:05.000"), lastLSN[e.GetShard()])
			}
			lastLSN[e.GetShard()] = e.GetLsn()
			switch e.GetEvent() {
			case "lease.reserved":
				reserved[e.GetLease().GetLeaseId()]++
			case "lease.released":
				released[e.GetLease().GetLeaseId()]++
			}
		})
		complete := true
		for _, g := range grants {
			if reserved[g.lease] != 1 || (g.releaseLSN != 0 && released[g.lease] != 1) {
				complete = false
			}
		}
		if complete {
			break
		}
		if attempt == 30 {
			for _, g := range grants {
				if reserved[g.lease] > 1 || released[g.lease] > 1 {
					t.Fatalf("lease %s: %d reserved and %d released events", g.lease, reserved[g.lease], released[g.lease])
				}
				if reserved[g.lease] == 0 || (g.releaseLSN != 0 && released[g.lease] == 0) {
					t.Fatalf("lease %s: %d reserved and %d released events after 30 s (released at %d)", g.lease, reserved[g.lease], released[g.lease], g.releaseLSN)
				}
			}
		}
		time.Sleep(time.Second)
	}
	t.Logf("%d events, %d expected for the grants", events, want)
}

// The adversarial harness's round — clients, nemesis, final reads, the event stream —
// against three nodes on a JetStream cluster of three NATS servers, checked by every
// checker of the single-process harness (porcupine per object, no double grant, no
// duplicate execution, ambiguity resolved, fencing, events one-to-one with the committed
// history, no early expiry), on histories whose requests went to any node. Faults hit
// one node at a time: kill -9, SIGSTOP (up to 1.5 s, past the 1 s ownership TTL),
// SIGTERM, and client connections closed; the clock fault moves every node's wall clock,
// which a cluster shard's slot clock does not follow.
func TestClusterRoundChecked(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster round")
	}
	ns := natstest.Start(t, 3)
	dir := t.TempDir()
	var cfgs []harness.ServerConfig
	for i := 1; i <= 3; i++ {
		d := filepath.Join(dir, fmt.Sprintf("n%d", i))
		cfgs = append(cfgs, harness.ServerConfig{Bin: binary, DataDir: filepath.Join(d, "data"), HooksDir: filepath.Join(d, "hooks"),
			LogPath: filepath.Join(d, "server.log"), Shards: 3, Extra: []string{"--replicas", "3", "--ownership-ttl", "1s", "--snapshot-every", "100", "--journal-layout", "feed"}})
	}
	cl, err := harness.NewCluster(ns.URL(), cfgs)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, n := range cl.Nodes {
			n.Close()
		}
	}()
	if err := cl.Start(); err != nil {
		t.Fatal(err)
	}
	faults := []string{harness.FaultKill, harness.FaultPause, harness.FaultTerm, harness.FaultConns, harness.FaultClock}
	checkClusterRound(t, cl, harness.RoundConfig{Clients: 8, Duration: 12 * time.Second, Faults: faults, Every: 1200 * time.Millisecond})
}

// checkClusterRound runs one round of cfg (ID, shards, keys, protobuf share and stop
// wait filled in) against cl and checks its history with every checker.
func checkClusterRound(t *testing.T, cl *harness.Cluster, cfg harness.RoundConfig) {
	t.Helper()
	cfg.ID, cfg.Shards, cfg.Keys, cfg.Proto, cfg.StopWait, cfg.Logf = 1, 3, 4, 0.15, 20*time.Second, t.Logf
	cfg.Seed = seed()
	rec := newRecorder(t, t.Name())
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+5*time.Minute)
	defer cancel()
	res, err := harness.RunRound(ctx, cl, rec, cfg)
	if err != nil {
		t.Fatalf("round: %v\n%s", err, cl.LogTail())
	}
	for _, p := range res.Problems {
		t.Errorf("harness: %s", p)
	}
	// Its front doors resend a forward after engine_halted or a timeout (docs/api.md §A.9).
	rep := check.Round(rec.Records(1), check.Options{Forwarding: true})
	t.Logf("seed %d, faults %v\n%s  committed codes: %s", cfg.Seed, res.Faults, rep, check.FmtCounts(rep.Stats.Codes))
	if !rep.OK() {
		t.Errorf("%d violations (seed %d)", len(rep.Violations), cfg.Seed)
	}
	if t.Failed() {
		t.Logf("%s", cl.LogTail())
	}
}
