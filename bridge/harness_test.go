package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/events"
	"github.com/holdfast/holdfast/kernel"
	"github.com/holdfast/holdfast/messages"
	"github.com/holdfast/holdfast/metrics"
)

// startNATS runs an embedded NATS server with JetStream on a random port.
func startNATS(t testing.TB) *server.Server {
	t.Helper()
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

func connect(t testing.TB, ns *server.Server) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(ns.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// stack is one Holdfast process: actors and bridge over a NATS server.
type stack struct {
	t       testing.TB
	ns      *server.Server
	nc      *nats.Conn          // the service's connection
	client  *nats.Conn          // a client's connection
	js      jetstream.JetStream // on the client's connection
	br      *Bridge
	metrics *metrics.Metrics
	pub     *events.Publisher // nil with noEvents
	sys     *actors.System
	dir     string
	shards  uint32
	stop    func()
}

type stackOptions struct {
	shards   uint32
	dir      string // data directory; a temp dir when empty
	cfg      func(*Config)
	kernel   func(*kernel.Config)
	noEvents bool // no event publisher (the composition root's --events off)
}

func testKernelConfig() kernel.Config {
	k := kernel.DefaultConfig()
	k.MaxResources = 1 << 12
	k.MaxPools = 1 << 10
	k.MaxRanges = 1 << 10
	k.MaxLeases = 1 << 12
	k.MaxMembers = 1 << 14
	k.MaxOperations = 1 << 14
	k.MaxExpirations = 1 << 12
	k.MaxRangeValues = 1 << 14
	return k
}

func startStack(t testing.TB, ns *server.Server, o stackOptions) *stack {
	t.Helper()
	if o.shards == 0 {
		o.shards = 1
	}
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	nc := connect(t, ns)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// As the composition root does: the metrics, the event publisher, the shards, then
	// the bridge.
	m := metrics.New(o.shards, nc, Version)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var pub *events.Publisher
	var sink actors.EventSink
	if !o.noEvents {
		ec := events.Config{}.WithDefaults()
		batched, err := events.EnsureStream(ctx, js, contract.DefaultPrefix, ec)
		if err != nil {
			t.Fatal(err)
		}
		ec.Plain = !batched
		pub = events.NewPublisher(js, contract.DefaultPrefix, o.shards, ec, slog.New(slog.DiscardHandler), m)
		if err := pub.Start(); err != nil {
			t.Fatal(err)
		}
		sink = pub
	}
	kcfg := testKernelConfig()
	if o.kernel != nil {
		o.kernel(&kcfg)
	}
	sys, err := actors.Start(actors.Options{Dir: filepath.Join(o.dir, "shards"), Shards: o.shards, Slot: 10 * time.Millisecond,
		Kernel: kcfg, SnapshotEvery: -1, Events: sink, Observer: m})
	if err != nil {
		t.Fatal(err)
	}
	m.Attach(sys, kcfg.SlotMillis)
	cfg := Config{Conn: nc, Shards: o.shards, Workers: 4, Metrics: m}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	br, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := br.Start(sys); err != nil {
		t.Fatal(err)
	}
	client := connect(t, ns)
	cjs, err := jetstream.New(client)
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{t: t, ns: ns, nc: nc, client: client, js: cjs, br: br, metrics: m, pub: pub, sys: sys, dir: o.dir, shards: o.shards}
	stopped := false
	s.stop = func() {
		if stopped {
			return
		}
		stopped = true
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := br.Drain(ctx); err != nil {
			t.Errorf("drain: %v", err)
		}
		sys.Stop()
		if pub != nil {
			if err := pub.Close(ctx); err != nil {
				t.Errorf("close: %v", err)
			}
		}
		nc.Close()
	}
	t.Cleanup(s.stop)
	return s
}

// subject is the request subject of tenant's verb.
func subject(tenant, verb string) string { return "holdfast.v1." + tenant + "." + verb }

// raw sends a request and returns the reply message.
func (s *stack) raw(subj string, data []byte, hdr nats.Header) *nats.Msg {
	s.t.Helper()
	msg := &nats.Msg{Subject: subj, Data: data, Header: hdr}
	reply, err := s.client.RequestMsg(msg, 15*time.Second)
	if err != nil {
		s.t.Fatalf("request %s: %v", subj, err)
	}
	return reply
}

// reply is a decoded JSON reply: the raw text, the generic map, and the typed message.
type reply struct {
	msg  *nats.Msg
	raw  string
	obj  map[string]any
	typ  *messages.Reply
	code string
}

func decodeJSONReply(t testing.TB, m *nats.Msg) *reply {
	t.Helper()
	r := &reply{msg: m, raw: string(m.Data), typ: &messages.Reply{}}
	if err := json.Unmarshal(m.Data, &r.obj); err != nil {
		t.Fatalf("reply is not JSON: %v: %q", err, m.Data)
	}
	if err := messages.UnmarshalJSON(m.Data, r.typ); err != nil {
		t.Fatalf("reply does not decode as Reply: %v: %s", err, m.Data)
	}
	r.code = r.typ.Code
	return r
}

// req sends a JSON request (a Go value marshalled with encoding/json, or a string).
func (s *stack) req(tenant, verb string, body any) *reply {
	s.t.Helper()
	var data []byte
	switch b := body.(type) {
	case string:
		data = []byte(b)
	case []byte:
		data = b
	default:
		var err error
		if data, err = json.Marshal(body); err != nil {
			s.t.Fatal(err)
		}
	}
	return decodeJSONReply(s.t, s.raw(subject(tenant, verb), data, nil))
}

// preq sends a protobuf request and decodes the protobuf reply.
func (s *stack) preq(tenant, verb string, m proto.Message) (*messages.Reply, *nats.Msg) {
	s.t.Helper()
	data, err := proto.Marshal(m)
	if err != nil {
		s.t.Fatal(err)
	}
	hdr := nats.Header{}
	hdr.Set(messages.HeaderContentType, messages.ContentTypeProtobuf)
	msg := s.raw(subject(tenant, verb), data, hdr)
	out := &messages.Reply{}
	if err := proto.Unmarshal(msg.Data, out); err != nil {
		s.t.Fatalf("protobuf reply: %v (%q)", err, msg.Data)
	}
	return out, msg
}

// want checks a reply's code and outcome.
func (r *reply) want(t testing.TB, code string) *reply {
	t.Helper()
	if r.code != code {
		t.Fatalf("code %q, want %q: %s", r.code, code, r.raw)
	}
	outcome := messages.OutcomeCommitted
	if messages.IsRejectionCode(code) {
		outcome = messages.OutcomeRejected
	}
	if r.typ.Outcome != outcome {
		t.Fatalf("outcome %q, want %q: %s", r.typ.Outcome, outcome, r.raw)
	}
	return r
}

// field walks a path of map keys and slice indexes in the generic JSON.
func (r *reply) field(t testing.TB, path ...any) any {
	t.Helper()
	var cur any = r.obj
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := cur.(map[string]any)
			if !ok {
				t.Fatalf("%v: not an object at %q in %s", path, k, r.raw)
			}
			if cur, ok = m[k]; !ok {
				t.Fatalf("%v: no field %q in %s", path, k, r.raw)
			}
		case int:
			a, ok := cur.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("%v: no element %d in %s", path, k, r.raw)
			}
			cur = a[k]
		}
	}
	return cur
}

// str requires a string field (64-bit numbers are strings on the wire).
func (r *reply) str(t testing.TB, path ...any) string {
	t.Helper()
	v := r.field(t, path...)
	s, ok := v.(string)
	if !ok {
		t.Fatalf("%v: %T %v is not a string in %s", path, v, v, r.raw)
	}
	return s
}

func (r *reply) absent(t testing.TB, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, ok := r.obj[k]; ok {
			t.Fatalf("field %q should be absent: %s", k, r.raw)
		}
	}
}

// keys checks that an object has exactly these fields.
func keysOf(t testing.TB, v any) []string {
	t.Helper()
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("%v is not an object", v)
	}
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func wantKeys(t testing.TB, what string, v any, want ...string) {
	t.Helper()
	got := keysOf(t, v)
	if len(got) != len(want) {
		t.Fatalf("%s: fields %v, want %v", what, got, want)
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			if g == w {
				found = true
			}
		}
		if !found {
			t.Fatalf("%s: fields %v, want %v", what, got, want)
		}
	}
}

// holdfast ids helper: a placement key that lands on the given shard.
func keyOnShard(tenant string, shard, shards uint32, prefix string) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s%d", prefix, i)
		if contract.ShardOf(tenant, k, shards) == shard {
			return k
		}
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// requestBound is the default timing with a shorter request bound.
func requestBound(d time.Duration) contract.Timing {
	t := contract.NewTiming(0, 0)
	t.Request = d
	return t
}
