package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/alecthomas/kong"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/messages"
)

// The operator's side of work coordination (docs/api.md Part III): runs created, read and
// ended, work shards read and unparked. Workers use the Go client's Worker.

type runCmd struct {
	Create   runCreateCmd  `cmd:"" help:"Create a run with its work shards."`
	Register runCreateCmd  `cmd:"" help:"Add work shards to an active run."`
	Get      runGetCmd     `cmd:"" help:"Read a run: its status and its work shards counted by status."`
	Complete runEndCmd     `cmd:"" help:"Mark a run done: every work shard must be done or split."`
	Fail     runEndCmd     `cmd:"" help:"End a run as failed: nothing in it can be claimed any more."`
	Cancel   runEndCmd     `cmd:"" help:"End a run as cancelled: nothing in it can be claimed any more."`
	Delete   deleteCmd     `cmd:"" help:"Delete an ended run with all its work shards, once none is claimed."`
	List     objectListCmd `cmd:"" help:"List runs by id prefix, a page at a time."`
}

type workCmd struct {
	Get           workGetCmd      `cmd:"" help:"Read a work shard: range, status, claim (lease id and epoch, never the holder), cursor."`
	List          workListCmd     `cmd:"" help:"List a run's work shards in creation order (--status to select)."`
	Unpark        workUnparkCmd   `cmd:"" help:"Make a parked work shard claimable again (an operator's verb)."`
	Checkpoint    workFencedCmd   `cmd:"" help:"Move a claimed work shard's cursor forward (--key, --token)."`
	Complete      workFencedCmd   `cmd:"" help:"Mark a claimed work shard done (optionally with a last --key); the claim ends."`
	Park          workFencedCmd   `cmd:"" help:"Park a claimed work shard for an operator (--reason); the claim ends."`
	SplitReplace  workSplitCmd    `cmd:"" name:"split-replace" help:"Replace a claimed work shard by children covering what is left (--child START..END, repeated); the claim ends."`
	SplitResidual workResidualCmd `cmd:"" name:"split-residual" help:"Keep [start, --at) under the claim and make [--at, end) a new work shard."`
}

// workFencedCmd is work checkpoint, complete and park: fenced by the claim; the verb is
// the command's name. Workers use the Go client's Worker; these are for operators and
// scripts.
type workFencedCmd struct {
	fenceFlags
	Key    *string `name:"key" help:"The cursor's last key (checkpoint: required; complete: optional)."`
	Token  string  `name:"cursor-token" help:"The cursor's token."`
	Reason string  `name:"reason" help:"Why (park)."`
	opFlag
	connFlags
}

func (c *workFencedCmd) Run(e *env) error {
	fence, msg := c.resolve()
	if msg != "" {
		return usageError(e, "%s", msg)
	}
	verb := e.cmd[strings.LastIndexByte(e.cmd, ' ')+1:]
	if verb == "checkpoint" && c.Key == nil {
		return usageError(e, "--key is required")
	}
	return callAndShow(e, &c.connFlags, func(ctx context.Context, cl *client.Client) (*client.WorkResult, error) {
		op := client.WithOperationID(c.Op)
		switch verb {
		case "checkpoint":
			return cl.Checkpoint(ctx, c.Holder, fence, []byte(*c.Key), []byte(c.Token), op)
		case "complete":
			var cur *messages.Cursor
			if c.Key != nil {
				cur = &messages.Cursor{LastKey: []byte(*c.Key), Token: []byte(c.Token)}
			}
			return cl.CompleteWork(ctx, c.Holder, fence, cur, op)
		}
		return cl.Park(ctx, c.Holder, fence, c.Reason, op)
	}, workView)
}

type workSplitCmd struct {
	fenceFlags
	Children []string `name:"child" placeholder:"START..END" help:"A child range (END empty: unbounded); repeat it, 2 to 16."`
	opFlag
	connFlags
}

func (c *workSplitCmd) Run(e *env) error {
	fence, msg := c.resolve()
	if msg != "" {
		return usageError(e, "%s", msg)
	}
	var children []*messages.KeyRange
	for _, ch := range c.Children {
		start, end, ok := strings.Cut(ch, "..")
		if !ok {
			return usageError(e, "--child: want START..END, got %q", ch)
		}
		children = append(children, &messages.KeyRange{Start: []byte(start), End: []byte(end)})
	}
	return callAndShow(e, &c.connFlags, func(ctx context.Context, cl *client.Client) (*client.WorkResult, error) {
		return cl.SplitReplace(ctx, c.Holder, fence, children, client.WithOperationID(c.Op))
	}, workView)
}

type workResidualCmd struct {
	fenceFlags
	At string `name:"at" required:"" placeholder:"KEY" help:"The split key: the claim keeps [start, KEY), a new work shard takes [KEY, end)."`
	opFlag
	connFlags
}

func (c *workResidualCmd) Run(e *env) error {
	fence, msg := c.resolve()
	if msg != "" {
		return usageError(e, "%s", msg)
	}
	return callAndShow(e, &c.connFlags, func(ctx context.Context, cl *client.Client) (*client.WorkResult, error) {
		return cl.SplitResidual(ctx, c.Holder, fence, []byte(c.At), client.WithOperationID(c.Op))
	}, workView)
}

// shardFlags collects --shard NAME=START..END (END empty: unbounded), in order.
type shardFlags []*messages.WorkSpec

// Decode is kong's hook for one --shard.
func (s *shardFlags) Decode(ctx *kong.DecodeContext) error {
	var v string
	if err := ctx.Scan.PopValueInto("shard", &v); err != nil {
		return err
	}
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

type runCreateCmd struct {
	ID     string     `arg:"" name:"run-id" help:"The run."`
	Shards shardFlags `name:"shard" placeholder:"NAME=START..END" help:"A work shard, the key range [START, END) (END empty: unbounded); repeat it."`
	opFlag
	connFlags
}

func (runCreateCmd) Help() string {
	return "Example:\n  holdfast run create crawl-42 --shard a=a..m --shard b=m.."
}

// Run is run create and run register: the verb is the command's name.
func (c *runCreateCmd) Run(e *env) error {
	if len(c.Shards) == 0 {
		return usageError(e, "at least one --shard is required")
	}
	register := strings.HasSuffix(e.cmd, "register")
	return callAndShow(e, &c.connFlags, func(ctx context.Context, cl *client.Client) (*client.RunResult, error) {
		if register {
			return cl.RegisterRun(ctx, c.ID, c.Shards, client.WithOperationID(c.Op))
		}
		return cl.CreateRun(ctx, c.ID, c.Shards, client.WithOperationID(c.Op))
	}, runView)
}

type runGetCmd struct {
	ID string `arg:"" name:"run-id" help:"The run."`
	readFlags
	connFlags
}

func (c *runGetCmd) Run(e *env) error {
	return callAndShow(e, &c.connFlags, func(ctx context.Context, cl *client.Client) (*client.RunResult, error) {
		return cl.GetRun(ctx, c.ID, c.options()...)
	}, runView)
}

// runEndCmd is run complete, fail and cancel: the verb is the command's name.
type runEndCmd struct {
	ID     string `arg:"" name:"run-id" help:"The run."`
	Reason string `name:"reason" help:"Why (fail, cancel)."`
	opFlag
	connFlags
}

func (c *runEndCmd) Run(e *env) error {
	verb := e.cmd[strings.LastIndexByte(e.cmd, ' ')+1:]
	return callAndShow(e, &c.connFlags, func(ctx context.Context, cl *client.Client) (*client.RunResult, error) {
		switch verb {
		case "complete":
			return cl.CompleteRun(ctx, c.ID, client.WithOperationID(c.Op))
		case "fail":
			return cl.FailRun(ctx, c.ID, c.Reason, client.WithOperationID(c.Op))
		}
		return cl.CancelRun(ctx, c.ID, c.Reason, client.WithOperationID(c.Op))
	}, runView)
}

type workGetCmd struct {
	RunID string `arg:"" name:"run-id" help:"The run."`
	Name  string `arg:"" name:"name" help:"The work shard."`
	readFlags
	connFlags
}

func (c *workGetCmd) Run(e *env) error {
	return callAndShow(e, &c.connFlags, func(ctx context.Context, cl *client.Client) (*client.WorkResult, error) {
		return cl.GetWork(ctx, c.RunID, c.Name, c.options()...)
	}, workView)
}

type workUnparkCmd struct {
	RunID string `arg:"" name:"run-id" help:"The run."`
	Name  string `arg:"" name:"name" help:"The work shard."`
	opFlag
	connFlags
}

func (c *workUnparkCmd) Run(e *env) error {
	return callAndShow(e, &c.connFlags, func(ctx context.Context, cl *client.Client) (*client.WorkResult, error) {
		return cl.Unpark(ctx, c.RunID, c.Name, client.WithOperationID(c.Op))
	}, workView)
}

func runView(r *client.RunResult) view { return view{&r.Result, runLine(r.Run), r.Run != nil} }

func workView(r *client.WorkResult) view { return view{&r.Result, workLine(r.Work), r.Work != nil} }
