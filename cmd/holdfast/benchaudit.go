package main

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/messages"
)

// --audit reads back, after the load, every lease whose reserve was answered ok: a kill
// or a partition during the run must not lose an acknowledged write. Each must still be
// known (released, live or expired — never lease_not_found: the grant was lost), and each
// whose release was answered ok must read released (not live, not expired: the release
// was lost). It reads back within the history window (10 minutes by default), and keeps
// one lease id per grant for the run, so it is for runs of minutes.

// grant is one reserve answered ok, and whether its release was.
type grant struct {
	lease    string
	released bool
}

// auditReport is what the read-back found.
type auditReport struct {
	Granted      int    `json:"granted"`       // reserves answered ok
	Released     int    `json:"released"`      // of them, releases answered ok: read back released
	Unanswered   int    `json:"unanswered"`    // releases not answered ok: live, expired or released
	LostGrants   int    `json:"lost_grants"`   // granted, and not found
	LostReleases int    `json:"lost_releases"` // release answered ok, and not released
	Unread       int    `json:"unread"`        // reads that failed
	Example      string `json:"example,omitempty"`
}

// failed reports whether the audit found an acknowledged write missing, or could not tell.
func (a *auditReport) failed() error {
	if a.LostGrants+a.LostReleases+a.Unread == 0 {
		return nil
	}
	return fmt.Errorf("audit: %d grant(s) and %d release(s) answered ok are missing, %d lease(s) unread (%s)",
		a.LostGrants, a.LostReleases, a.Unread, a.Example)
}

func (a *auditReport) print(w io.Writer) {
	fmt.Fprintf(w, "audit: %d lease(s) granted, read back: %d released as answered, %d whose release was not answered ok; lost grants %d, lost releases %d, unread %d\n",
		a.Granted, a.Released, a.Unanswered, a.LostGrants, a.LostReleases, a.Unread)
}

// auditGrants reads back every grant of the workers.
func auditGrants(ctx context.Context, cfg *benchConfig, conns []*nats.Conn, workers []*benchWorker) (*auditReport, error) {
	clients, err := benchClients(cfg, conns, cfg.cf.Tenant)
	if err != nil {
		return nil, err
	}
	var all []grant
	for _, w := range workers {
		all = append(all, w.grants...)
	}
	byID := make(map[string]bool, len(all))
	ids := make([]string, len(all))
	for i, g := range all {
		byID[g.lease], ids[i] = g.released, g.lease
	}
	rep := &auditReport{Granted: len(all)}
	var mu sync.Mutex
	note := func(f func(), example string) {
		mu.Lock()
		defer mu.Unlock()
		f()
		if rep.Example == "" {
			rep.Example = example
		}
	}
	err = forEachID(ctx, 32, clients, ids, func(cl *client.Client, id string) error {
		r, err := cl.GetLease(ctx, id)
		switch {
		case err == nil && r.Code == messages.CodeLeaseNotFound:
			note(func() { rep.LostGrants++ }, "lease "+id+" granted, not found")
		case err == nil && !r.OK():
			note(func() { rep.Unread++ }, "lease "+id+": "+r.Code)
		case err != nil:
			note(func() { rep.Unread++ }, "lease "+id+": "+err.Error())
		case byID[id] && r.Lease.GetState() != messages.StateReleased:
			note(func() { rep.LostReleases++ }, "lease "+id+" released, reads "+r.Lease.GetState())
		case byID[id]:
			mu.Lock()
			rep.Released++
			mu.Unlock()
		default:
			mu.Lock()
			rep.Unanswered++
			mu.Unlock()
		}
		return nil
	})
	return rep, err
}
