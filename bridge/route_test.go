package bridge

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
)

func TestRouteFor(t *testing.T) {
	for _, c := range []struct {
		kind                       opKind
		clustered, forwarded, open bool
		want                       route
	}{
		{opWrite, false, false, false, routeHere}, // one process serves every shard
		{opWrite, true, false, true, routeHere},   // this node's shard
		{opWrite, true, false, false, routeOwner}, // another node's
		{opRead, true, false, false, routeOwner},
		{opWrite, true, true, false, routeHere}, // forwarded here: never sent on (the shard answers engine_halted)
		{opRead, true, true, false, routeHere},
		{opList, true, false, false, routeHere}, // gathers every shard's part itself
		{opFan, true, false, false, routeHere},
		{opStatus, true, false, false, routeHere},
	} {
		if got := routeFor(c.kind, c.clustered, c.forwarded, c.open); got != c.want {
			t.Errorf("routeFor(%d, clustered=%v, forwarded=%v, open=%v) = %d, want %d", c.kind, c.clustered, c.forwarded, c.open, got, c.want)
		}
	}
}

// forwardingStub is a cluster node serving no shard: every write goes to the shard subject.
func forwardingStub(t *testing.T, request time.Duration) (front *nats.Conn, owner *nats.Conn) {
	t.Helper()
	ns := startNATS(t)
	sys := &stubSystem{shards: 2, halted: make([]atomic.Bool, 2), onRead: okRead, closed: true,
		onWrite: func(uint32, *kernel.Command, func(*actors.Reply)) {
			t.Error("a shard this node does not serve was written")
		}}
	_, client := startStub(t, ns, sys, func(c *Config) {
		c.Timing = requestBound(request)
		c.Routing = &Routing{ShardSubject: func(k uint32) string { return "holdfast._shard." + strconv.Itoa(int(k)) }}
	})
	return client, connect(t, ns)
}

// An owner that took the request and went silent (killed): the front door answers
// timeout when the request's bound ends, not after a second wait of its own, and tells
// the owner how much of the bound is left.
func TestForwardToASilentOwnerIsAnsweredTimeoutWithinTheBound(t *testing.T) {
	client, owner := forwardingStub(t, 400*time.Millisecond)
	var budget atomic.Int64
	var took atomic.Int32
	if _, err := owner.Subscribe("holdfast._shard.*", func(m *nats.Msg) {
		took.Add(1)
		ms, _ := strconv.ParseInt(m.Header.Get(headerBudget), 10, 64)
		budget.Store(ms)
	}); err != nil {
		t.Fatal(err)
	}
	_ = owner.Flush()
	start := time.Now()
	r := request(t, client, subject("t", "resource.create"), `{"operation_id":"a","resource_id":"x"}`)
	if r.code != contract.NameTimeout {
		t.Fatalf("code %q, want timeout: %s", r.code, r.raw)
	}
	if d := time.Since(start); d < 350*time.Millisecond || d > 1200*time.Millisecond {
		t.Fatalf("answered after %v, want about the 400ms bound", d)
	}
	if n := took.Load(); n != 1 {
		t.Fatalf("the owner was sent the request %d times, want once (the client owns retries)", n)
	}
	if b := budget.Load(); b <= 0 || b > 350 {
		t.Fatalf("the owner was given %d ms, want what is left of 400 ms less a retry pause", b)
	}
}

// Nobody listens on the shard subject (the shard is moving): the request is sent again
// until an owner takes it, and its answer — whatever it is — is relayed once.
func TestForwardIsResentOnlyWhileNobodyListens(t *testing.T) {
	client, owner := forwardingStub(t, 1500*time.Millisecond)
	var took atomic.Int32
	go func() {
		time.Sleep(200 * time.Millisecond)
		_, _ = owner.Subscribe("holdfast._shard.*", func(m *nats.Msg) {
			took.Add(1)
			msg := replyMsg(m.Reply, false, contract.CodeEngineHalted, []byte(`{"outcome":"rejected","code":"engine_halted","message":"halted"}`))
			_ = m.RespondMsg(msg)
		})
	}()
	r := request(t, client, subject("t", "resource.create"), `{"operation_id":"a","resource_id":"x"}`)
	if r.code != contract.NameEngineHalted || r.msg.Header.Get(micro.ErrorHeader) != contract.NameEngineHalted {
		t.Fatalf("code %q, want the owner's engine_halted relayed: %s", r.code, r.raw)
	}
	if n := took.Load(); n != 1 {
		t.Fatalf("the owner was sent the request %d times, want once: an indefinite answer goes back to the client", n)
	}
}

// Nobody ever listens: engine_halted (indefinite) within the bound.
func TestForwardWithoutOwnerIsEngineHaltedWithinTheBound(t *testing.T) {
	client, _ := forwardingStub(t, 300*time.Millisecond)
	start := time.Now()
	r := request(t, client, subject("t", "resource.create"), `{"operation_id":"a","resource_id":"x"}`)
	if r.code != contract.NameEngineHalted {
		t.Fatalf("code %q, want engine_halted: %s", r.code, r.raw)
	}
	if d := time.Since(start); d > 1200*time.Millisecond {
		t.Fatalf("answered after %v, want within the 300ms bound", d)
	}
}

// The owner holds a forwarded request no longer than the front door said was left.
func TestForwardedBudgetBoundsTheOwner(t *testing.T) {
	ns := startNATS(t)
	held := make(chan func(*actors.Reply), 4)
	sys := &stubSystem{shards: 2, halted: make([]atomic.Bool, 2), onRead: okRead,
		onWrite: func(_ uint32, _ *kernel.Command, reply func(*actors.Reply)) { held <- reply }}
	br, client := startStub(t, ns, sys, func(c *Config) {
		c.Routing = &Routing{ShardSubject: func(k uint32) string { return "holdfast._shard." + strconv.Itoa(int(k)) }}
	})
	for k := uint32(0); k < 2; k++ {
		if err := br.Accept(k); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		budget string
		min    time.Duration
		max    time.Duration
	}{{"150", 120 * time.Millisecond, 900 * time.Millisecond}, {"", 1400 * time.Millisecond, 3 * time.Second}} {
		msg := &nats.Msg{Data: []byte(`{"operation_id":"a","resource_id":"x"}`), Header: nats.Header{}}
		msg.Header.Set(headerSubject, subject("t", "resource.create"))
		msg.Header.Set(headerForwarded, "1")
		if c.budget != "" {
			msg.Header.Set(headerBudget, c.budget)
		}
		msg.Subject = "holdfast._shard.0" // the node serves both shards: any shard subject takes it
		start := time.Now()
		got, err := client.RequestMsg(msg, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		d := time.Since(start)
		if r := decodeJSONReply(t, got); r.code != contract.NameTimeout {
			t.Fatalf("budget %q: code %q, want timeout", c.budget, r.code)
		}
		if d < c.min || d > c.max {
			t.Fatalf("budget %q: answered after %v, want between %v and %v", c.budget, d, c.min, c.max)
		}
	}
}
