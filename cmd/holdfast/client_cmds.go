package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/messages"
)

func init() {
	registerCLI("resource", "create or read a named resource (create|get)", cmdResource)
	registerCLI("pool", "create or read a capacity pool (create|get)", cmdPool)
	registerCLI("range", "create or read a value range (create|get)", cmdRange)
	registerCLI("lease", "reserve, activate, renew, release, revoke, reclaim, get or list leases", cmdLease)
}

// subcommand is one verb of an object command.
type subcommand struct {
	name string
	run  func(e *env, args []string) int
}

// dispatch runs the verb named by args[0].
func dispatch(e *env, object string, verbs []subcommand, args []string) int {
	names := make([]string, len(verbs))
	for i, v := range verbs {
		names[i] = v.name
	}
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		w, code := e.stdout, exitOK // help asked for: stdout, exit 0
		if len(args) == 0 {
			w, code = e.stderr, exitUsage
		}
		fmt.Fprintf(w, "usage: holdfast %s <%s> [flags]\n\nRun 'holdfast %s <verb> --help' for the flags of a verb.\n\n%s",
			object, strings.Join(names, "|"), object, exitCodesHelp)
		return code
	}
	for _, v := range verbs {
		if v.name == args[0] {
			return v.run(e, args[1:])
		}
	}
	fmt.Fprintf(e.stderr, "holdfast %s: unknown verb %q", object, args[0])
	if near, ok := closest(args[0], names); ok {
		fmt.Fprintf(e.stderr, "; did you mean %q?", near)
	}
	fmt.Fprintf(e.stderr, " (one of %s)\n", strings.Join(names, ", "))
	return exitUsage
}

// call is the common frame of a client command: flags parsed, connection
// open, a context bounded by --timeout.
type call struct {
	e   *env
	fs  *flag.FlagSet
	cf  connFlags
	pos []string
}

// show prints a result with the one-line view of its object when the reply carried
// one (view is called only then).
func (c *call) show(r *client.Result, has bool, view func() string) int {
	return printResult(c.e, r, c.cf.json, func(w io.Writer) {
		if has {
			fmt.Fprintln(w, view())
		}
	})
}

// prepare parses the flags and checks the number of positional arguments
// (npos, or -1 for any). It returns -1 to go on, else an exit code.
func (c *call) prepare(args []string, npos int, posName string) int {
	c.cf.register(c.fs)
	pos, code := parseArgs(c.e, c.fs, args)
	if code >= 0 {
		return code
	}
	if err := c.cf.validate(); err != nil {
		return usageError(c.e, c.fs, "%v", err)
	}
	if npos >= 0 && len(pos) != npos {
		if len(pos) < npos {
			return usageError(c.e, c.fs, "missing %s", posName)
		}
		return usageError(c.e, c.fs, "unexpected arguments: %s", strings.Join(pos[npos:], " "))
	}
	c.pos = pos
	return -1
}

// run connects and runs do under a context bounded by --timeout.
func (c *call) run(do func(ctx context.Context, cl *client.Client) int) int {
	nc, cl, code, err := c.cf.connect(c.fs.Name())
	if err != nil {
		c.e.errorf("%v", err)
		return code
	}
	defer nc.Close()
	c.e.cl = cl
	ctx, cancel := context.WithTimeout(c.e.ctx, c.cf.timeout)
	defer cancel()
	return do(ctx, cl)
}

func newCall(e *env, name, synopsis, about string) *call {
	return &call{e: e, fs: newFlagSet(e, name, synopsis, about)}
}

// readFlags are the fence flags of single-object reads.
type readFlags struct {
	minLSN uint64
	wait   time.Duration
}

func (r *readFlags) register(fs *flag.FlagSet) {
	fs.Uint64Var(&r.minLSN, "min-lsn", 0, "answer only once the shard has applied this `lsn` (e.g. of an earlier write)")
	fs.DurationVar(&r.wait, "wait", 0, "how long a --min-lsn read may wait (0-10s; server default 1s)")
}

func (r *readFlags) options(fs *flag.FlagSet) []client.ReadOption {
	var o []client.ReadOption
	if r.minLSN > 0 {
		o = append(o, client.MinLSN(r.minLSN))
	}
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "wait" })
	if set {
		o = append(o, client.Wait(r.wait))
	}
	return o
}

// --- resource --------------------------------------------------------------

func cmdResource(e *env, args []string) int {
	return dispatch(e, "resource", []subcommand{
		{"create", resourceCreate},
		{"get", resourceGet},
	}, args)
}

func resourceCreate(e *env, args []string) int {
	c := newCall(e, "resource create", "resource create ID [flags]",
		"Create a named resource. Ids: 1-128 chars of A-Z a-z 0-9 _ - : / @ +; the part\nbefore the first / is the placement key.")
	op := c.fs.String("op", "", "operation `id` (generated if absent; reuse it to retry)")
	if code := c.prepare(args, 1, "resource ID"); code >= 0 {
		return code
	}
	return c.run(func(ctx context.Context, cl *client.Client) int {
		res, err := cl.CreateResource(ctx, c.pos[0], client.WithOperationID(*op))
		if err != nil {
			return errorExit(e, err, c.cf.json)
		}
		return c.show(&res.Result, res.Resource != nil, func() string { return resourceLine(res.Resource) })
	})
}

func resourceGet(e *env, args []string) int {
	c := newCall(e, "resource get", "resource get ID [flags]", "Read a resource.")
	var rf readFlags
	rf.register(c.fs)
	if code := c.prepare(args, 1, "resource ID"); code >= 0 {
		return code
	}
	return c.run(func(ctx context.Context, cl *client.Client) int {
		res, err := cl.GetResource(ctx, c.pos[0], rf.options(c.fs)...)
		if err != nil {
			return errorExit(e, err, c.cf.json)
		}
		return c.show(&res.Result, res.Resource != nil, func() string { return resourceLine(res.Resource) })
	})
}

// --- pool ------------------------------------------------------------------

func cmdPool(e *env, args []string) int {
	return dispatch(e, "pool", []subcommand{
		{"create", poolCreate},
		{"get", poolGet},
	}, args)
}

func poolCreate(e *env, args []string) int {
	c := newCall(e, "pool create", "pool create ID --capacity N [flags]", "Create a capacity pool of N units.")
	op := c.fs.String("op", "", "operation `id` (generated if absent; reuse it to retry)")
	capacity := c.fs.Uint64("capacity", 0, "total units (> 0)")
	if code := c.prepare(args, 1, "pool ID"); code >= 0 {
		return code
	}
	if *capacity == 0 {
		return usageError(e, c.fs, "--capacity must be > 0")
	}
	return c.run(func(ctx context.Context, cl *client.Client) int {
		res, err := cl.CreatePool(ctx, c.pos[0], *capacity, client.WithOperationID(*op))
		if err != nil {
			return errorExit(e, err, c.cf.json)
		}
		return c.show(&res.Result, res.Pool != nil, func() string { return poolLine(res.Pool) })
	})
}

func poolGet(e *env, args []string) int {
	c := newCall(e, "pool get", "pool get ID [flags]", "Read a pool.")
	var rf readFlags
	rf.register(c.fs)
	if code := c.prepare(args, 1, "pool ID"); code >= 0 {
		return code
	}
	return c.run(func(ctx context.Context, cl *client.Client) int {
		res, err := cl.GetPool(ctx, c.pos[0], rf.options(c.fs)...)
		if err != nil {
			return errorExit(e, err, c.cf.json)
		}
		return c.show(&res.Result, res.Pool != nil, func() string { return poolLine(res.Pool) })
	})
}

// --- range -----------------------------------------------------------------

func cmdRange(e *env, args []string) int {
	return dispatch(e, "range", []subcommand{
		{"create", rangeCreate},
		{"get", rangeGet},
	}, args)
}

func rangeCreate(e *env, args []string) int {
	c := newCall(e, "range create", "range create ID --first A --last B [--strategy S] [flags]",
		"Create the value range [A, B] (up to [0, 2^64-1]).")
	op := c.fs.String("op", "", "operation `id` (generated if absent; reuse it to retry)")
	first := c.fs.Uint64("first", 0, "lowest value")
	last := c.fs.Uint64("last", math.MaxUint64, "highest value")
	strategy := c.fs.String("strategy", messages.StrategyLowestFree, "lowest_free, random or least_recently_freed")
	if code := c.prepare(args, 1, "range ID"); code >= 0 {
		return code
	}
	switch *strategy {
	case messages.StrategyLowestFree, messages.StrategyRandom, messages.StrategyLeastRecentlyFreed:
	default:
		return usageError(e, c.fs, "unknown --strategy %q", *strategy)
	}
	if *first > *last {
		return usageError(e, c.fs, "--first %d is above --last %d", *first, *last)
	}
	return c.run(func(ctx context.Context, cl *client.Client) int {
		res, err := cl.CreateRange(ctx, c.pos[0], *first, *last, *strategy, client.WithOperationID(*op))
		if err != nil {
			return errorExit(e, err, c.cf.json)
		}
		return c.show(&res.Result, res.Range != nil, func() string { return rangeLine(res.Range) })
	})
}

func rangeGet(e *env, args []string) int {
	c := newCall(e, "range get", "range get ID [flags]", "Read a range.")
	var rf readFlags
	rf.register(c.fs)
	if code := c.prepare(args, 1, "range ID"); code >= 0 {
		return code
	}
	return c.run(func(ctx context.Context, cl *client.Client) int {
		res, err := cl.GetRange(ctx, c.pos[0], rf.options(c.fs)...)
		if err != nil {
			return errorExit(e, err, c.cf.json)
		}
		return c.show(&res.Result, res.Range != nil, func() string { return rangeLine(res.Range) })
	})
}

// --- lease -----------------------------------------------------------------

func cmdLease(e *env, args []string) int {
	return dispatch(e, "lease", []subcommand{
		{"reserve", leaseReserve},
		{"activate", leaseActivate},
		{"renew", leaseRenew},
		{"release", leaseRelease},
		{"revoke", leaseRevoke},
		{"reclaim", leaseReclaim},
		{"get", leaseGet},
		{"list", leaseList},
	}, args)
}

// printLease prints a lease result.
func printLease(e *env, res *client.LeaseResult, jsonOut bool) int {
	var slot time.Duration
	if l := res.Lease.Lease; !jsonOut && e.cl != nil && l != nil && (l.GetDeadlineSlot() != 0 || l.GetRetireAfterSlot() != 0) {
		// Slots shown as times: the service advertises its slot length (one short
		// request; without an answer the slots alone are shown).
		ctx, cancel := context.WithTimeout(e.ctx, time.Second)
		slot, _ = e.cl.SlotLength(ctx)
		cancel()
	}
	return printResult(e, &res.Result, jsonOut, func(w io.Writer) { leaseBlock(w, res.Lease.Lease, slot, time.Now()) })
}

func leaseReserve(e *env, args []string) int {
	c := newCall(e, "lease reserve", "lease reserve --holder H (--resource ID | --pool ID:QTY | --range ID[=VALUE])... [flags]",
		`Reserve the members for the holder as one lease, all or nothing. Members are
taken in the order given; all must share one placement key (the id part before
its first /). --range ID takes any free value, --range ID=VALUE that value.

Example:
  holdfast lease reserve --holder alice --resource node14/gpu0 --pool node14/mem:4 --ttl 30s`)
	var ml memberList
	c.fs.Var(memberFlag{&ml, memberResource}, "resource", "a resource `ID` (repeatable)")
	c.fs.Var(memberFlag{&ml, memberPool}, "pool", "`ID:QTY` units of a pool (repeatable)")
	c.fs.Var(memberFlag{&ml, memberRange}, "range", "`ID` (any free value) or ID=VALUE of a range (repeatable)")
	holder := c.fs.String("holder", "", "holder `id` (required)")
	ttl := c.fs.Duration("ttl", 30*time.Second, "time to live of the reservation (ignored with --activate)")
	activate := c.fs.Bool("activate", false, "create the lease active instead of reserved")
	op := c.fs.String("op", "", "operation `id` (generated if absent; reuse it to retry)")
	if code := c.prepare(args, 0, ""); code >= 0 {
		return code
	}
	switch {
	case *holder == "":
		return usageError(e, c.fs, "--holder is required")
	case len(ml.members) == 0:
		return usageError(e, c.fs, "give at least one --resource, --pool or --range")
	case *ttl <= 0 && !*activate:
		return usageError(e, c.fs, "--ttl must be positive")
	}
	return c.run(func(ctx context.Context, cl *client.Client) int {
		res, err := cl.Reserve(ctx, client.ReserveRequest{Holder: *holder, Members: ml.members, TTL: *ttl, Activate: *activate},
			client.WithOperationID(*op))
		if err != nil {
			return errorExit(e, err, c.cf.json)
		}
		return printLease(e, res, c.cf.json)
	})
}

// fenceFlags are the flags naming a lease and its epoch for the
// holder-authorized verbs: a positional LEASE_ID or --lease, --epoch, or
// --fence LEASE_ID@EPOCH.
type fenceFlags struct {
	lease  string
	epoch  uint64
	fence  string
	holder string
}

func (f *fenceFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.lease, "lease", "", "lease `id` (or give it as the argument)")
	fs.Uint64Var(&f.epoch, "epoch", 0, "the lease's current epoch")
	fs.StringVar(&f.fence, "fence", "", "lease id and epoch as `LEASE_ID@EPOCH` (instead of --lease/--epoch)")
	fs.StringVar(&f.holder, "holder", "", "holder `id` (required)")
}

// resolve returns the fence, or a usage error message.
func (f *fenceFlags) resolve(pos []string) (client.Fence, string) {
	if len(pos) > 0 {
		if f.lease != "" || f.fence != "" {
			return client.Fence{}, "give the lease once: as the argument, --lease or --fence"
		}
		f.lease = pos[0]
	}
	if f.holder == "" {
		return client.Fence{}, "--holder is required"
	}
	if f.fence != "" {
		if f.lease != "" || f.epoch != 0 {
			return client.Fence{}, "--fence replaces --lease and --epoch"
		}
		fence, err := client.ParseFence(f.fence)
		if err != nil {
			return client.Fence{}, err.Error()
		}
		return fence, ""
	}
	if f.lease == "" {
		return client.Fence{}, "missing lease id"
	}
	if f.epoch == 0 {
		return client.Fence{}, "--epoch is required (the lease's current epoch, ≥ 1)"
	}
	return client.Fence{LeaseID: f.lease, Epoch: f.epoch}, ""
}

func holderVerb(e *env, args []string, verb, about string, withTTL bool,
	do func(ctx context.Context, cl *client.Client, holder string, f client.Fence, ttl time.Duration, op string) (*client.LeaseResult, error)) int {
	c := newCall(e, "lease "+verb, "lease "+verb+" LEASE_ID --holder H --epoch N [flags]", about)
	var ff fenceFlags
	ff.register(c.fs)
	var ttl *time.Duration
	if withTTL {
		ttl = c.fs.Duration("ttl", 30*time.Second, "new time to live from now")
	}
	op := c.fs.String("op", "", "operation `id` (generated if absent; reuse it to retry)")
	if code := c.prepare(args, -1, ""); code >= 0 {
		return code
	}
	if len(c.pos) > 1 {
		return usageError(e, c.fs, "unexpected arguments: %s", strings.Join(c.pos[1:], " "))
	}
	fence, msg := ff.resolve(c.pos)
	if msg != "" {
		return usageError(e, c.fs, "%s", msg)
	}
	var d time.Duration
	if ttl != nil {
		if *ttl <= 0 {
			return usageError(e, c.fs, "--ttl must be positive")
		}
		d = *ttl
	}
	return c.run(func(ctx context.Context, cl *client.Client) int {
		res, err := do(ctx, cl, ff.holder, fence, d, *op)
		if err != nil {
			return errorExit(e, err, c.cf.json)
		}
		return printLease(e, res, c.cf.json)
	})
}

func leaseActivate(e *env, args []string) int {
	return holderVerb(e, args, "activate", "Activate a reserved lease whose deadline is still ahead.", false,
		func(ctx context.Context, cl *client.Client, holder string, f client.Fence, _ time.Duration, op string) (*client.LeaseResult, error) {
			return cl.Activate(ctx, holder, f, client.WithOperationID(op))
		})
}

func leaseRenew(e *env, args []string) int {
	return holderVerb(e, args, "renew", "Renew a reserved lease: its deadline becomes now + --ttl.", true,
		func(ctx context.Context, cl *client.Client, holder string, f client.Fence, ttl time.Duration, op string) (*client.LeaseResult, error) {
			return cl.Renew(ctx, holder, f, ttl, client.WithOperationID(op))
		})
}

func leaseRelease(e *env, args []string) int {
	return holderVerb(e, args, "release", "Release a lease (the holder gives it up).", false,
		func(ctx context.Context, cl *client.Client, holder string, f client.Fence, _ time.Duration, op string) (*client.LeaseResult, error) {
			return cl.Release(ctx, holder, f, client.WithOperationID(op))
		})
}

func operatorVerb(e *env, args []string, verb, about string,
	do func(ctx context.Context, cl *client.Client, leaseID, op string) (*client.LeaseResult, error)) int {
	c := newCall(e, "lease "+verb, "lease "+verb+" LEASE_ID [flags]", about)
	lease := c.fs.String("lease", "", "lease `id` (or give it as the argument)")
	op := c.fs.String("op", "", "operation `id` (generated if absent; reuse it to retry)")
	if code := c.prepare(args, -1, ""); code >= 0 {
		return code
	}
	id, msg := leaseArg(c.pos, *lease)
	if msg != "" {
		return usageError(e, c.fs, "%s", msg)
	}
	return c.run(func(ctx context.Context, cl *client.Client) int {
		res, err := do(ctx, cl, id, *op)
		if err != nil {
			return errorExit(e, err, c.cf.json)
		}
		return printLease(e, res, c.cf.json)
	})
}

// leaseArg takes the lease id from the one positional argument or --lease.
func leaseArg(pos []string, flagVal string) (string, string) {
	switch {
	case len(pos) > 1:
		return "", "unexpected arguments: " + strings.Join(pos[1:], " ")
	case len(pos) == 1 && flagVal != "":
		return "", "give the lease once: as the argument or --lease"
	case len(pos) == 1:
		return pos[0], ""
	case flagVal == "":
		return "", "missing lease id"
	}
	return flagVal, ""
}

func leaseRevoke(e *env, args []string) int {
	return operatorVerb(e, args, "revoke", "Revoke an active lease (operator): it becomes revoking and its epoch moves on;\nits members stay unavailable until 'lease reclaim'.",
		func(ctx context.Context, cl *client.Client, id, op string) (*client.LeaseResult, error) {
			return cl.Revoke(ctx, id, client.WithOperationID(op))
		})
}

func leaseReclaim(e *env, args []string) int {
	return operatorVerb(e, args, "reclaim", "Reclaim a revoking lease (operator): it becomes revoked and its members free.",
		func(ctx context.Context, cl *client.Client, id, op string) (*client.LeaseResult, error) {
			return cl.Reclaim(ctx, id, client.WithOperationID(op))
		})
}

func leaseGet(e *env, args []string) int {
	c := newCall(e, "lease get", "lease get LEASE_ID [flags]", "Read a lease.")
	lease := c.fs.String("lease", "", "lease `id` (or give it as the argument)")
	var rf readFlags
	rf.register(c.fs)
	if code := c.prepare(args, -1, ""); code >= 0 {
		return code
	}
	id, msg := leaseArg(c.pos, *lease)
	if msg != "" {
		return usageError(e, c.fs, "%s", msg)
	}
	return c.run(func(ctx context.Context, cl *client.Client) int {
		res, err := cl.GetLease(ctx, id, rf.options(c.fs)...)
		if err != nil {
			return errorExit(e, err, c.cf.json)
		}
		return printLease(e, res, c.cf.json)
	})
}

func leaseList(e *env, args []string) int {
	c := newCall(e, "lease list", "lease list --holder H [--limit N] [flags]",
		"List the holder's live leases (reserved, active, revoking) across all shards.")
	holder := c.fs.String("holder", "", "holder `id` (required)")
	limit := c.fs.Int("limit", 0, "most leases to list, 1-10000 (server default 1000)")
	if code := c.prepare(args, 0, ""); code >= 0 {
		return code
	}
	if *holder == "" {
		return usageError(e, c.fs, "--holder is required")
	}
	if *limit < 0 || *limit > messages.MaxListLimit {
		return usageError(e, c.fs, "--limit must be 1-%d", messages.MaxListLimit)
	}
	return c.run(func(ctx context.Context, cl *client.Client) int {
		res, err := cl.ListLeases(ctx, *holder, *limit)
		if err != nil {
			return errorExit(e, err, c.cf.json)
		}
		return printResult(e, &res.Result, c.cf.json, func(w io.Writer) {
			more := ""
			if res.Truncated {
				more = " (truncated by --limit)"
			}
			fmt.Fprintf(w, "%d live lease(s) of %s%s\n", len(res.Leases), *holder, more)
			for _, l := range res.Leases {
				fmt.Fprintln(w, leaseLine(l.Lease))
			}
		})
	})
}
