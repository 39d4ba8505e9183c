package main

import (
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
	runID := rep.RunID
	clients, err := benchClients(cfg, conns, cfg.cf.Tenant)
	if err != nil {
		return nil, err
	}
	runs := claimRuns(cfg, runID)
	fmt.Fprintf(e.stderr, "bench: creating %d runs of up to %d work shards...\n", len(runs), claimRunSize)
	start := time.Now()
	for i, run := range runs {
		var shards []*messages.WorkSpec
		for j := i * claimRunSize; j < min(cfg.resources, (i+1)*claimRunSize); j++ {
			shards = append(shards, client.Shard("w"+strconv.Itoa(j), nil, nil))
		}
		res, err := clients[0].CreateRun(ctx, run, shards)
		if err == nil && !res.OK() {
			err = res.Err()
		}
		if err != nil {
			return nil, fmt.Errorf("create run %s: %w", run, err)
		}
	}
	rep.Setup = setupReport{Created: cfg.resources, Elapsed: time.Since(start)}

	type worker struct {
		claimLat, checkLat, doneLat histogram
		codes                       map[string]map[string]uint64
		cycles                      uint64
	}
	workers := make([]*worker, cfg.clients)
	var live liveCounters
	stop := startProgress(e, cfg, "holdfast", &live)
	var exhausted sync.Map // run → true once none_available with nothing held
	var left atomic.Int64
	left.Store(int64(len(runs)))
	elapsed := runPhase(ctx, cfg.duration, len(workers), func(i int, deadline time.Time) {
		w := &worker{codes: map[string]map[string]uint64{"claim": {}, "checkpoint": {}, "complete": {}}}
		workers[i] = w
		cl := clients[i%len(clients)]
		holder := "bench-" + runID + "-" + strconv.Itoa(i)
		r := i % len(runs)
		for ctx.Err() == nil && time.Now().Before(deadline) && left.Load() > 0 {
			run := runs[r]
			if _, done := exhausted.Load(run); done {
				r = (r + 1) % len(runs)
				continue
			}
			t := time.Now()
			res, err := cl.Claim(ctx, holder, run, "", cfg.ttl)
			w.claimLat.record(time.Since(t))
			live.reserves.Add(1)
			code := codeOf(res, err)
			w.codes["claim"][code]++
			if code != messages.CodeOK {
				if code == messages.CodeNoneAvailable && res.EarliestDeadlineSlot == 0 {
					if _, loaded := exhausted.LoadOrStore(run, true); !loaded {
						left.Add(-1)
					}
				} else if code != messages.CodeNoneAvailable {
					live.failures.Add(1)
				}
				r = (r + 1) % len(runs)
				continue
			}
			live.grants.Add(1)
			f := res.Fence()
			// A worker resumes after the cursor a claim returns: a work shard claimed
			// again (its last claim lapsed) checkpoints on from where it was left.
			for k := resumeAfter(res.Work.GetCursor().GetLastKey()); k < cfg.checkpoints; k++ {
				t = time.Now()
				cr, err := cl.Checkpoint(ctx, holder, f, checkpointKey(k), []byte("t"))
				w.checkLat.record(time.Since(t))
				w.codes["checkpoint"][codeOf(cr, err)]++
			}
			t = time.Now()
			dr, err := cl.CompleteWork(ctx, holder, f, nil)
			w.doneLat.record(time.Since(t))
			live.releases.Add(1)
			if c := codeOf(dr, err); c != messages.CodeOK {
				live.failures.Add(1)
				w.codes["complete"][c]++
			} else {
				w.codes["complete"][c]++
				w.cycles++
			}
		}
	})
	stop()
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
	rep.Holdfast = phaseReport{
		Elapsed:    elapsed,
		AttemptsPS: float64(claimLat.count()) / secs,
		GrantsPS:   float64(codes["claim"]["ok"]) / secs,
		RequestsPS: float64(claimLat.count()+checkLat.count()+doneLat.count()) / secs,
		Cycles:     cycles,
		Verbs:      []verbReport{verbOf("claim", &claimLat), verbOf("checkpt", &checkLat), verbOf("complete", &doneLat)},
		Codes:      codes,
	}
	if rep.Kept = cfg.keep; !cfg.keep {
		c := benchCleanup(ctx, cfg, conns, cfg.cf.Tenant, runs, deleteRun)
		rep.Cleanup = &c
	}
	return rep, nil
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
