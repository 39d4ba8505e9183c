package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/messages"
)

// The client commands of the lease API: resources, pools, ranges and leases. Each verb is
// a struct of its flags and arguments (with the connection flags embedded) and a Run.

// opFlag is the operation id of a write.
type opFlag struct {
	Op string `name:"op" placeholder:"ID" help:"Operation id (generated if absent; reuse it to retry)."`
}

// view is what a reply shows: its result and, when it carried its object, the object's
// one-line form.
type view struct {
	result *client.Result
	line   string
	has    bool
}

func resourceView(r *client.ResourceResult) view {
	return view{&r.Result, resourceLine(r.Resource), r.Resource != nil}
}

func poolView(r *client.PoolResult) view { return view{&r.Result, poolLine(r.Pool), r.Pool != nil} }

func rangeView(r *client.RangeResult) view {
	return view{&r.Result, rangeLine(r.Range), r.Range != nil}
}

// callAndShow connects, makes the call and prints its reply, or the error that kept it
// from coming.
func callAndShow[R any](e *env, cf *connFlags, call func(ctx context.Context, cl *client.Client) (R, error), show func(R) view) error {
	return cf.run(e, func(ctx context.Context, cl *client.Client) int {
		res, err := call(ctx, cl)
		if err != nil {
			return errorExit(e, err, cf.JSON)
		}
		v := show(res)
		return printResult(e, v.result, cf.JSON, func(w io.Writer) {
			if v.has {
				fmt.Fprintln(w, v.line)
			}
		})
	})
}

// readFlags are the fence flags of single-object reads.
type readFlags struct {
	MinLSN uint64         `name:"min-lsn" placeholder:"LSN" help:"Answer only once the shard has applied this lsn (e.g. of an earlier write)."`
	Wait   *time.Duration `name:"wait" help:"How long a --min-lsn read may wait (0-10s; server default 1s)."`
}

func (r *readFlags) options() []client.ReadOption {
	var o []client.ReadOption
	if r.MinLSN > 0 {
		o = append(o, client.MinLSN(r.MinLSN))
	}
	if r.Wait != nil {
		o = append(o, client.Wait(*r.Wait))
	}
	return o
}

// --- resource --------------------------------------------------------------

type resourceCmd struct {
	Create resourceCreateCmd `cmd:"" help:"Create a named resource."`
	Get    resourceGetCmd    `cmd:"" help:"Read a resource."`
	Delete deleteCmd         `cmd:"" help:"Delete a resource no lease holds (object_in_use while one does)."`
	List   objectListCmd     `cmd:"" help:"List resources by id prefix, a page at a time."`
}

type resourceCreateCmd struct {
	ID string `arg:"" name:"resource-id" help:"1-128 chars of A-Z a-z 0-9 _ - : / @ +; the part before the first / is the placement key."`
	opFlag
	connFlags
}

func (c *resourceCreateCmd) Run(e *env) error {
	return callAndShow(e, &c.connFlags, func(ctx context.Context, cl *client.Client) (*client.ResourceResult, error) {
		return cl.CreateResource(ctx, c.ID, client.WithOperationID(c.Op))
	}, resourceView)
}

type resourceGetCmd struct {
	ID string `arg:"" name:"resource-id" help:"The resource."`
	readFlags
	connFlags
}

func (c *resourceGetCmd) Run(e *env) error {
	return callAndShow(e, &c.connFlags, func(ctx context.Context, cl *client.Client) (*client.ResourceResult, error) {
		return cl.GetResource(ctx, c.ID, c.options()...)
	}, resourceView)
}

// --- pool ------------------------------------------------------------------

type poolCmd struct {
	Create   poolCreateCmd   `cmd:"" help:"Create a capacity pool of --capacity units."`
	Get      poolGetCmd      `cmd:"" help:"Read a pool."`
	Delete   deleteCmd       `cmd:"" help:"Delete a pool with no units reserved or active (object_in_use otherwise)."`
	List     objectListCmd   `cmd:"" help:"List pools by id prefix, a page at a time."`
	Resize   poolResizeCmd   `cmd:"" help:"Give a pool a new --capacity (never below reserved + active + consumed)."`
	Holdings poolHoldingsCmd `cmd:"" help:"List the live leases holding units of a pool."`
}

type poolCreateCmd struct {
	ID       string `arg:"" name:"pool-id" help:"The pool's id (as a resource id)."`
	Capacity uint64 `name:"capacity" placeholder:"N" help:"Total units (> 0)."`
	opFlag
	connFlags
}

func (c *poolCreateCmd) Run(e *env) error {
	if c.Capacity == 0 {
		return usageError(e, "--capacity must be > 0")
	}
	return callAndShow(e, &c.connFlags, func(ctx context.Context, cl *client.Client) (*client.PoolResult, error) {
		return cl.CreatePool(ctx, c.ID, c.Capacity, client.WithOperationID(c.Op))
	}, poolView)
}

type poolGetCmd struct {
	ID string `arg:"" name:"pool-id" help:"The pool."`
	readFlags
	connFlags
}

func (c *poolGetCmd) Run(e *env) error {
	return callAndShow(e, &c.connFlags, func(ctx context.Context, cl *client.Client) (*client.PoolResult, error) {
		return cl.GetPool(ctx, c.ID, c.options()...)
	}, poolView)
}

// --- range -----------------------------------------------------------------

type rangeCmd struct {
	Create      rangeCreateCmd      `cmd:"" help:"Create the value range [--first, --last] (up to [0, 2^64-1])."`
	Get         rangeGetCmd         `cmd:"" help:"Read a range."`
	Delete      deleteCmd           `cmd:"" help:"Delete a range with no value allocated (object_in_use otherwise)."`
	List        objectListCmd       `cmd:"" help:"List ranges by id prefix, a page at a time."`
	Lookup      rangeLookupCmd      `cmd:"" help:"Who holds a value: free, held (by which lease) or excluded."`
	Allocations rangeAllocationsCmd `cmd:"" help:"List a range's allocated values with their leases (or --excluded intervals)."`
	Release     rangeValueCmd       `cmd:"" help:"The holder frees a value it holds (--holder)."`
	Revoke      rangeValueCmd       `cmd:"" help:"Revoke the active lease holding a value, whoever holds it (operator)."`
	Reclaim     rangeValueCmd       `cmd:"" help:"Reclaim the revoking lease holding a value (operator): the value is free."`
	Exclude     rangeExcludeCmd     `cmd:"" help:"Stop handing out values FIRST..LAST (value_busy while one is held)."`
	Include     rangeExcludeCmd     `cmd:"" help:"Hand out values FIRST..LAST again."`
	Resize      rangeResizeCmd      `cmd:"" help:"Give a range new bounds in place (--first, --last, --static-band)."`
}

type rangeCreateCmd struct {
	ID       string   `arg:"" name:"range-id" help:"The range's id (as a resource id)."`
	First    uint64   `name:"first" help:"Lowest value."`
	Last     uint64   `name:"last" default:"18446744073709551615" help:"Highest value."`
	Strategy string   `name:"strategy" default:"lowest_free" enum:"lowest_free,random,least_recently_freed" help:"Which free value a reserve takes: lowest_free, random or least_recently_freed."`
	Exclude  []string `name:"exclude" placeholder:"FIRST..LAST" help:"Values never handed out (repeatable)."`
	Band     string   `name:"static-band" placeholder:"FIRST..LAST" help:"Values 'any' takes only when no other is free."`
	Format   string   `name:"format" enum:",port,ipv4,mac" default:"" help:"How clients show the values: port, ipv4 or mac."`
	opFlag
	connFlags
}

func (c *rangeCreateCmd) Run(e *env) error {
	if c.First > c.Last {
		return usageError(e, "--first %d is above --last %d", c.First, c.Last)
	}
	spec := client.RangeSpec{ID: c.ID, First: c.First, Last: c.Last, Strategy: c.Strategy, Format: c.Format}
	for _, x := range c.Exclude {
		iv, err := parseInterval(x)
		if err != nil {
			return usageError(e, "--exclude %v", err)
		}
		spec.Excluded = append(spec.Excluded, *iv)
	}
	if c.Band != "" {
		iv, err := parseInterval(c.Band)
		if err != nil {
			return usageError(e, "--static-band %v", err)
		}
		spec.StaticBand = iv
	}
	return callAndShow(e, &c.connFlags, func(ctx context.Context, cl *client.Client) (*client.RangeResult, error) {
		return cl.CreateRangeSpec(ctx, spec, client.WithOperationID(c.Op))
	}, rangeView)
}

type rangeGetCmd struct {
	ID string `arg:"" name:"range-id" help:"The range."`
	readFlags
	connFlags
}

func (c *rangeGetCmd) Run(e *env) error {
	return callAndShow(e, &c.connFlags, func(ctx context.Context, cl *client.Client) (*client.RangeResult, error) {
		return cl.GetRange(ctx, c.ID, c.options()...)
	}, rangeView)
}

// deleteCmd is resource, pool, range and run delete: the object is the command's first word.
type deleteCmd struct {
	ID string `arg:"" name:"id" help:"The object to delete."`
	opFlag
	connFlags
}

func (c *deleteCmd) Run(e *env) error {
	op := client.WithOperationID(c.Op)
	cf := &c.connFlags
	switch object, _, _ := strings.Cut(e.cmd, " "); object {
	case "pool":
		return callAndShow(e, cf, func(ctx context.Context, cl *client.Client) (*client.PoolResult, error) {
			return cl.DeletePool(ctx, c.ID, op)
		}, poolView)
	case "range":
		return callAndShow(e, cf, func(ctx context.Context, cl *client.Client) (*client.RangeResult, error) {
			return cl.DeleteRange(ctx, c.ID, op)
		}, rangeView)
	case "run":
		return callAndShow(e, cf, func(ctx context.Context, cl *client.Client) (*client.RunResult, error) {
			return cl.DeleteRun(ctx, c.ID, op)
		}, runView)
	}
	return callAndShow(e, cf, func(ctx context.Context, cl *client.Client) (*client.ResourceResult, error) {
		return cl.DeleteResource(ctx, c.ID, op)
	}, resourceView)
}

// --- lease -----------------------------------------------------------------

type leaseCmd struct {
	Reserve    leaseReserveCmd  `cmd:"" help:"Reserve members for a holder as one lease, all or nothing."`
	Activate   leaseActivateCmd `cmd:"" help:"Activate a reserved lease whose deadline is still ahead."`
	Renew      leaseRenewCmd    `cmd:"" help:"Renew a lease: a reserved one's deadline becomes now + --ttl; a keep-alive lease's or a work claim's the later of its deadline and now + --ttl (never shortened)."`
	Release    leaseReleaseCmd  `cmd:"" help:"Release a lease (the holder gives it up)."`
	Revoke     leaseRevokeCmd   `cmd:"" help:"Revoke an active lease (operator)."`
	Reclaim    leaseReclaimCmd  `cmd:"" help:"Reclaim a revoking lease (operator): it becomes revoked and its members free."`
	Get        leaseGetCmd      `cmd:"" help:"Read a lease."`
	List       leaseListCmd     `cmd:"" help:"List live leases by --holder, --label or --state across all shards."`
	Consume    leaseConsumeCmd  `cmd:"" help:"Use a hold of pool units up for good (the lease ends consumed)."`
	Import     leaseImportCmd   `cmd:"" help:"Import up to 1000 leases at once from a JSON file, all or nothing."`
	ReleaseAll leaseBulkCmd     `cmd:"" name:"release-all" help:"The holder releases its leases carrying --label, in steps."`
	RevokeAll  leaseBulkCmd     `cmd:"" name:"revoke-all" help:"Revoke (and with --reclaim free) every lease carrying --label, in steps."`
}

// printLease prints a lease result.
func printLease(e *env, res *client.LeaseResult, jsonOut bool) int {
	var slot time.Duration
	if l := res.Lease.Lease; !jsonOut && e.cl != nil && l != nil && (l.GetDeadlineSlot() != 0 || l.GetRetireAfterSlot() != 0) {
		slot = slotLength(e, e.cl)
	}
	return printResult(e, &res.Result, jsonOut, func(w io.Writer) { leaseBlock(w, res.Lease.Lease, slot, time.Now()) })
}

// slotLength is the service's slot length, for showing slots as times: one short request
// (remembered by the client); 0 without an answer, and the slots alone are shown.
func slotLength(e *env, cl *client.Client) time.Duration {
	ctx, cancel := context.WithTimeout(e.ctx, time.Second)
	defer cancel()
	slot, _ := cl.SlotLength(ctx)
	return slot
}

// leaseRun connects, calls do and prints its lease.
func leaseRun(e *env, cf *connFlags, do func(ctx context.Context, cl *client.Client) (*client.LeaseResult, error)) error {
	return cf.run(e, func(ctx context.Context, cl *client.Client) int {
		res, err := do(ctx, cl)
		if err != nil {
			return errorExit(e, err, cf.JSON)
		}
		return printLease(e, res, cf.JSON)
	})
}

type leaseReserveCmd struct {
	memberFlags
	Holder    string        `name:"holder" placeholder:"ID" help:"Holder id (required)."`
	TTL       time.Duration `name:"ttl" default:"30s" help:"Time to live of the reservation (ignored with --activate)."`
	Activate  bool          `name:"activate" help:"Create the lease active instead of reserved."`
	KeepAlive time.Duration `name:"keepalive" placeholder:"D" help:"With --activate: the active lease must be renewed within D (lease renew, or --hold), else it moves to revoking and a reclaimer returns what it held."`
	Hold      bool          `name:"hold" help:"Stay running and renew the lease (every third of --ttl, or of --keepalive) until interrupted, then release it; killed, it renews no more and the lease expires (or, with --keepalive, goes revoking)."`
	Label     []string      `name:"label" placeholder:"KEY=VALUE" help:"A label of the lease (repeatable), e.g. owner_uuid=5f1c."`
	opFlag
	connFlags
}

func (leaseReserveCmd) Help() string {
	return `Members are taken in the order given, of any placement keys (the id part before its
first /): members on several shards are granted together or not at all, the lease living on
the first member's shard. --range ID takes any free value, --range ID=VALUE that value.

Freed when the holder dies: a reserved lease expires unless renewed within its --ttl,
and an active lease with --keepalive goes revoking unless renewed within it (then
'holdfast reclaimer' returns what it held after its grace). --hold renews from this
process until Ctrl-C, which releases the lease.

Examples:
  holdfast lease reserve --holder alice --resource node14/gpu0 --pool node14/mem:4 --ttl 30s
  holdfast lease reserve --holder job-7 --resource node14/gpu0 --activate --keepalive 10s --hold`
}

func (c *leaseReserveCmd) Run(e *env) error {
	members := c.members()
	switch {
	case c.Holder == "":
		return usageError(e, "--holder is required")
	case len(members) == 0:
		return usageError(e, "give at least one --resource, --pool or --range")
	case c.TTL <= 0 && !c.Activate:
		return usageError(e, "--ttl must be positive")
	case c.KeepAlive < 0:
		return usageError(e, "--keepalive must be positive")
	case c.KeepAlive > 0 && !c.Activate:
		return usageError(e, "--keepalive needs --activate: a reserved lease is kept by renewing its --ttl (--hold)")
	case c.Hold && c.Activate && c.KeepAlive == 0:
		return usageError(e, "--hold with --activate needs --keepalive: an active lease without one never expires, so there is nothing to renew")
	}
	labels := map[string]string{}
	for _, l := range c.Label {
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			return usageError(e, "--label %q: KEY=VALUE", l)
		}
		labels[k] = v
	}
	return c.connFlags.run(e, func(ctx context.Context, cl *client.Client) int {
		res, err := cl.Reserve(ctx, client.ReserveRequest{Holder: c.Holder, Members: members, TTL: c.TTL, Activate: c.Activate,
			KeepAlive: c.KeepAlive, Labels: labels}, client.WithOperationID(c.Op))
		if err != nil {
			return errorExit(e, err, c.JSON)
		}
		if code := printLease(e, res, c.JSON); code != exitOK || !c.Hold {
			return code
		}
		return c.hold(e, cl, res.Fence())
	})
}

// hold renews the lease until the command is interrupted, then releases it.
func (c *leaseReserveCmd) hold(e *env, cl *client.Client, f client.Fence) int {
	every := c.TTL
	if c.Activate {
		every = c.KeepAlive
	}
	fmt.Fprintf(e.stderr, "holdfast: holding lease %s: renewing every %v until interrupted (which releases it)\n", f.LeaseID, (every / 3).Round(time.Millisecond))
	ka := cl.KeepAlive(e.ctx, c.Holder, f, every)
	<-ka.Done()
	if err := ka.Err(); err != nil {
		e.errorf("lease %s lost: %v", f.LeaseID, err)
		return exitDomain
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
	defer cancel()
	res, err := cl.Release(ctx, c.Holder, f)
	if err != nil {
		return errorExit(e, err, c.JSON)
	}
	return printLease(e, res, c.JSON)
}

// fenceFlags name a lease and its epoch for the holder-authorized verbs: the LEASE_ID
// argument or --lease, and --epoch; or --fence LEASE_ID@EPOCH.
type fenceFlags struct {
	LeaseID string `arg:"" optional:"" name:"lease-id" help:"The lease (or --lease, or --fence)."`
	Lease   string `name:"lease" placeholder:"ID" help:"Lease id (or give it as the argument)."`
	Epoch   uint64 `name:"epoch" help:"The lease's current epoch."`
	Fence   string `name:"fence" placeholder:"LEASE_ID@EPOCH" help:"Lease id and epoch (instead of --lease/--epoch)."`
	Holder  string `name:"holder" placeholder:"ID" help:"Holder id (required)."`
}

// resolve returns the fence, or a usage error message.
func (f *fenceFlags) resolve() (client.Fence, string) {
	lease := f.Lease
	if f.LeaseID != "" {
		if f.Lease != "" || f.Fence != "" {
			return client.Fence{}, "give the lease once: as the argument, --lease or --fence"
		}
		lease = f.LeaseID
	}
	if f.Holder == "" {
		return client.Fence{}, "--holder is required"
	}
	if f.Fence != "" {
		if lease != "" || f.Epoch != 0 {
			return client.Fence{}, "--fence replaces --lease and --epoch"
		}
		fence, err := client.ParseFence(f.Fence)
		if err != nil {
			return client.Fence{}, err.Error()
		}
		return fence, ""
	}
	if lease == "" {
		return client.Fence{}, "missing lease id"
	}
	if f.Epoch == 0 {
		return client.Fence{}, "--epoch is required (the lease's current epoch, ≥ 1)"
	}
	return client.Fence{LeaseID: lease, Epoch: f.Epoch}, ""
}

// holderRun resolves the fence, then calls do with it.
func holderRun(e *env, f *fenceFlags, cf *connFlags, do func(ctx context.Context, cl *client.Client, fence client.Fence) (*client.LeaseResult, error)) error {
	fence, msg := f.resolve()
	if msg != "" {
		return usageError(e, "%s", msg)
	}
	return leaseRun(e, cf, func(ctx context.Context, cl *client.Client) (*client.LeaseResult, error) { return do(ctx, cl, fence) })
}

type leaseActivateCmd struct {
	fenceFlags
	KeepAlive time.Duration `name:"keepalive" placeholder:"D" help:"The active lease must be renewed within D (lease renew), else it moves to revoking and a reclaimer returns what it held."`
	opFlag
	connFlags
}

func (c *leaseActivateCmd) Run(e *env) error {
	if c.KeepAlive < 0 {
		return usageError(e, "--keepalive must be positive")
	}
	return holderRun(e, &c.fenceFlags, &c.connFlags, func(ctx context.Context, cl *client.Client, f client.Fence) (*client.LeaseResult, error) {
		return cl.ActivateKeepAlive(ctx, c.Holder, f, c.KeepAlive, client.WithOperationID(c.Op))
	})
}

type leaseRenewCmd struct {
	fenceFlags
	TTL time.Duration `name:"ttl" default:"30s" help:"New time to live from now."`
	opFlag
	connFlags
}

func (c *leaseRenewCmd) Run(e *env) error {
	if c.TTL <= 0 {
		return usageError(e, "--ttl must be positive")
	}
	return holderRun(e, &c.fenceFlags, &c.connFlags, func(ctx context.Context, cl *client.Client, f client.Fence) (*client.LeaseResult, error) {
		return cl.Renew(ctx, c.Holder, f, c.TTL, client.WithOperationID(c.Op))
	})
}

type leaseReleaseCmd struct {
	fenceFlags
	opFlag
	connFlags
}

func (c *leaseReleaseCmd) Run(e *env) error {
	return holderRun(e, &c.fenceFlags, &c.connFlags, func(ctx context.Context, cl *client.Client, f client.Fence) (*client.LeaseResult, error) {
		return cl.Release(ctx, c.Holder, f, client.WithOperationID(c.Op))
	})
}

// leaseIDFlags name a lease by the LEASE_ID argument or --lease.
type leaseIDFlags struct {
	LeaseID string `arg:"" optional:"" name:"lease-id" help:"The lease (or --lease)."`
	Lease   string `name:"lease" placeholder:"ID" help:"Lease id (or give it as the argument)."`
}

// id is the lease, or a usage error message.
func (f *leaseIDFlags) id() (string, string) {
	switch {
	case f.LeaseID != "" && f.Lease != "":
		return "", "give the lease once: as the argument or --lease"
	case f.LeaseID != "":
		return f.LeaseID, ""
	case f.Lease == "":
		return "", "missing lease id"
	}
	return f.Lease, ""
}

// operatorRun takes the lease id, then calls do with it.
func operatorRun(e *env, f *leaseIDFlags, cf *connFlags, do func(ctx context.Context, cl *client.Client, id string) (*client.LeaseResult, error)) error {
	id, msg := f.id()
	if msg != "" {
		return usageError(e, "%s", msg)
	}
	return leaseRun(e, cf, func(ctx context.Context, cl *client.Client) (*client.LeaseResult, error) { return do(ctx, cl, id) })
}

type leaseRevokeCmd struct {
	leaseIDFlags
	opFlag
	connFlags
}

func (leaseRevokeCmd) Help() string {
	return "The lease becomes revoking and its epoch moves on; its members stay unavailable\nuntil 'lease reclaim'."
}

func (c *leaseRevokeCmd) Run(e *env) error {
	return operatorRun(e, &c.leaseIDFlags, &c.connFlags, func(ctx context.Context, cl *client.Client, id string) (*client.LeaseResult, error) {
		return cl.Revoke(ctx, id, client.WithOperationID(c.Op))
	})
}

type leaseReclaimCmd struct {
	leaseIDFlags
	opFlag
	connFlags
}

func (c *leaseReclaimCmd) Run(e *env) error {
	return operatorRun(e, &c.leaseIDFlags, &c.connFlags, func(ctx context.Context, cl *client.Client, id string) (*client.LeaseResult, error) {
		return cl.Reclaim(ctx, id, client.WithOperationID(c.Op))
	})
}

type leaseGetCmd struct {
	leaseIDFlags
	readFlags
	connFlags
}

func (c *leaseGetCmd) Run(e *env) error {
	return operatorRun(e, &c.leaseIDFlags, &c.connFlags, func(ctx context.Context, cl *client.Client, id string) (*client.LeaseResult, error) {
		return cl.GetLease(ctx, id, c.options()...)
	})
}

type leaseListCmd struct {
	Holder string `name:"holder" placeholder:"ID" help:"Only this holder's leases."`
	Label  string `name:"label" placeholder:"KEY=VALUE" help:"Only leases carrying this label."`
	State  string `name:"state" enum:",reserved,active,revoking" default:"" help:"Only leases in this state."`
	Limit  int    `name:"limit" help:"Most leases per page, 1-10000 (server default 1000)."`
	Cursor string `name:"cursor" placeholder:"CURSOR" help:"Go on after the page that printed this cursor."`
	All    bool   `name:"all" help:"Follow the cursors: print every page."`
	connFlags
}

func (c *leaseListCmd) Run(e *env) error {
	if c.Holder == "" && c.Label == "" {
		return usageError(e, "--holder or --label is required (--state filters them)")
	}
	if c.Limit < 0 || c.Limit > messages.MaxListLimit {
		return usageError(e, "--limit must be 1-%d", messages.MaxListLimit)
	}
	p := &pageFlags{Cursor: c.Cursor, Limit: c.Limit, All: c.All}
	var slot time.Duration
	return pages(e, &c.connFlags, p, func(ctx context.Context, cl *client.Client, cursor string) (*client.LeasesResult, *client.Result, string, error) {
		res, err := cl.ListLeasesPage(ctx, client.LeaseQuery{Holder: c.Holder, Label: c.Label, State: c.State, Page: p.page(cursor)})
		if err != nil {
			return nil, nil, "", err
		}
		if !c.JSON && len(res.Leases) > 0 && slot == 0 {
			slot = slotLength(e, cl)
		}
		return res, &res.Result, res.NextCursor, nil
	}, func(w io.Writer, res *client.LeasesResult) {
		of, more := "", ""
		if c.Holder != "" {
			of = " of " + c.Holder
		}
		if res.Truncated {
			more = " (truncated by --limit)"
		}
		fmt.Fprintf(w, "%d live lease(s)%s%s\n", len(res.Leases), of, more)
		for _, l := range res.Leases {
			fmt.Fprintln(w, leaseLine(l.Lease, slot))
		}
	})
}
