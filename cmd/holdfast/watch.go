package main

import (
	"context"
	"fmt"
	"time"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/messages"
)

func init() {
	registerCLI("watch", "follow events live, or replay them from the event stream", cmdWatch)
}

const watchAbout = `Print one line per event (the event's JSON with --json), following live events
on <prefix>.v1.<tenant>.events.<filter>, or replaying them from the JetStream
stream HOLDFAST_EVENTS with --from-start, --since or --seq and then following
it live. Stops on Ctrl-C, after --count events or after --for.

Exit codes: 0 stopped normally, 1 the watch failed (no stream, lost events,
bad payload), 2 usage error, 5 cannot connect.`

func cmdWatch(e *env, args []string) int {
	fs := newFlagSet(e, "watch", "watch [flags]", watchAbout)
	var cf connFlags
	cf.register(fs)
	filter := fs.String("filter", ">", "events to follow: the subject part after events., e.g. lease.> or lease.expired")
	allTenants := fs.Bool("all-tenants", false, "follow every tenant, not only --tenant")
	fromStart := fs.Bool("from-start", false, "replay the whole stream, then follow it")
	since := fs.Duration("since", 0, "replay the events of this last `duration`, then follow")
	seq := fs.Uint64("seq", 0, "replay from this stream sequence `N`, then follow")
	count := fs.Int("count", 0, "stop after N events (0: no limit)")
	forD := fs.Duration("for", 0, "stop after this `duration` (0: until interrupted)")
	pos, code := parseArgs(e, fs, args)
	if code >= 0 {
		return code
	}
	if len(pos) > 0 {
		return usageError(e, fs, "unexpected arguments: %v", pos)
	}
	if err := cf.validate(); err != nil {
		return usageError(e, fs, "%v", err)
	}
	n := 0
	for _, set := range []bool{*fromStart, *since > 0, *seq > 0} {
		if set {
			n++
		}
	}
	if n > 1 {
		return usageError(e, fs, "give at most one of --from-start, --since, --seq")
	}
	if *since < 0 || *count < 0 || *forD < 0 {
		return usageError(e, fs, "--since, --count and --for must not be negative")
	}
	opts := client.WatchOptions{Filter: *filter, AllTenants: *allTenants, FromStart: *fromStart, StartSeq: *seq}
	if *since > 0 {
		opts.StartTime = time.Now().Add(-*since)
	}

	nc, cl, code, err := cf.connect("watch")
	if err != nil {
		e.errorf("%v", err)
		return code
	}
	defer nc.Close()
	ctx := e.ctx
	if *forD > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *forD)
		defer cancel()
	}
	w, err := cl.Watch(ctx, opts)
	if err != nil {
		e.errorf("%v", err)
		return exitDomain
	}
	defer w.Stop()
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
					return exitDomain
				}
				return exitOK
			}
			ev = x
		}
		if cf.json {
			b, err := messages.MarshalJSON(ev.Event)
			if err != nil {
				e.errorf("encode event: %v", err)
				return exitDomain
			}
			fmt.Fprintf(e.stdout, "%s\n", b)
		} else {
			fmt.Fprintln(e.stdout, eventLine(ev))
		}
		seen++
		if ev.CaughtUp {
			fmt.Fprintf(e.stderr, "holdfast watch: replayed %d event(s); following live events\n", seen)
		}
		if *count > 0 && seen >= *count {
			return exitOK
		}
	}
}
