package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/messages"
)

// The allocator commands (docs/api.md Part IV): listings, lookup and release by value,
// exclusions, resizes, consumed capacity, imports and the bulk verbs. Values are shown
// in the range's format (ipv4, mac, port) and accepted in it or as numbers.

// pageFlags page a listing: --cursor goes on where a page ended, --all follows the
// cursors to the end.
type pageFlags struct {
	Cursor string `name:"cursor" placeholder:"CURSOR" help:"Go on after the page that printed this cursor."`
	Limit  int    `name:"limit" help:"Most items per page (server default 100, at most 1000)."`
	All    bool   `name:"all" help:"Follow the cursors: print every page."`
}

func (p *pageFlags) page(cursor string) client.Page {
	return client.Page{Cursor: cursor, Limit: p.Limit}
}

// pages calls list from --cursor on, once or (--all) until the last page, printing each
// page's items with show; the first page's result is the exit status's.
func pages[R any](e *env, cf *connFlags, p *pageFlags, list func(ctx context.Context, cl *client.Client, cursor string) (R, *client.Result, string, error),
	show func(w io.Writer, r R)) error {
	return cf.run(e, func(ctx context.Context, cl *client.Client) int {
		cursor := p.Cursor
		for {
			res, base, next, err := list(ctx, cl, cursor)
			if err != nil {
				return errorExit(e, err, cf.JSON)
			}
			code := printResult(e, base, cf.JSON, func(w io.Writer) {
				show(w, res)
				if next != "" && !p.All {
					fmt.Fprintf(w, "more: --cursor %s\n", next)
				}
			})
			if code != 0 || next == "" || !p.All {
				return code
			}
			cursor = next
		}
	})
}

// objectListCmd is resource, pool, range and run list: the object is the command's first
// word.
type objectListCmd struct {
	IDPrefix string `arg:"" optional:"" name:"id-prefix" help:"Only ids that start with it."`
	pageFlags
	connFlags
}

func (objectListCmd) Help() string {
	return "Lists the tenant's objects of one kind in id order, over every shard, a page at a time."
}

func (c *objectListCmd) Run(e *env) error {
	object, _, _ := strings.Cut(e.cmd, " ")
	return pages(e, &c.connFlags, &c.pageFlags, func(ctx context.Context, cl *client.Client, cursor string) (*client.ObjectsResult, *client.Result, string, error) {
		var res *client.ObjectsResult
		var err error
		switch object {
		case "pool":
			res, err = cl.ListPools(ctx, c.IDPrefix, c.page(cursor))
		case "range":
			res, err = cl.ListRanges(ctx, c.IDPrefix, c.page(cursor))
		case "run":
			res, err = cl.ListRuns(ctx, c.IDPrefix, c.page(cursor))
		default:
			res, err = cl.ListResources(ctx, c.IDPrefix, c.page(cursor))
		}
		if err != nil {
			return nil, nil, "", err
		}
		return res, &res.Result, res.NextCursor, nil
	}, func(w io.Writer, res *client.ObjectsResult) {
		for _, r := range res.Resources {
			fmt.Fprintln(w, resourceLine(r))
		}
		for _, p := range res.Pools {
			fmt.Fprintln(w, poolLine(p))
		}
		for _, r := range res.Ranges {
			fmt.Fprintln(w, rangeLine(r))
		}
		for _, r := range res.Runs {
			fmt.Fprintln(w, runLine(r))
		}
	})
}

// rangeFormat is the range's value format, read once for parsing and showing values;
// "" when the range cannot be read (numbers then).
func rangeFormat(ctx context.Context, cl *client.Client, rangeID string) string {
	res, err := cl.GetRange(ctx, rangeID)
	if err != nil || res.Range == nil {
		return ""
	}
	return res.Range.GetFormat()
}

// rangeValue parses a value argument: a number, or a value in the range's format.
func rangeValue(ctx context.Context, cl *client.Client, rangeID, s string) (uint64, error) {
	if v, err := strconv.ParseUint(s, 10, 64); err == nil {
		return v, nil
	}
	return client.ParseValue(rangeFormat(ctx, cl, rangeID), s)
}

type rangeLookupCmd struct {
	ID    string `arg:"" name:"range-id" help:"The range."`
	Value string `arg:"" name:"value" help:"The value: a number, or in the range's format (10.0.0.7, 52:54:00:00:00:01)."`
	readFlags
	connFlags
}

func (rangeLookupCmd) Help() string {
	return "Says whether the value is free, held (and by which lease) or excluded."
}

func (c *rangeLookupCmd) Run(e *env) error {
	return c.run(e, func(ctx context.Context, cl *client.Client) int {
		v, err := rangeValue(ctx, cl, c.ID, c.Value)
		if err != nil {
			return usageExit(e, err.Error())
		}
		res, err := cl.LookupValue(ctx, c.ID, v, c.options()...)
		if err != nil {
			return errorExit(e, err, c.JSON)
		}
		return printResult(e, &res.Result, c.JSON, func(w io.Writer) {
			if res.State != "" {
				fmt.Fprintf(w, "value %s: %s\n", c.Value, res.State)
			}
			if res.Lease.Lease != nil {
				fmt.Fprintln(w, leaseLine(res.Lease.Lease, 0))
			}
		})
	})
}

type rangeAllocationsCmd struct {
	ID       string `arg:"" name:"range-id" help:"The range."`
	Excluded bool   `name:"excluded" help:"List the excluded intervals instead."`
	pageFlags
	connFlags
}

func (rangeAllocationsCmd) Help() string {
	return "Lists the range's allocated values in value order, each with the lease holding it."
}

func (c *rangeAllocationsCmd) Run(e *env) error {
	format := ""
	return pages(e, &c.connFlags, &c.pageFlags, func(ctx context.Context, cl *client.Client, cursor string) (*client.AllocationsResult, *client.Result, string, error) {
		if cursor == c.Cursor && format == "" {
			format = rangeFormat(ctx, cl, c.ID)
		}
		var res *client.AllocationsResult
		var err error
		if c.Excluded {
			res, err = cl.ListExcluded(ctx, c.ID, c.page(cursor))
		} else {
			res, err = cl.ListAllocations(ctx, c.ID, c.page(cursor))
		}
		if err != nil {
			return nil, nil, "", err
		}
		return res, &res.Result, res.NextCursor, nil
	}, func(w io.Writer, res *client.AllocationsResult) {
		for _, a := range res.Allocations {
			fmt.Fprintf(w, "%s %s\n", client.FormatValue(format, a.GetValue()), leaseLine(a.GetLease(), 0))
		}
		for _, iv := range res.Excluded {
			fmt.Fprintf(w, "excluded %s..%s\n", client.FormatValue(format, iv.GetFirst()), client.FormatValue(format, iv.GetLast()))
		}
	})
}

// rangeValueCmd is range release, revoke and reclaim: the verb is the command's last word.
type rangeValueCmd struct {
	ID         string `arg:"" name:"range-id" help:"The range."`
	Value      string `arg:"" name:"value" help:"The value: a number, or in the range's format."`
	Holder     string `name:"holder" placeholder:"ID" help:"release: the holder (required); nobody frees another holder's value."`
	Lease      string `name:"lease" placeholder:"LEASE-ID" help:"Act only while this lease holds the value (stale_epoch once another does): a late call never ends the value's next lease."`
	Epoch      uint64 `name:"epoch" help:"release, with --lease: the lease's epoch, checked when given."`
	WholeLease bool   `name:"whole-lease" help:"release: also the lease's other members (a hold is never released in part)."`
	opFlag
	connFlags
}

func (c *rangeValueCmd) Run(e *env) error {
	verb := e.cmd[strings.LastIndexByte(e.cmd, ' ')+1:]
	if verb == "release" && c.Holder == "" {
		return usageError(e, "--holder is required")
	}
	if verb != "release" && (c.Holder != "" || c.Epoch != 0 || c.WholeLease) {
		return usageError(e, "--holder, --epoch and --whole-lease are release's")
	}
	if c.Epoch != 0 && c.Lease == "" {
		return usageError(e, "--epoch needs --lease: every lease starts at epoch 1, so an epoch alone cannot tell two leases of one value apart")
	}
	return c.run(e, func(ctx context.Context, cl *client.Client) int {
		v, err := rangeValue(ctx, cl, c.ID, c.Value)
		if err != nil {
			return usageExit(e, err.Error())
		}
		op, lease := client.WithOperationID(c.Op), client.WithLease(c.Lease)
		var res *client.LeaseResult
		switch verb {
		case "revoke":
			res, err = cl.RevokeValue(ctx, c.ID, v, op, lease)
		case "reclaim":
			res, err = cl.ReclaimValue(ctx, c.ID, v, op, lease)
		default:
			res, err = cl.ReleaseValue(ctx, c.Holder, c.ID, v, c.Epoch, c.WholeLease, op, lease)
		}
		if err != nil {
			return errorExit(e, err, c.JSON)
		}
		return printLease(e, res, c.JSON)
	})
}

// rangeExcludeCmd is range exclude and include.
type rangeExcludeCmd struct {
	ID    string `arg:"" name:"range-id" help:"The range."`
	First string `arg:"" name:"first" help:"The first value (a number, or in the range's format)."`
	Last  string `arg:"" optional:"" name:"last" help:"The last value (default: first)."`
	opFlag
	connFlags
}

func (c *rangeExcludeCmd) Run(e *env) error {
	include := strings.HasSuffix(e.cmd, " include")
	return c.run(e, func(ctx context.Context, cl *client.Client) int {
		first, err := rangeValue(ctx, cl, c.ID, c.First)
		if err != nil {
			return usageExit(e, err.Error())
		}
		last := first
		if c.Last != "" {
			if last, err = rangeValue(ctx, cl, c.ID, c.Last); err != nil {
				return usageExit(e, err.Error())
			}
		}
		op := client.WithOperationID(c.Op)
		var res *client.RangeResult
		if include {
			res, err = cl.Include(ctx, c.ID, first, last, op)
		} else {
			res, err = cl.Exclude(ctx, c.ID, first, last, op)
		}
		if err != nil {
			return errorExit(e, err, c.JSON)
		}
		v := rangeView(res)
		return printResult(e, v.result, c.JSON, func(w io.Writer) {
			if v.has {
				fmt.Fprintln(w, v.line)
			}
		})
	})
}

// parseInterval reads A..B (or A-B, or A).
func parseInterval(s string) (*client.Interval, error) {
	a, b, found := strings.Cut(s, "..")
	if !found {
		a, b, found = strings.Cut(s, "-")
	}
	first, err := strconv.ParseUint(a, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("%q: FIRST..LAST", s)
	}
	last := first
	if found {
		if last, err = strconv.ParseUint(b, 10, 64); err != nil {
			return nil, fmt.Errorf("%q: FIRST..LAST", s)
		}
	}
	return &client.Interval{First: first, Last: last}, nil
}

type rangeResizeCmd struct {
	ID    string  `arg:"" name:"range-id" help:"The range."`
	First *uint64 `name:"first" help:"The new lowest value (omitted: it stays)."`
	Last  *uint64 `name:"last" help:"The new highest value (omitted: it stays)."`
	Band  string  `name:"static-band" placeholder:"FIRST..LAST" help:"A new static band."`
	opFlag
	connFlags
}

func (c *rangeResizeCmd) Run(e *env) error {
	var band *client.Interval
	if c.Band != "" {
		var err error
		if band, err = parseInterval(c.Band); err != nil {
			return usageError(e, "--static-band %v", err)
		}
	}
	if c.First == nil && c.Last == nil && band == nil {
		return usageError(e, "give --first, --last or --static-band (an omitted bound keeps its value)")
	}
	if c.First != nil && c.Last != nil && *c.First > *c.Last {
		return usageError(e, "--first %d is above --last %d", *c.First, *c.Last)
	}
	return callAndShow(e, &c.connFlags, func(ctx context.Context, cl *client.Client) (*client.RangeResult, error) {
		return cl.ResizeRangeBounds(ctx, c.ID, c.First, c.Last, band, client.WithOperationID(c.Op))
	}, rangeView)
}

type poolResizeCmd struct {
	ID       string `arg:"" name:"pool-id" help:"The pool."`
	Capacity uint64 `name:"capacity" placeholder:"N" help:"The new capacity (> 0; never below reserved + active + consumed)."`
	opFlag
	connFlags
}

func (c *poolResizeCmd) Run(e *env) error {
	if c.Capacity == 0 {
		return usageError(e, "--capacity must be > 0")
	}
	return callAndShow(e, &c.connFlags, func(ctx context.Context, cl *client.Client) (*client.PoolResult, error) {
		return cl.ResizePool(ctx, c.ID, c.Capacity, client.WithOperationID(c.Op))
	}, poolView)
}

type poolHoldingsCmd struct {
	ID string `arg:"" name:"pool-id" help:"The pool."`
	pageFlags
	connFlags
}

func (c *poolHoldingsCmd) Run(e *env) error {
	return pages(e, &c.connFlags, &c.pageFlags, func(ctx context.Context, cl *client.Client, cursor string) (*client.LeasesResult, *client.Result, string, error) {
		res, err := cl.ListHoldings(ctx, c.ID, c.page(cursor))
		if err != nil {
			return nil, nil, "", err
		}
		return res, &res.Result, res.NextCursor, nil
	}, func(w io.Writer, res *client.LeasesResult) {
		for _, l := range res.Leases {
			fmt.Fprintln(w, leaseLine(l.Lease, 0))
		}
	})
}

type workListCmd struct {
	RunID  string `arg:"" name:"run-id" help:"The run."`
	Status string `name:"status" enum:",active,claimed,done,split,parked" default:"" help:"Only work shards of this status: active, claimed, done, split, parked."`
	pageFlags
	connFlags
}

func (c *workListCmd) Run(e *env) error {
	return pages(e, &c.connFlags, &c.pageFlags, func(ctx context.Context, cl *client.Client, cursor string) (*client.WorksResult, *client.Result, string, error) {
		res, err := cl.ListWork(ctx, c.RunID, c.Status, c.page(cursor))
		if err != nil {
			return nil, nil, "", err
		}
		return res, &res.Result, res.NextCursor, nil
	}, func(w io.Writer, res *client.WorksResult) {
		for _, wk := range res.Works {
			fmt.Fprintln(w, workLine(wk))
		}
	})
}

type leaseConsumeCmd struct {
	fenceFlags
	opFlag
	connFlags
}

func (leaseConsumeCmd) Help() string {
	return "A hold of pool units is used up for good: the lease ends consumed and its units\nleave the pool (only 'pool resize' gives it more)."
}

func (c *leaseConsumeCmd) Run(e *env) error {
	return holderRun(e, &c.fenceFlags, &c.connFlags, func(ctx context.Context, cl *client.Client, f client.Fence) (*client.LeaseResult, error) {
		return cl.Consume(ctx, c.Holder, f, client.WithOperationID(c.Op))
	})
}

type leaseImportCmd struct {
	File string `arg:"" name:"file" help:"A JSON array of leases ('-': standard input): {\"holder_id\", \"members\", \"activate\" or \"ttl_ms\", \"labels\"}, as lease.import's leases."`
	opFlag
	connFlags
}

func (leaseImportCmd) Help() string {
	return `Up to 1000 leases in one call, all or nothing, members of any placement keys (across
shards every lease lives on the shard of the first lease's first member).

Example file:
  [{"holder_id": "nova", "members": [{"range_id": "vxlan", "value": "42"}], "activate": true,
    "labels": {"owner_type": "instance", "owner_uuid": "5f1c"}}]`
}

func (c *leaseImportCmd) Run(e *env) error {
	var data []byte
	var err error
	if c.File == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(c.File)
	}
	if err != nil {
		return usageError(e, "%v", err)
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return usageError(e, "%s: a JSON array of leases: %v", c.File, err)
	}
	leases := make([]client.ImportLease, len(raw))
	for i, r := range raw {
		var m messages.ImportLease
		if err := messages.UnmarshalJSON(r, &m); err != nil {
			return usageError(e, "leases[%d]: %v", i, err)
		}
		leases[i] = client.ImportLease{Holder: m.HolderId, Members: m.Members, TTL: time.Duration(m.TtlMs) * time.Millisecond,
			Activate: m.Activate, KeepAlive: time.Duration(m.KeepaliveMs) * time.Millisecond, Labels: m.Labels}
	}
	return c.run(e, func(ctx context.Context, cl *client.Client) int {
		res, err := cl.Import(ctx, leases, client.WithOperationID(c.Op))
		if err != nil {
			return errorExit(e, err, c.JSON)
		}
		return printResult(e, &res.Result, c.JSON, func(w io.Writer) {
			if res.Item != nil {
				fmt.Fprintf(w, "failing lease: leases[%d]\n", *res.Item)
			}
			for _, l := range res.Leases {
				fmt.Fprintln(w, leaseLine(l.Lease, 0))
			}
		})
	})
}

// leaseBulkCmd is lease release-all and revoke-all.
type leaseBulkCmd struct {
	Label   string `name:"label" placeholder:"KEY=VALUE" help:"The label the leases carry (required)."`
	Holder  string `name:"holder" placeholder:"ID" help:"release-all: the holder (required)."`
	Reclaim bool   `name:"reclaim" help:"revoke-all: reclaim them too, so their members are free at once."`
	Limit   int    `name:"limit" help:"Leases per shard per call (server default 100, at most 1000)."`
	All     bool   `name:"all" help:"Call again while more carry the label."`
	opFlag
	connFlags
}

func (c *leaseBulkCmd) Run(e *env) error {
	revoke := strings.HasSuffix(e.cmd, " revoke-all")
	switch {
	case c.Label == "":
		return usageError(e, "--label is required")
	case !revoke && c.Holder == "":
		return usageError(e, "--holder is required")
	case revoke && c.Holder != "":
		return usageError(e, "--holder is release-all's: revoke-all revokes whoever holds them")
	case !revoke && c.Reclaim:
		return usageError(e, "--reclaim is revoke-all's")
	case c.All && c.Op != "":
		return usageError(e, "--all makes one call per step: give no --op")
	}
	return c.run(e, func(ctx context.Context, cl *client.Client) int {
		for {
			var res *client.BulkResult
			var err error
			op := client.WithOperationID(c.Op)
			if revoke {
				res, err = cl.RevokeAll(ctx, c.Label, c.Limit, c.Reclaim, op)
			} else {
				res, err = cl.ReleaseAll(ctx, c.Holder, c.Label, c.Limit, op)
			}
			if err != nil {
				return errorExit(e, err, c.JSON)
			}
			code := printResult(e, &res.Result, c.JSON, func(w io.Writer) {
				fmt.Fprintf(w, "%d lease(s), more=%v\n", res.Count, res.More)
				for _, l := range res.Leases {
					fmt.Fprintln(w, leaseLine(l.Lease, 0))
				}
			})
			if code != 0 || !res.More || !c.All {
				return code
			}
		}
	})
}
