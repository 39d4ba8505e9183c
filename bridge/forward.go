package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

// Cluster routing (API §7). Every node serves the public subjects; a request for a shard
// this node does not serve is sent to the shard's subject, where only its owner listens,
// and the owner's answer is relayed to the client. While a shard moves nobody listens:
// the request is sent again until the bridge's timeout, then answered engine_halted
// (indefinite; a retry of the same operation_id learns the outcome).

// Headers of a forwarded request.
const (
	headerSubject   = contract.HeaderSubject   // the public subject the client used
	headerForwarded = contract.HeaderForwarded // set on forwarded requests: never forwarded again
	headerPart      = "Holdfast-Part"          // a lease.list part: the shard whose leases are asked for
)

// Routing tells the bridge where shards are served in a cluster.
type Routing struct {
	// ShardSubject is where the owner of shard k takes forwarded requests.
	ShardSubject func(k uint32) string
}

// headerBudget carries what is left of a forwarded request's bound, in milliseconds
// (relative, so the two nodes' clocks need not agree): the owner answers within it.
const headerBudget = "Holdfast-Budget"

// mustForward reports whether a prepared request goes to another node.
func (b *Bridge) mustForward(j *job, c *call) bool {
	if b.cfg.Routing == nil {
		return false
	}
	return routeFor(c.op.kind, true, j.forwarded, b.sys.IsOpen(c.op.shard)) == routeOwner
}

// forward sends the request to its shard's owner and relays the answer, whatever it is,
// to the client: the client is the one owner of retries (an indefinite answer is retried
// with the same operation_id). The request is sent again only while nobody listens on
// the shard subject (the shard is moving: nothing was delivered), within the request's
// bound; an owner that took it and went silent is answered timeout when the bound ends.
// It runs on a goroutine of its own, holding the call's in-flight slot.
func (b *Bridge) forward(j *job, c *call) {
	shard := c.op.shard
	deadline := j.start.Add(b.bound(j, c))
	msg := b.shardRequest(j, shard, false)
	for c.res == nil {
		left := time.Until(deadline)
		if left <= b.cfg.Timing.ForwardRetry {
			c.res = rejectReply(contract.CodeEngineHalted, fmt.Sprintf("shard %d has no serving node right now (moving between nodes); retry the same operation_id", shard))
			break
		}
		// The owner's own bound ends a retry pause before ours, so its timeout answer
		// reaches us before we give up on it.
		msg.Header.Set(headerBudget, strconv.FormatInt((left-b.cfg.Timing.ForwardRetry).Milliseconds(), 10))
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		resp, err := b.nc.RequestMsgWithContext(ctx, msg)
		cancel()
		switch {
		case err == nil:
			b.metrics.Forward("answered")
			j.spec.stats.record(resp.Header.Get(micro.ErrorHeader), time.Since(j.start))
			if j.reply != "" {
				if err := b.nc.PublishMsg(&nats.Msg{Subject: j.reply, Data: resp.Data, Header: resp.Header}); err != nil {
					b.log.Debug("relaying a forwarded reply", "err", err)
				}
			}
			b.settled(c)
			return
		case errors.Is(err, nats.ErrNoResponders):
			time.Sleep(b.cfg.Timing.ForwardRetry)
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
			c.res = rejectReply(contract.CodeTimeout, fmt.Sprintf("no answer from shard %d's owner in time; retry the same operation_id to learn the outcome", shard))
		default:
			c.res = rejectReply(contract.CodeEngineHalted, fmt.Sprintf("shard %d could not be reached (%v); retry the same operation_id", shard, err))
		}
	}
	b.metrics.Forward("no_owner")
	b.respond(c)
}

// shardRequest is request j sent on to the owner of shard k: the client's body and headers,
// the public subject it came on, marked forwarded (never forwarded again); with part, it
// asks for shard k's part of a lease.list or cluster.status only.
func (b *Bridge) shardRequest(j *job, k uint32, part bool) *nats.Msg {
	msg := &nats.Msg{Subject: b.cfg.Routing.ShardSubject(k), Data: j.data, Header: nats.Header{}}
	for name, vs := range j.header {
		msg.Header[name] = vs
	}
	msg.Header.Del(headerBudget)
	msg.Header.Set(headerSubject, j.subject)
	msg.Header.Set(headerForwarded, "1")
	if part {
		msg.Header.Set(headerPart, strconv.FormatUint(uint64(k), 10))
	}
	return msg
}

// Accept starts taking forwarded requests for shard k (this node now serves it).
func (b *Bridge) Accept(k uint32) error {
	if b.cfg.Routing == nil {
		return errors.New("bridge: not in a cluster")
	}
	sub, err := b.nc.Subscribe(b.cfg.Routing.ShardSubject(k), b.handleForwarded)
	if err != nil {
		return err
	}
	_ = sub.SetPendingLimits(b.cfg.QueueLen, -1)
	b.mu.Lock()
	if b.shardSubs == nil {
		b.shardSubs = make(map[uint32]*nats.Subscription)
	}
	if old := b.shardSubs[k]; old != nil {
		_ = old.Unsubscribe()
	}
	b.shardSubs[k] = sub
	b.mu.Unlock()
	return b.nc.Flush()
}

// Release stops taking forwarded requests for shard k. The subscription is drained:
// requests already delivered here are handed to the shard (which is still open: the
// caller closes it after Release), and Release returns once they are (bounded).
func (b *Bridge) Release(k uint32) {
	b.mu.Lock()
	sub := b.shardSubs[k]
	delete(b.shardSubs, k)
	b.mu.Unlock()
	if sub == nil {
		return
	}
	if err := sub.Drain(); err != nil {
		_ = sub.Unsubscribe()
		return
	}
	deadline := time.Now().Add(b.cfg.Timing.Drain)
	for sub.IsValid() && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
}

// handleForwarded takes a request another node forwarded here, as handle does a
// client's.
func (b *Bridge) handleForwarded(m *nats.Msg) {
	subject := m.Header.Get(headerSubject)
	spec := b.specFor(subject)
	if spec == nil {
		return // not a request subject of this prefix: nothing to answer
	}
	var part uint32
	if v := m.Header.Get(headerPart); v != "" {
		k, err := strconv.ParseUint(v, 10, 32)
		if t := spec.verb.Info().Target; err != nil || k >= uint64(b.cfg.Shards) || (t != contract.TargetAll && t != contract.TargetNone) {
			return
		}
		part = uint32(k) + 1
	}
	// A request a client sent here itself (direct routing) is served as if it had come on
	// the public subject: counted in this node's stats, and forwarded on when the shard
	// has just left this node (the client's placement was right when it sent). One
	// another node forwarded is counted there and never forwarded again.
	direct := m.Header.Get(headerForwarded) == "" && part == 0
	var budget time.Duration
	if ms, err := strconv.ParseInt(m.Header.Get(headerBudget), 10, 64); err == nil && ms > 0 {
		budget = time.Duration(ms) * time.Millisecond
	}
	b.handleJob(&job{spec: spec, subject: subject, reply: m.Reply, data: m.Data, header: m.Header,
		proto: isProtobuf(m.Header), forwarded: !direct, start: time.Now(), part: part, budget: budget})
}

// specFor finds the verb of a public request subject.
func (b *Bridge) specFor(subject string) *verbSpec {
	for _, s := range b.specs {
		if len(subject) > s.tenantStart+s.suffixLen && strings.HasPrefix(subject, b.cfg.Prefix+".v1.") &&
			strings.HasSuffix(subject, "."+s.verb.Object()+"."+s.verb.Action()) &&
			!strings.Contains(subject[s.tenantStart:len(subject)-s.suffixLen], ".") {
			return s
		}
	}
	return nil
}

// partReply is one shard's part of a listing or a bulk verb between nodes (internal
// JSON; both ends run the same build).
type partReply struct {
	Code      contract.Code      `json:"code"`
	Message   string             `json:"message,omitempty"`
	Leases    []kernel.LeaseView `json:"leases,omitempty"`
	Truncated bool               `json:"truncated,omitempty"`
	// AppliedLSN is the position the part reflects (a listing), or the shard's applied
	// position (cluster.status).
	AppliedLSN uint64 `json:"applied_lsn,omitempty"`
	// A listing's page; a bulk verb's entry, count, more and changed leases.
	Page           *kernel.ListPage     `json:"page,omitempty"`
	LSN            uint64               `json:"lsn,omitempty"`
	FromRetryCache bool                 `json:"from_retry_cache,omitempty"`
	Count          int                  `json:"count,omitempty"`
	More           bool                 `json:"more,omitempty"`
	Changes        []kernel.LeaseChange `json:"changes,omitempty"`
}

func partOf(r *actors.Reply) partReply {
	return partReply{Code: r.Code, Message: r.Message, Leases: r.Leases, Truncated: r.Truncated, AppliedLSN: r.AppliedLSN,
		Page: r.Page, LSN: r.LSN, FromRetryCache: r.FromRetryCache, Count: r.Count, More: r.More, Changes: r.Changes}
}

func (p *partReply) reply() *actors.Reply {
	return &actors.Reply{Code: p.Code, Message: p.Message, Leases: p.Leases, Truncated: p.Truncated, AppliedLSN: p.AppliedLSN,
		Page: p.Page, LSN: p.LSN, FromRetryCache: p.FromRetryCache, Count: p.Count, More: p.More, Changes: p.Changes,
		MemberIndex: -1, ItemIndex: -1}
}

// remotePart asks the owner of shard k for its part of a lease.list.
func (b *Bridge) remotePart(j *job, k uint32, done func(*actors.Reply)) {
	msg := b.shardRequest(j, k, true)
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.Timing.Request)
	defer cancel()
	for {
		resp, err := b.nc.RequestMsgWithContext(ctx, msg)
		if err == nil {
			var p partReply
			if err := json.Unmarshal(resp.Data, &p); err != nil {
				break
			}
			done(p.reply())
			return
		}
		if !errors.Is(err, nats.ErrNoResponders) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(b.cfg.Timing.ForwardRetry):
			continue
		}
		break
	}
	done(rejectReply(contract.CodeEngineHalted, fmt.Sprintf("shard %d has no serving node right now; retry", k)))
}

// servePart answers another node's request for shard k's part of a lease.list.
func (b *Bridge) servePart(j *job, c *call) {
	if j.spec.verb == contract.VerbClusterStatus {
		defer b.pending.Add(-1)
		p := partReply{Code: contract.CodeEngineHalted}
		if b.sys.IsOpen(j.part - 1) {
			p = partReply{Code: contract.CodeOK, AppliedLSN: b.sys.Stats(j.part - 1).AppliedLSN}
		}
		body, _ := json.Marshal(p)
		if j.reply != "" {
			_ = b.nc.Publish(j.reply, body)
		}
		return
	}
	c.op.servePart(b.sys, j.part-1, func(r *actors.Reply) {
		defer b.pending.Add(-1)
		body, _ := json.Marshal(partOf(r))
		if j.reply != "" {
			_ = b.nc.Publish(j.reply, body)
		}
	})
}
