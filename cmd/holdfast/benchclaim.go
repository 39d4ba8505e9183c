package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/messages"
)

// The claim scenario: a worker fleet through a run's work. R work shards in runs of 256
// (the manifest bound); C workers each claim the next work shard of a run, checkpoint it
// --checkpoints times and complete it, moving on to the next run when one is exhausted,
// until every work shard is done or D passes. Each client is the Go SDK (client.Claim,
// Checkpoint, CompleteWork), as a worker fleet would use it.

const claimRunSize = 256

func claimRuns(cfg *benchConfig, runID string) []string {
	runs := make([]string, (cfg.resources+claimRunSize-1)/claimRunSize)
	for i := range runs {
		runs[i] = cfg.idPrefix + "-" + runID + "-run" + strconv.Itoa(i)
	}
	return runs
}

func runClaimBench(e *env, cfg *benchConfig, conns []*nats.Conn) (*benchReport, error) {
	ctx := e.ctx
	rep := newBenchReport(cfg)
	clients, err := benchClients(cfg, conns, cfg.cf.Tenant)
	if err != nil {
		return nil, err
	}
	runs := claimRuns(cfg, rep.RunID)
	fmt.Fprintf(e.stderr, "bench: creating %d runs of up to %d work shards...\n", len(runs), claimRunSize)
	start := time.Now()
	if err := createClaimRuns(ctx, cfg, clients[0], runs); err != nil {
		return nil, err
	}
	rep.Setup = setupReport{Created: cfg.resources, Elapsed: time.Since(start)}

	workers := make([]*claimWorker, cfg.clients)
	var live liveCounters
	stop := startProgress(e, cfg, "holdfast", &live)
	left := &claimRunsLeft{}
	left.n.Store(int64(len(runs)))
	elapsed := runPhase(ctx, cfg.duration, len(workers), func(i int, deadline time.Time) {
		w := &claimWorker{cfg: cfg, cl: clients[i%len(clients)], holder: "bench-" + rep.RunID + "-" + strconv.Itoa(i),
			live: &live, codes: map[string]map[string]uint64{"claim": {}, "checkpoint": {}, "complete": {}}}
		workers[i] = w
		r := i % len(runs)
		for ctx.Err() == nil && time.Now().Before(deadline) && left.n.Load() > 0 {
			run := runs[r]
			if _, done := left.exhausted.Load(run); done || !w.cycle(ctx, run, left) {
				r = (r + 1) % len(runs)
			}
		}
	})
	stop()
	rep.Holdfast = claimPhase(workers, elapsed)
	if rep.Kept = cfg.keep; !cfg.keep {
		c := benchCleanup(ctx, cfg, conns, cfg.cf.Tenant, runs, deleteRun)
		rep.Cleanup = &c
	}
	return rep, nil
}

// createClaimRuns creates the runs, up to claimRunSize work shards each.
func createClaimRuns(ctx context.Context, cfg *benchConfig, cl *client.Client, runs []string) error {
	for i, run := range runs {
		var shards []*messages.WorkSpec
		for j := i * claimRunSize; j < min(cfg.resources, (i+1)*claimRunSize); j++ {
			shards = append(shards, client.Shard("w"+strconv.Itoa(j), nil, nil))
		}
		res, err := cl.CreateRun(ctx, run, shards)
		if err == nil && !res.OK() {
			err = res.Err()
		}
		if err != nil {
			return fmt.Errorf("create run %s: %w", run, err)
		}
	}
	return nil
}

// claimRunsLeft is what the workers know of the runs together: which are exhausted
// (none_available with nothing held), and how many are not.
type claimRunsLeft struct {
	exhausted sync.Map
	n         atomic.Int64
}

// claimWorker is one client of the claim scenario.
type claimWorker struct {
	cfg                         *benchConfig
	cl                          *client.Client
	holder                      string
	live                        *liveCounters
	claimLat, checkLat, doneLat histogram
	codes                       map[string]map[string]uint64
	cycles                      uint64
}

// cycle claims a work shard of run, checkpoints it and completes it; false when the
// claim got none (the worker moves to the next run).
func (w *claimWorker) cycle(ctx context.Context, run string, left *claimRunsLeft) bool {
	t := time.Now()
	res, err := w.cl.Claim(ctx, w.holder, run, "", w.cfg.ttl)
	w.claimLat.record(time.Since(t))
	w.live.reserves.Add(1)
	code := codeOf(res, err)
	w.codes["claim"][code]++
	if code != messages.CodeOK {
		if code == messages.CodeNoneAvailable && res.EarliestDeadlineSlot == 0 {
			if _, loaded := left.exhausted.LoadOrStore(run, true); !loaded {
				left.n.Add(-1)
			}
		} else if code != messages.CodeNoneAvailable {
			w.live.failures.Add(1)
		}
		return false
	}
	w.live.grants.Add(1)
	f := res.Fence()
	// A worker resumes after the cursor a claim returns: a work shard claimed
	// again (its last claim lapsed) checkpoints on from where it was left.
	for k := resumeAfter(res.Work.GetCursor().GetLastKey()); k < w.cfg.checkpoints; k++ {
		t = time.Now()
		cr, err := w.cl.Checkpoint(ctx, w.holder, f, checkpointKey(k), []byte("t"))
		w.checkLat.record(time.Since(t))
		w.codes["checkpoint"][codeOf(cr, err)]++
	}
	t = time.Now()
	dr, err := w.cl.CompleteWork(ctx, w.holder, f, nil)
	w.doneLat.record(time.Since(t))
	w.live.releases.Add(1)
	c := codeOf(dr, err)
	w.codes["complete"][c]++
	if c != messages.CodeOK {
		w.live.failures.Add(1)
	} else {
		w.cycles++
	}
	return true
}

// claimPhase sums the workers' counts into the run's report.
func claimPhase(workers []*claimWorker, elapsed time.Duration) phaseReport {
	var claimLat, checkLat, doneLat histogram
	codes := map[string]map[string]uint64{"claim": {}, "checkpoint": {}, "complete": {}}
	var cycles uint64
	for _, w := range workers {
		if w == nil {
			continue
		}
		claimLat.merge(&w.claimLat)
		checkLat.merge(&w.checkLat)
		doneLat.merge(&w.doneLat)
		for verb, m := range w.codes {
			for k, v := range m {
				codes[verb][k] += v
			}
		}
		cycles += w.cycles
	}
	secs := elapsed.Seconds()
	return phaseReport{
		Elapsed:    elapsed,
		AttemptsPS: float64(claimLat.count()) / secs,
		GrantsPS:   float64(codes["claim"]["ok"]) / secs,
		RequestsPS: float64(claimLat.count()+checkLat.count()+doneLat.count()) / secs,
		Cycles:     cycles,
		Verbs:      []verbReport{verbOf("claim", &claimLat), verbOf("checkpt", &checkLat), verbOf("complete", &doneLat)},
		Codes:      codes,
	}
}

// codeOf is a call's code: the reply's, or the error's.
func codeOf(r *client.WorkResult, err error) string {
	if err != nil {
		if c := client.Code(err); c != "" {
			return c
		}
		return "transport:error"
	}
	return r.Code
}

// checkpointKey is the bench's k-th checkpoint key; keys order as their numbers do (a
// checkpoint's key must exceed the cursor's, bytewise).
func checkpointKey(k int) []byte { return fmt.Appendf(nil, "k%06d", k) }

// resumeAfter is the number of the first checkpoint after a cursor's last key (0: none).
func resumeAfter(lastKey []byte) int {
	var k int
	if _, err := fmt.Sscanf(string(lastKey), "k%06d", &k); err != nil {
		return 0
	}
	return k + 1
}
