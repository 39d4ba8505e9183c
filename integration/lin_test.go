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
	"github.com/holdfast/holdfast/integration/internal/harness"
)

// What the work linearizability tests share: a client that rides out the kills, the
// kills themselves, a history recorder and porcupine's verdict.

// linClient connects a client that reconnects at once and retries an indefinite answer
// for as long as a restart takes.
func linClient(t *testing.T, url string) *client.Client {
	t.Helper()
	_, c := reconnectingClient(t, url, client.WithTimeout(time.Second), client.WithRetry(20, 20*time.Millisecond, 300*time.Millisecond))
	return c
}

// reconnectingClient connects to url with a connection that reconnects at once, forever,
// and a client on it with opts (its timeout and retries); both close when the test ends.
func reconnectingClient(t *testing.T, url string, opts ...client.Option) (*nats.Conn, *client.Client) {
	t.Helper()
	nc, err := nats.Connect(url, nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c, err := client.New(nc, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return nc, c
}

// killEverySecond kills the server with SIGKILL and starts it again every second until
// ctx ends.
func killEverySecond(ctx context.Context, t *testing.T, srv *harness.Server) {
	for ctx.Err() == nil {
		time.Sleep(time.Second)
		if ctx.Err() != nil {
			return
		}
		srv.Kill()
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
	}
}

// outcome is an answer as the models read it: its code, "rejected" for a definite
// rejection (it did not take effect), "unknown" for an indefinite one (it may have).
func outcome(r *client.Result, err error) string {
	var de *client.DefiniteError
	switch {
	case err == nil:
		return r.Code
	case errors.As(err, &de):
		return "rejected"
	default:
		return "unknown"
	}
}

// The Result of each kind of answer, nil when there is none (err is set then).

func workRes(r *client.WorkResult) *client.Result {
	if r == nil {
		return nil
	}
	return &r.Result
}

func runRes(r *client.RunResult) *client.Result {
	if r == nil {
		return nil
	}
	return &r.Result
}

func leaseRes(r *client.LeaseResult) *client.Result {
	if r == nil {
		return nil
	}
	return &r.Result
}

// linHistory records operations from several workers.
type linHistory struct {
	mu  sync.Mutex
	ops []porcupine.Operation
}

// returnTime is now; an unknown outcome may take effect at any time after its call, so
// it never returns (MaxInt64). The models read it from the input too (expiry is judged
// at the return), so it is taken before the operation is recorded.
func returnTime(unknown bool) int64 {
	if unknown {
		return math.MaxInt64
	}
	return time.Now().UnixNano()
}

func (h *linHistory) add(worker int, in interface{}, call, ret int64, out interface{}) {
	h.mu.Lock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: worker, Input: in, Call: call, Output: out, Return: ret})
	h.mu.Unlock()
}

// partitionBy splits a history by key, in the order keys first appear.
func partitionBy(h []porcupine.Operation, key func(input interface{}) string) [][]porcupine.Operation {
	by := map[string][]porcupine.Operation{}
	var order []string
	for _, op := range h {
		k := key(op.Input)
		if _, ok := by[k]; !ok {
			order = append(order, k)
		}
		by[k] = append(by[k], op)
	}
	out := make([][]porcupine.Operation, 0, len(order))
	for _, k := range order {
		out = append(out, by[k])
	}
	return out
}

// checkLinearizable fails the test when the history does not fit the model, drawing it
// into file (kept under -serverlogs DIR).
func checkLinearizable(t *testing.T, model porcupine.Model, ops []porcupine.Operation, file, what string) {
	t.Helper()
	res, info := porcupine.CheckOperationsVerbose(model, ops, time.Minute)
	if res == porcupine.Ok {
		return
	}
	path := filepath.Join(t.TempDir(), file)
	if *flagLogs != "" {
		path = filepath.Join(*flagLogs, file)
	}
	_ = porcupine.VisualizePath(model, info, path)
	t.Fatalf("%s histories are not linearizable (%v); the history is drawn in %s (keep it with -serverlogs DIR)", what, res, path)
}

// nextStates collects a model step's next states, each once.
type nextStates[S comparable] struct{ list []interface{} }

func (n *nextStates[S]) add(st S) {
	for _, have := range n.list {
		if have.(S) == st {
			return
		}
	}
	n.list = append(n.list, st)
}

// claimUse is what a worker does with a claim it got: zero to two checkpoints with keys
// that only grow, a pause, then one of `of` times it completes the work shard (0),
// releases the claim (1..release) or abandons it to expire (the rest). Each answer goes to
// record with the lease, the checkpoint's key and when it was asked for.
type claimUse struct {
	c       *client.Client
	holder  string
	keys    *atomic.Int64
	of      int
	release int
}

func (u claimUse) run(ctx context.Context, rng *rand.Rand, f client.Fence, record func(kind, key string, call int64, code string)) {
	for k := rng.Intn(3); k > 0; k-- {
		key := fmt.Sprintf("%08d", u.keys.Add(1))
		call := time.Now().UnixNano()
		r, err := u.c.Checkpoint(ctx, u.holder, f, []byte(key), nil)
		record("checkpoint", key, call, outcome(workRes(r), err))
	}
	time.Sleep(time.Duration(rng.Intn(60)) * time.Millisecond)
	call := time.Now().UnixNano()
	switch x := rng.Intn(u.of); {
	case x == 0:
		r, err := u.c.CompleteWork(ctx, u.holder, f, nil)
		record("complete", "", call, outcome(workRes(r), err))
	case x <= u.release:
		r, err := u.c.Release(ctx, u.holder, f)
		record("release", "", call, outcome(leaseRes(r), err))
	}
}
