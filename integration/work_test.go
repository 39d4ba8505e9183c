//go:build unix

package integration

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/internal/eventstest"
	"github.com/holdfast/holdfast/messages"
)

// A worker fleet through a run while the server is killed with SIGKILL and restarted
// every 0.7 s. Workers claim the next work shard, checkpoint it three times and complete it,
// retrying indefinite answers with the same operation id. Afterwards, from the shards'
// own record (the event stream, one lsn order per shard) and reads:
//   - no work shard was ever claimed while an earlier claim on it was live (a claim ends
//     by completion, park, split, release or expiry);
//   - every acknowledged completion is done, every work shard is done exactly once;
//   - checkpoints of a work shard never go back, and every acknowledged one is at or
//     before the shard's final cursor.
func TestWorkFleetSurvivesKills(t *testing.T) {
	if testing.Short() {
		t.Skip("work fleet fault test")
	}
	srv := newServer(t, 3)
	nc, c := reconnectingClient(t, srv.URL(), client.WithTimeout(2*time.Second), client.WithRetry(50, 20*time.Millisecond, 500*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const shards = 48
	var specs []*messages.WorkSpec
	for i := 0; i < shards; i++ {
		specs = append(specs, client.Shard(fmt.Sprintf("s%02d", i), []byte(fmt.Sprintf("%02d", i)), []byte(fmt.Sprintf("%02d~", i))))
	}
	if r, err := c.CreateRun(ctx, "scan", specs); err != nil || !r.OK() {
		t.Fatalf("create run: %v %+v", err, r)
	}

	var mu sync.Mutex
	completed := map[string]int{}        // work shard → acknowledged completions
	checkpoints := map[string][]string{} // work shard → acknowledged checkpoint keys
	stats := map[string]int{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 6; w++ {
		holder := fmt.Sprintf("w%d", w)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ctx.Err() == nil; i++ {
				res, err := c.Claim(ctx, holder, "scan", "", 1500*time.Millisecond, client.WithOperationID(fmt.Sprintf("%s-c%d", holder, i)))
				if err != nil {
					mu.Lock()
					stats["claim error"]++
					mu.Unlock()
					time.Sleep(50 * time.Millisecond)
					continue
				}
				if res.Code == messages.CodeNoneAvailable {
					if res.EarliestDeadlineSlot == 0 {
						select {
						case <-stop:
							return
						default:
						}
					}
					time.Sleep(30 * time.Millisecond)
					continue
				}
				if !res.OK() {
					t.Errorf("claim: %s", res.Code)
					return
				}
				name, f := res.Work.GetName(), res.Fence()
				ok := true
				// Resume after the last checkpoint: its key's last digit is the step done.
				first := 0
				if last := res.Work.GetCursor().GetLastKey(); len(last) > 0 {
					first = int(last[len(last)-1]-'0') + 1
				}
				for k := first; k < 3 && ok; k++ {
					time.Sleep(150 * time.Millisecond) // the work between checkpoints
					key := fmt.Sprintf("%s%d", name[1:], k)
					r, err := c.Checkpoint(ctx, holder, f, []byte(key), nil, client.WithOperationID(fmt.Sprintf("%s-c%d-k%d", holder, i, k)))
					switch {
					case err != nil:
						ok = false
					case r.OK():
						mu.Lock()
						checkpoints[name] = append(checkpoints[name], key)
						mu.Unlock()
					default:
						ok = false // lost the claim (expired over a restart): claim again
					}
				}
				if !ok {
					mu.Lock()
					stats["claim lost"]++
					mu.Unlock()
					continue
				}
				r, err := c.CompleteWork(ctx, holder, f, nil, client.WithOperationID(fmt.Sprintf("%s-c%d-done", holder, i)))
				mu.Lock()
				switch {
				case err != nil:
					stats["complete unknown"]++
				case r.OK():
					completed[name]++
				default:
					stats["complete "+r.Code]++
				}
				mu.Unlock()
			}
		}()
	}
	// The nemesis: kill -9 and restart, eight times, while the fleet works.
	for i := 0; i < 8; i++ {
		time.Sleep(700 * time.Millisecond)
		srv.Kill()
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(60 * time.Second):
		mu.Lock()
		t.Fatalf("the fleet did not finish the run within 60 s of the last fault: %d completed, %v", len(completed), stats)
	}
	t.Logf("completions %d, %v; server started %d times", len(completed), stats, srv.Starts())
	if srv.Starts() < 9 {
		t.Fatalf("the nemesis restarted the server %d times", srv.Starts()-1)
	}

	for name, n := range completed {
		if n != 1 {
			t.Errorf("%s: completed %d times", name, n)
		}
		r, err := c.GetWork(ctx, "scan", name)
		if err != nil || r.Work.GetStatus() != "done" {
			t.Fatalf("%s: acknowledged complete, reads %v %+v", name, err, r)
		}
	}
	for name, keys := range checkpoints {
		r, err := c.GetWork(ctx, "scan", name)
		if err != nil {
			t.Fatal(err)
		}
		final := string(r.Work.GetCursor().GetLastKey())
		for _, k := range keys {
			if k > final {
				t.Errorf("%s: acknowledged checkpoint %q after the final cursor %q", name, k, final)
			}
		}
	}
	run, err := c.GetRun(ctx, "scan")
	if err != nil || run.Run.GetDone() != shards {
		t.Fatalf("run: %v %+v", err, run.Run)
	}
	checkWorkEvents(t, nc, shards)

	// The run ends and is deleted with its work shards; a kill -9 right after keeps the
	// delete (acknowledged means journaled), and the id is free for a new run.
	if r, err := c.CompleteRun(ctx, "scan"); err != nil || !r.OK() {
		t.Fatalf("complete run: %v %+v", err, r)
	}
	if r, err := c.DeleteRun(ctx, "scan"); err != nil || !r.OK() || r.Run.GetDone() != shards {
		t.Fatalf("delete run: %v %+v", err, r)
	}
	srv.Kill()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	if r, err := c.GetRun(ctx, "scan"); err != nil || r.Code != messages.CodeRunNotFound {
		t.Fatalf("the deleted run after a kill -9: %v %+v", err, r)
	}
	if r, err := c.GetWork(ctx, "scan", "s00"); err != nil || r.Code != messages.CodeRunNotFound {
		t.Fatalf("a deleted run's work shard after a kill -9: %v %+v", err, r)
	}
	if r, err := c.CreateRun(ctx, "scan", specs[:1]); err != nil || !r.OK() || r.Run.GetActive() != 1 {
		t.Fatalf("a new run of the deleted id: %v %+v", err, r)
	}
}

// checkWorkEvents reads the event stream: per work shard, claims never overlap and
// checkpoints never go back, and each work shard is completed once.
func checkWorkEvents(t *testing.T, nc *nats.Conn, shards int) {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for attempt := 0; ; attempt++ {
		held := map[string]string{}    // work shard → live claim
		leaseOf := map[string]string{} // lease → work shard
		cursor := map[string]string{}
		done := map[string]int{}
		var problems []string
		lastLSN := map[uint32]uint64{}
		eventstest.Consume(ctx, t, js, func(_ jetstream.Msg, e *messages.Event) {
			if e.GetLsn() < lastLSN[e.GetShard()] {
				problems = append(problems, fmt.Sprintf("shard %d: lsn %d after %d", e.GetShard(), e.GetLsn(), lastLSN[e.GetShard()]))
			}
			lastLSN[e.GetShard()] = e.GetLsn()
			l, w := e.GetLease(), e.GetWork()
			switch e.GetEvent() {
			case "lease.reserved":
				for _, m := range l.GetMembers() {
					if m.GetWork() == nil {
						continue
					}
					name := m.GetWork().GetName()
					if prev := held[name]; prev != "" {
						problems = append(problems, fmt.Sprintf("%s claimed by %s while %s held it", name, l.GetLeaseId(), prev))
					}
					held[name], leaseOf[l.GetLeaseId()] = l.GetLeaseId(), name
				}
			case "lease.released", "lease.expired", "lease.revoked":
				if name := leaseOf[l.GetLeaseId()]; name != "" && held[name] == l.GetLeaseId() {
					held[name] = ""
				}
			case "work.checkpointed":
				k := string(w.GetCursor().GetLastKey())
				if k < cursor[w.GetName()] {
					problems = append(problems, fmt.Sprintf("%s: checkpoint %q after %q", w.GetName(), k, cursor[w.GetName()]))
				}
				cursor[w.GetName()] = k
			case "work.completed", "work.parked", "work.split":
				held[w.GetName()] = ""
				if e.GetEvent() == "work.completed" {
					done[w.GetName()]++
				}
			}
		})
		if len(problems) > 0 {
			sort.Strings(problems)
			t.Fatalf("event stream: %v", problems)
		}
		if len(done) == shards {
			for name, n := range done {
				if n != 1 {
					t.Fatalf("%s completed %d times in the stream", name, n)
				}
			}
			return
		}
		if attempt == 30 {
			t.Fatalf("after 30 s the stream shows %d of %d work shards completed", len(done), shards)
		}
		time.Sleep(time.Second)
	}
}
