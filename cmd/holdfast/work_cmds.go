package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/messages"
)

// The operator's side of work coordination (docs/api.md Part III): runs created, read and
// ended, work shards read and unparked. Workers use the Go client's Worker.

func init() {
	registerCLI("run", "create, read or end a run of work shards (create|get|complete|fail|cancel)", cmdRun)
	registerCLI("work", "read a work shard, or unpark a parked one (get|unpark)", cmdWork)
}

func cmdRun(e *env, args []string) int {
	return dispatch(e, "run", []subcommand{
		{"create", runCreate},
		{"get", runGet},
		{"complete", func(e *env, args []string) int { return runEnd(e, "complete", args) }},
		{"fail", func(e *env, args []string) int { return runEnd(e, "fail", args) }},
		{"cancel", func(e *env, args []string) int { return runEnd(e, "cancel", args) }},
	}, args)
}

// shardFlags collects --shard NAME=START..END (END empty: unbounded), in order.
type shardFlags []*messages.WorkSpec

func (s *shardFlags) String() string { return "" }

func (s *shardFlags) Set(v string) error {
	name, rng, ok := strings.Cut(v, "=")
	start, end, ok2 := strings.Cut(rng, "..")
	if !ok || !ok2 || name == "" {
		return fmt.Errorf("want NAME=START..END (END empty: unbounded), got %q", v)
	}
	*s = append(*s, client.Shard(name, []byte(start), []byte(end)))
	return nil
}

func runLine(r *messages.Run) string {
	s := fmt.Sprintf("run %s status=%s work=%d active=%d claimed=%d done=%d split=%d parked=%d", r.GetRunId(), r.GetStatus(),
		r.GetWork(), r.GetActive(), r.GetClaimed(), r.GetDone(), r.GetSplit(), r.GetParked())
	if r.GetReason() != "" {
		s += fmt.Sprintf(" reason=%q", r.GetReason())
	}
	return s
}

func workLine(w *messages.Work) string {
	s := fmt.Sprintf("work %s/%s [%q,%q) status=%s claims=%d", w.GetRunId(), w.GetName(), w.GetStart(), w.GetEnd(), w.GetStatus(), w.GetClaims())
	if w.GetLeaseId() != "" {
		s += fmt.Sprintf(" lease=%s epoch=%d", w.GetLeaseId(), w.GetLeaseEpoch())
	}
	if c := w.GetCursor(); c != nil {
		s += fmt.Sprintf(" cursor=%q", c.GetLastKey())
	}
	if len(w.GetChildren()) > 0 {
		s += " children=" + strings.Join(w.GetChildren(), ",")
	}
	if w.GetReason() != "" {
		s += fmt.Sprintf(" reason=%q", w.GetReason())
	}
	return s
}

func runCreate(e *env, args []string) int {
	c := newCall(e, "run create", "run create RUN --shard NAME=START..END ... [flags]",
		"Create a run with its work shards, each a key range [START, END) (END empty: unbounded):\n"+
			"  holdfast run create crawl-42 --shard a=a..m --shard b=m..")
	op := c.fs.String("op", "", "operation `id` (generated if absent; reuse it to retry)")
	var shards shardFlags
	c.fs.Var(&shards, "shard", "a work shard `NAME=START..END` (repeat it)")
	if code := c.prepare(args, 1, "run ID"); code >= 0 {
		return code
	}
	if len(shards) == 0 {
		return usageError(e, c.fs, "at least one --shard is required")
	}
	return c.run(func(ctx context.Context, cl *client.Client) int {
		return c.showRun(cl.CreateRun(ctx, c.pos[0], shards, client.WithOperationID(*op)))
	})
}

func runGet(e *env, args []string) int {
	c := newCall(e, "run get", "run get RUN [flags]", "Read a run: its status and its work shards counted by status.")
	var rf readFlags
	rf.register(c.fs)
	if code := c.prepare(args, 1, "run ID"); code >= 0 {
		return code
	}
	return c.run(func(ctx context.Context, cl *client.Client) int {
		return c.showRun(cl.GetRun(ctx, c.pos[0], rf.options(c.fs)...))
	})
}

func runEnd(e *env, verb string, args []string) int {
	c := newCall(e, "run "+verb, "run "+verb+" RUN [flags]",
		map[string]string{"complete": "Mark a run done: every work shard must be done or split.",
			"fail": "End a run as failed: nothing in it can be claimed any more.", "cancel": "End a run as cancelled: nothing in it can be claimed any more."}[verb])
	op := c.fs.String("op", "", "operation `id` (generated if absent; reuse it to retry)")
	reason := c.fs.String("reason", "", "why (fail, cancel)")
	if code := c.prepare(args, 1, "run ID"); code >= 0 {
		return code
	}
	return c.run(func(ctx context.Context, cl *client.Client) int {
		var res *client.RunResult
		var err error
		switch verb {
		case "complete":
			res, err = cl.CompleteRun(ctx, c.pos[0], client.WithOperationID(*op))
		case "fail":
			res, err = cl.FailRun(ctx, c.pos[0], *reason, client.WithOperationID(*op))
		default:
			res, err = cl.CancelRun(ctx, c.pos[0], *reason, client.WithOperationID(*op))
		}
		return c.showRun(res, err)
	})
}

func cmdWork(e *env, args []string) int {
	return dispatch(e, "work", []subcommand{
		{"get", workGet},
		{"unpark", workUnpark},
	}, args)
}

func workGet(e *env, args []string) int {
	c := newCall(e, "work get", "work get RUN NAME [flags]", "Read a work shard: range, status, claim (lease id and epoch, never the holder), cursor.")
	var rf readFlags
	rf.register(c.fs)
	if code := c.prepare(args, 2, "run ID and work shard name"); code >= 0 {
		return code
	}
	return c.run(func(ctx context.Context, cl *client.Client) int {
		return c.showWork(cl.GetWork(ctx, c.pos[0], c.pos[1], rf.options(c.fs)...))
	})
}

func workUnpark(e *env, args []string) int {
	c := newCall(e, "work unpark", "work unpark RUN NAME [flags]", "Make a parked work shard claimable again (an operator's verb).")
	op := c.fs.String("op", "", "operation `id` (generated if absent; reuse it to retry)")
	if code := c.prepare(args, 2, "run ID and work shard name"); code >= 0 {
		return code
	}
	return c.run(func(ctx context.Context, cl *client.Client) int {
		return c.showWork(cl.Unpark(ctx, c.pos[0], c.pos[1], client.WithOperationID(*op)))
	})
}

// showRun prints a run reply, or the error that kept it from coming.
func (c *call) showRun(res *client.RunResult, err error) int {
	if err != nil {
		return errorExit(c.e, err, c.cf.json)
	}
	return c.show(&res.Result, res.Run != nil, func() string { return runLine(res.Run) })
}

// showWork prints a work shard reply, or the error that kept it from coming.
func (c *call) showWork(res *client.WorkResult, err error) int {
	if err != nil {
		return errorExit(c.e, err, c.cf.json)
	}
	return c.show(&res.Result, res.Work != nil, func() string { return workLine(res.Work) })
}
