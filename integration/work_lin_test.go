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

// Work shards under kill -9, checked for linearizability with porcupine, one partition
// per work shard. Workers claim named work shards (ttl 400 ms), checkpoint them with
// increasing keys, then complete, release or abandon them (the claim expires), and read
// them, while the server is killed and restarted every second. The model
// (workModel) is the contract's: a work shard is held by at most one claim; only its
// holder checkpoints (never backwards), completes or releases it; done is final; a claim
// may end by expiry no earlier than its ttl after it was asked for (late, never early);
// an indefinite answer may or may not have taken effect, a definite rejection did not.
func TestWorkShardsLinearizable(t *testing.T) {
	if testing.Short() {
		t.Skip("work shard linearizability under kill -9")
	}
	const (
		shards = 24
		ttl    = 400 * time.Millisecond
	)
	srv := newServer(t, 3)
	c := linClient(t, srv.URL())
	ctx := context.Background()
	var specs []*messages.WorkSpec
	for i := 0; i < shards; i++ {
		specs = append(specs, client.Shard(fmt.Sprintf("s%02d", i), nil, nil))
	}
	if r, err := c.CreateRun(ctx, "lin", specs); err != nil || !r.OK() {
		t.Fatalf("create run: %v %+v", err, r)
	}

	var (
		h    linHistory
		keys atomic.Int64
	)
	record := func(worker int, in workIn, call int64, out workOut) {
		in.ret = returnTime(out.code == "unknown")
		h.add(worker, in, call, in.ret, out)
	}
	outOf := func(r *client.WorkResult, err error) workOut { return workOut{code: outcome(workRes(r), err)} }
	runCtx, stop := context.WithTimeout(ctx, 8*time.Second)
	defer stop()
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			holder := fmt.Sprintf("w%d", w)
			use := claimUse{c: c, holder: holder, keys: &keys, of: 20, release: 15}
			for runCtx.Err() == nil {
				name := fmt.Sprintf("s%02d", rng.Intn(shards))
				if rng.Intn(5) == 0 {
					call := time.Now().UnixNano()
					r, err := c.GetWork(ctx, "lin", name)
					out := outOf(r, err)
					if err == nil && r.Work != nil {
						out.status, out.claim = r.Work.GetStatus(), r.Work.GetLeaseId()
						out.cursor = string(r.Work.GetCursor().GetLastKey())
					}
					if out.code == "unknown" || out.code == "rejected" {
						continue // a read that did not answer says nothing
					}
					record(w, workIn{shard: name, kind: "get"}, call, out)
					continue
				}
				call := time.Now().UnixNano()
				r, err := c.Claim(ctx, holder, "lin", name, ttl)
				out := outOf(r, err)
				if err == nil && r.OK() {
					out.lease = r.Fence().LeaseID
				}
				record(w, workIn{shard: name, kind: "claim", call: call}, call, out)
				if out.lease == "" {
					time.Sleep(time.Duration(rng.Intn(20)) * time.Millisecond)
					continue
				}
				f := r.Fence()
				use.run(ctx, rng, f, func(kind, key string, call int64, code string) {
					record(w, workIn{shard: name, kind: kind, lease: f.LeaseID, key: key}, call, workOut{code: code})
				})
			}
		}()
	}
	killEverySecond(runCtx, t, srv)
	wg.Wait()

	counts := map[string]int{}
	for _, op := range h.ops {
		counts[op.Input.(workIn).kind+" "+op.Output.(workOut).code]++
	}
	t.Logf("%d operations, server started %d times: %v", len(h.ops), srv.Starts(), counts)
	if counts["claim ok"] == 0 || counts["checkpoint ok"] == 0 || counts["complete ok"] == 0 {
		t.Fatal("the history lacks successful claims, checkpoints or completions")
	}
	checkLinearizable(t, workModel(int64(ttl)), h.ops, "work-lin.html", "work shard")
}

type workIn struct {
	shard, kind, lease, key string
	call, ret               int64 // the claim's call; every op's return (MaxInt64: unknown)
}

type workOut struct {
	code, lease           string
	status, claim, cursor string // get
}

type workState struct {
	done      bool
	claim     string // the live claim's lease id; "?" an unknown one; "" none
	claimCall int64  // when its claim was asked for: expiry no earlier than ttl after
	cursor    string
}

// workModel is the contract's model of one work shard; expiry is nondeterministic but
// never earlier than ttl (less two 10 ms slots of rounding) after the claim was asked for.
func workModel(ttl int64) porcupine.Model {
	const slack = int64(20 * time.Millisecond)
	return (&porcupine.NondeterministicModel{
		Partition: func(h []porcupine.Operation) [][]porcupine.Operation {
			return partitionBy(h, func(in interface{}) string { return in.(workIn).shard })
		},
		Init: func() []interface{} { return []interface{}{workState{}} },
		Step: func(state, input, output interface{}) []interface{} {
			s, in, out := state.(workState), input.(workIn), output.(workOut)
			pre := []workState{s}
			if s.claim != "" && in.ret >= s.claimCall+ttl-slack {
				e := s
				e.claim, e.claimCall = "", 0 // expired meanwhile
				pre = append(pre, e)
			}
			var next nextStates[workState]
			add := next.add
			for _, p := range pre {
				if out.code == "rejected" || out.code == "unknown" {
					add(p) // did not take effect (or, unknown, may not have)
				}
				holds := p.claim != "" && p.claim == in.lease
				switch in.kind {
				case "claim":
					free := !p.done && p.claim == ""
					switch out.code {
					case "ok":
						if free {
							add(workState{claim: out.lease, claimCall: in.call, cursor: p.cursor})
						}
					case "unknown":
						if free {
							add(workState{claim: "?", claimCall: in.call, cursor: p.cursor})
						}
					case messages.CodeResourceBusy:
						if !p.done && p.claim != "" {
							add(p)
						}
					case messages.CodeWorkTerminal:
						if p.done {
							add(p)
						}
					}
				case "checkpoint":
					ok := holds && !p.done && in.key >= p.cursor
					switch out.code {
					case "ok", "unknown":
						if ok {
							n := p
							n.cursor = in.key
							add(n)
						}
					case messages.CodeCursorRegression:
						if holds && in.key < p.cursor {
							add(p)
						}
					case messages.CodeLeaseExpired:
						if !holds || in.ret >= p.claimCall+ttl-slack {
							add(p)
						}
					case messages.CodeStaleEpoch, messages.CodeWorkTerminal:
						if !holds {
							add(p)
						}
					}
				case "complete", "release":
					switch out.code {
					case "ok", "unknown":
						if holds && !p.done {
							n := p
							n.claim, n.claimCall = "", 0
							n.done = in.kind == "complete"
							add(n)
						}
					case messages.CodeLeaseExpired:
						if !holds || in.ret >= p.claimCall+ttl-slack {
							add(p)
						}
					case messages.CodeStaleEpoch, messages.CodeWorkTerminal, messages.CodeInvalidState:
						if !holds {
							add(p)
						}
					}
				case "get":
					status := "active"
					if p.done {
						status = "done"
					}
					claimOK := out.claim == p.claim || (p.claim == "?" && out.claim != "")
					if out.code == "ok" && out.status == status && out.cursor == p.cursor && claimOK {
						n := p
						if p.claim == "?" {
							n.claim = out.claim // now known
						}
						add(n)
					}
				}
			}
			return next.list
		},
		DescribeOperation: func(input, output interface{}) string {
			in, out := input.(workIn), output.(workOut)
			return fmt.Sprintf("%s %s lease=%s key=%s -> %s %s %s", in.kind, in.shard, in.lease, in.key, out.code, out.lease, out.status)
		},
	}).ToModel()
}
