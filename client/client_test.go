package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/messages"
)

const reserveSubject = "holdfast.v1.default.lease.reserve"

func newClient(t *testing.T, nc *nats.Conn, opts ...Option) *Client {
	t.Helper()
	base := []Option{WithTimeout(500 * time.Millisecond), WithRetry(5, time.Millisecond, 5*time.Millisecond)}
	c, err := New(nc, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// opIDOf decodes a JSON write request strictly (as the server would) and
// returns its operation id.
func opIDOf(t *testing.T, m *nats.Msg) string {
	t.Helper()
	var req messages.ReserveRequest
	if err := messages.UnmarshalJSON(m.Data, &req); err != nil {
		t.Fatalf("request is not a strict ReserveRequest: %v (%s)", err, m.Data)
	}
	return req.OperationId
}

func reserveSeat(ctx context.Context, c *Client, opts ...WriteOption) (*LeaseResult, error) {
	return c.Reserve(ctx, ReserveRequest{Holder: "alice", Members: []*messages.Member{Resource("show1/seat-A1")}, TTL: 1500 * time.Microsecond}, opts...)
}

func TestIndefiniteThenSuccessKeepsOperationID(t *testing.T) {
	_, nc := startNATS(t, false)
	f := &fake{handler: func(n int, m *nats.Msg) ([]byte, nats.Header, bool) {
		if n == 1 {
			return []byte(`{"outcome":"rejected","code":"engine_halted","category":"indefinite","message":"shard halted"}`), nil, true
		}
		return []byte(`{"outcome":"committed","code":"ok","lsn":"1042","from_retry_cache":true,
			"lease":{"lease_id":"3-1042","holder_id":"alice","state":"reserved","lease_epoch":"1",
			"created_lsn":"1042","deadline_slot":"99","members":[{"resource_id":"show1/seat-A1"}]}}`), nil, true
	}}
	f.serve(t, nc, reserveSubject)
	c := newClient(t, nc)

	res, err := reserveSeat(context.Background(), c)
	if err != nil {
		t.Fatalf("reserve: %v", err)
	}
	reqs := f.requests()
	if len(reqs) != 2 {
		t.Fatalf("requests = %d, want 2", len(reqs))
	}
	id1, id2 := opIDOf(t, reqs[0]), opIDOf(t, reqs[1])
	if id1 == "" || id1 != id2 {
		t.Fatalf("operation ids %q, %q: want the same, non-empty", id1, id2)
	}
	if len(id1) != 32 || !ValidID(id1) {
		t.Fatalf("generated operation id %q: want 32 hex chars", id1)
	}
	if string(reqs[0].Data) != string(reqs[1].Data) {
		t.Fatalf("retry sent different bytes:\n%s\n%s", reqs[0].Data, reqs[1].Data)
	}
	if !res.OK() || res.LSN != 1042 || !res.FromRetryCache || res.Attempts != 2 || res.OperationID != id1 {
		t.Fatalf("result = %+v", res.Result)
	}
	if got := res.Fence(); got != (Fence{LeaseID: "3-1042", Epoch: 1}) {
		t.Fatalf("fence = %v", got)
	}
	if res.Lease.DeadlineSlot != 99 || len(res.Lease.Members) != 1 {
		t.Fatalf("lease = %v", res.Lease.Lease)
	}
	// ttl_ms is rounded up to whole milliseconds.
	var req messages.ReserveRequest
	_ = messages.UnmarshalJSON(reqs[0].Data, &req)
	if req.TtlMs != 2 || req.HolderId != "alice" {
		t.Fatalf("request = %v", &req)
	}
}

func TestDefiniteRejectionNotRetried(t *testing.T) {
	_, nc := startNATS(t, false)
	f := &fake{handler: always(`{"outcome":"rejected","code":"cross_shard","category":"definite","message":"members span placement keys"}`)}
	f.serve(t, nc, reserveSubject)
	c := newClient(t, nc)

	res, err := reserveSeat(context.Background(), c, WithOperationID("my-op-1"))
	if res != nil {
		t.Fatalf("result %+v with a rejection", res)
	}
	var de *DefiniteError
	if !errors.As(err, &de) {
		t.Fatalf("err = %T %v, want *DefiniteError", err, err)
	}
	if de.Code != messages.CodeCrossShard || de.OperationID != "my-op-1" || de.Reply == nil || !strings.Contains(de.Error(), "placement keys") {
		t.Fatalf("definite error = %+v", de)
	}
	if !errors.Is(err, ErrDefinite) || !errors.Is(err, &DefiniteError{Code: "cross_shard"}) || errors.Is(err, &DefiniteError{Code: "overloaded"}) {
		t.Fatal("errors.Is does not classify the definite error")
	}
	if errors.Is(err, ErrIndefinite) || errors.Is(err, ErrCommitted) {
		t.Fatal("definite error matches another class")
	}
	if n := len(f.requests()); n != 1 {
		t.Fatalf("requests = %d, want 1 (no retry)", n)
	}
	if got := opIDOf(t, f.requests()[0]); got != "my-op-1" {
		t.Fatalf("operation id = %q, want the caller's", got)
	}
}

func TestTransportTimeoutRetried(t *testing.T) {
	_, nc := startNATS(t, false)
	f := &fake{handler: func(n int, m *nats.Msg) ([]byte, nats.Header, bool) {
		if n == 1 {
			return nil, nil, false // the reply is lost
		}
		return []byte(`{"outcome":"committed","code":"ok","lsn":7,"lease":{"lease_id":"0-7","lease_epoch":1}}`), nil, true
	}}
	f.serve(t, nc, reserveSubject)
	c := newClient(t, nc, WithTimeout(100*time.Millisecond))

	res, err := reserveSeat(context.Background(), c)
	if err != nil {
		t.Fatalf("reserve: %v", err)
	}
	reqs := f.requests()
	if len(reqs) != 2 || opIDOf(t, reqs[0]) != opIDOf(t, reqs[1]) {
		t.Fatalf("requests = %d, want 2 with one operation id", len(reqs))
	}
	if res.Attempts != 2 || res.LSN != 7 {
		t.Fatalf("result = %+v", res.Result)
	}
}

func TestServerTimeoutOutcomeRetriedUntilBudgetSpent(t *testing.T) {
	_, nc := startNATS(t, false)
	f := &fake{handler: always(`{"outcome":"rejected","code":"timeout","category":"indefinite"}`)}
	f.serve(t, nc, reserveSubject)
	c := newClient(t, nc, WithRetry(3, time.Millisecond, 2*time.Millisecond))

	_, err := reserveSeat(context.Background(), c)
	var ie *IndefiniteError
	if !errors.As(err, &ie) {
		t.Fatalf("err = %T %v, want *IndefiniteError", err, err)
	}
	reqs := f.requests()
	if len(reqs) != 3 || ie.Attempts != 3 || ie.Code != messages.CodeTimeout {
		t.Fatalf("requests = %d, error = %+v", len(reqs), ie)
	}
	for _, r := range reqs {
		if opIDOf(t, r) != ie.OperationID {
			t.Fatalf("request with operation id %q, error names %q", opIDOf(t, r), ie.OperationID)
		}
	}
	if OperationID(err) != ie.OperationID || Code(err) != "timeout" {
		t.Fatal("OperationID/Code helpers")
	}
	if !errors.Is(err, ErrIndefinite) || !strings.Contains(err.Error(), ie.OperationID) {
		t.Fatalf("error %q", err)
	}
}

// No service at all serves the prefix: the call says so at once, as a definite
// rejection (nothing received the request), naming the prefixes that did answer.
func TestNoServiceFailsFast(t *testing.T) {
	_, nc := startNATS(t, false)
	other := &fake{handler: always(`{"name":"holdfast","metadata":{"prefix":"acme.hf"}}`)}
	other.serve(t, nc, "$SRV.PING.holdfast")
	c := newClient(t, nc, WithRetry(50, time.Millisecond, 2*time.Millisecond))
	start := time.Now()
	_, err := c.CreateResource(context.Background(), "r1", WithOperationID("op-ns"))
	var de *DefiniteError
	if !errors.As(err, &de) || de.Code != CodeNoService || !strings.Contains(de.Message, `"acme.hf"`) || de.OperationID != "op-ns" {
		t.Fatalf("err = %#v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("took %v", took)
	}
}

// A service serves the prefix but the shard's endpoint has no responder for now (a
// restart): retried with the same operation id, then indefinite.
func TestNoRespondersRetriedThenIndefinite(t *testing.T) {
	_, nc := startNATS(t, false)
	svc := &fake{handler: always(`{"name":"holdfast","metadata":{"prefix":"holdfast"}}`)}
	svc.serve(t, nc, "$SRV.PING.holdfast")
	c := newClient(t, nc, WithRetry(4, time.Millisecond, 2*time.Millisecond))
	_, err := c.CreateResource(context.Background(), "r1", WithOperationID("op-nr"))
	var ie *IndefiniteError
	if !errors.As(err, &ie) || ie.Code != "no_responders" || ie.Attempts != 4 || ie.OperationID != "op-nr" {
		t.Fatalf("err = %#v", err)
	}
	if !errors.Is(err, nats.ErrNoResponders) {
		t.Fatal("IndefiniteError does not unwrap to the transport error")
	}
}

func TestContextEndsDuringRetries(t *testing.T) {
	_, nc := startNATS(t, false)
	f := &fake{handler: always(`{"outcome":"rejected","code":"storage_failure","category":"indefinite"}`)}
	f.serve(t, nc, "holdfast.v1.default.lease.release")
	c := newClient(t, nc, WithRetry(1000, 20*time.Millisecond, 20*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	_, err := c.Release(ctx, "alice", Fence{LeaseID: "1-5", Epoch: 1})
	var ie *IndefiniteError
	// The context may end between attempts (the last answer, storage_failure, is kept)
	// or during one (a busy machine: that attempt's timeout).
	if !errors.As(err, &ie) || (ie.Code != messages.CodeStorageFailure && ie.Code != "timeout") || ie.OperationID == "" || ie.Attempts < 2 {
		t.Fatalf("err = %#v", err)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err %v does not wrap the context's error", err)
	}
	if n := len(f.requests()); n < 2 || n > 20 {
		t.Fatalf("requests = %d", n)
	}
}

func TestCommittedDomainFailureIsNotAnError(t *testing.T) {
	_, nc := startNATS(t, false)
	f := &fake{handler: always(`{"outcome":"committed","code":"resource_busy","lsn":"12","message":"seat taken"}`)}
	f.serve(t, nc, reserveSubject)
	c := newClient(t, nc)
	res, err := reserveSeat(context.Background(), c)
	if err != nil {
		t.Fatalf("err = %v", err)
	}
	if res.OK() || res.Code != messages.CodeResourceBusy || res.LSN != 12 || res.Lease.Lease != nil {
		t.Fatalf("result = %+v", res.Result)
	}
	if !res.Fence().IsZero() {
		t.Fatal("fence of a result without a lease is not zero")
	}
	cerr := res.Err()
	var ce *CommittedError
	if !errors.As(cerr, &ce) || ce.Code != "resource_busy" || ce.LSN != 12 || ce.Op != "lease.reserve" {
		t.Fatalf("Err() = %#v", cerr)
	}
	if !errors.Is(cerr, &CommittedError{Code: "resource_busy"}) || !errors.Is(cerr, ErrCommitted) || errors.Is(cerr, &CommittedError{Code: "value_busy"}) {
		t.Fatal("errors.Is on CommittedError")
	}
	if n := len(f.requests()); n != 1 {
		t.Fatalf("requests = %d", n)
	}
}

func TestDecodes64BitFieldsAsStringsAndNumbers(t *testing.T) {
	_, nc := startNATS(t, false)
	f := &fake{handler: func(n int, m *nats.Msg) ([]byte, nats.Header, bool) {
		switch {
		case strings.HasSuffix(m.Subject, ".range.get"):
			return []byte(`{"outcome":"committed","code":"ok","applied_lsn":"9007199254740993",
				"range":{"range_id":"vxlan","first":"0","last":"18446744073709551615","strategy":"random",
				"allocated":"3","free":"18446744073709551612"}}`), nil, true
		case strings.HasSuffix(m.Subject, ".pool.get"):
			return []byte(`{"outcome":"committed","code":"ok","applied_lsn":17,
				"pool":{"pool_id":"node14/mem","capacity":80,"reserved":"8","active":32,"available":"40"}}`), nil, true
		default:
			return []byte(`{"outcome":"committed","code":"ok","applied_lsn":"5","some_future_field":true,
				"lease":{"lease_id":"2-5","lease_epoch":"18446744073709551615",
				"members":[{"range_id":"vxlan","value":"18446744073709551615"},{"pool_id":"p","quantity":"4"}]}}`), nil, true
		}
	}}
	f.serve(t, nc, "holdfast.v1.default.>")
	c := newClient(t, nc)
	ctx := context.Background()

	rr, err := c.GetRange(ctx, "vxlan")
	if err != nil {
		t.Fatal(err)
	}
	if rr.AppliedLSN != 9007199254740993 || rr.Range.Last != 1<<64-1 || rr.Range.Free != 1<<64-4 || rr.Range.Allocated != 3 {
		t.Fatalf("range = %v applied %d", rr.Range, rr.AppliedLSN)
	}
	pr, err := c.GetPool(ctx, "node14/mem")
	if err != nil {
		t.Fatal(err)
	}
	if pr.Pool.Capacity != 80 || pr.Pool.Reserved != 8 || pr.Pool.Active != 32 || pr.Pool.Available != 40 || pr.AppliedLSN != 17 {
		t.Fatalf("pool = %v", pr.Pool)
	}
	lr, err := c.GetLease(ctx, "2-5")
	if err != nil {
		t.Fatal(err)
	}
	if lr.Lease.LeaseEpoch != 1<<64-1 || lr.Lease.Members[0].GetValue() != 1<<64-1 || lr.Lease.Members[1].Quantity != 4 {
		t.Fatalf("lease = %v", lr.Lease.Lease)
	}
	// Reads carry no operation id and a strict-decodable body.
	for _, r := range f.requests() {
		if strings.Contains(string(r.Data), "operation_id") {
			t.Fatalf("read request with an operation id: %s", r.Data)
		}
	}
}

func TestProtobufMode(t *testing.T) {
	_, nc := startNATS(t, false)
	f := &fake{handler: func(n int, m *nats.Msg) ([]byte, nats.Header, bool) {
		if m.Header.Get("Content-Type") != "application/protobuf" {
			return []byte(`{"outcome":"rejected","code":"invalid_request","category":"definite","message":"not protobuf"}`), nil, true
		}
		var req messages.ReserveRequest
		if err := messages.UnmarshalProto(m.Data, &req); err != nil {
			return []byte(`{"outcome":"rejected","code":"invalid_request","category":"definite","message":"bad protobuf"}`), nil, true
		}
		if n == 1 {
			rep, _ := messages.MarshalProto(&messages.Reply{Outcome: "rejected", Code: "engine_halted", Category: "indefinite"})
			return rep, nats.Header{"Content-Type": []string{"application/protobuf"}}, true
		}
		v := uint64(42)
		rep, _ := messages.MarshalProto(&messages.Reply{
			Outcome: "committed", Code: "ok", Lsn: 1 << 62,
			Lease: &messages.Lease{LeaseId: "1-9", HolderId: req.HolderId, State: "reserved", LeaseEpoch: 1,
				Members: []*messages.Member{{RangeId: req.Members[0].RangeId, Value: &v}}},
		})
		return rep, nats.Header{"Content-Type": []string{"application/protobuf"}}, true
	}}
	f.serve(t, nc, reserveSubject)
	c := newClient(t, nc, WithProtobuf())
	if c.Encoding() != Protobuf {
		t.Fatal("encoding")
	}
	res, err := c.Reserve(context.Background(), ReserveRequest{Holder: "bob", Members: []*messages.Member{RangeAny("vxlan")}, TTL: time.Second})
	if err != nil {
		t.Fatalf("reserve: %v", err)
	}
	if res.LSN != 1<<62 || res.Lease.HolderId != "bob" || res.Lease.Members[0].GetValue() != 42 || res.Attempts != 2 {
		t.Fatalf("result = %+v lease %v", res.Result, res.Lease.Lease)
	}
	reqs := f.requests()
	var a, b messages.ReserveRequest
	if err := messages.UnmarshalProto(reqs[0].Data, &a); err != nil {
		t.Fatal(err)
	}
	if err := messages.UnmarshalProto(reqs[1].Data, &b); err != nil {
		t.Fatal(err)
	}
	if a.OperationId == "" || a.OperationId != b.OperationId || a.TtlMs != 1000 {
		t.Fatalf("requests %v / %v", &a, &b)
	}
}

func TestBareServiceErrorHeader(t *testing.T) {
	_, nc := startNATS(t, false)
	f := &fake{handler: func(int, *nats.Msg) ([]byte, nats.Header, bool) {
		return nil, nats.Header{"Nats-Service-Error": []string{"overloaded"}, "Nats-Service-Error-Code": []string{"503"}}, true
	}}
	f.serve(t, nc, "holdfast.v1.default.resource.create")
	c := newClient(t, nc)
	_, err := c.CreateResource(context.Background(), "r1")
	if !errors.Is(err, &DefiniteError{Code: "overloaded"}) {
		t.Fatalf("err = %v", err)
	}
}

func TestUndecodableReplyIsIndefiniteWithoutRetry(t *testing.T) {
	_, nc := startNATS(t, false)
	f := &fake{handler: always(`{"outcome": nope`)}
	f.serve(t, nc, "holdfast.v1.default.resource.create")
	c := newClient(t, nc)
	_, err := c.CreateResource(context.Background(), "r1")
	var ie *IndefiniteError
	if !errors.As(err, &ie) || ie.Code != "bad_reply" || ie.OperationID == "" {
		t.Fatalf("err = %#v", err)
	}
	if n := len(f.requests()); n != 1 {
		t.Fatalf("requests = %d", n)
	}
}

func TestSubjectsTenantPrefixAndRequests(t *testing.T) {
	_, nc := startNATS(t, false)
	f := &fake{handler: always(`{"outcome":"committed","code":"ok","lsn":"1"}`)}
	f.serve(t, nc, "acme.hf.v1.blue.>")
	c := newClient(t, nc, WithPrefix("acme.hf"), WithTenant("blue"))
	ctx := context.Background()
	fence := Fence{LeaseID: "4-77", Epoch: 3}
	steps := []struct {
		subject string
		call    func() error
		want    string // the request body, with operation ids replaced by OP
	}{
		{"resource.create", func() error { _, err := c.CreateResource(ctx, "n1/gpu0", WithOperationID("OP")); return err },
			`{"operation_id":"OP","resource_id":"n1/gpu0"}`},
		{"pool.create", func() error { _, err := c.CreatePool(ctx, "n1/mem", 80, WithOperationID("OP")); return err },
			`{"operation_id":"OP","pool_id":"n1/mem","capacity":"80"}`},
		{"range.create", func() error {
			_, err := c.CreateRange(ctx, "vxlan", 4096, 1<<24-1, messages.StrategyLeastRecentlyFreed, WithOperationID("OP"))
			return err
		}, `{"operation_id":"OP","range_id":"vxlan","first":"4096","last":"16777215","strategy":"least_recently_freed"}`},
		{"lease.reserve", func() error {
			_, err := c.Reserve(ctx, ReserveRequest{Holder: "h", Activate: true, Members: []*messages.Member{
				Resource("n1/gpu0"), PoolUnits("n1/mem", 4), RangeAny("n1/v"), RangeValue("n1/v", 0)}}, WithOperationID("OP"))
			return err
		}, `{"operation_id":"OP","holder_id":"h","members":[{"resource_id":"n1/gpu0"},{"pool_id":"n1/mem","quantity":"4"},{"range_id":"n1/v"},{"range_id":"n1/v","value":"0"}],"activate":true}`},
		{"lease.activate", func() error { _, err := c.Activate(ctx, "h", fence, WithOperationID("OP")); return err },
			`{"operation_id":"OP","lease_id":"4-77","holder_id":"h","lease_epoch":"3"}`},
		{"lease.renew", func() error { _, err := c.Renew(ctx, "h", fence, 30*time.Second, WithOperationID("OP")); return err },
			`{"operation_id":"OP","lease_id":"4-77","holder_id":"h","lease_epoch":"3","ttl_ms":"30000"}`},
		{"lease.release", func() error { _, err := c.Release(ctx, "h", fence, WithOperationID("OP")); return err },
			`{"operation_id":"OP","lease_id":"4-77","holder_id":"h","lease_epoch":"3"}`},
		{"lease.revoke", func() error { _, err := c.Revoke(ctx, "4-77", WithOperationID("OP")); return err },
			`{"operation_id":"OP","lease_id":"4-77"}`},
		{"lease.reclaim", func() error { _, err := c.Reclaim(ctx, "4-77", WithOperationID("OP")); return err },
			`{"operation_id":"OP","lease_id":"4-77"}`},
		{"resource.get", func() error { _, err := c.GetResource(ctx, "n1/gpu0"); return err },
			`{"resource_id":"n1/gpu0"}`},
		{"pool.get", func() error { _, err := c.GetPool(ctx, "n1/mem", MinLSN(12)); return err },
			`{"pool_id":"n1/mem","min_lsn":"12"}`},
		{"range.get", func() error { _, err := c.GetRange(ctx, "vxlan", MinLSN(12), Wait(0)); return err },
			`{"range_id":"vxlan","min_lsn":"12","wait_ms":0}`},
		{"lease.get", func() error { _, err := c.GetLease(ctx, "4-77", Wait(2500*time.Millisecond)); return err },
			`{"lease_id":"4-77","wait_ms":2500}`},
		{"lease.list", func() error { _, err := c.ListLeases(ctx, "h", 10); return err },
			`{"holder_id":"h","limit":10}`},
		{"lease.list", func() error { _, err := c.ListLeases(ctx, "h", 0); return err },
			`{"holder_id":"h"}`},
		{"resource.delete", func() error { _, err := c.DeleteResource(ctx, "n1/gpu0", WithOperationID("OP")); return err },
			`{"operation_id":"OP","resource_id":"n1/gpu0"}`},
		{"pool.delete", func() error { _, err := c.DeletePool(ctx, "n1/mem", WithOperationID("OP")); return err },
			`{"operation_id":"OP","pool_id":"n1/mem"}`},
		{"range.delete", func() error { _, err := c.DeleteRange(ctx, "vxlan", WithOperationID("OP")); return err },
			`{"operation_id":"OP","range_id":"vxlan"}`},
		{"run.delete", func() error { _, err := c.DeleteRun(ctx, "crawl", WithOperationID("OP")); return err },
			`{"operation_id":"OP","run_id":"crawl"}`},
	}
	for i, s := range steps {
		if err := s.call(); err != nil {
			t.Fatalf("%s: %v", s.subject, err)
		}
		reqs := f.requests()
		if len(reqs) != i+1 {
			t.Fatalf("%s: %d requests", s.subject, len(reqs))
		}
		r := reqs[i]
		if r.Subject != "acme.hf.v1.blue."+s.subject {
			t.Fatalf("subject %q, want acme.hf.v1.blue.%s", r.Subject, s.subject)
		}
		if string(r.Data) != s.want {
			t.Fatalf("%s body\n got %s\nwant %s", s.subject, r.Data, s.want)
		}
	}
}

func TestNewValidates(t *testing.T) {
	_, nc := startNATS(t, false)
	for _, o := range []Option{WithTenant(""), WithTenant("a.b"), WithTenant(strings.Repeat("t", 65)), WithPrefix(""), WithPrefix("a.*"), WithPrefix("a..b"), WithTimeout(0)} {
		if _, err := New(nc, o); err == nil {
			t.Fatal("New accepted an invalid option")
		}
	}
	if _, err := New(nil); err == nil {
		t.Fatal("New accepted a nil connection")
	}
	c, err := New(nc)
	if err != nil || c.Tenant() != "default" || c.Prefix() != "holdfast" || c.Encoding() != JSON {
		t.Fatalf("defaults: %v %v", c, err)
	}
}

func TestListLeases(t *testing.T) {
	_, nc := startNATS(t, false)
	f := &fake{handler: always(`{"outcome":"committed","code":"ok","truncated":true,
		"leases":[{"lease_id":"0-3","holder_id":"h","state":"active","lease_epoch":"1"},{"lease_id":"5-9","holder_id":"h","state":"reserved","lease_epoch":"2"}],
		"applied_lsns":[{"shard":0,"lsn":"17"},{"shard":5,"lsn":"9"}]}`)}
	f.serve(t, nc, "holdfast.v1.default.lease.list")
	c := newClient(t, nc)
	res, err := c.ListLeases(context.Background(), "h", 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Leases) != 2 || !res.Truncated || len(res.AppliedLSNs) != 2 || res.AppliedLSNs[1].Lsn != 9 {
		t.Fatalf("list = %+v", res)
	}
	if res.Leases[1].Fence() != (Fence{LeaseID: "5-9", Epoch: 2}) || !res.Leases[0].Live() {
		t.Fatal("lease helpers")
	}
	if s := res.Leases[0].String(); s != "0-3 holder=h state=active epoch=1" {
		t.Fatalf("String() = %q", s)
	}
}

func TestBackoffBounded(t *testing.T) {
	c := &Client{cfg: config{backoffBase: 10 * time.Millisecond, backoffMax: 80 * time.Millisecond}}
	for attempt := 1; attempt < 70; attempt++ {
		want := min(10*time.Millisecond<<min(attempt-1, 10), 80*time.Millisecond)
		for range 20 {
			d := c.backoff(attempt)
			if d < want/2 || d > want {
				t.Fatalf("backoff(%d) = %v, want in [%v, %v]", attempt, d, want/2, want)
			}
		}
	}
}

func TestOperationIDsAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := NewOperationID()
		if seen[id] || !contract.ValidOperationID(id) {
			t.Fatalf("operation id %q repeated or invalid", id)
		}
		seen[id] = true
	}
}

// The slot length comes from $SRV.INFO; when a service of another prefix answers that
// first, from this prefix's own cluster.status.
func TestSlotLengthAsksItsOwnPrefix(t *testing.T) {
	_, nc := startNATS(t, false)
	other := &fake{handler: always(`{"name":"holdfast","metadata":{"prefix":"acme.hf","slot_ms":"10"}}`)}
	other.serve(t, nc, "$SRV.INFO.holdfast")
	status := &fake{handler: always(`{"outcome":"committed","code":"ok","slot_ms":"250"}`)}
	status.serve(t, nc, "holdfast.v1.default.cluster.status")
	c := newClient(t, nc)
	d, err := c.SlotLength(context.Background())
	if err != nil || d != 250*time.Millisecond {
		t.Fatalf("slot length %v, %v; want 250ms from cluster.status", d, err)
	}
	own := newClient(t, nc, WithPrefix("acme.hf"))
	if d, err := own.SlotLength(context.Background()); err != nil || d != 10*time.Millisecond {
		t.Fatalf("acme.hf's slot length %v, %v; want 10ms from $SRV.INFO", d, err)
	}
}

// A route probe that finds its shard with nobody listening (the shard is being handed
// over or loaded) is asked again soon: the client does not stay on the public subject
// for good because its one probe came at the wrong moment.
func TestDirectRoutingSurvivesAProbeOfAMovingShard(t *testing.T) {
	_, nc := startNATS(t, false)
	if _, err := nc.Subscribe("$SRV.INFO.holdfast", func(m *nats.Msg) {
		_ = m.Respond([]byte(`{"name":"holdfast","metadata":{"prefix":"holdfast","shards":"1","routing":"direct"}}`))
	}); err != nil {
		t.Fatal(err)
	}
	const found = `{"outcome":"committed","code":"ok","resource":{"resource_id":"seat-1"}}`
	public := &fake{handler: always(found)}
	public.serve(t, nc, "holdfast.v1.default.resource.get")
	c := newClient(t, nc)
	get := func() {
		t.Helper()
		if _, err := c.GetResource(context.Background(), "seat-1"); err != nil {
			t.Fatal(err)
		}
	}
	// The first request starts the fetch; its probe meets no responders.
	get()
	time.Sleep(300 * time.Millisecond)
	owner := &fake{handler: always(found)}
	owner.serve(t, nc, contract.ShardSubject("holdfast", 0))
	deadline := time.Now().Add(5 * time.Second)
	for len(owner.requests()) < 2 { // the probe, then a request routed directly
		if time.Now().After(deadline) {
			t.Fatalf("no request reached the shard's owner directly (%d public)", len(public.requests()))
		}
		get()
		time.Sleep(50 * time.Millisecond)
	}
}

// A caller's deadline that ends an attempt in flight reports what the earlier attempts
// learnt (here engine_halted), not the cut attempt's timeout: the last answer is the one
// that says why the outcome is unknown.
func TestDeadlineDuringAnAttemptKeepsTheLastAnswer(t *testing.T) {
	_, nc := startNATS(t, false)
	f := &fake{handler: func(n int, m *nats.Msg) ([]byte, nats.Header, bool) {
		if n == 1 {
			return []byte(`{"outcome":"rejected","code":"engine_halted","category":"indefinite","message":"shard halted"}`), nil, true
		}
		return nil, nil, false // the next attempt is never answered: the deadline ends it
	}}
	f.serve(t, nc, reserveSubject)
	c := newClient(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := reserveSeat(ctx, c)
	var ie *IndefiniteError
	if !errors.As(err, &ie) || ie.Code != "engine_halted" || ie.Attempts != 2 {
		t.Fatalf("err = %v (%+v), want engine_halted after 2 attempts", err, ie)
	}
}
