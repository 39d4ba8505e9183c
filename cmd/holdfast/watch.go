package main

import (
	"context"
	"fmt"
	"time"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/messages"
)

type watchCmd struct {
	Filter     string        `name:"filter" default:">" help:"Events to follow: the subject part after events., e.g. lease.> or lease.expired."`
	AllTenants bool          `name:"all-tenants" help:"Follow every tenant, not only --tenant."`
	FromStart  bool          `name:"from-start" help:"Replay the whole stream, then follow it."`
	Since      time.Duration `name:"since" placeholder:"DURATION" help:"Replay the events of this last duration, then follow."`
	Seq        uint64        `name:"seq" placeholder:"N" help:"Replay from this stream sequence, then follow."`
	Count      int           `name:"count" help:"Stop after N events (0: no limit)."`
	For        time.Duration `name:"for" placeholder:"DURATION" help:"Stop after this long (0: until interrupted)."`
	connFlags
}

func (watchCmd) Help() string {
	return `Print one line per event (the event's JSON with --json), following live events
on <prefix>.v1.<tenant>.events.<filter>, or replaying them from the JetStream
stream HOLDFAST_EVENTS with --from-start, --since or --seq and then following
it live. Stops on Ctrl-C, after --count events or after --for.`
}

const watchExitCodes = `Exit codes: 0 stopped normally, 1 the watch failed (no stream, lost events,
bad payload), 2 usage error, 5 cannot connect.
`

func (c *watchCmd) Run(e *env) error {
	opts, err := c.options(e)
	if err != nil {
		return err
	}

	nc, cl, code, err := c.connect("watch")
	if err != nil {
		e.errorf("%v", err)
		return exitCode(code)
	}
	defer nc.Close()
	ctx := e.ctx
	if c.For > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.For)
		defer cancel()
	}
	var slot time.Duration
	if !c.JSON {
		slot = slotLength(e, cl)
	}
	w, err := cl.Watch(ctx, opts)
	if err != nil {
		e.errorf("%v", err)
		return exitCode(exitDomain)
	}
	defer w.Stop()
	return c.follow(e, w, opts, slot)
}

// options checks the flags and makes the watch's options.
func (c *watchCmd) options(e *env) (client.WatchOptions, error) {
	if err := c.validate(); err != nil {
		return client.WatchOptions{}, usageError(e, "%v", err)
	}
	n := 0
	for _, set := range []bool{c.FromStart, c.Since > 0, c.Seq > 0} {
		if set {
			n++
		}
	}
	if n > 1 {
		return client.WatchOptions{}, usageError(e, "give at most one of --from-start, --since, --seq")
	}
	if c.Since < 0 || c.Count < 0 || c.For < 0 {
		return client.WatchOptions{}, usageError(e, "--since, --count and --for must not be negative")
	}
	opts := client.WatchOptions{Filter: c.Filter, AllTenants: c.AllTenants, FromStart: c.FromStart, StartSeq: c.Seq}
	if c.Since > 0 {
		opts.StartTime = time.Now().Add(-c.Since)
	}
	return opts, nil
}

// follow prints the watch's events until --count, the watch's end or an error.
func (c *watchCmd) follow(e *env, w *client.Watcher, opts client.WatchOptions, slot time.Duration) error {
	seen := 0
	replaying := opts.FromStart || opts.StartSeq > 0 || !opts.StartTime.IsZero()
	empty := w.Empty()
	if !replaying {
		empty = nil
	}
	events := w.Events()
	for {
		var ev client.Event
		select {
		case <-empty:
			fmt.Fprintln(e.stderr, "holdfast watch: nothing to replay; following live events")
			empty = nil
			continue
		case x, ok := <-events:
			if !ok {
				if err := w.Err(); err != nil {
					e.errorf("%v", err)
					return exitCode(exitDomain)
				}
				return nil
			}
			ev = x
		}
		if c.JSON {
			b, err := messages.MarshalJSON(ev.Event)
			if err != nil {
				e.errorf("encode event: %v", err)
				return exitCode(exitDomain)
			}
			fmt.Fprintf(e.stdout, "%s\n", b)
		} else {
			fmt.Fprintln(e.stdout, eventLine(ev, slot))
		}
		seen++
		if ev.CaughtUp {
			fmt.Fprintf(e.stderr, "holdfast watch: replayed %d event(s); following live events\n", seen)
		}
		if c.Count > 0 && seen >= c.Count {
			return nil
		}
	}
}
