//go:build unix

package integration

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/nats-io/nats.go"

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
	nc, err := nats.Connect(srv.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c, err := client.New(nc, client.WithTimeout(time.Second), client.WithRetry(20, 20*time.Millisecond, 300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var specs []*messages.WorkSpec
	for i := 0; i < shards; i++ {
		specs = append(specs, client.Shard(fmt.Sprintf("s%02d", i), nil, nil))
	}
	if r, err := c.CreateRun(ctx, "lin", specs); err != nil || !r.OK() {
		t.Fatalf("create run: %v %+v", err, r)
	}

	var (
		mu   sync.Mutex
		ops  []porcupine.Operation
		keys atomic.Int64
	)
	record := func(worker int, in workIn, call int64, out workOut) {
		ret := time.Now().UnixNano()
		if out.code == "unknown" {
			ret = math.MaxInt64 // it may have taken effect at any time after its call
		}
		in.ret = ret
		mu.Lock()
		ops = append(ops, porcupine.Operation{ClientId: worker, Input: in, Call: call, Output: out, Return: ret})
		mu.Unlock()
	}
	outOf := func(r *client.WorkResult, err error) workOut {
		var de *client.DefiniteError
		switch {
		case err == nil:
			return workOut{code: r.Code}
		case errors.As(err, &de):
			return workOut{code: "rejected"}
		default:
			return workOut{code: "unknown"}
		}
	}
	runCtx, stop := context.WithTimeout(ctx, 8*time.Second)
	defer stop()
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			holder := fmt.Sprintf("w%d", w)
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
				for k := rng.Intn(3); k > 0; k-- {
					key := fmt.Sprintf("%08d", keys.Add(1))
					call := time.Now().UnixNano()
					cr, err := c.Checkpoint(ctx, holder, f, []byte(key), nil)
					record(w, workIn{shard: name, kind: "checkpoint", lease: f.LeaseID, key: key}, call, outOf(cr, err))
				}
				time.Sleep(time.Duration(rng.Intn(60)) * time.Millisecond)
				call = time.Now().UnixNano()
				switch rng.Intn(20) {
				case 0:
					cr, err := c.CompleteWork(ctx, holder, f, nil)
					record(w, workIn{shard: name, kind: "complete", lease: f.LeaseID}, call, outOf(cr, err))
				case 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15:
					lr, err := c.Release(ctx, holder, f)
					out := workOut{code: "unknown"}
					var de *client.DefiniteError
					switch {
					case err == nil:
						out.code = lr.Code
					case errors.As(err, &de):
						out.code = "rejected"
					}
					record(w, workIn{shard: name, kind: "release", lease: f.LeaseID}, call, out)
				default: // abandoned: the claim expires
				}
			}
		}()
	}
	for runCtx.Err() == nil {
		time.Sleep(time.Second)
		if runCtx.Err() != nil {
			break
		}
		srv.Kill()
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()

	counts := map[string]int{}
	for _, op := range ops {
		counts[op.Input.(workIn).kind+" "+op.Output.(workOut).code]++
	}
	t.Logf("%d operations, server started %d times: %v", len(ops), srv.Starts(), counts)
	if counts["claim ok"] == 0 || counts["checkpoint ok"] == 0 || counts["complete ok"] == 0 {
		t.Fatal("the history lacks successful claims, checkpoints or completions")
	}
	model := workModel(int64(ttl))
	res, info := porcupine.CheckOperationsVerbose(model, ops, time.Minute)
	if res != porcupine.Ok {
		path := filepath.Join(t.TempDir(), "work-lin.html")
		if *flagLogs != "" {
			path = filepath.Join(*flagLogs, "work-lin.html")
		}
		_ = porcupine.VisualizePath(model, info, path)
		t.Fatalf("work shard histories are not linearizable (%v); the history is drawn in %s (keep it with -serverlogs DIR)", res, path)
	}
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
			by := map[string][]porcupine.Operation{}
			var order []string
			for _, op := range h {
				s := op.Input.(workIn).shard
				if _, ok := by[s]; !ok {
					order = append(order, s)
				}
				by[s] = append(by[s], op)
			}
			var out [][]porcupine.Operation
			for _, s := range order {
				out = append(out, by[s])
			}
			return out
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
			var next []interface{}
			add := func(st workState) {
				for _, n := range next {
					if n.(workState) == st {
						return
					}
				}
				next = append(next, st)
			}
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
			return next
		},
		DescribeOperation: func(input, output interface{}) string {
			in, out := input.(workIn), output.(workOut)
			return fmt.Sprintf("%s %s lease=%s key=%s -> %s %s %s", in.kind, in.shard, in.lease, in.key, out.code, out.lease, out.status)
		},
	}).ToModel()
}
