// Command workers is a worker fleet on Holdfast: a run's key space split into work
// shards, claimed by workers that checkpoint as they go; one worker dies mid-shard and
// another resumes from its checkpoint; one splits off the rest of a long shard for others
// to share; the run completes when every shard is done.
//
//	go run ./examples/workers --server nats://127.0.0.1:4222
//
// Keys are "k0000".."k0999"; "processing" a key is recording it, so the example can show
// that every key was processed, and how many twice (at least once, resumed from the last
// checkpoint, as the contract promises).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/messages"
)

func main() {
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "workers:", err)
		os.Exit(1)
	}
}

func key(i int) string { return fmt.Sprintf("k%04d", i) }

// fleet records what was processed, by key.
type fleet struct {
	mu   sync.Mutex
	seen map[string]int
	log  []string
}

func (f *fleet) process(k string) {
	f.mu.Lock()
	f.seen[k]++
	f.mu.Unlock()
}

func (f *fleet) say(format string, args ...any) {
	f.mu.Lock()
	f.log = append(f.log, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("workers", flag.ContinueOnError)
	server := fs.String("server", nats.DefaultURL, "NATS server URL")
	tenant := fs.String("tenant", "default", "Holdfast tenant")
	runID := fs.String("run", "crawl-"+client.NewOperationID()[:8], "run id")
	workers := fs.Int("workers", 3, "workers in the fleet")
	if err := fs.Parse(args); err != nil {
		return err
	}
	nc, err := nats.Connect(*server, nats.Name("holdfast example workers"))
	if err != nil {
		return err
	}
	defer nc.Close()
	hf, err := client.New(nc, client.WithTenant(*tenant))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()

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

	f := &fleet{seen: map[string]int{}}
	newWorker := func(n int) *client.Worker {
		return &client.Worker{Client: hf, Holder: fmt.Sprintf("worker-%d", n), Run: *runID, TTL: time.Second}
	}
	// worker-0 goes first, takes s0 (the fairest: fewest claims, lowest name) and dies
	// in it; the fleet starts after.
	if err := work(ctx, newWorker(0), f, true); err != nil {
		return fmt.Errorf("worker-0: %w", err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, *workers)
	for n := 1; n <= *workers; n++ {
		w := newWorker(n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := work(ctx, w, f, false); err != nil {
				errs <- fmt.Errorf("%s: %w", w.Holder, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		return err
	}
	r, err := hf.CompleteRun(ctx, *runID)
	if err != nil || !r.OK() {
		return fmt.Errorf("complete run: %v %v", err, r.Err())
	}
	sort.Strings(f.log)
	for _, l := range f.log {
		fmt.Fprintln(out, l)
	}
	twice := 0
	for i := 0; i < 1000; i++ {
		switch f.seen[key(i)] {
		case 0:
			return fmt.Errorf("key %s never processed", key(i))
		case 1:
		default:
			twice++
		}
	}
	fmt.Fprintf(out, "every key processed; %d processed again after a resume; run %s: %s, %d work shards (%d split)\n",
		twice, *runID, r.Run.GetStatus(), r.Run.GetWork(), r.Run.GetSplit())
	return nil
}

// work claims shards until none is left. The doomed worker dies after processing some
// keys of its first shard without checkpointing them: its claim expires and another
// worker resumes from the last checkpoint.
func work(ctx context.Context, w *client.Worker, f *fleet, doomed bool) error {
	for {
		claim, res, err := w.Next(ctx)
		if err != nil {
			return err
		}
		if claim == nil {
			switch res.Code {
			case messages.CodeNoneAvailable:
				if res.EarliestDeadlineSlot == 0 {
					return nil // every shard is done, split or claimed for good
				}
				time.Sleep(50 * time.Millisecond) // a claim may free up: look again
				continue
			case messages.CodeRunTerminal:
				return nil
			}
			return fmt.Errorf("claim: %s", res.Code)
		}
		if err := shard(ctx, claim, f, w.Holder, doomed); err != nil {
			return err
		}
		if doomed {
			return nil
		}
	}
}

// shard processes one claimed work shard from its cursor, checkpointing every 25 keys.
func shard(ctx context.Context, claim *client.Claim, f *fleet, holder string, doomed bool) error {
	wk := claim.Work
	from := string(wk.GetStart())
	if c := wk.GetCursor(); c != nil {
		from = string(c.GetLastKey())
		f.say("%s resumed %s at %s (token %q)", holder, wk.GetName(), from, c.GetToken())
	}
	end := string(wk.GetEnd())
	var i int
	if _, err := fmt.Sscanf(from, "k%04d", &i); err != nil {
		return err
	}
	for n := 0; ; i, n = i+1, n+1 {
		k := key(i)
		if (end != "" && k >= end) || i >= 1000 {
			break
		}
		if claim.Context().Err() != nil {
			return fmt.Errorf("claim of %s lost: %v", wk.GetName(), claim.Err())
		}
		if doomed && n == 40 {
			claim.KeepAlive.Stop() // the process dies: nobody renews, nobody checkpoints
			f.say("%s died in %s after %s", holder, wk.GetName(), k)
			return nil
		}
		// The long shard hands its second half to the fleet.
		if wk.GetName() == "s3" && n == 0 {
			r, err := claim.SplitResidual(ctx, []byte(key(650)))
			if err != nil || !r.OK() {
				return fmt.Errorf("split: %v %v", err, r.Err())
			}
			end = key(650)
			f.say("%s split %s at %s: %s", holder, wk.GetName(), key(650), r.Children[0].GetName())
		}
		f.process(k)
		if n%25 == 24 {
			r, err := claim.Checkpoint(ctx, []byte(k), []byte(fmt.Sprintf("done-through=%s", k)))
			if err != nil {
				return err
			}
			if !r.OK() {
				return errors.New("checkpoint: " + r.Code)
			}
		}
	}
	r, err := claim.Complete(ctx, nil)
	if err != nil || !r.OK() {
		return fmt.Errorf("complete %s: %v %v", wk.GetName(), err, r.Err())
	}
	return nil
}
