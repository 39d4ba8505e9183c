package bridge

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/metrics"
)

// stubSystem stands in for the shards: it hands each request to onWrite/onRead.
type stubSystem struct {
	shards  uint32
	onWrite func(shard uint32, c *kernel.Command, reply func(*actors.Reply))
	onRead  func(shard uint32, q actors.ReadRequest, reply func(*actors.Reply))
	halted  []atomic.Bool
	closed  bool // IsOpen says false for every shard (a cluster node serving none)
}

func (s *stubSystem) Write(shard uint32, c *kernel.Command, reply func(*actors.Reply)) {
	s.onWrite(shard, c, reply)
}

func (s *stubSystem) Read(shard uint32, q actors.ReadRequest, reply func(*actors.Reply)) {
	s.onRead(shard, q, reply)
}
func (s *stubSystem) Stats(uint32) actors.ShardStats { return actors.ShardStats{} }
func (s *stubSystem) IsOpen(uint32) bool             { return !s.closed }

func (s *stubSystem) Halted(shard uint32) bool { return s.halted[shard].Load() }
func (s *stubSystem) Shards() uint32           { return s.shards }
func (s *stubSystem) Options() actors.Options  { return actors.Options{Kernel: stubKernel()} }
func stubKernel() kernel.Config                { k := kernel.DefaultConfig(); return k }
func okRead(_ uint32, _ actors.ReadRequest, r func(*actors.Reply)) {
	r(&actors.Reply{Code: contract.CodeResourceNotFound})
}

// startStub runs a bridge over a stub system.
func startStub(t *testing.T, ns *server.Server, sys *stubSystem, cfg func(*Config)) (*Bridge, *nats.Conn) {
	t.Helper()
	nc := connect(t, ns)
	c := Config{Conn: nc, Shards: sys.shards}
	if cfg != nil {
		cfg(&c)
	}
	br, err := New(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if err := br.start(sys); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = br.Close(ctx)
	})
	return br, connect(t, ns)
}

func request(t *testing.T, nc *nats.Conn, subj, body string) *reply {
	t.Helper()
	m, err := nc.Request(subj, []byte(body), 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return decodeJSONReply(t, m)
}

func TestShardTimeoutIsIndefiniteAndLateAnswerDropped(t *testing.T) {
	ns := startNATS(t)
	held := make(chan func(*actors.Reply), 1)
	sys := &stubSystem{shards: 2, halted: make([]atomic.Bool, 2), onRead: okRead,
		onWrite: func(_ uint32, _ *kernel.Command, reply func(*actors.Reply)) { held <- reply }}
	_, client := startStub(t, ns, sys, func(c *Config) { c.Timing = requestBound(100 * time.Millisecond) })

	inbox := nats.NewInbox()
	sub, err := client.SubscribeSync(inbox)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := client.PublishRequest(subject("t", "resource.create"), inbox, []byte(`{"operation_id":"a","resource_id":"x"}`)); err != nil {
		t.Fatal(err)
	}
	m, err := sub.NextMsg(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	r := decodeJSONReply(t, m).want(t, "timeout")
	if r.str(t, "category") != "indefinite" || m.Header.Get(micro.ErrorCodeHeader) != "504" || m.Header.Get(micro.ErrorHeader) != "timeout" {
		t.Fatalf("timeout reply: %s %v", r.raw, m.Header)
	}
	if took := time.Since(start); took < 90*time.Millisecond {
		t.Fatalf("timed out after %v", took)
	}
	// The shard answers late: nothing more is sent.
	(<-held)(&actors.Reply{Code: contract.CodeOK, LSN: 1, MemberIndex: -1})
	if m, err := sub.NextMsg(300 * time.Millisecond); err == nil {
		t.Fatalf("late answer was sent: %s", m.Data)
	}
	// A lease.list whose second shard does not answer: timeout, the late part dropped.
	heldRead := make(chan func(*actors.Reply), 1)
	sys.onRead = func(shard uint32, _ actors.ReadRequest, reply func(*actors.Reply)) {
		if shard == 1 {
			heldRead <- reply
			return
		}
		reply(&actors.Reply{Code: contract.CodeOK, AppliedLSN: 3, MemberIndex: -1})
	}
	request(t, client, subject("t", "lease.list"), `{"holder_id":"h"}`).want(t, "timeout")
	(<-heldRead)(&actors.Reply{Code: contract.CodeOK, AppliedLSN: 4, MemberIndex: -1})
	// A shard that rejects makes the whole list rejected.
	sys.onRead = func(shard uint32, _ actors.ReadRequest, reply func(*actors.Reply)) {
		if shard == 1 {
			reply(&actors.Reply{Code: contract.CodeEngineHalted, Message: "shard halted", MemberIndex: -1})
			return
		}
		reply(&actors.Reply{Code: contract.CodeOK, AppliedLSN: 3, MemberIndex: -1})
	}
	r = request(t, client, subject("t", "lease.list"), `{"holder_id":"h"}`).want(t, "engine_halted")
	if r.str(t, "category") != "indefinite" || !contains(r.typ.Message, "shard 1") {
		t.Fatalf("list with a halted shard: %s", r.raw)
	}

	// Reads add their wait_ms to the bound.
	sys.onRead = func(_ uint32, _ actors.ReadRequest, reply func(*actors.Reply)) {}
	start = time.Now()
	request(t, client, subject("t", "resource.get"), `{"resource_id":"x","min_lsn":5,"wait_ms":200}`).want(t, "timeout")
	if took := time.Since(start); took < 290*time.Millisecond {
		t.Fatalf("read timed out after %v, want at least timeout+wait_ms", took)
	}
}

func TestOverloadIsAnsweredAtOnce(t *testing.T) {
	ns := startNATS(t)
	var mu sync.Mutex
	var held []func(*actors.Reply)
	entered := make(chan struct{}, 10)
	release := make(chan struct{})
	sys := &stubSystem{shards: 1, halted: make([]atomic.Bool, 1), onRead: okRead,
		onWrite: func(_ uint32, c *kernel.Command, reply func(*actors.Reply)) {
			if c.OperationID == "block" {
				entered <- struct{}{}
				<-release // a stuck worker (a real shard never blocks the caller)
			}
			mu.Lock()
			held = append(held, reply)
			mu.Unlock()
		}}
	br, client := startStub(t, ns, sys, func(c *Config) { c.Workers = 1; c.QueueLen = 1; c.MaxInFlight = 2 })

	send := func(op string) *nats.Subscription {
		inbox := nats.NewInbox()
		sub, err := client.SubscribeSync(inbox)
		if err != nil {
			t.Fatal(err)
		}
		if err := client.PublishRequest(subject("t", "resource.create"), inbox, []byte(`{"operation_id":"`+op+`","resource_id":"x"}`)); err != nil {
			t.Fatal(err)
		}
		return sub
	}
	heldCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(held)
	}
	waitHeld := func(n int) {
		for deadline := time.Now().Add(5 * time.Second); heldCount() < n; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d requests reached the shard, want %d", heldCount(), n)
			}
		}
	}
	// In-flight bound: two requests held by the shard, the third is overloaded.
	s1 := send("h1")
	waitHeld(1)
	s2 := send("h2")
	waitHeld(2)
	r := request(t, client, subject("t", "resource.create"), `{"operation_id":"h3","resource_id":"x"}`).want(t, "overloaded")
	if r.msg.Header.Get(micro.ErrorCodeHeader) != "503" || r.str(t, "category") != "definite" || !contains(r.typ.Message, "in flight") {
		t.Fatalf("overloaded: %s %v", r.raw, r.msg.Header)
	}
	mu.Lock()
	for _, h := range held {
		h(&actors.Reply{Code: contract.CodeOK, LSN: 7, MemberIndex: -1})
	}
	held = nil
	mu.Unlock()
	for _, s := range []*nats.Subscription{s1, s2} {
		m, err := s.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		decodeJSONReply(t, m).want(t, "ok")
	}

	// Queue bound: the only worker is stuck, one request waits, the next is overloaded.
	b := send("block")
	<-entered
	q := send("queued")
	for deadline := time.Now().Add(5 * time.Second); len(br.intake) < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the request was not queued")
		}
	}
	r = request(t, client, subject("t", "resource.create"), `{"operation_id":"x","resource_id":"x"}`).want(t, "overloaded")
	if !contains(r.typ.Message, "queue") {
		t.Fatalf("queue full: %s", r.raw)
	}
	close(release)
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	for _, h := range held {
		h(&actors.Reply{Code: contract.CodeOK, LSN: 8, MemberIndex: -1})
	}
	mu.Unlock()
	for _, s := range []*nats.Subscription{b, q} {
		m, err := s.NextMsg(5 * time.Second)
		if err != nil {
			t.Fatal(err)
		}
		decodeJSONReply(t, m).want(t, "ok")
	}
}

func TestMetricsAndHealth(t *testing.T) {
	ns := startNATS(t)
	s := startStack(t, ns, stackOptions{shards: 2})
	s.req("t", "resource.create", `{"operation_id":"a","resource_id":"x"}`).want(t, "ok")
	s.req("t", "resource.create", `{"resource_id":"x"}`).want(t, "invalid_request")
	s.req("t", "resource.get", `{"resource_id":"x"}`).want(t, "ok")
	s.waitPublished()

	srv := httptest.NewServer(s.metrics.Handler())
	defer srv.Close()
	get := func(path string) (int, string) {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("/healthz")
	if code != 200 || !strings.HasPrefix(body, "ok") {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	code, body = get("/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{
		`holdfast_requests_total{code="ok",verb="resource.create"} 1`,
		`holdfast_requests_total{code="invalid_request",verb="resource.create"} 1`,
		`holdfast_requests_total{code="ok",verb="resource.get"} 1`,
		`holdfast_request_duration_seconds_count{verb="resource.create"} 2`,
		`holdfast_shard_applied_lsn{shard="0"}`,
		`holdfast_shard_applied_lsn{shard="1"}`,
		`holdfast_shard_queue_depth{shard="1"} 0`,
		`holdfast_shard_halted{shard="0"} 0`,
		`holdfast_shard_expiry_backlog{shard="0"} 0`,
		`holdfast_shard_slot_lag{shard="0"}`,
		`holdfast_shard_table_utilization{shard="0",table="resources"}`,
		`holdfast_shard_table_capacity{shard="0",table="resources"} 4096`,
		`holdfast_shard_batch_entries_bucket{shard=`,
		`holdfast_shard_append_duration_seconds_bucket{shard=`,
		`holdfast_leases{shard="0",state="reserved"} 0`,
		`holdfast_nats_connected 1`,
		`holdfast_shard_expiry_lag_seconds{shard="0"} 0`,
		`holdfast_nats_reconnects_total 0`,
		`holdfast_lease_expiry_lateness_seconds_bucket{shard="0",le="0"} 0`,
		`holdfast_events_published_total{shard=`,
		`holdfast_events_published_lsn{shard=`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	sh := contract.ShardOf("t", "x", 2)
	if !strings.Contains(body, `holdfast_shard_table_entries{shard="`+string(rune('0'+sh))+`",table="resources"} 1`) {
		t.Errorf("/metrics: resource table fill of shard %d missing", sh)
	}
	if !strings.Contains(body, `holdfast_shard_table_capacity{shard="0",table="work"} `) ||
		!strings.Contains(body, `holdfast_shard_table_entries{shard="0",table="runs"} 0`) {
		t.Errorf("/metrics: the run and work tables' fill missing")
	}
	if t.Failed() {
		t.Log(body)
	}
}

func TestHealthzReportsHaltedShards(t *testing.T) {
	ns := startNATS(t)
	sys := &stubSystem{shards: 3, halted: make([]atomic.Bool, 3), onRead: okRead,
		onWrite: func(uint32, *kernel.Command, func(*actors.Reply)) {}}
	startStub(t, ns, sys, nil)
	m := metrics.New(sys.shards, nil, Version)
	m.Attach(sys, 100)
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	check := func(wantCode int, wantBody string) {
		t.Helper()
		resp, err := http.Get(srv.URL + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != wantCode || !strings.Contains(string(b), wantBody) {
			t.Fatalf("/healthz: %d %q, want %d %q", resp.StatusCode, b, wantCode, wantBody)
		}
	}
	check(200, "ok")
	sys.halted[2].Store(true)
	check(503, "shard 2: halted")
	sys.halted[2].Store(false)
	check(200, "ok")
}
