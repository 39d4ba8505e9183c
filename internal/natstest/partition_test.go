package natstest

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A server cut off from the others cannot store on a replicated stream (no quorum on
// its side); the two others can; healed, it has every message. One way cut, the routes
// between the two still cannot carry a round trip.
func TestNetPartitions(t *testing.T) {
	c, nw := StartPartitionable(t, 3)
	js := func(i int) jetstream.JetStream {
		nc, err := nats.Connect(fmt.Sprintf("nats://127.0.0.1:%d", c.opts[i].Port))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		j, _ := jetstream.New(nc)
		return j
	}
	ctx := context.Background()
	j0, j1 := js(0), js(1)
	if _, err := j1.CreateStream(ctx, jetstream.StreamConfig{Name: "P", Subjects: []string{"p"}, Replicas: 3}); err != nil {
		t.Fatal(err)
	}
	publish := func(j jetstream.JetStream, d time.Duration) error {
		pctx, cancel := context.WithTimeout(ctx, d)
		defer cancel()
		_, err := j.Publish(pctx, "p", []byte("x"))
		return err
	}
	if err := publish(j0, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	nw.Isolate(0)
	majority := false
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if publish(j1, 2*time.Second) == nil {
			majority = true
			break
		}
	}
	if !majority {
		t.Fatal("the majority could not store with server 0 isolated")
	}
	if err := publish(j0, 2*time.Second); err == nil {
		t.Fatal("the isolated server stored a message on a replicated stream")
	}
	nw.Heal()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		s, err := j0.Stream(ctx, "P")
		if err == nil {
			if info, err := s.Info(ctx); err == nil && info.State.Msgs >= 2 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("server 0 did not catch up after the heal")
		}
	}
}

// A route port taken between its choice and the server's listen (another test process
// took it) fails that attempt at once, and the cluster comes up on other ports.
func TestStartPartitionableRetriesATakenPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	port := taken.Addr().(*net.TCPAddr).Port
	calls := 0
	takeFirst := func(o *natsserver.Options) {
		if calls++; calls == 1 {
			o.Cluster.Port = port
		}
	}
	begun := time.Now()
	c, _ := StartPartitionable(t, 3, takeFirst)
	if calls != 4 {
		t.Fatalf("options applied %d times, want 4 (one server of a failed attempt, then three)", calls)
	}
	for i, o := range c.opts {
		if o.Cluster.Port == port {
			t.Fatalf("server %d listens on the taken port", i)
		}
	}
	if took := time.Since(begun); took > 20*time.Second {
		t.Fatalf("the retry took %v: the taken port was not seen at once", took)
	}
}
