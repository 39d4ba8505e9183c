package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/alecthomas/kong"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/cluster"
	"github.com/holdfast/holdfast/kernel"
)

// clusterConfigureCmd shows or changes the settings every node of a cluster serves under
// (docs/api.md §6): the admission limits and the shape every shard journals. Only the
// flags given change; with none it shows the settings.
type clusterConfigureCmd struct {
	MaxTTL        time.Duration `name:"max-ttl" placeholder:"D" help:"Largest ttl_ms and keepalive_ms accepted, at most 1h (takes effect for new requests)."`
	MaxBundle     int           `name:"max-bundle" placeholder:"N" help:"Members per lease (takes effect for new requests)."`
	DedupeWindow  time.Duration `name:"dedupe-window" placeholder:"D" help:"How long an operation's outcome is remembered (journaled: for what is remembered from now on)."`
	HistoryWindow time.Duration `name:"history-window" placeholder:"D" help:"How long an ended lease stays readable (journaled: for what ends from now on)."`
	MaxMemory     byteSize      `name:"max-memory" placeholder:"BYTES" help:"Sizes the operation and lease tables over all shards, as serve's --max-memory (journaled)."`
	MaxResources  int           `name:"max-resources" placeholder:"N" help:"Resources per shard (journaled: a lower bound keeps what a table holds and refuses new objects)."`
	MaxLeases     int           `name:"max-leases" placeholder:"N" help:"Leases per shard, with the tables that grow with them (journaled)."`
	MaxOperations int           `name:"max-operations" placeholder:"N" help:"Remembered operation outcomes per shard (journaled)."`
	MaxPools      int           `name:"max-pools" placeholder:"N" help:"Pools per shard (journaled)."`
	MaxRanges     int           `name:"max-ranges" placeholder:"N" help:"Value ranges per shard (journaled)."`
	connFlags
}

func (clusterConfigureCmd) Help() string {
	return `Shows, or with flags changes, the settings every node of a cluster (--journal
jetstream) serves under: the limits new requests are admitted under, at once on every
node, and the windows and table bounds every shard journals as it serves. A node's own
flags for them count only when it is the first of its cluster. A single process (--journal
file) takes them from its flags at its next start instead. Only the flags given change.`
}

func (c *clusterConfigureCmd) Run(e *env, kctx *kong.Context) error {
	if err := c.validate(); err != nil {
		return usageError(e, "%v", err)
	}
	explicit := explicitFlags(kctx)
	nc, err := c.dial(e.cmd)
	if err != nil {
		e.errorf("%v", err)
		return exitCode(exitConnect)
	}
	defer nc.Close()
	ctx, cancel := context.WithTimeout(e.ctx, c.Timeout)
	defer cancel()
	js, err := jetstream.New(nc)
	if err != nil {
		e.errorf("%v", err)
		return exitCode(exitConnect)
	}
	names := cluster.NamesFor(c.Prefix)
	kv, err := cluster.ExistingBucket(ctx, js, names)
	if err != nil {
		e.errorf("prefix %q: no cluster bucket %s (%v): is a Holdfast serving this prefix on this NATS?", c.Prefix, names.Bucket(), err)
		return exitCode(exitConnect)
	}
	reg, err := cluster.LoadRegistration(ctx, kv)
	if err != nil {
		e.errorf("prefix %q: its registry: %v", c.Prefix, err)
		return exitCode(exitConnect)
	}
	if reg.Journal != "jetstream" {
		e.errorf("prefix %q is served by node %q from its own data directory (--journal file): its settings are its serve flags, journaled at its next start", c.Prefix, reg.Node)
		return exitCode(exitUsage)
	}
	cur, err := cluster.LoadSettings(ctx, kv)
	if err != nil {
		e.errorf("prefix %q: the cluster's settings: %v", c.Prefix, err)
		return exitCode(exitConnect)
	}
	next, err := c.apply(cur, explicit, reg.Shards)
	if err != nil {
		return usageError(e, "%v", err)
	}
	if next == cur {
		c.show(e, cur, nil)
		return exitCode(exitOK)
	}
	done, err := cluster.UpdateSettings(ctx, kv, next, cur.Shape.Version)
	if errors.Is(err, jetstream.ErrKeyExists) || isWrongRevision(err) {
		e.errorf("the cluster's settings changed while this command ran: run it again")
		return exitCode(exitDomain)
	}
	if err != nil {
		e.errorf("%v", err)
		return exitCode(exitConnect)
	}
	c.show(e, done, cluster.SettingsDiff(done, cur))
	return exitCode(exitOK)
}

// isWrongRevision reports JetStream's "wrong last sequence" (10071): another update
// landed first.
func isWrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == 10071
}

// apply returns cur with the flags given, as serve turns them into settings.
func (c *clusterConfigureCmd) apply(cur cluster.Settings, explicit map[string]bool, shards uint32) (cluster.Settings, error) {
	next := cur
	l, s := &next.Limits, &next.Shape
	slot := time.Duration(s.SlotMillis) * time.Millisecond
	if explicit["max-ttl"] {
		if c.MaxTTL < time.Millisecond || c.MaxTTL%time.Millisecond != 0 || c.MaxTTL > kernel.MaxTTLMillisLimit*time.Millisecond {
			return next, fmt.Errorf("--max-ttl: whole milliseconds, between 1ms and 1h, got %v", c.MaxTTL)
		}
		l.MaxTTLMillis = uint64(c.MaxTTL / time.Millisecond)
	}
	if explicit["max-bundle"] {
		l.MaxBundle = c.MaxBundle
	}
	for _, w := range []struct {
		flag  string
		d     time.Duration
		slots *uint64
	}{{"dedupe-window", c.DedupeWindow, &s.DedupeWindowSlots}, {"history-window", c.HistoryWindow, &s.HistoryWindowSlots}} {
		if !explicit[w.flag] {
			continue
		}
		if w.d < slot {
			return next, fmt.Errorf("--%s: at least one slot (%v), got %v", w.flag, slot, w.d)
		}
		*w.slots = slotsCeil(w.d, slot)
	}
	if explicit["max-memory"] {
		if c.MaxMemory < 1<<20 {
			return next, fmt.Errorf("--max-memory: at least 1MiB, got %v", &c.MaxMemory)
		}
		s.SizeForMemory(uint64(c.MaxMemory) / uint64(max(shards, 1)))
	}
	sizeLeaseTables(s, explicit, c.MaxLeases, c.MaxOperations)
	for _, b := range []struct {
		flag string
		v    int
		dst  *int
	}{{"max-resources", c.MaxResources, &s.MaxResources}, {"max-pools", c.MaxPools, &s.MaxPools}, {"max-ranges", c.MaxRanges, &s.MaxRanges}} {
		if explicit[b.flag] {
			*b.dst = b.v
		}
	}
	if err := next.Validate(); err != nil {
		return next, err
	}
	return next, nil
}

// show prints the settings named like serve's flags, and what changed.
func (c *clusterConfigureCmd) show(e *env, s cluster.Settings, changed []string) {
	slot := time.Duration(s.Shape.SlotMillis) * time.Millisecond
	lines := []struct {
		name string
		v    any
	}{
		{"max-ttl", time.Duration(s.Limits.MaxTTLMillis) * time.Millisecond}, {"max-bundle", s.Limits.MaxBundle},
		{"slot", slot},
		{"dedupe-window", time.Duration(s.Shape.DedupeWindowSlots) * slot}, {"history-window", time.Duration(s.Shape.HistoryWindowSlots) * slot},
		{"max-resources", s.Shape.MaxResources}, {"max-pools", s.Shape.MaxPools}, {"max-ranges", s.Shape.MaxRanges},
		{"max-leases", s.Shape.MaxLeases}, {"max-members", s.Shape.MaxMembers}, {"max-operations", s.Shape.MaxOperations},
		{"max-expirations", s.Shape.MaxExpirations}, {"max-range-values", s.Shape.MaxRangeValues},
		{"max-runs", s.Shape.MaxRuns}, {"max-work", s.Shape.MaxWork},
	}
	if c.JSON {
		out := map[string]any{"revision": s.Shape.Version, "changed": changed}
		for _, l := range lines {
			if d, ok := l.v.(time.Duration); ok {
				out[strings.ReplaceAll(l.name, "-", "_")+"_ms"] = d.Milliseconds()
			} else {
				out[strings.ReplaceAll(l.name, "-", "_")] = l.v
			}
		}
		b, _ := json.Marshal(out)
		fmt.Fprintln(e.stdout, string(b))
		return
	}
	if changed != nil {
		fmt.Fprintf(e.stdout, "changed (revision %d): %s\n", s.Shape.Version, strings.Join(changed, ", "))
	} else {
		fmt.Fprintf(e.stdout, "settings (revision %d)\n", s.Shape.Version)
	}
	for _, l := range lines {
		fmt.Fprintf(e.stdout, "  %-17s %v\n", l.name, l.v)
	}
}
