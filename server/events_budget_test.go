package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/messages"
)

// Imports at full speed yield events faster than the stream stores them. A shard bounds
// its events not yet published (actors.Options.MaxUnpublished): past it an import is
// answered overloaded and nothing is sequenced, so the publisher's queue never overflows
// — an overflow dropped the shard's events and stopped its published position (and so
// its snapshots) until a restart. Every granted lease's event reaches the stream.
func TestImportsAtFullSpeedLoseNoEvent(t *testing.T) {
	ctx := context.Background()
	cfg := testConfig(t.TempDir())
	cfg.Shards = 1
	cfg.Events.MaxQueuedEvents = 3000 // the shard's bound: 1,500
	srv, err := Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(ctx)
	cl := bundleClient(t, srv.URL())
	if r, err := cl.CreatePool(ctx, "p/units", 1_000_000); err != nil || !r.OK() {
		t.Fatalf("create pool: %v %+v", err, r)
	}
	const clients, imports, size = 8, 6, 400
	var wg sync.WaitGroup
	var mu sync.Mutex
	overloaded := 0
	for c := range clients {
		wg.Go(func() {
			for i := range imports {
				var leases []client.ImportLease
				for j := range size {
					leases = append(leases, client.ImportLease{Holder: fmt.Sprintf("h%d-%d-%d", c, i, j), TTL: time.Hour,
						Members: []*messages.Member{client.PoolUnits("p/units", 1)}})
				}
				op := client.NewOperationID()
				for {
					r, err := cl.Import(ctx, leases, client.WithOperationID(op))
					if err == nil && r.OK() {
						break
					}
					if !errors.Is(err, &client.DefiniteError{Code: messages.CodeOverloaded}) {
						t.Errorf("import: %v %+v", err, r)
						return
					}
					mu.Lock()
					overloaded++
					mu.Unlock()
					time.Sleep(5 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	js, err := jetstream.New(cl.Conn())
	if err != nil {
		t.Fatal(err)
	}
	st, err := js.Stream(ctx, contract.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	want := uint64(1 + clients*imports*size) // the pool's creation and every lease
	deadline := time.Now().Add(30 * time.Second)
	for {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the stream holds %d events, want %d (overloaded answers: %d)", info.State.Msgs, want, overloaded)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The stream holds them all; the publisher counts each off as its acknowledgement
	// comes back, a moment later.
	for n := srv.pub.Unpublished(0); n != 0; n = srv.pub.Unpublished(0) {
		if time.Now().After(deadline) {
			t.Fatalf("%d events still held by the publisher", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("overloaded answers: %d", overloaded)
}
