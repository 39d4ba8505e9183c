package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/messages"
)

// benchRoute sends the load straight to each shard's owner, as the Go client does
// (docs/api.md §7): the bench builds its requests by hand for speed, so it places them
// itself — a reserve by its resource, a release by the shard in its lease id, with the
// client's own placement — on the shard subject, the public subject in a header. Without it a cluster's numbers would
// carry a forward through the front door for two requests in three, which no Go client
// pays; --no-direct measures that path (the one clients of other languages take).
type benchRoute struct {
	prefix, tenant string
	shards         uint32
	// reserve and release are the headers of a direct send of each verb.
	reserve, release nats.Header
}

// newBenchRoute asks the service how it routes; nil when it does not route directly (a
// single process) or did not say (a service that does not answer $SRV.INFO).
func newBenchRoute(nc *nats.Conn, cfg *benchConfig, header nats.Header, subjReserve, subjRelease string) *benchRoute {
	meta, err := serviceMetadata(nc, cfg.cf.Timeout)
	if err != nil {
		return nil
	}
	n, err := strconv.ParseUint(meta["shards"], 10, 32)
	if err != nil || n == 0 || meta["routing"] != "direct" {
		return nil
	}
	with := func(public string) nats.Header {
		h := nats.Header{contract.HeaderSubject: []string{public}}
		for k, v := range header {
			h[k] = v
		}
		return h
	}
	return &benchRoute{prefix: cfg.cf.Prefix, tenant: cfg.cf.Tenant, shards: uint32(n),
		reserve: with(subjReserve), release: with(subjRelease)}
}

// to is where req goes straight to its owner: its shard's subject and the header of a
// direct send of it — or "" (no route, or a request a client would not place: the
// public subject). It places a request as the Go client does (client.PlaceRequest).
func (r *benchRoute) to(req proto.Message) (string, nats.Header) {
	if r == nil {
		return "", nil
	}
	k, ok := client.PlaceRequest(r.tenant, req, r.shards)
	if !ok {
		return "", nil
	}
	h := r.release
	if _, reserve := req.(*messages.ReserveRequest); reserve {
		h = r.reserve
	}
	return contract.ShardSubject(r.prefix, k), h
}

// serviceMetadata asks a Holdfast instance for its micro metadata (shards, routing).
func serviceMetadata(nc *nats.Conn, timeout time.Duration) (map[string]string, error) {
	msg, err := nc.Request("$SRV.INFO.holdfast", nil, timeout)
	if err != nil {
		return nil, fmt.Errorf("asking the service for its metadata: %w", err)
	}
	var info struct {
		Metadata map[string]string `json:"metadata"`
	}
	if err := json.Unmarshal(msg.Data, &info); err != nil {
		return nil, fmt.Errorf("service info: %w", err)
	}
	return info.Metadata, nil
}
