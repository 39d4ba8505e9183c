package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

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
