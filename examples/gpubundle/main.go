// Command gpubundle leases a GPU together with GPU memory units as one
// bundle: a scheduler gets both or neither, under one fencing token.
//
//	go run ./examples/gpubundle --server nats://127.0.0.1:4222
//
// The GPUs are resources "<node>/gpu0".."<node>/gpu3" and the memory is a pool
// "<node>/mem" of 80 units (GiB): sharing the placement key <node>, they live on one
// shard. A bundle may also span nodes (examples/gang), at one more round of writes.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/examples/internal/example"
	"github.com/holdfast/holdfast/messages"
)

func main() { example.Main("gpubundle", run) }

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := example.NewFlags("gpubundle", "default")
	node := fs.String("node", "node-"+client.NewOperationID()[:8], "node id (the placement key)")
	protobuf := fs.Bool("protobuf", false, "talk protobuf instead of JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var opts []client.Option
	if *protobuf {
		opts = append(opts, client.WithProtobuf())
	}
	hf, ctx, done, err := fs.Start(ctx, args, time.Minute, opts...)
	if err != nil {
		return err
	}
	defer done()

	gpu := func(i int) string { return fmt.Sprintf("%s/gpu%d", *node, i) }
	mem := *node + "/mem"
	for i := range 4 {
		if err := created(hf.CreateResource(ctx, gpu(i))); err != nil {
			return err
		}
	}
	if err := created(hf.CreatePool(ctx, mem, 80)); err != nil {
		return err
	}
	fmt.Fprintf(out, "node %s: 4 GPUs, pool %s of 80 GiB\n", *node, mem)

	// Job A: one GPU and 48 GiB, active at once (no hold phase).
	jobA, err := hf.Reserve(ctx, client.ReserveRequest{
		Holder:   "job-a",
		Members:  []*messages.Member{client.Resource(gpu(0)), client.PoolUnits(mem, 48)},
		Activate: true,
	})
	if err != nil {
		return err
	}
	if err := jobA.Err(); err != nil {
		return fmt.Errorf("job A: %w", err)
	}
	fmt.Fprintf(out, "job A: gpu0 + 48 GiB, lease %s %s, fence %s\n", jobA.Lease.LeaseId, jobA.Lease.State, jobA.Fence())

	// Job B asks for 48 GiB too: only 32 are left, so it gets nothing, not
	// even the free GPU.
	jobB, err := hf.Reserve(ctx, client.ReserveRequest{
		Holder:   "job-b",
		Members:  []*messages.Member{client.Resource(gpu(1)), client.PoolUnits(mem, 48)},
		Activate: true,
	})
	if err != nil {
		return err
	}
	if jobB.Code != messages.CodeInsufficientCapacity {
		return fmt.Errorf("job B with 48 GiB: got %s, want insufficient_capacity", jobB.Code)
	}
	g1, err := hf.GetResource(ctx, gpu(1), client.MinLSN(jobB.LSN))
	if err != nil {
		return err
	}
	pool, err := hf.GetPool(ctx, mem, client.MinLSN(jobB.LSN))
	if err != nil {
		return err
	}
	if g1.Resource.GetState() != messages.StateAvailable || pool.Pool.GetAvailable() != 32 {
		return fmt.Errorf("after the failed bundle: gpu1 %s, %d GiB available", g1.Resource.GetState(), pool.Pool.GetAvailable())
	}
	fmt.Fprintf(out, "job B: gpu1 + 48 GiB: %s; gpu1 stays %s, %d GiB available\n", jobB.Code, g1.Resource.State, pool.Pool.Available)

	// Job B settles for 32 GiB.
	jobB, err = hf.Reserve(ctx, client.ReserveRequest{
		Holder:   "job-b",
		Members:  []*messages.Member{client.Resource(gpu(1)), client.PoolUnits(mem, 32)},
		Activate: true,
	})
	if err != nil {
		return err
	}
	if err := jobB.Err(); err != nil {
		return fmt.Errorf("job B with 32 GiB: %w", err)
	}
	pool, err = hf.GetPool(ctx, mem, client.MinLSN(jobB.LSN))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "job B: gpu1 + 32 GiB, lease %s; pool active=%d available=%d\n", jobB.Lease.LeaseId, pool.Pool.Active, pool.Pool.Available)

	// A bundle may span nodes (examples/gang), still all or nothing: with a member that
	// does not exist it takes nothing, not even the free GPU.
	jobC, err := hf.Reserve(ctx, client.ReserveRequest{
		Holder:   "job-c",
		Members:  []*messages.Member{client.Resource(gpu(2)), client.PoolUnits("other-"+*node+"/mem", 1)},
		Activate: true,
	})
	if err != nil {
		return err
	}
	g2, err := hf.GetResource(ctx, gpu(2))
	if err != nil {
		return err
	}
	if jobC.Code != messages.CodePoolNotFound || g2.Resource.GetState() != messages.StateAvailable {
		return fmt.Errorf("bundle across nodes with a missing pool: got %s, gpu2 %s", jobC.Code, g2.Resource.GetState())
	}
	fmt.Fprintf(out, "job C across two nodes, one pool missing: %s; gpu2 stays %s\n", jobC.Code, g2.Resource.State)
	// Each member is named once: a definite rejection, nothing happened.
	_, err = hf.Reserve(ctx, client.ReserveRequest{
		Holder:   "job-c",
		Members:  []*messages.Member{client.Resource(gpu(2)), client.Resource(gpu(2))},
		Activate: true,
	})
	if !errors.Is(err, &client.DefiniteError{Code: messages.CodeDuplicateMember}) {
		return fmt.Errorf("bundle naming gpu2 twice: got %v, want duplicate_member", err)
	}
	fmt.Fprintf(out, "job C with gpu2 twice: rejected %s\n", client.Code(err))

	// Both jobs finish: releasing a bundle returns every member.
	for _, job := range []struct {
		holder string
		res    *client.LeaseResult
	}{{"job-a", jobA}, {"job-b", jobB}} {
		rel, err := hf.Release(ctx, job.holder, job.res.Fence())
		if err != nil {
			return err
		}
		if err := rel.Err(); err != nil {
			return fmt.Errorf("release %s: %w", job.holder, err)
		}
		pool, err = hf.GetPool(ctx, mem, client.MinLSN(rel.LSN))
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s released %s: %d GiB available\n", job.holder, rel.Lease.LeaseId, pool.Pool.Available)
	}
	if pool.Pool.GetAvailable() != 80 {
		return fmt.Errorf("pool has %d GiB available at the end, want 80", pool.Pool.GetAvailable())
	}
	return nil
}

// created accepts ok and already_exists, so that reruns work.
func created[R interface{ Err() error }](res R, err error) error {
	if err != nil {
		return err
	}
	if err := res.Err(); err != nil && !errors.Is(err, &client.CommittedError{Code: messages.CodeAlreadyExists}) {
		return err
	}
	return nil
}
