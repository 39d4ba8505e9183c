// Command fill puts N leases into a running service, fast: a pool on each shard (a
// placement key chosen for it) and lease.import of 1,000 leases of one unit at a time,
// from 8 clients. scripts/snapshot-bench.sh uses it to time backups of a large state.
//
//	go run ./scripts/fill URL SHARDS N [CLIENTS [PAUSE]]
//
// CLIENTS (default 8) import at once, each pausing PAUSE (default 0s) after an import.
// Every imported lease is an event: when a shard has as many events waiting for the
// stream as it holds, the import is answered overloaded and tried again, with the same
// operation id, a moment later.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/messages"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "fill:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) < 3 || len(args) > 5 {
		return fmt.Errorf("usage: fill URL SHARDS N [CLIENTS [PAUSE]]")
	}
	shards, err1 := strconv.Atoi(args[1])
	n, err2 := strconv.Atoi(args[2])
	clients, pause := 8, time.Duration(0)
	var err3, err4 error
	if len(args) > 3 {
		clients, err3 = strconv.Atoi(args[3])
	}
	if len(args) > 4 {
		pause, err4 = time.ParseDuration(args[4])
	}
	if err1 != nil || err2 != nil || err3 != nil || err4 != nil || shards < 1 || n < 1 || clients < 1 {
		return fmt.Errorf("SHARDS, N and CLIENTS must be positive numbers, PAUSE a duration")
	}
	nc, err := nats.Connect(args[0])
	if err != nil {
		return err
	}
	defer nc.Close()
	cl, err := client.New(nc, client.WithTimeout(30*time.Second))
	if err != nil {
		return err
	}
	ctx := context.Background()
	pools, err := createPools(ctx, cl, shards, n)
	if err != nil {
		return err
	}
	start := time.Now()
	batches := (n + contract.MaxImportLeases - 1) / contract.MaxImportLeases
	next := make(chan int)
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for b := range next {
				if err := importOnce(ctx, cl, importBatch(b, n, pools[b%shards])); err != nil {
					errs <- fmt.Errorf("import batch %d: %w", b, err)
					return
				}
				time.Sleep(pause)
			}
		})
	}
	for b := 0; b < batches; b++ {
		select {
		case next <- b:
		case err := <-errs:
			close(next)
			wg.Wait()
			return err
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	fmt.Printf("fill: %d leases in %d imports in %v\n", n, batches, time.Since(start).Round(time.Millisecond))
	return nil
}

// importOnce imports leases, trying again while the shard is overloaded.
func importOnce(ctx context.Context, cl *client.Client, leases []client.ImportLease) error {
	op := client.WithOperationID(client.NewOperationID())
	for {
		r, err := cl.Import(ctx, leases, op)
		switch {
		case errors.Is(err, &client.DefiniteError{Code: messages.CodeOverloaded}):
			time.Sleep(10 * time.Millisecond)
		case err != nil:
			return err
		case !r.OK():
			return fmt.Errorf("%s: %s", r.Code, r.Message)
		default:
			return nil
		}
	}
}

// createPools makes one pool per shard, named by the first key "p<i>" that lands on it,
// with room for its part of n leases.
func createPools(ctx context.Context, cl *client.Client, shards, n int) ([]string, error) {
	pools := make([]string, shards)
	for i, found := 0, 0; found < shards; i++ {
		key := "p" + strconv.Itoa(i)
		k := contract.ShardOf("default", key, uint32(shards))
		if pools[k] != "" {
			continue
		}
		pools[k] = key + "/units"
		found++
		if r, err := cl.CreatePool(ctx, pools[k], uint64(n/shards+contract.MaxImportLeases)); err != nil || (!r.OK() && r.Code != messages.CodeAlreadyExists) {
			return nil, fmt.Errorf("create pool %s: %v %v", pools[k], err, r)
		}
	}
	return pools, nil
}

// importBatch is batch b of n leases: one unit of pool each, an hour long.
func importBatch(b, n int, pool string) []client.ImportLease {
	var leases []client.ImportLease
	for i := b * contract.MaxImportLeases; i < min(n, (b+1)*contract.MaxImportLeases); i++ {
		leases = append(leases, client.ImportLease{Holder: "h" + strconv.Itoa(i), TTL: time.Hour,
			Members: []*messages.Member{client.PoolUnits(pool, 1)}})
	}
	return leases
}
