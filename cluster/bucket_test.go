package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/internal/natstest"
)

// Nodes starting together all open the cluster bucket (one creates it, the others find it).
func TestOpenBucketConcurrently(t *testing.T) {
	ns := natstest.Start(t, 3)
	var wg sync.WaitGroup
	errs := make([]error, 3)
	for i := range errs {
		js := connectJS(t, ns.URL())
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			_, errs[i] = OpenBucket(ctx, js, NamesFor("holdfast"), 3)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
	}
}

// A node that leaves takes its name out of the bucket for good: the marker of its
// liveness key lapses too, so nodes that come and go under new names (pods of a
// Deployment) leave nothing behind.
func TestLeavingNodeLeavesNoMarker(t *testing.T) {
	ns := natstest.Start(t, 1)
	js := connectJS(t, ns.URL())
	names := NamesFor("holdfast")
	n, err := Join(context.Background(), Config{JS: js, Names: names, Node: "pod-x1", Shards: 2, OwnershipTTL: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	n.Stop()
	stream, err := js.Stream(context.Background(), "KV_"+names.Bucket())
	if err != nil {
		t.Fatal(err)
	}
	subject := "$KV." + names.Bucket() + ".node.pod-x1"
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := stream.GetLastMsgForSubject(context.Background(), subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still holds a message 10s after the node left: %v", subject, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// A renewal acknowledged when the revision it replaced may have been expiring is not
// served on: the expiry's marker can still purge it and another node claim the shard.
// The next renewal, which expects its revision, confirms it.
func TestRenewalAtTheExpiryIsNotServedOn(t *testing.T) {
	ns := natstest.Start(t, 1)
	js := connectJS(t, ns.URL())
	ctx := context.Background()
	const ttl = 2 * time.Second
	n, err := Join(ctx, Config{JS: js, Names: NamesFor("holdfast"), Node: "a", Shards: 1, OwnershipTTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Abandon()
	rev, err := n.kv.Create(ctx, shardKey(0), []byte(`{"node":"a"}`), jetstream.KeyTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	// The revision was written almost a TTL ago, as after a stall of the renewals.
	now := actors.MonoNow()
	n.table.shards[0] = shardClaim{phase: serving, rev: rev, sent: now - int64(ttl-ttl/20), serveUntil: now + int64(time.Second)}
	n.publish()
	n.renewAll()
	if until := n.serveUntil[0].Load(); until != now+int64(time.Second) {
		t.Fatal("served on a renewal that landed as its predecessor may have expired")
	}
	n.renewAll()
	if !n.Serving(0) {
		t.Fatal("a confirming renewal did not restore serving")
	}
	for _, c := range []struct {
		prev, acked int64
		want        bool
	}{{0, int64(ttl / 4), true}, {0, int64(ttl * 3 / 4), true}, {0, int64(ttl * 9 / 10), false}, {0, int64(ttl), false}} {
		if got := landedBeforeExpiry(c.prev, c.acked, ttl); got != c.want {
			t.Errorf("acked %v after the previous send: %v, want %v", time.Duration(c.acked-c.prev), got, c.want)
		}
	}
}

// The live node list is whole or an error: cut short by its context it would make the
// placement move shards off nodes that are alive.
func TestMembersIsWholeOrAnError(t *testing.T) {
	ns := natstest.Start(t, 1)
	js := connectJS(t, ns.URL())
	ctx := context.Background()
	n, err := Join(ctx, Config{JS: js, Names: NamesFor("holdfast"), Node: "a", Shards: 1, OwnershipTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Abandon()
	const nodes = 500
	for i := 1; i < nodes; i++ {
		if _, err := n.kv.Put(ctx, fmt.Sprintf("node.n%d", i), []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	all, err := n.members(ctx)
	if err != nil || len(all) != nodes {
		t.Fatalf("%d members, %v", len(all), err)
	}
	whole := time.Since(start)
	cut := 0
	for i := 1; i <= 40; i++ {
		wctx, cancel := context.WithTimeout(ctx, whole*time.Duration(i)/40)
		got, err := n.members(wctx)
		cancel()
		switch {
		case err != nil:
			cut++
		case len(got) != nodes:
			t.Fatalf("a list cut short after %v came back as whole: %d of %d nodes", whole*time.Duration(i)/40, len(got), nodes)
		}
	}
	t.Logf("whole list in %v; %d of 40 shorter deadlines ended in an error", whole, cut)
}

// The live node list leaves out no live node while nodes renew their keys: the KV key
// lister did (16 lists of 2,000 short, here).
func TestMembersWholeUnderRenewals(t *testing.T) {
	ns := natstest.Start(t, 1)
	js := connectJS(t, ns.URL())
	ctx := context.Background()
	var nodes []*Node
	for _, name := range []string{"n1", "n2", "n3"} {
		n, err := Join(ctx, Config{JS: js, Names: NamesFor("holdfast"), Node: name, Shards: 1, OwnershipTTL: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				n.renewMember(ctx)
				time.Sleep(time.Millisecond)
			}
		}()
	}
	short := 0
	for i := 0; i < 2000; i++ {
		m, err := nodes[0].members(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(m) != 3 {
			short++
			if short < 5 {
				t.Logf("list %d: %v", i, m)
			}
		}
	}
	close(stop)
	wg.Wait()
	if short > 0 {
		t.Fatalf("%d of 2000 lists left out a live node", short)
	}
}

// A JetStream cluster still forming answers 10008 "temporarily unavailable", also after
// it first answered (its first meta leader can step down while the others join): start-up
// waits for it rather than exit, at every step.
func TestJetStreamFormingIsWaitedFor(t *testing.T) {
	forming := &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}
	if !JetStreamForming(fmt.Errorf("account info: %w", forming)) || !retryable(fmt.Errorf("create bucket: %w", forming)) {
		t.Fatal("10008 not taken for a forming cluster worth asking again")
	}
	if JetStreamForming(&jetstream.APIError{Code: 404, ErrorCode: 10059}) || JetStreamForming(jetstream.ErrJetStreamNotEnabled) {
		t.Fatal("other errors taken for a forming cluster")
	}
}
