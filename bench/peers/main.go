// Command peers runs one lease workload — acquire a resource with a TTL, release it
// fenced by what the acquire returned — against Holdfast and the systems a user would pick
// instead, each started by this tool on loopback from Debian's packages, back to back on
// the same machine, and prints one table with ratios (docs/benchmarks.md, "Peers").
//
//	apt-get install etcd-server redis-server postgresql
//	cd bench/peers && go run . --systems all --duration 20s
//
// Workloads: spread (64 clients over 10,000 resources: grants/s), hotspot (64 clients on
// one resource: attempts/s), one client (acquire p50 and p99 over random resources).
// Every system makes each write durable before it answers: Holdfast (fsync per batch; in
// a cluster on JetStream with sync always), etcd (raft + fsync), NATS's key-value store
// (JetStream, sync always: the engine under Holdfast's cluster, with nothing in
// between), Redis (appendfsync always), PostgreSQL (synchronous_commit on) — except
// nats-mem, the transport's floor: a lock table in memory behind NATS request/reply.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Locker is one system under test: a lock service with TTLs and fenced releases.
type Locker interface {
	// Client returns a connection of one simulated client.
	Client(ctx context.Context, id int) (LockClient, error)
	// Setup makes the resources exist (where a system needs them to).
	Setup(ctx context.Context, resources int) error
	// Procs are the processes serving it, whose CPU time the report counts.
	Procs() []*proc
	Close()
}

// LockClient acquires and releases for one client.
type LockClient interface {
	// Acquire takes resource r for ttl: ok false when someone holds it; token fences the
	// release.
	Acquire(ctx context.Context, r string, ttl time.Duration) (token any, ok bool, err error)
	Release(ctx context.Context, r string, token any) error
	Close()
}

type system struct {
	name  string
	start func(ctx context.Context, dir string) (Locker, error)
}

func systems(holdfast, natsServer string, holdfastArgs []string) []system {
	return []system{
		{"holdfast", func(ctx context.Context, dir string) (Locker, error) {
			return startHoldfast(ctx, dir, holdfast, 1, holdfastArgs)
		}},
		{"holdfast-x3", func(ctx context.Context, dir string) (Locker, error) {
			return startHoldfast(ctx, dir, holdfast, 3, holdfastArgs)
		}},
		{"etcd", func(ctx context.Context, dir string) (Locker, error) { return startEtcd(ctx, dir, 1) }},
		{"etcd-x3", func(ctx context.Context, dir string) (Locker, error) { return startEtcd(ctx, dir, 3) }},
		{"nats-kv", func(ctx context.Context, dir string) (Locker, error) { return startNATSKV(ctx, dir, natsServer, 1) }},
		{"nats-kv-x3", func(ctx context.Context, dir string) (Locker, error) { return startNATSKV(ctx, dir, natsServer, 3) }},
		{"nats-mem", func(ctx context.Context, dir string) (Locker, error) { return startNATSMem(ctx, dir, natsServer) }},
		{"redis-aof", startRedis},
		{"postgresql", startPostgres},
	}
}

type result struct {
	system, workload string
	perSec           float64 // grants/s (spread) or attempts/s (hotspot)
	p50, p99         time.Duration
	errs             int64
	span             string // of several rounds: the range of the rate (the p50 for one client)
	// The CPU time per request (acquire or release, the unmeasured first tenth included)
	// of the system's processes and of this tool's clients: on a shared machine less
	// noisy than the rates, and what the rates are made of when the cores are busy.
	serverCPU, clientCPU time.Duration
}

// combine makes one result of each system's rounds of a workload: the median rate, p50
// and p99 (each taken on its own), the errors summed, and the range of the rate (of the
// p50 for one client) when there was more than one round. The machines this runs on are
// shared and noisy; a system run once against another run once says less than the
// medians of turns taken alternately.
func combine(rs []result) []result {
	var keys []string
	by := map[string][]result{}
	for _, r := range rs {
		k := r.system + "/" + r.workload
		if _, ok := by[k]; !ok {
			keys = append(keys, k)
		}
		by[k] = append(by[k], r)
	}
	var out []result
	for _, k := range keys {
		runs := by[k]
		c := runs[0]
		if len(runs) > 1 {
			var rates []float64
			var p50s, p99s, srv, cli []time.Duration
			c.errs = 0
			for _, r := range runs {
				rates, p50s, p99s = append(rates, r.perSec), append(p50s, r.p50), append(p99s, r.p99)
				srv, cli = append(srv, r.serverCPU), append(cli, r.clientCPU)
				c.errs += r.errs
			}
			c.perSec, c.p50, c.p99 = median(rates), median(p50s), median(p99s)
			c.serverCPU, c.clientCPU = median(srv), median(cli)
			if c.workload == "one" {
				c.span = fmt.Sprintf("%s–%s", round(p50s[0]), round(p50s[len(p50s)-1]))
			} else {
				c.span = fmt.Sprintf("%.0f–%.0f", rates[0], rates[len(rates)-1])
			}
		}
		out = append(out, c)
	}
	return out
}

func main() {
	sel := flag.String("systems", "all", "comma-separated: holdfast, holdfast-x3, etcd, etcd-x3, nats-kv, nats-kv-x3, nats-mem, redis-aof, postgresql, or all")
	dur := flag.Duration("duration", 20*time.Second, "how long each workload runs on each system")
	clients := flag.Int("clients", 64, "clients of spread and hotspot")
	resources := flag.Int("resources", 10000, "resources of spread")
	workloads := flag.String("workloads", "spread,hotspot,one", "comma-separated: spread, hotspot, one")
	holdfast := flag.String("holdfast", "", "the holdfast binary (default: built from this repository)")
	holdfastArgs := flag.String("holdfast-args", "", "more flags for every `holdfast serve`, space-separated (e.g. \"--shards 3\"); the table's title names them")
	rounds := flag.Int("rounds", 1, "run every system this many times, in turn (round 1 of each, then round 2, ...), and report each one's median with the range")
	keep := flag.String("dir", "", "working directory (default: a temporary one, removed)")
	cpuProfile := flag.String("cpuprofile", "", "write this tool's own CPU profile (the clients' side) to this file")
	responder := flag.String("nats-mem-responder", "", "(this tool's own use) serve nats-mem's lock table on this NATS URL")
	flag.Parse()
	if *responder != "" {
		if err := serveNATSMem(*responder); err != nil {
			fail(err)
		}
		return
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			fail(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fail(err)
		}
		defer pprof.StopCPUProfile()
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	dir := *keep
	if dir == "" {
		d, err := os.MkdirTemp("", "holdfast-peers-")
		if err != nil {
			fail(err)
		}
		defer os.RemoveAll(d)
		_ = os.Chmod(d, 0o755) // PostgreSQL runs as its own user when this tool runs as root
		dir = d
	}
	bin := *holdfast
	if bin == "" {
		bin = filepath.Join(dir, "bin", "holdfast")
		if err := run(ctx, "../..", "go", "build", "-o", bin, "./cmd/holdfast"); err != nil {
			fail(fmt.Errorf("building holdfast: %w", err))
		}
	}
	natsServer := filepath.Join(dir, "bin", "nats-server")
	if *sel == "all" || strings.Contains(*sel, "nats-") {
		// The nats-server Holdfast embeds, at the version its module requires.
		if err := run(ctx, "../..", "go", "build", "-o", natsServer, "github.com/nats-io/nats-server/v2"); err != nil {
			fail(fmt.Errorf("building nats-server: %w", err))
		}
	}
	var results []result
	for round := 1; round <= *rounds; round++ {
		for _, s := range systems(bin, natsServer, strings.Fields(*holdfastArgs)) {
			if *sel != "all" && !contains(strings.Split(*sel, ","), s.name) {
				continue
			}
			fmt.Fprintf(os.Stderr, "%s: starting (round %d of %d)\n", s.name, round, *rounds)
			l, err := s.start(ctx, filepath.Join(dir, fmt.Sprintf("%s-%d", s.name, round)))
			if err != nil {
				fail(fmt.Errorf("%s: %w", s.name, err))
			}
			if err := l.Setup(ctx, *resources); err != nil {
				l.Close()
				fail(fmt.Errorf("%s setup: %w", s.name, err))
			}
			for _, w := range strings.Split(*workloads, ",") {
				fmt.Fprintf(os.Stderr, "%s: %s for %v\n", s.name, w, *dur)
				r, err := runWorkload(ctx, l, w, *clients, *resources, *dur)
				if err != nil {
					l.Close()
					fail(fmt.Errorf("%s %s: %w", s.name, w, err))
				}
				r.system = s.name
				results = append(results, r)
			}
			l.Close()
		}
	}
	if *holdfastArgs != "" {
		fmt.Printf("holdfast serve with %s\n", *holdfastArgs)
	}
	report(os.Stdout, combine(results))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "peers:", err)
	os.Exit(1)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if strings.TrimSpace(y) == x {
			return true
		}
	}
	return false
}

// runWorkload runs one workload for d and measures it.
func runWorkload(ctx context.Context, l Locker, w string, clients, resources int, d time.Duration) (result, error) {
	res := result{workload: w}
	n := clients
	space := resources
	switch w {
	case "hotspot":
		space = 1
	case "one":
		n = 1
	case "spread":
	default:
		return res, fmt.Errorf("unknown workload %q", w)
	}
	var conns []LockClient
	for i := 0; i < n; i++ {
		c, err := l.Client(ctx, i)
		if err != nil {
			return res, err
		}
		conns = append(conns, c)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	var grants, attempts, errs, requests atomic.Int64
	server0, client0 := treeCPU(l.Procs()), selfCPU()
	var mu sync.Mutex
	var lat []time.Duration
	stop := time.Now().Add(d)
	warm := time.Now().Add(d / 10) // the first tenth is not measured
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			var mine []time.Duration
			for time.Now().Before(stop) && ctx.Err() == nil {
				r := fmt.Sprintf("r%d", rng.IntN(space))
				t0 := time.Now()
				tok, ok, err := c.Acquire(ctx, r, 30*time.Second)
				took := time.Since(t0)
				requests.Add(1)
				measured := t0.After(warm)
				if err != nil {
					errs.Add(1)
					time.Sleep(10 * time.Millisecond)
					continue
				}
				if measured {
					attempts.Add(1)
					mine = append(mine, took)
				}
				if !ok {
					continue
				}
				if measured {
					grants.Add(1)
				}
				if err := c.Release(ctx, r, tok); err != nil {
					errs.Add(1)
				}
				requests.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if n := requests.Load(); n > 0 {
		res.serverCPU = (treeCPU(l.Procs()) - server0) / time.Duration(n)
		res.clientCPU = (selfCPU() - client0) / time.Duration(n)
	}
	secs := (d - d/10).Seconds()
	res.perSec = float64(grants.Load()) / secs
	if w == "hotspot" {
		res.perSec = float64(attempts.Load()) / secs
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	if len(lat) > 0 {
		res.p50, res.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	res.errs = errs.Load()
	return res, nil
}

// median sorts xs and returns the middle one, or the mean of the two in the middle.
func median[T float64 | time.Duration](xs []T) T {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// report prints one row per workload and system, with Holdfast's edge over it: its rate
// over the system's (spread, hotspot), the system's p50 over its p50 (one client) — above
// 1 Holdfast is ahead. A replicated system (-x3) is set against holdfast-x3, a single one
// against holdfast. Of several rounds, the medians are set against each other, and each
// row ends with its range.
func report(w *os.File, rs []result) {
	base := map[string]result{}
	for _, r := range rs {
		if r.system == "holdfast" || r.system == "holdfast-x3" {
			base[r.system+"/"+r.workload] = r
		}
	}
	ranged := false
	for _, r := range rs {
		ranged = ranged || r.span != ""
	}
	fmt.Fprintf(w, "%-10s %-12s %14s %10s %10s %8s %9s %9s %s\n", "workload", "system", "rate", "p50", "p99", "errors", "srv/req", "cli/req", "holdfast's edge")
	for _, wl := range []string{"spread", "hotspot", "one"} {
		for _, r := range rs {
			if r.workload != wl {
				continue
			}
			rate, edge := "", ""
			switch wl {
			case "spread":
				rate = fmt.Sprintf("%.0f grants/s", r.perSec)
			case "hotspot":
				rate = fmt.Sprintf("%.0f att/s", r.perSec)
			}
			against := "holdfast"
			if strings.HasSuffix(r.system, "-x3") {
				against = "holdfast-x3"
			}
			if b, ok := base[against+"/"+wl]; ok && !strings.HasPrefix(r.system, "holdfast") {
				if wl == "one" && b.p50 > 0 {
					edge = fmt.Sprintf("%.2f× (p50, vs %s)", float64(r.p50)/float64(b.p50), against)
				} else if wl != "one" && r.perSec > 0 {
					edge = fmt.Sprintf("%.2f× (vs %s)", b.perSec/r.perSec, against)
				}
			}
			if ranged {
				edge = fmt.Sprintf("%-34s rounds: %s", edge, r.span)
			}
			fmt.Fprintf(w, "%-10s %-12s %14s %10s %10s %8d %9s %9s %s\n", wl, r.system, rate, round(r.p50), round(r.p99), r.errs,
				cpuPerReq(r.serverCPU), cpuPerReq(r.clientCPU), edge)
		}
	}
}

// cpuPerReq prints a CPU time per request in microseconds ("-" when not measured).
func cpuPerReq(d time.Duration) string {
	if d <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
}

func round(d time.Duration) string {
	switch {
	case d >= time.Millisecond:
		return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
	default:
		return fmt.Sprintf("%dµs", d.Microseconds())
	}
}
