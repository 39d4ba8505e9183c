package main

import (
	"fmt"
	"io"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/messages"
)

// --by-shard: each client works on the resources of one shard only (client i on shard
// i mod S), and the report gives every shard its own requests, failures and latency. A
// closed loop over all resources measures a node's loss badly: every client ends up
// waiting on a request to the lost node's shards, and the survivors' shards look idle.
// Pinned, the clients of the survivors' shards go on, and their failures and p99 say
// what the loss cost the shards that did not move (docs/benchmarks.md "Losing a machine").

// shardReport is one shard's part of a --by-shard run.
type shardReport struct {
	Shard    uint32            `json:"shard"`
	Clients  int               `json:"clients"`
	Requests uint64            `json:"requests"`
	Failures uint64            `json:"failures"` // answers other than ok and resource_busy
	Codes    map[string]uint64 `json:"codes"`
	Latency  verbReport        `json:"latency"` // reserves and releases together
}

// shardResources splits resources by the shard each is placed on (the client's own
// placement), over the service's shard count.
func shardResources(tenant string, resources []string, shards uint32) [][]string {
	by := make([][]string, shards)
	for _, r := range resources {
		req := &messages.ReserveRequest{Members: []*messages.Member{{ResourceId: r}}}
		k, ok := client.PlaceRequest(tenant, req, shards)
		if ok {
			by[k] = append(by[k], r)
		}
	}
	return by
}

// pinWorkers gives client i the resources of shard i mod S (skipping shards without
// any), and says which shard each client is on.
func pinWorkers(by [][]string, clients int) (resources [][]string, shard []uint32) {
	var ks []uint32
	for k, rs := range by {
		if len(rs) > 0 {
			ks = append(ks, uint32(k))
		}
	}
	resources, shard = make([][]string, clients), make([]uint32, clients)
	for i := range clients {
		k := ks[i%len(ks)]
		resources[i], shard[i] = by[k], k
	}
	return resources, shard
}

// shardReports sums the workers' outcomes by the shard each was pinned to.
func shardReports(workers []*benchWorker, shard []uint32, shards uint32) []shardReport {
	hists := make([]histogram, shards)
	reps := make([]shardReport, shards)
	for i, w := range workers {
		k := shard[i]
		r := &reps[k]
		r.Shard = k
		r.Clients++
		if r.Codes == nil {
			r.Codes = map[string]uint64{}
		}
		hists[k].merge(&w.reserveLat)
		hists[k].merge(&w.releaseLat)
		for _, codes := range []map[string]uint64{w.reserveCodes, w.releaseCodes} {
			for c, n := range codes {
				r.Codes[c] += n
				r.Requests += n
				if c != messages.CodeOK && c != messages.CodeResourceBusy {
					r.Failures += n
				}
			}
		}
	}
	var out []shardReport
	for k := range reps {
		if reps[k].Clients > 0 {
			reps[k].Latency = verbOf("shard "+strconv.Itoa(k), &hists[k])
			out = append(out, reps[k])
		}
	}
	return out
}

func printShards(w io.Writer, shards []shardReport) {
	fmt.Fprintf(w, "  %-6s %7s %10s %9s %9s %9s %9s  %s\n", "shard", "clients", "requests", "failures", "p50", "p99", "max", "codes")
	for _, s := range shards {
		fmt.Fprintf(w, "  %-6d %7d %10d %9d %9s %9s %9s  %s\n", s.Shard, s.Clients, s.Requests, s.Failures,
			fmtDur(s.Latency.P50), fmtDur(s.Latency.P99), fmtDur(s.Latency.Max), formatCodes(s.Codes))
	}
}

// pinBench is --by-shard's split of the resources between the clients (nil without it):
// over the shards the service routes by, or its metadata's count.
func pinBench(cfg *benchConfig, nc *nats.Conn, route *benchRoute, resources []string) ([][]string, []uint32, uint32, error) {
	if !cfg.byShard {
		return nil, nil, 0, nil
	}
	var shards uint32
	if route != nil {
		shards = route.shards
	} else {
		meta, err := serviceMetadata(nc, cfg.cf.Timeout)
		if err != nil {
			return nil, nil, 0, err
		}
		n, err := strconv.ParseUint(meta["shards"], 10, 32)
		if err != nil || n == 0 {
			return nil, nil, 0, fmt.Errorf("--by-shard: the service did not say its shard count (%q)", meta["shards"])
		}
		shards = uint32(n)
	}
	pinned, shard := pinWorkers(shardResources(cfg.cf.Tenant, resources, shards), cfg.clients)
	return pinned, shard, shards, nil
}
