// Command gang places one job on GPUs of eight nodes, all or nothing (gang scheduling):
// a training job that runs on eight nodes or not at all asks for a GPU on each in one
// call and gets one lease — one fence for the whole gang — or nothing, never seven GPUs
// it must hand back. The nodes are placement keys, so the members live on several shards.
//
//	go run ./examples/gang --server nats://127.0.0.1:4222
package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/examples/internal/example"
	"github.com/holdfast/holdfast/messages"
)

func main() { example.Main("gang", run) }

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := example.NewFlags("gang", "default")
	nodes := fs.Int("nodes", 8, "nodes in a gang")
	rack := fs.String("rack", "rack-"+client.NewOperationID()[:6], "the nodes are <rack>-n0, <rack>-n1, ...")
	if err := fs.Parse(args); err != nil {
		return err
	}
	hf, ctx, done, err := fs.Start(ctx, args, time.Minute)
	if err != nil {
		return err
	}
	defer done()
	gpu := func(node, i int) string { return fmt.Sprintf("%s-n%d/gpu%d", *rack, node, i) }
	for n := range *nodes {
		for i := range 2 {
			if err := created(hf.CreateResource(ctx, gpu(n, i))); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(out, "rack %s: %d nodes of 2 GPUs\n", *rack, *nodes)

	// Job A: gpu0 on every node, in one call.
	gang := func(pick func(node int) int) []*messages.Member {
		ms := make([]*messages.Member, *nodes)
		for n := range ms {
			ms[n] = client.Resource(gpu(n, pick(n)))
		}
		return ms
	}
	jobA, err := hf.Reserve(ctx, client.ReserveRequest{Holder: "job-a", Activate: true, Members: gang(func(int) int { return 0 })})
	if err := errOf(jobA, err); err != nil {
		return fmt.Errorf("job A: %w", err)
	}
	fmt.Fprintf(out, "job A: %d GPUs on %d nodes, one lease %s, fence %s\n", len(jobA.Lease.Members), *nodes, jobA.Lease.LeaseId, jobA.Fence())

	// Job B asks for gpu1 everywhere but on the last node, where it asks for gpu0, which
	// job A holds: it gets nothing, not even the free GPUs of the other nodes.
	last := *nodes - 1
	jobB, err := hf.Reserve(ctx, client.ReserveRequest{Holder: "job-b", Activate: true, Members: gang(func(n int) int {
		if n == last {
			return 0
		}
		return 1
	})})
	if err != nil {
		return err
	}
	free, err := hf.GetResource(ctx, gpu(0, 1))
	if err != nil {
		return err
	}
	if jobB.Code != messages.CodeResourceBusy || free.Resource.GetState() != messages.StateAvailable {
		return fmt.Errorf("job B over a held GPU: %s, %s stays %s", jobB.Code, gpu(0, 1), free.Resource.GetState())
	}
	fmt.Fprintf(out, "job B with %s held: %s (%s); %s stays %s\n", gpu(last, 0), jobB.Code, jobB.Message, gpu(0, 1), free.Resource.State)

	// Job B takes gpu1 everywhere; then both finish, each with one release.
	jobB, err = hf.Reserve(ctx, client.ReserveRequest{Holder: "job-b", Activate: true, Members: gang(func(int) int { return 1 })})
	if err := errOf(jobB, err); err != nil {
		return fmt.Errorf("job B: %w", err)
	}
	fmt.Fprintf(out, "job B: %d GPUs, lease %s\n", len(jobB.Lease.Members), jobB.Lease.LeaseId)
	for _, job := range []struct {
		holder string
		res    *client.LeaseResult
	}{{"job-a", jobA}, {"job-b", jobB}} {
		rel, err := hf.Release(ctx, job.holder, job.res.Fence())
		if err := errOf(rel, err); err != nil {
			return fmt.Errorf("%s release: %w", job.holder, err)
		}
	}
	// The GPUs on other shards than the lease's home are freed a moment after its release.
	for n := range *nodes {
		for i := range 2 {
			if err := waitFree(ctx, hf, gpu(n, i)); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(out, "both jobs released: all %d GPUs available\n", 2**nodes)
	return nil
}

func errOf(r *client.LeaseResult, err error) error {
	if err != nil {
		return err
	}
	return r.Err()
}

func created(r *client.ResourceResult, err error) error {
	if err != nil {
		return err
	}
	if r.Code != messages.CodeOK && r.Code != messages.CodeAlreadyExists {
		return r.Err()
	}
	return nil
}

func waitFree(ctx context.Context, hf *client.Client, id string) error {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		r, err := hf.GetResource(ctx, id)
		if err != nil {
			return err
		}
		if r.Resource.GetState() == messages.StateAvailable {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is %s after the release", id, r.Resource.GetState())
		}
	}
}
