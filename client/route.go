package client

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/messages"
)

// Direct routing (docs/api.md §7). In a cluster every node answers every request,
// forwarding it to the owner of its shard; the client saves that hop by computing the
// shard itself — the placement of the request's object, or the shard in its lease id —
// and sending the request to the subject only the owner listens on. It learns the shard
// count and whether the service routes this way from the service's metadata, once, in
// the background; until then, for requests it cannot place, and when nobody listens on
// the shard's subject (the shard is moving), it uses the public subject.

// routeInfo is what the service tells a client about routing.
type routeInfo struct {
	shards uint32
	direct bool
}

// route is the routing state of a client.
type route struct {
	info     atomic.Pointer[routeInfo]
	fetching atomic.Bool
	retryAt  atomic.Int64 // unix ns: no new fetch before (after a failed one)
	moving   int          // probes that met a shard with no owner listening (fetchRoute's own)
}

// maxMovingProbes is how many probes may find their shard without an owner listening
// (a shard being handed over or loaded: tens of milliseconds) before the client decides
// direct routing does not reach this service and stays on the public subject.
const maxMovingProbes = 10

// directSubject returns the shard subject for a request and true, or false when it goes
// to the public subject.
func (c *Client) directSubject(req proto.Message) (string, bool) {
	if c.cfg.noDirect {
		return "", false
	}
	info := c.route.info.Load()
	if info == nil {
		c.fetchRoute()
		return "", false
	}
	if !info.direct {
		return "", false
	}
	k, ok := PlaceRequest(c.cfg.tenant, req, info.shards)
	if !ok {
		return "", false
	}
	return contract.ShardSubject(c.cfg.prefix, k), true
}

// fetchRoute asks the service for its routing metadata in the background, once at a
// time.
func (c *Client) fetchRoute() {
	if time.Now().UnixNano() < c.route.retryAt.Load() || !c.route.fetching.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer c.route.fetching.Store(false)
		info, err := c.routeInfo()
		if err != nil {
			c.route.retryAt.Store(time.Now().Add(5 * time.Second).UnixNano())
			return
		}
		if info.direct {
			switch err := c.probeDirect(info); {
			case errors.Is(err, nats.ErrNoResponders) && c.route.moving < maxMovingProbes:
				// Nobody listens on the probe's shard: it is moving. Ask again soon
				// rather than give direct routing up for good.
				c.route.moving++
				c.route.retryAt.Store(time.Now().Add(500 * time.Millisecond).UnixNano())
				return
			case err != nil:
				info.direct = false // not answered there: permissions, or an older service
			}
		}
		c.route.info.Store(info)
	}()
}

// routeInfo asks the Holdfast services on this NATS for their INFO and takes the
// routing of the one of the client's prefix.
func (c *Client) routeInfo() (*routeInfo, error) {
	var info *routeInfo
	var bad error
	found, err := c.askServices(context.Background(), "INFO", min(c.cfg.timeout, 2*time.Second), func(meta map[string]string) bool {
		if meta["prefix"] != c.cfg.prefix {
			return false
		}
		if n, err := strconv.ParseUint(meta["shards"], 10, 32); err != nil || n == 0 {
			bad = errors.New("the service advertises no shard count")
		} else {
			info = &routeInfo{shards: uint32(n), direct: meta["routing"] == "direct"}
		}
		return true
	})
	switch {
	case err != nil:
		return nil, err
	case !found:
		return nil, errors.New("no service of this prefix answered $SRV.INFO")
	case bad != nil:
		return nil, bad
	}
	return info, nil
}

// probeDirect sends one read straight to a shard's owner and reports why it was not
// answered (nil: it was): a client whose permissions do not let it publish to the shard subjects (a
// tenant account that imports only its own subjects) would otherwise wait out its
// timeout on every request.
func (c *Client) probeDirect(info *routeInfo) error {
	req := &messages.GetResourceRequest{ResourceId: "holdfast-route-probe"}
	data, err := c.encode(req)
	if err != nil {
		return err
	}
	k, _ := PlaceRequest(c.cfg.tenant, req, info.shards)
	msg := c.directMsg(&nats.Msg{Subject: c.subjects[contract.VerbGetResource], Data: data, Header: c.header},
		contract.ShardSubject(c.cfg.prefix, k))
	ctx, cancel := context.WithTimeout(context.Background(), min(c.cfg.timeout, time.Second))
	defer cancel()
	rep, _, err := c.attempt(ctx, msg, time.Second)
	if err == nil && rep.Outcome == "" {
		err = errors.New("the probe's answer has no outcome")
	}
	return err
}

// directMsg is msg sent straight to the shard's owner: the same body and headers, and
// the public subject it stands for.
func (c *Client) directMsg(msg *nats.Msg, subject string) *nats.Msg {
	h := nats.Header{}
	for k, v := range msg.Header {
		h[k] = v
	}
	h.Set(contract.HeaderSubject, msg.Subject)
	return &nats.Msg{Subject: subject, Data: msg.Data, Header: h}
}

// PlaceRequest is the shard of a request of tenant that a client can place, of a
// service with shards shards: by the placement key of the object it names, or by the
// shard in the lease id it names. Listings over every shard, cluster.status and unknown
// requests are not placed. (Tools that build requests by hand, as `holdfast bench`
// does, route them with it as the client does.)
func PlaceRequest(tenant string, req proto.Message, shards uint32) (uint32, bool) {
	byID := func(id string) (uint32, bool) {
		if id == "" {
			return 0, false
		}
		return contract.ShardOf(tenant, contract.PlacementKey(id), shards), true
	}
	byLease := func(id string) (uint32, bool) {
		k, _, ok := contract.ParseLeaseID(id)
		return k, ok && k < shards
	}
	switch r := req.(type) {
	case *messages.ReserveRequest:
		if len(r.Members) == 0 || r.Members[0] == nil {
			return 0, false
		}
		m := r.Members[0]
		if m.Work != nil {
			return byID(m.Work.RunId)
		}
		return byID(m.ResourceId + m.PoolId + m.RangeId)
	case *messages.ImportRequest:
		if len(r.Leases) == 0 || r.Leases[0] == nil || len(r.Leases[0].Members) == 0 || r.Leases[0].Members[0] == nil {
			return 0, false
		}
		m := r.Leases[0].Members[0]
		return byID(m.ResourceId + m.PoolId + m.RangeId)
	case interface{ GetLeaseId() string }:
		return byLease(r.GetLeaseId())
	case interface{ GetResourceId() string }:
		return byID(r.GetResourceId())
	case interface{ GetPoolId() string }:
		return byID(r.GetPoolId())
	case interface{ GetRangeId() string }:
		return byID(r.GetRangeId())
	case interface{ GetRunId() string }:
		return byID(r.GetRunId())
	}
	return 0, false
}

// ShardCount is the shard count of the client's service, from its $SRV.INFO metadata:
// what a tool that speaks to every shard (holdfast snapshot save) needs.
func (c *Client) ShardCount() (uint32, error) {
	info, err := c.routeInfo()
	if err != nil {
		return 0, err
	}
	return info.shards, nil
}
