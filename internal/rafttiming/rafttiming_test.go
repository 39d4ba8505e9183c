package rafttiming

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/internal/natstest"
)

func TestSetReachesTheServer(t *testing.T) {
	prev := Set(Fast)
	defer Set(prev)
	if prev != Default {
		t.Fatalf("nats-server's defaults changed: %+v", prev)
	}
	if Current() != Fast {
		t.Fatalf("%+v", Current())
	}
}

// Fast timing on this machine: three servers with sync: always, eight replicated
// streams written as fast as they take it for a while (every append an fsync on a
// quorum) — no leader is elected after the first ones (a heartbeat delayed past the
// election timeout by a slow disk would start one). -spurious sets the length.
func TestNoSpuriousElections(t *testing.T) {
	if testing.Short() {
		t.Skip("a loaded JetStream cluster")
	}
	timing := Fast
	if *flagFaster {
		timing = Faster
	}
	prev := Set(timing)
	defer Set(prev)
	c := natstest.Start(t, 3)
	nc, js := natstest.Connect(t, c.URL())
	ctx := context.Background()
	const streams = 8
	for i := range streams {
		if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: fmt.Sprint("S", i), Subjects: []string{fmt.Sprint("s.", i)}, Replicas: 3}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second) // the first elections are over
	var elections atomic.Int32
	sub, err := nc.Subscribe("$JS.EVENT.ADVISORY.STREAM.LEADER_ELECTED.>", func(m *nats.Msg) {
		elections.Add(1)
		t.Logf("leader elected: %s", m.Subject)
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	var wg sync.WaitGroup
	var written atomic.Int64
	stop := time.Now().Add(*flagSpurious)
	for i := range streams {
		wg.Go(func() {
			for time.Now().Before(stop) {
				var futs []jetstream.PubAckFuture
				for range 16 {
					f, err := js.PublishAsync(fmt.Sprint("s.", i), make([]byte, 512))
					if err == nil {
						futs = append(futs, f)
					}
				}
				for _, f := range futs {
					select {
					case <-f.Ok():
						written.Add(1)
					case <-f.Err():
					case <-time.After(5 * time.Second):
					}
				}
			}
		})
	}
	wg.Wait()
	t.Logf("%d messages stored on %d R3 streams in %v with heartbeats every %v, elections after %v–%v",
		written.Load(), streams, *flagSpurious, timing.Heartbeat, timing.ElectionMin, timing.ElectionMax)
	if n := elections.Load(); n != 0 {
		t.Fatalf("%d leaders elected under load", n)
	}
	// The watch sees an election: a step-down asked for is one.
	if _, err := nc.Request("$JS.API.STREAM.LEADER.STEPDOWN.S0", nil, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); elections.Load() == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("a step-down's election was not seen: the watch sees nothing")
		}
	}
}

var flagFaster = flag.Bool("faster", false, "TestNoSpuriousElections with Faster, not Fast")

var flagSpurious = flag.Duration("spurious", 10*time.Second, "TestNoSpuriousElections's load")
