package cluster

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

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
