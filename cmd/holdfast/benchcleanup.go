package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/messages"
)

// A bench leaves nothing behind unless --keep: once measured, it deletes the resources it
// reserved (spread, hotspot, the bystander's) or the runs it claimed from (claim, each
// cancelled first). A delete of an object still held — a release or complete that failed
// leaves its lease until the TTL runs out — answers object_in_use and is retried until
// then; what is still held after that is counted as left.

// cleanupReport is what the deletes did.
type cleanupReport struct {
	Deleted int           `json:"deleted"`
	Gone    int           `json:"already_gone"` // not found: deleted before, or never made
	Left    int           `json:"left"`         // still held, or a delete that failed
	Elapsed time.Duration `json:"elapsed_ns"`
	Error   string        `json:"error,omitempty"` // the first failure, if any
}

// benchClients is one SDK client per connection, in the bench's tenant.
func benchClients(cfg *benchConfig, conns []*nats.Conn, tenant string) ([]*client.Client, error) {
	clients := make([]*client.Client, len(conns))
	for i, nc := range conns {
		cl, err := client.New(nc, client.WithPrefix(cfg.cf.Prefix), client.WithTenant(tenant),
			client.WithEncoding(cfg.encoding), client.WithTimeout(cfg.cf.Timeout))
		if err != nil {
			return nil, err
		}
		clients[i] = cl
	}
	return clients, nil
}

// forEachID calls do for every id with up to workers concurrent callers, spreading them
// over clients; it stops at the first error do returns, and returns it.
func forEachID(ctx context.Context, workers int, clients []*client.Client, ids []string, do func(cl *client.Client, id string) error) error {
	var (
		next     atomic.Int64
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	for i := range min(workers, len(ids)) {
		cl := clients[i%len(clients)]
		wg.Go(func() {
			for {
				k := int(next.Add(1) - 1)
				if k >= len(ids) || ctx.Err() != nil {
					return
				}
				if err := do(cl, ids[k]); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					next.Store(int64(len(ids)))
					return
				}
			}
		})
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}

// deleteFunc deletes one object and returns the reply's code.
type deleteFunc func(ctx context.Context, cl *client.Client, id string) (string, error)

func deleteResource(ctx context.Context, cl *client.Client, id string) (string, error) {
	r, err := cl.DeleteResource(ctx, id)
	if err != nil {
		return "", err
	}
	return r.Code, nil
}

// deleteRun cancels the run (run_terminal if it has ended already) and deletes it.
func deleteRun(ctx context.Context, cl *client.Client, id string) (string, error) {
	if r, err := cl.CancelRun(ctx, id, "bench done"); err != nil {
		return "", err
	} else if r.Code != messages.CodeOK && r.Code != messages.CodeRunTerminal {
		return r.Code, nil
	}
	r, err := cl.DeleteRun(ctx, id)
	if err != nil {
		return "", err
	}
	return r.Code, nil
}

// benchCleanup deletes ids in tenant with del, retrying an object in use until the TTL of
// the bench's leases has passed. A failure is reported, not returned: the measurement
// stands.
func benchCleanup(ctx context.Context, cfg *benchConfig, conns []*nats.Conn, tenant string, ids []string, del deleteFunc) cleanupReport {
	start := time.Now()
	var rep cleanupReport
	clients, err := benchClients(cfg, conns, tenant)
	if err != nil {
		rep.Error = err.Error()
		rep.Left = len(ids)
		return rep
	}
	var deleted, gone atomic.Int64
	heldUntil := start.Add(cfg.ttl + time.Second)
	err = forEachID(ctx, cfg.clients, clients, ids, func(cl *client.Client, id string) error {
		for {
			code, err := del(ctx, cl, id)
			switch {
			case err != nil:
				return fmt.Errorf("delete %s: %w", id, err)
			case code == messages.CodeOK:
				deleted.Add(1)
				return nil
			case code == messages.CodeResourceNotFound || code == messages.CodeRunNotFound:
				gone.Add(1)
				return nil
			case code != messages.CodeObjectInUse:
				return fmt.Errorf("delete %s: %s", id, code)
			case time.Now().After(heldUntil):
				return nil // still held: left
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	rep.Deleted, rep.Gone = int(deleted.Load()), int(gone.Load())
	rep.Left = len(ids) - rep.Deleted - rep.Gone
	if err != nil {
		rep.Error = err.Error()
	}
	rep.Elapsed = time.Since(start)
	return rep
}

// add counts another cleanup (the bystander's) into r.
func (r *cleanupReport) add(o cleanupReport) {
	r.Deleted += o.Deleted
	r.Gone += o.Gone
	r.Left += o.Left
	r.Elapsed += o.Elapsed
	if r.Error == "" {
		r.Error = o.Error
	}
}

func (r *cleanupReport) print(w io.Writer, what string) {
	fmt.Fprintf(w, "cleanup: %d %s deleted in %s", r.Deleted, what, r.Elapsed.Round(time.Millisecond))
	if r.Gone > 0 {
		fmt.Fprintf(w, ", %d already gone", r.Gone)
	}
	if r.Left > 0 {
		fmt.Fprintf(w, ", %d left", r.Left)
	}
	if r.Error != "" {
		fmt.Fprintf(w, " (%s)", r.Error)
	}
	fmt.Fprintln(w)
}
