package schema_test

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/holdfast/holdfast/bridge"
	"github.com/holdfast/holdfast/internal/eventstest"
	"github.com/holdfast/holdfast/internal/schema"
	"github.com/holdfast/holdfast/internal/testserver"
)

const file = "../../docs/schema/holdfast.schema.json"

// docs/schema/holdfast.schema.json is what the generator writes today: a field added to
// the .proto or a verb to the table without `go generate ./internal/schema` fails here.
func TestSchemaIsCurrent(t *testing.T) {
	want, err := schema.Build()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is stale: run go generate ./internal/schema", file)
	}
}

// compiled is the schema of one $defs entry of the generated file.
type compiled struct {
	t    *testing.T
	c    *jsonschema.Compiler
	defs map[string]*jsonschema.Schema
}

func load(t *testing.T) *compiled {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(schema.ID, doc); err != nil {
		t.Fatal(err)
	}
	return &compiled{t: t, c: c, defs: map[string]*jsonschema.Schema{}}
}

// check validates one JSON document against the schema at ref (#/$defs/Name).
func (s *compiled) check(ref, what string, data []byte) {
	s.t.Helper()
	sch, ok := s.defs[ref]
	if !ok {
		var err error
		if sch, err = s.c.Compile(schema.ID + ref); err != nil {
			s.t.Fatalf("compiling %s: %v", ref, err)
		}
		s.defs[ref] = sch
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		s.t.Fatalf("%s is not JSON: %v: %s", what, err, data)
	}
	if err := sch.Validate(inst); err != nil {
		s.t.Errorf("%s does not match %s: %#v\n%s", what, ref, err, data)
	}
}

// Real traffic matches the schema: requests as a client in another language writes them
// (JSON, original field names), every reply of a session that touches resources, pools,
// ranges, leases, runs and work, a reply of every verb to an empty request, and every
// event the session published.
func TestRealTrafficMatchesTheSchema(t *testing.T) {
	s := load(t)
	var doc struct {
		Verbs map[string]struct{ Request, Reply string } `json:"x-holdfast-verbs"`
		Event string                                     `json:"x-holdfast-event"`
	}
	raw, _ := os.ReadFile(file)
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Verbs) != len(bridge.Requests()) {
		t.Fatalf("the schema names %d verbs, the service answers %d", len(doc.Verbs), len(bridge.Requests()))
	}

	srv := testserver.Start(t)
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	call := func(verb, body string) map[string]any {
		t.Helper()
		v, ok := doc.Verbs[verb]
		if !ok {
			t.Fatalf("no verb %s in the schema", verb)
		}
		s.check(v.Request, verb+" request", []byte(body))
		m, err := nc.Request("holdfast.v1.default."+verb, []byte(body), 5*time.Second)
		if err != nil {
			t.Fatalf("%s: %v", verb, err)
		}
		s.check(v.Reply, verb+" reply", m.Data)
		var out map[string]any
		_ = json.Unmarshal(m.Data, &out)
		return out
	}
	ok := func(verb, body string) map[string]any {
		t.Helper()
		r := call(verb, body)
		if r["code"] != "ok" {
			t.Fatalf("%s %s: %v", verb, body, r)
		}
		return r
	}

	ok("resource.create", `{"operation_id":"s1","resource_id":"node14/gpu0"}`)
	ok("pool.create", `{"operation_id":"s2","pool_id":"node14/mem","capacity":80}`)
	ok("range.create", `{"operation_id":"s3","range_id":"node14/vxlan","first":1,"last":"4096"}`)
	r := ok("lease.reserve", `{"operation_id":"s4","holder_id":"sched-1","ttl_ms":30000,"labels":{"team":"ml"},
		"members":[{"resource_id":"node14/gpu0"},{"pool_id":"node14/mem","quantity":16},{"range_id":"node14/vxlan"}]}`)
	lease := r["lease"].(map[string]any)["lease_id"].(string)
	ok("lease.activate", `{"operation_id":"s5","holder_id":"sched-1","lease_id":"`+lease+`","lease_epoch":1}`)
	ok("lease.get", `{"lease_id":"`+lease+`"}`)
	ok("lease.list", `{"holder_id":"sched-1"}`)
	ok("lease.list", `{"label":"team=ml","limit":10}`)
	ok("range.lookup", `{"range_id":"node14/vxlan","value":1}`)
	ok("resource.get", `{"resource_id":"node14/gpu0"}`)
	ok("pool.get", `{"pool_id":"node14/mem"}`)
	ok("range.get", `{"range_id":"node14/vxlan"}`)
	ok("resource.list", `{}`)
	ok("cluster.status", `{}`)
	ok("lease.revoke", `{"operation_id":"s6","lease_id":"`+lease+`"}`)
	ok("lease.reclaim", `{"operation_id":"s7","lease_id":"`+lease+`"}`)
	ok("run.create", `{"operation_id":"s8","run_id":"run-1","shards":[{"name":"a","start":"AA==","end":"/w=="},{"name":"b"}]}`)
	r = ok("lease.reserve", `{"operation_id":"s9","holder_id":"worker-1","ttl_ms":30000,"members":[{"work":{"run_id":"run-1"}}]}`)
	claim := r["lease"].(map[string]any)
	ok("run.get", `{"run_id":"run-1"}`)
	call("lease.release", `{"operation_id":"s10","holder_id":"worker-1","lease_id":"`+claim["lease_id"].(string)+`","lease_epoch":1}`)
	// Every verb's rejection of an empty request is a reply of the schema too.
	for verb := range doc.Verbs {
		call(verb, `{}`)
	}

	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	var evs []eventstest.Stored
	for {
		evs = eventstest.Stream(t, js)
		if len(evs) >= 10 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	kinds := map[string]bool{}
	for _, e := range evs {
		s.check(doc.Event, "event "+e.Subject, []byte(e.Raw))
		kinds[e.Subject[strings.Index(e.Subject, ".events.")+len(".events."):]] = true
	}
	for _, want := range []string{"resource.created", "pool.created", "range.created", "lease.reserved", "lease.activated", "lease.revoking", "lease.revoked", "run.created"} {
		if !kinds[want] {
			t.Errorf("no %s event among %v", want, kinds)
		}
	}
}
