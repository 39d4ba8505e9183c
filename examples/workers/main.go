// Command workers is a worker fleet on Holdfast: a run's key space split into work
// shards, claimed by workers that write their results in batches and checkpoint after
// each; one worker dies mid-shard and another resumes after its checkpoint; the dead
// worker comes back as a zombie and tries to write what it had, and the results store
// refuses it by its stale fence; one worker splits off the rest of a long shard for others
// to share; the run completes when every shard is done.
//
//	go run ./examples/workers --server nats://127.0.0.1:4222
//
// Keys are "k0000".."k0999". The results store admits a batch only with the newest fence
// it has seen for the work shard (client.FenceGuard), so every key ends up written exactly
// once, by a writer that held the shard when it wrote.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/examples/internal/example"
	"github.com/holdfast/holdfast/messages"
)

func main() { example.Main("workers", run) }

func key(i int) string { return fmt.Sprintf("k%04d", i) }

// store is the results store the workers write to: a batch of keys per write, admitted
// only with the newest fence seen for its work shard.
type store struct {
	guard client.FenceGuard
	mu    sync.Mutex
	rows  map[string]string // key → the lease that wrote it
	again int               // keys written a second time
	log   []string
}

func (st *store) write(shard string, f client.Fence, keys []string) error {
	if err := st.guard.Admit(shard, f); err != nil {
		return err
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for _, k := range keys {
		if _, ok := st.rows[k]; ok {
			st.again++
		}
		st.rows[k] = f.LeaseID
	}
	return nil
}

func (st *store) say(format string, args ...any) {
	st.mu.Lock()
	st.log = append(st.log, fmt.Sprintf(format, args...))
	st.mu.Unlock()
}

// zombie is what the dead worker still holds in memory: its fence and unwritten batch.
type zombie struct {
	shard string
	fence client.Fence
	keys  []string
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := example.NewFlags("workers", "default")
	runID := fs.String("run", "crawl-"+client.NewOperationID()[:8], "run id")
	workers := fs.Int("workers", 3, "workers in the fleet")
	hf, ctx, done, err := fs.Start(ctx, args, time.Minute)
	if err != nil {
		return err
	}
	defer done()

	// Four shards over k0000..k0999; the last one is long.
	var shards []*messages.WorkSpec
	for i, b := range [][2]int{{0, 100}, {100, 200}, {200, 300}, {300, 1000}} {
		end := []byte(key(b[1]))
		if b[1] == 1000 {
			end = nil // unbounded: the rest of the key space
		}
		shards = append(shards, client.Shard(fmt.Sprintf("s%d", i), []byte(key(b[0])), end))
	}
	if r, err := hf.CreateRun(ctx, *runID, shards); err != nil || !r.OK() {
		return fmt.Errorf("create run: %v %v", err, r.Err())
	}
	fmt.Fprintf(out, "run %s: %d work shards over k0000..k0999\n", *runID, len(shards))

	st := &store{rows: map[string]string{}}
	newWorker := func(n int) *client.Worker {
		return &client.Worker{Client: hf, Holder: fmt.Sprintf("worker-%d", n), Run: *runID, TTL: time.Second}
	}
	// worker-0 goes first, takes s0 (the fairest: fewest claims, lowest name) and dies
	// in it; the fleet starts after.
	z, err := work(ctx, newWorker(0), st, true)
	if err != nil {
		return fmt.Errorf("worker-0: %w", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, *workers)
	for n := 1; n <= *workers; n++ {
		w := newWorker(n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := work(ctx, w, st, false); err != nil {
				errs <- fmt.Errorf("%s: %w", w.Holder, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	// The dead worker wakes up and flushes what it had: refused.
	if err := st.write(z.shard, z.fence, z.keys); err != nil {
		st.say("zombie worker-0's late batch of %d keys refused: %v", len(z.keys), errors.Unwrap(err))
	} else {
		return errors.New("the zombie's stale write was accepted")
	}
	r, err := hf.CompleteRun(ctx, *runID)
	if err != nil || !r.OK() {
		return fmt.Errorf("complete run: %v %v", err, r.Err())
	}
	sort.Strings(st.log)
	for _, l := range st.log {
		fmt.Fprintln(out, l)
	}
	for i := 0; i < 1000; i++ {
		if _, ok := st.rows[key(i)]; !ok {
			return fmt.Errorf("key %s never written", key(i))
		}
	}
	fmt.Fprintf(out, "every key written, %d written twice; run %s: %s, %d work shards (%d split)\n",
		st.again, *runID, r.Run.GetStatus(), r.Run.GetWork(), r.Run.GetSplit())
	return nil
}

// work claims shards until none is left. The doomed worker dies in its first shard and
// returns what it had not written.
func work(ctx context.Context, w *client.Worker, st *store, doomed bool) (*zombie, error) {
	for {
		claim, res, err := w.Next(ctx)
		if err != nil {
			return nil, err
		}
		if claim == nil {
			switch res.Code {
			case messages.CodeNoneAvailable:
				if res.EarliestDeadlineSlot == 0 {
					return nil, nil // every shard is done or split
				}
				time.Sleep(50 * time.Millisecond) // a claim may free up: look again
				continue
			case messages.CodeRunTerminal:
				return nil, nil
			}
			return nil, fmt.Errorf("claim: %s", res.Code)
		}
		z, err := shard(ctx, claim, st, w.Holder, doomed)
		if err != nil || doomed {
			return z, err
		}
	}
}

// shard processes one claimed work shard after its checkpoint, writing results every 25
// keys and checkpointing after each write: the token says through which key it is done.
func shard(ctx context.Context, claim *client.Claim, st *store, holder string, doomed bool) (*zombie, error) {
	wk := claim.Work
	i := 0
	if _, err := fmt.Sscanf(string(wk.GetStart()), "k%04d", &i); err != nil {
		return nil, err
	}
	if c := wk.GetCursor(); c != nil {
		var done int
		if _, err := fmt.Sscanf(string(c.GetToken()), "done-through=k%04d", &done); err != nil {
			return nil, err
		}
		i = done + 1
		st.say("%s resumed %s after %s (token %q)", holder, wk.GetName(), c.GetLastKey(), c.GetToken())
	}
	end := string(wk.GetEnd())
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		last := batch[len(batch)-1]
		if err := st.write(wk.GetName(), claim.Fence(), batch); err != nil {
			return err
		}
		batch = nil
		r, err := claim.Checkpoint(ctx, []byte(last), []byte("done-through="+last))
		if err != nil {
			return err
		}
		if !r.OK() {
			return errors.New("checkpoint: " + r.Code)
		}
		return nil
	}
	for n := 0; ; i, n = i+1, n+1 {
		k := key(i)
		if (end != "" && k >= end) || i >= 1000 {
			break
		}
		if claim.Context().Err() != nil {
			return nil, fmt.Errorf("claim of %s lost: %v", wk.GetName(), claim.Err())
		}
		if doomed && n == 40 {
			claim.KeepAlive.Stop() // the process hangs: nobody renews, nobody writes
			st.say("%s died in %s after %s, %d keys unwritten", holder, wk.GetName(), key(i-1), len(batch))
			return &zombie{shard: wk.GetName(), fence: claim.Fence(), keys: batch}, nil
		}
		// The long shard hands its second half to the fleet.
		if wk.GetName() == "s3" && n == 0 {
			r, err := claim.SplitResidual(ctx, []byte(key(650)))
			if err != nil || !r.OK() {
				return nil, fmt.Errorf("split: %v %v", err, r.Err())
			}
			end = key(650)
			st.say("%s split %s at %s: %s", holder, wk.GetName(), key(650), r.Children[0].GetName())
		}
		batch = append(batch, k)
		if len(batch) == 25 {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	r, err := claim.Complete(ctx, nil)
	if err != nil || !r.OK() {
		return nil, fmt.Errorf("complete %s: %v %v", wk.GetName(), err, r.Err())
	}
	return nil, nil
}
