package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/backup"
	"github.com/holdfast/holdfast/bridge"
	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/cluster"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/events"
	"github.com/holdfast/holdfast/kernel"
)

// snapshotCmd is backup and restore (docs/operations.md "Backup and restore").
type snapshotCmd struct {
	Save    snapshotSaveCmd    `cmd:"" help:"Copy a running service into FILE: every shard at one consistent cut, taken while it serves."`
	Status  snapshotStatusCmd  `cmd:"" help:"Check a copy (every checksum) and print what it holds."`
	Restore snapshotRestoreCmd `cmd:"" help:"Make a data directory (--data) that serves what a copy holds."`
}

type snapshotSaveCmd struct {
	File string        `arg:"" name:"file" help:"Where to write the copy (written beside, then renamed)."`
	Hold time.Duration `default:"10s" help:"How long each shard may hold its bundle steps for the copy (one-shard writes never wait)."`
	connFlags
}

func (c *snapshotSaveCmd) Run(e *env) error {
	if c.Hold <= 0 || c.Hold > time.Minute {
		return usageError(e, "--hold must be positive, at most 1m")
	}
	return c.run(e, func(ctx context.Context, cl *client.Client) int {
		shards, err := cl.ShardCount()
		if err != nil {
			e.errorf("asking the service its shard count: %v", err)
			return exitConnect
		}
		slot, err := cl.SlotLength(ctx)
		if err != nil {
			e.errorf("asking the service its slot length: %v", err)
			return exitConnect
		}
		start := time.Now()
		cp, err := backup.Save(ctx, cl.Conn(), backup.SaveOptions{Prefix: c.Prefix, Shards: shards, SlotMs: uint64(slot / time.Millisecond),
			Version: bridge.Version, Hold: c.Hold, Timeout: c.Timeout})
		if err == nil {
			err = backup.WriteFile(c.File, cp)
		}
		if err != nil {
			e.errorf("%v", err)
			return exitDomain
		}
		fmt.Fprintf(e.stderr, "holdfast snapshot: saved %d shards to %s in %v\n", shards, c.File, time.Since(start).Round(time.Millisecond))
		return printCopy(e, cp, c.JSON)
	})
}

type snapshotStatusCmd struct {
	File string `arg:"" name:"file" help:"The copy."`
	JSON bool   `name:"json" help:"Print the header and counts as JSON."`
}

func (c *snapshotStatusCmd) Run(e *env) error {
	cp, err := backup.ReadFile(c.File)
	if err != nil {
		e.errorf("%v", err)
		return exitCode(exitDomain)
	}
	return exitCode(printCopy(e, cp, c.JSON))
}

type snapshotRestoreCmd struct {
	File      string `arg:"" name:"file" help:"The copy."`
	Data      string `placeholder:"DIR" help:"The data directory to make (missing or empty); then: holdfast serve --data DIR."`
	JetStream bool   `name:"jetstream" help:"Restore into the JetStream of --server instead, under --prefix (never served yet); then: holdfast serve --nats URL --journal jetstream."`
	Replicas  int    `default:"1" help:"With --jetstream: the replicas of the snapshot store and cluster bucket (3 for a three-node cluster, as its --replicas)."`
	Layout    string `name:"journal-layout" default:"streams" enum:"feed,streams" help:"With --jetstream: how the cluster keeps its journals (as serve's --journal-layout): feed (on the shards' subjects of HOLDFAST_EVENTS, when that stream allows purges) or streams (a stream per journal)."`
	connFlags
}

func (c *snapshotRestoreCmd) Run(e *env) error {
	if (c.Data == "") == !c.JetStream {
		return usageError(e, "give --data DIR, or --jetstream (with --server)")
	}
	if c.Replicas != 1 && c.Replicas != 3 {
		return usageError(e, "--replicas: 1 or 3")
	}
	cp, err := backup.ReadFile(c.File)
	if err == nil {
		_, err = copyKernels(cp) // every part rebuilds and the cut is whole, wherever it goes
	}
	if err != nil {
		e.errorf("%v", err)
		return exitCode(exitDomain)
	}
	if c.JetStream {
		return c.intoJetStream(e, cp)
	}
	if err := restoreDataDir(cp, c.Data); err != nil {
		e.errorf("%v", err)
		return exitCode(exitDomain)
	}
	fmt.Fprintf(e.stderr, "holdfast snapshot: restored %d shards into %s; start it with: holdfast serve --data %s\n", cp.Shards, c.Data, c.Data)
	return nil
}

// intoJetStream restores a checked copy into --server's JetStream for a cluster to start
// from.
func (c *snapshotRestoreCmd) intoJetStream(e *env, cp *backup.Copy) error {
	return c.run(e, func(ctx context.Context, cl *client.Client) int {
		js, err := jetstream.New(cl.Conn())
		if err != nil {
			e.errorf("%v", err)
			return exitConnect
		}
		shards := make([]cluster.RestoredShard, len(cp.States))
		for k, st := range cp.States {
			shards[k] = cluster.RestoredShard{LSN: cp.Parts[k].LSN, Slot: cp.Parts[k].Slot, State: st}
		}
		format := uint32(cluster.FeedFormat - 1)
		if c.Layout == "feed" {
			if holds, err := events.StreamHoldsJournals(ctx, js); err != nil {
				e.errorf("%v", err)
				return exitDomain
			} else if !holds {
				e.errorf("--journal-layout feed: the %s stream was created by an earlier Holdfast and denies purges, so it cannot hold journals", contract.StreamName)
				return exitDomain
			}
			format = cluster.DataFormat
		}
		if err := cluster.Restore(ctx, js, c.Prefix, c.Replicas, cp.SlotMs, format, shards); err != nil {
			e.errorf("%v", err)
			return exitDomain
		}
		fmt.Fprintf(e.stderr, "holdfast snapshot: restored %d shards under prefix %s into JetStream; start the nodes with: holdfast serve --nats URL --journal jetstream --shards %d --slot %v --replicas %d\n",
			cp.Shards, c.Prefix, cp.Shards, time.Duration(cp.SlotMs)*time.Millisecond, c.Replicas)
		return exitOK
	})
}

// restoreDataDir makes dir a data directory that starts where a checked copy
// (copyKernels) was taken: its layout (shard count, slot length), and each shard's state
// as its snapshot, with an empty journal that continues after it and nothing left to
// publish before it. The process that starts on it expires on its own clock what passed
// meanwhile.
func restoreDataDir(cp *backup.Copy, dir string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return fmt.Errorf("%s is not empty: restore makes a new data directory", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for k, st := range cp.States {
		sd := actors.ShardDir(dir, uint32(k))
		if err := os.MkdirAll(sd, 0o755); err != nil {
			return err
		}
		fs := actors.FileStorage{Dir: sd}
		p := cp.Parts[k]
		if err := fs.WritePublished(p.LSN); err != nil {
			return err
		}
		if err := fs.WriteSnapshot(p.LSN, p.Slot, st); err != nil {
			return err
		}
	}
	// The layout last: a directory without it is not taken for a restored one.
	return writeLayout(dir, serveLayout{Format: serveLayoutV1, Shards: cp.Shards, SlotMillis: cp.SlotMs})
}

// copyKernels rebuilds every shard of a copy, which checks each part whole, and checks
// that together they tear no bundle across shards.
func copyKernels(cp *backup.Copy) ([]*kernel.Kernel, error) {
	ks := make([]*kernel.Kernel, len(cp.States))
	for k, st := range cp.States {
		cfg := kernel.DefaultConfig()
		cfg.Shard = uint32(k)
		var err error
		if ks[k], err = kernel.Restore(cfg, st); err != nil {
			return nil, fmt.Errorf("shard %d's part does not rebuild: %w", k, err)
		}
	}
	if err := kernel.CheckCut(ks); err != nil {
		return nil, fmt.Errorf("the copy tears a bundle across shards: %w", err)
	}
	return ks, nil
}

// copyCounts is what a copy's shard holds.
type copyCounts struct {
	Shard     uint32 `json:"shard"`
	LSN       uint64 `json:"lsn"`
	Slot      uint64 `json:"slot"`
	Bytes     int64  `json:"bytes"`
	Leases    int    `json:"leases"` // live
	Resources int    `json:"resources"`
	Pools     int    `json:"pools"`
	Ranges    int    `json:"ranges"`
	Runs      int    `json:"runs"`
	Bundles   int    `json:"undecided_bundles"`
}

// printCopy prints a copy's header and what each shard holds (rebuilding each, which
// checks it, and the cut across them).
func printCopy(e *env, cp *backup.Copy, asJSON bool) int {
	ks, err := copyKernels(cp)
	if err != nil {
		e.errorf("%v", err)
		return exitDomain
	}
	counts := make([]copyCounts, len(ks))
	for k, kn := range ks {
		s := kn.Stats()
		p := cp.Parts[k]
		counts[k] = copyCounts{Shard: uint32(k), LSN: p.LSN, Slot: p.Slot, Bytes: p.Size, Leases: s.Reserved + s.Active + s.Revoking,
			Resources: s.Resources, Pools: s.Pools, Ranges: s.Ranges, Runs: s.Runs, Bundles: kn.UndecidedBundles()}
	}
	if asJSON {
		out, _ := json.MarshalIndent(struct {
			backup.Header
			Counts []copyCounts `json:"counts"`
		}{cp.Header, counts}, "", "  ")
		fmt.Fprintf(e.stdout, "%s\n", out)
		return exitOK
	}
	fmt.Fprintf(e.stdout, "format %d, taken %s by holdfast %s, prefix %s, %d shards, slot %v\n",
		cp.Format, cp.Taken.Format(time.RFC3339), cp.Version, cp.Prefix, cp.Shards, time.Duration(cp.SlotMs)*time.Millisecond)
	tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SHARD\tLSN\tSLOT\tBYTES\tLEASES\tRESOURCES\tPOOLS\tRANGES\tRUNS\tUNDECIDED")
	var total copyCounts
	for _, c := range counts {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", c.Shard, c.LSN, c.Slot, c.Bytes, c.Leases, c.Resources, c.Pools, c.Ranges, c.Runs, c.Bundles)
		total.Bytes += c.Bytes
		total.Leases += c.Leases
		total.Resources += c.Resources
		total.Pools += c.Pools
		total.Ranges += c.Ranges
		total.Runs += c.Runs
		total.Bundles += c.Bundles
	}
	fmt.Fprintf(tw, "all\t\t\t%d\t%d\t%d\t%d\t%d\t%d\t%d\n", total.Bytes, total.Leases, total.Resources, total.Pools, total.Ranges, total.Runs, total.Bundles)
	tw.Flush()
	return exitOK
}
