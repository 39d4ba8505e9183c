//go:build unix

package integration

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/messages"
)

// runShards is how many work shards each run of TestWorkRunsLinearizable has.
const runShards = 3

// Runs created, cancelled, deleted and created again under kill -9, with their work
// shards claimed, checkpointed, completed and released meanwhile, checked for
// linearizability with porcupine, one partition per run. The model (runModel) is the
// contract's: a run is cancelled once; a claim outlives the cancel until its holder ends
// it or it expires, but nothing else in a cancelled run changes; a run is deleted only
// once cancelled with no claim left, and its id is then free: created again, its work
// shards start afresh, and no claim of the run before reaches them.
func TestWorkRunsLinearizable(t *testing.T) {
	if testing.Short() {
		t.Skip("run lifecycle linearizability under kill -9")
	}
	const (
		runs = 4
		ttl  = 400 * time.Millisecond
	)
	srv := newServer(t, 3)
	c := linClient(t, srv.URL())
	ctx := context.Background()
	specs := func() []*messages.WorkSpec {
		var s []*messages.WorkSpec
		for i := 0; i < runShards; i++ {
			s = append(s, client.Shard(fmt.Sprintf("s%d", i), nil, nil))
		}
		return s
	}
	for r := 0; r < runs; r++ {
		if res, err := c.CreateRun(ctx, fmt.Sprintf("run%d", r), specs()); err != nil || !res.OK() {
			t.Fatalf("create run%d: %v %+v", r, err, res)
		}
	}

	var (
		h    linHistory
		keys atomic.Int64
	)
	record := func(worker int, in runIn, call int64, code string) {
		in.ret = returnTime(code == "unknown")
		h.add(worker, in, call, in.ret, runOut{code: code})
	}
	runCtx, stop := context.WithTimeout(ctx, 8*time.Second)
	defer stop()
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(100 + w)))
			holder := fmt.Sprintf("w%d", w)
			use := claimUse{c: c, holder: holder, keys: &keys, of: 10, release: 7}
			for runCtx.Err() == nil {
				r, shard := rng.Intn(runs), rng.Intn(runShards)
				run, name := fmt.Sprintf("run%d", r), fmt.Sprintf("s%d", shard)
				in := runIn{run: run, shard: shard}
				call := time.Now().UnixNano()
				switch x := rng.Intn(30); {
				case x == 0:
					in.kind = "cancel"
					res, err := c.CancelRun(ctx, run, "lin")
					record(w, in, call, outcome(runRes(res), err))
					continue
				case x < 3:
					in.kind = "delete"
					res, err := c.DeleteRun(ctx, run)
					record(w, in, call, outcome(runRes(res), err))
					continue
				case x < 5:
					in.kind = "create"
					res, err := c.CreateRun(ctx, run, specs())
					record(w, in, call, outcome(runRes(res), err))
					continue
				case x < 10:
					in.kind = "get"
					res, err := c.GetWork(ctx, run, name)
					code := outcome(workRes(res), err)
					if code == "unknown" || code == "rejected" {
						continue // a read that did not answer says nothing
					}
					out := runOut{code: code}
					if code == messages.CodeOK {
						out.status, out.claim = res.Work.GetStatus(), res.Work.GetLeaseId()
						out.cursor = string(res.Work.GetCursor().GetLastKey())
					}
					in.ret = returnTime(false)
					h.add(w, in, call, in.ret, out)
					continue
				}
				in.kind, in.call = "claim", call
				res, err := c.Claim(ctx, holder, run, name, ttl)
				code := outcome(workRes(res), err)
				in.lease = ""
				if code == messages.CodeOK {
					in.lease = res.Fence().LeaseID // the claim's outcome names its lease
				}
				record(w, in, call, code)
				if code != messages.CodeOK {
					time.Sleep(time.Duration(rng.Intn(20)) * time.Millisecond)
					continue
				}
				f := res.Fence()
				use.run(ctx, rng, f, func(kind, key string, call int64, code string) {
					record(w, runIn{run: run, shard: shard, kind: kind, lease: f.LeaseID, key: key}, call, code)
				})
			}
		}()
	}
	killEverySecond(runCtx, t, srv)
	wg.Wait()

	counts := map[string]int{}
	for _, op := range h.ops {
		counts[op.Input.(runIn).kind+" "+op.Output.(runOut).code]++
	}
	t.Logf("%d operations, server started %d times: %v", len(h.ops), srv.Starts(), counts)
	for _, want := range []string{"claim ok", "checkpoint ok", "cancel ok", "delete ok", "create ok", "delete object_in_use", "claim run_terminal"} {
		if counts[want] == 0 {
			t.Fatalf("the history has no %q: it does not exercise what the test is for", want)
		}
	}
	checkLinearizable(t, runModel(int64(ttl)), h.ops, "run-lin.html", "run")
}

type runIn struct {
	run              string
	shard            int
	kind, lease, key string
	call, ret        int64 // the claim's call; every op's return (MaxInt64: unknown)
}

type runOut struct {
	code                  string
	status, claim, cursor string // get
}

// runState is one run as the model sees it: comparable, so porcupine can tell states
// apart.
type runState struct {
	exists, cancelled bool
	shards            [runShards]workState
}

// runModel is the contract's model of one run and its work shards. Expiry is
// nondeterministic, as in workModel: a claim may have lapsed from ttl (less two slots)
// after it was asked for, or any time later.
func runModel(ttl int64) porcupine.Model {
	const slack = int64(20 * time.Millisecond)
	return (&porcupine.NondeterministicModel{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			return partitionBy(h, func(in interface{}) string { return in.(runIn).run })
		},
		Init: func() []interface{} { return []interface{}{runState{exists: true}} },
		Step: func(state, input, output interface{}) []interface{} {
			s, in, out := state.(runState), input.(runIn), output.(runOut)
			// Every combination of the claims that may have lapsed by the op's return.
			pre := []runState{s}
			for i := range s.shards {
				if c := s.shards[i]; c.claim != "" && in.ret >= c.claimCall+ttl-slack {
					for _, p := range pre {
						p.shards[i].claim, p.shards[i].claimCall = "", 0
						pre = append(pre, p)
					}
				}
			}
			var next nextStates[runState]
			add := next.add
			for _, p := range pre {
				if out.code == "rejected" || out.code == "unknown" {
					add(p) // did not take effect (or, unknown, may not have)
				}
				w := p.shards[in.shard]
				holds := p.exists && w.claim != "" && w.claim == in.lease
				lapsed := in.ret >= w.claimCall+ttl-slack
				claimed := false
				for _, sh := range p.shards {
					claimed = claimed || sh.claim != ""
				}
				switch in.kind {
				case "create":
					switch out.code {
					case "ok", "unknown":
						if !p.exists {
							add(runState{exists: true})
						}
					case messages.CodeAlreadyExists:
						if p.exists {
							add(p)
						}
					}
				case "cancel":
					switch out.code {
					case "ok", "unknown":
						if p.exists && !p.cancelled {
							n := p
							n.cancelled = true
							add(n)
						}
					case messages.CodeRunTerminal:
						if p.exists && p.cancelled {
							add(p)
						}
					case messages.CodeRunNotFound:
						if !p.exists {
							add(p)
						}
					}
				case "delete":
					switch out.code {
					case "ok", "unknown":
						if p.exists && p.cancelled && !claimed {
							add(runState{})
						}
					case messages.CodeObjectInUse:
						if p.exists && (!p.cancelled || claimed) {
							add(p)
						}
					case messages.CodeRunNotFound:
						if !p.exists {
							add(p)
						}
					}
				case "claim":
					free := p.exists && !p.cancelled && !w.done && w.claim == ""
					switch out.code {
					case "ok", "unknown":
						if free {
							n := p
							n.shards[in.shard] = workState{claim: in.lease, claimCall: in.call, cursor: w.cursor}
							if out.code == "unknown" {
								n.shards[in.shard].claim = "?"
							}
							add(n)
						}
					case messages.CodeRunNotFound:
						if !p.exists {
							add(p)
						}
					case messages.CodeRunTerminal:
						if p.exists && p.cancelled {
							add(p)
						}
					case messages.CodeWorkTerminal:
						if p.exists && !p.cancelled && w.done {
							add(p)
						}
					case messages.CodeResourceBusy:
						if p.exists && !p.cancelled && !w.done && w.claim != "" {
							add(p)
						}
					}
				case "checkpoint", "complete", "release":
					switch out.code {
					case "ok", "unknown":
						switch {
						case !holds:
						case in.kind == "release":
							n := p
							n.shards[in.shard].claim, n.shards[in.shard].claimCall = "", 0
							add(n)
						case p.cancelled:
						case in.kind == "complete":
							n := p
							n.shards[in.shard] = workState{done: true, cursor: w.cursor}
							add(n)
						case in.key >= w.cursor:
							n := p
							n.shards[in.shard].cursor = in.key
							add(n)
						}
					case messages.CodeCursorRegression:
						if holds && !p.cancelled && in.key < w.cursor {
							add(p)
						}
					case messages.CodeRunTerminal:
						if holds && p.cancelled && in.kind != "release" {
							add(p)
						}
					case messages.CodeLeaseExpired:
						if !holds || lapsed {
							add(p)
						}
					case messages.CodeStaleEpoch, messages.CodeWorkTerminal, messages.CodeInvalidState,
						messages.CodeLeaseRetired, messages.CodeLeaseNotFound:
						if !holds {
							add(p)
						}
					}
				case "get":
					status := "active"
					if w.done {
						status = "done"
					}
					claimOK := out.claim == w.claim || (w.claim == "?" && out.claim != "")
					switch {
					case out.code == messages.CodeRunNotFound && !p.exists:
						add(p)
					case out.code == messages.CodeOK && p.exists && out.status == status && out.cursor == w.cursor && claimOK:
						n := p
						if w.claim == "?" {
							n.shards[in.shard].claim = out.claim // now known
						}
						add(n)
					}
				}
			}
			return next.list
		},
		DescribeOperation: func(input, output interface{}) string {
			in, out := input.(runIn), output.(runOut)
			return fmt.Sprintf("%s %s/s%d lease=%s key=%s -> %s %s %s", in.kind, in.run, in.shard, in.lease, in.key, out.code, out.status, out.claim)
		},
	}).ToModel()
}
