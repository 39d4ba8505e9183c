package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/messages"
)

// bystander is a client of another tenant whose resource lives on the same shard as the
// load's first resource (the hot one in --scenario hotspot). It reserves and releases in a
// loop; every answer but ok is a refusal the load caused it, which must never happen: a
// storm of failing attempts, from any tenant, denies nobody (docs/api.md §4).
type bystander struct {
	w     *benchWorker
	res   []string
	subjR string
	subjX string
	codes map[string]uint64
}

func newBystander(ctx context.Context, cfg *benchConfig, nc *nats.Conn, hot, runID string, header nats.Header) (*bystander, error) {
	shards, err := serviceShards(nc, cfg.cf.Timeout)
	if err != nil {
		return nil, err
	}
	target := contract.ShardOf(cfg.cf.Tenant, contract.PlacementKey(hot), shards)
	var id string
	for i := 0; ; i++ {
		id = "bystander-" + strconv.Itoa(i)
		if contract.ShardOf(cfg.bystander, contract.PlacementKey(id), shards) == target {
			break
		}
	}
	cl, err := client.New(nc, client.WithPrefix(cfg.cf.Prefix), client.WithTenant(cfg.bystander), client.WithTimeout(cfg.cf.Timeout))
	if err != nil {
		return nil, err
	}
	res, err := cl.CreateResource(ctx, id)
	if err == nil && res.Code != messages.CodeOK && res.Code != messages.CodeAlreadyExists {
		err = fmt.Errorf("%s", res.Code)
	}
	if err != nil {
		return nil, fmt.Errorf("bystander resource: %w", err)
	}
	w := newBenchWorker(cfg, nc, header, "bystander-"+runID, "y"+runID+"-", rand.New(rand.NewPCG(1, 2)))
	return &bystander{w: w, res: []string{id}, codes: map[string]uint64{},
		subjR: client.Subject(cfg.cf.Prefix, cfg.bystander, "lease", "reserve"),
		subjX: client.Subject(cfg.cf.Prefix, cfg.bystander, "lease", "release")}, nil
}

// run cycles until deadline, one write at a time, and counts what it got.
func (b *bystander) run(ctx context.Context, deadline time.Time, live *liveCounters) {
	var mine liveCounters
	for ctx.Err() == nil && time.Now().Before(deadline) {
		b.w.cycle(b.subjR, b.subjX, b.res, &mine)
	}
	for _, m := range []map[string]uint64{b.w.reserveCodes, b.w.releaseCodes} {
		for code, n := range m {
			b.codes[code] += n
		}
	}
	live.bystanderRefused.Add(mine.failures.Load())
}

// serviceShards asks a Holdfast instance for its shard count (micro metadata "shards").
func serviceShards(nc *nats.Conn, timeout time.Duration) (uint32, error) {
	meta, err := serviceMetadata(nc, timeout)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(meta["shards"], 10, 32)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("service info: no shard count in %v", meta)
	}
	return uint32(n), nil
}
