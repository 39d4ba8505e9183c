//go:build unix

package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/micro"

	"github.com/holdfast/holdfast/integration/internal/check"
	"github.com/holdfast/holdfast/integration/internal/harness"
	"github.com/holdfast/holdfast/integration/internal/history"
	"github.com/holdfast/holdfast/messages"
)

// hostile is one bad request and what it must get.
type hostile struct {
	kind    string
	subject string
	data    []byte
	proto   bool
	// expect: "reject" (a definite rejection naming what is wrong), "absent" (committed
	// or read *_not_found), "none" (no responder: the subject is no endpoint), "replay"
	// (the original result from the retry cache), "conflict" (operation_conflict).
	expect string
	orig   *messages.Reply
	op     string
	verb   string
}

var hostileVerbs = []string{"resource.create", "resource.get", "pool.create", "pool.get", "range.create", "range.get",
	"lease.reserve", "lease.activate", "lease.renew", "lease.release", "lease.revoke", "lease.reclaim", "lease.get", "lease.list"}

// malformed builds a request that no server may accept: every one is a request fault.
func malformed(rng *rand.Rand, tenant string) hostile {
	verb := hostileVerbs[rng.IntN(len(hostileVerbs))]
	subj := "holdfast.v1." + tenant + "." + verb
	h := hostile{subject: subj, expect: "reject", verb: verb}
	write := check.IsWrite(verb)
	switch k := rng.IntN(16); k {
	case 0:
		h.kind = "random-bytes"
		b := make([]byte, 1+rng.IntN(300))
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		b[0] = '{' // never valid JSON: an object that does not close properly
		b[len(b)-1] = ','
		h.data = b
	case 1:
		h.kind = "truncated-json"
		h.data = []byte(`{"operation_id":"x1","resource_id":"n0/r0"`)
	case 2:
		h.kind = "wrong-type"
		h.data = []byte([]string{
			`{"operation_id":5,"resource_id":"a"}`, `{"operation_id":"x","holder_id":"h","members":"all","ttl_ms":5}`,
			`{"operation_id":"x","holder_id":"h","members":[{"resource_id":"a"}],"ttl_ms":"soon"}`,
			`{"operation_id":"x","pool_id":"p","capacity":-1}`, `{"operation_id":"x","lease_id":"0-1","holder_id":"h","lease_epoch":1.5}`,
			`{"resource_id":["a"]}`, `{"holder_id":{"a":1}}`, `{"operation_id":"x","range_id":"r","first":"zero","last":1}`,
		}[rng.IntN(8)])
	case 3:
		h.kind = "unknown-field"
		h.data = []byte(`{"operation_id":"x","resource_id":"n0/r0","lease_id":"0-1","holder_id":"h","evil":true}`)
	case 4:
		h.kind = "oversized"
		h.data = []byte(`{"operation_id":"x","resource_id":"` + strings.Repeat("a", 200<<10) + `"}`)
	case 5:
		h.kind = "bundle-too-large"
		verb = "lease.reserve"
		h.subject, h.verb = "holdfast.v1."+tenant+"."+verb, verb
		var ms []string
		for i := 0; i < 65+rng.IntN(100); i++ {
			ms = append(ms, fmt.Sprintf(`{"resource_id":"n0/x%d"}`, i))
		}
		h.data = []byte(`{"operation_id":"x","holder_id":"h","ttl_ms":1000,"members":[` + strings.Join(ms, ",") + `]}`)
	case 6:
		h.kind = "deep-nesting"
		h.data = []byte(`{"members":` + strings.Repeat("[", 5000) + strings.Repeat("]", 5000) + `}`)
	case 7:
		h.kind = "bad-id"
		bad := []string{"has space", strings.Repeat("r", 129), "-leading", "ünï", "a\u0000b", ""}[rng.IntN(6)]
		b, _ := json.Marshal(map[string]any{"operation_id": "x", "resource_id": bad, "pool_id": bad, "range_id": bad, "holder_id": bad})
		h.data = b
		if verb == "lease.list" || verb == "lease.get" || check.IsWrite(verb) && verb != "resource.create" {
			h.data = []byte(`{"operation_id":"x","lease_id":"` + []string{"abc", "00-1", "5-0", "99999-1", "1-", "-1"}[rng.IntN(6)] + `","holder_id":"!"}`)
		}
	case 8:
		h.kind = "invalid-utf8"
		h.data = append(append([]byte(`{"operation_id":"`), 0xff, 0xfe), []byte(`","resource_id":"a"}`)...)
	case 9:
		h.kind = "out-of-bounds"
		verb = []string{"resource.get", "lease.list", "lease.get"}[rng.IntN(3)]
		h.subject, h.verb = "holdfast.v1."+tenant+"."+verb, verb
		h.data = []byte(map[string]string{
			"resource.get": `{"resource_id":"n0/r0","wait_ms":10001}`,
			"lease.list":   `{"holder_id":"h1","limit":0}`,
			"lease.get":    `{"lease_id":"0-1","wait_ms":4294967295}`,
		}[verb])
	case 10:
		h.kind = "missing-fields"
		if !write {
			h.data = []byte(`{}`)
		} else {
			h.data = nil // an empty body: the empty request
		}
	case 11:
		h.kind = "bad-tenant"
		h.subject = "holdfast.v1." + []string{strings.Repeat("t", 65), "ten@nt", "t+1"}[rng.IntN(3)] + "." + verb
		h.data = []byte(`{"operation_id":"x","resource_id":"a"}`)
	case 12:
		h.kind = "no-endpoint"
		h.data = []byte(`{}`)
		// A verb-shaped subject naming no verb is answered (no such verb, definite);
		// other shapes reach no endpoint at all.
		switch rng.IntN(3) {
		case 0:
			h.subject, h.expect = "holdfast.v1."+tenant+".lease.steal", "reject"
		case 1:
			h.subject, h.expect = "holdfast.v1."+tenant+".lease.reserve.now", "none"
		default:
			h.subject, h.expect = "holdfast.v2."+tenant+".lease.get", "none"
		}
	case 13:
		h.kind = "protobuf-garbage"
		h.proto = true
		h.data = []byte{0x0a, 0x80, 0x80, 0x80, 0x80, 0x10, 'x'} // a length that runs past the end
	case 14:
		h.kind = "ttl-out-of-range"
		verb = "lease.reserve"
		h.subject, h.verb = "holdfast.v1."+tenant+"."+verb, verb
		h.data = []byte(`{"operation_id":"x","holder_id":"h","members":[{"resource_id":"n0/r0"}],"ttl_ms":` +
			[]string{"0", "3600001", "18446744073709551615"}[rng.IntN(3)] + `}`)
	default:
		h.kind = "cross-shard-duplicate"
		verb = "lease.reserve"
		h.subject, h.verb = "holdfast.v1."+tenant+"."+verb, verb
		h.data = []byte([]string{
			`{"operation_id":"x","holder_id":"h","ttl_ms":100,"members":[{"resource_id":"n0/r0"},{"resource_id":"n1/r0"},{"resource_id":"n0/r0"}]}`,
			`{"operation_id":"x","holder_id":"h","ttl_ms":100,"members":[{"resource_id":"n0/r0"},{"resource_id":"n0/r0"}]}`,
			`{"operation_id":"x","holder_id":"h","ttl_ms":100,"members":[{"pool_id":"n0/mem"}]}`,
			`{"operation_id":"x","holder_id":"h","ttl_ms":100,"members":[{"range_id":"n0/vx","quantity":2}]}`,
		}[rng.IntN(4)])
	}
	return h
}

// fromHistory builds replays of the correct clients' committed writes, the same ids with
// another command, and other tenants' views of their leases.
func fromHistory(rng *rand.Rand, recs []history.Record, correct []string) (hostile, bool) {
	var cands []*history.Record
	for i := range recs {
		r := &recs[i]
		if r.Kind == history.KindCall && r.Intent == "" && check.IsWrite(r.Verb) && len(r.Reply) > 0 && !r.Proto {
			cands = append(cands, r)
		}
	}
	if len(cands) == 0 {
		return hostile{}, false
	}
	r := cands[rng.IntN(len(cands))]
	orig := &messages.Reply{}
	if messages.UnmarshalJSONTolerant(r.Reply, orig) != nil || orig.Outcome != messages.OutcomeCommitted {
		return hostile{}, false
	}
	req, err := check.DecodeRequest(r.Verb, r.Request)
	if err != nil {
		return hostile{}, false
	}
	switch rng.IntN(3) {
	case 0:
		return hostile{kind: "replay", subject: r.Subject, data: r.Request, expect: "replay", orig: orig, op: r.Op, verb: r.Verb}, true
	case 1:
		var m map[string]any
		if json.Unmarshal(r.Request, &m) != nil {
			return hostile{}, false
		}
		switch {
		case r.Verb == "lease.reserve" && !req.Activate:
			m["ttl_ms"] = fmt.Sprint(req.TTLMs + 1)
		case r.Verb == "lease.activate" || r.Verb == "lease.release" || r.Verb == "lease.renew":
			m["lease_epoch"] = fmt.Sprint(req.Epoch + 7)
		case r.Verb == "pool.create":
			m["capacity"] = fmt.Sprint(req.Capacity + 1)
		default:
			return hostile{}, false
		}
		b, _ := json.Marshal(m)
		return hostile{kind: "conflicting-reuse", subject: r.Subject, data: b, expect: "conflict", op: r.Op, verb: r.Verb}, true
	default:
		if orig.Lease == nil {
			return hostile{}, false
		}
		verb := []string{"lease.get", "lease.release", "lease.revoke", "lease.reclaim", "lease.activate"}[rng.IntN(5)]
		body := fmt.Sprintf(`{"operation_id":"evil-%d","lease_id":%q,"holder_id":%q,"lease_epoch":"%d"}`, rng.Int64(), orig.Lease.LeaseId,
			orig.Lease.HolderId, orig.Lease.LeaseEpoch)
		switch verb {
		case "lease.get":
			body = fmt.Sprintf(`{"lease_id":%q}`, orig.Lease.LeaseId)
		case "lease.revoke", "lease.reclaim":
			body = fmt.Sprintf(`{"operation_id":"evil-%d","lease_id":%q}`, rng.Int64(), orig.Lease.LeaseId)
		}
		return hostile{kind: "wrong-tenant", subject: "holdfast.v1.evil." + verb, data: []byte(body), expect: "absent", verb: verb}, true
	}
}

// judge checks the answer to one hostile request.
func judge(h hostile, msg *nats.Msg, err error) string {
	if h.expect == "none" {
		if errors.Is(err, nats.ErrNoResponders) {
			return ""
		}
		return fmt.Sprintf("a subject that is no endpoint: want no responders, got %v", err)
	}
	if err != nil {
		return "no answer: " + err.Error()
	}
	r := &messages.Reply{}
	var derr error
	if h.proto {
		derr = messages.UnmarshalProtoTolerant(msg.Data, r)
	} else {
		derr = messages.UnmarshalJSONTolerant(msg.Data, r)
	}
	if derr != nil {
		return fmt.Sprintf("undecodable reply %q", msg.Data)
	}
	if r.Code == messages.CodeOverloaded {
		return "" // a definite refusal under load is always allowed
	}
	switch h.expect {
	case "reject":
		if r.Outcome != messages.OutcomeRejected || r.Category != messages.CategoryDefinite || !harness.ShapeRejection(r.Code) {
			return fmt.Sprintf("want a definite request-fault rejection, got %s/%s %s", r.Outcome, r.Code, r.Message)
		}
		if r.Message == "" || msg.Header.Get(micro.ErrorHeader) != r.Code || msg.Header.Get(micro.ErrorCodeHeader) != "400" {
			return fmt.Sprintf("rejection %s without its message or error headers (%v)", r.Code, msg.Header)
		}
	case "absent":
		if !strings.HasSuffix(r.Code, "_not_found") || r.Lease != nil {
			return fmt.Sprintf("another tenant's lease: want *_not_found, got %s %v", r.Code, r.Lease)
		}
	case "replay":
		if r.Outcome != messages.OutcomeCommitted || !r.FromRetryCache || r.Code != h.orig.Code || r.Lsn != h.orig.Lsn {
			return fmt.Sprintf("a replay of %s (%s lsn %d): got %s %s lsn %d cached %t", h.op, h.orig.Code, h.orig.Lsn, r.Outcome, r.Code, r.Lsn, r.FromRetryCache)
		}
	case "conflict":
		if r.Code != messages.CodeOperationConflict || r.Category != messages.CategoryDefinite {
			return fmt.Sprintf("operation id %s reused for another command: want operation_conflict, got %s/%s", h.op, r.Outcome, r.Code)
		}
	}
	return ""
}

// TestHostileClients: malformed, oversized, wrongly typed, wrong-tenant and replayed
// requests at a high (bounded) rate while correct clients work. The correct clients'
// history must pass every checker, every hostile request gets the answer the contract
// gives it, and the server stays up.
func TestHostileClients(t *testing.T) {
	s := seed()
	srv := newServer(t, 2)
	rec := newRecorder(t, t.Name())
	const workers, perWorker = 6, 2500
	var sent, bad atomic.Int64
	kinds := map[string]int{}
	var mu sync.Mutex
	var failures []string
	during := func(ctx context.Context, r *harness.Round) {
		time.Sleep(300 * time.Millisecond) // let the correct clients create their objects
		var wg sync.WaitGroup
		for w := 0; w < workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewPCG(uint64(s), uint64(w)+100))
				nc, err := nats.Connect(srv.URL(), nats.Name(fmt.Sprintf("hostile-%d", w)))
				if err != nil {
					t.Error(err)
					return
				}
				defer nc.Close()
				var recs []history.Record
				for i := 0; i < perWorker && ctx.Err() == nil; i++ {
					if i%200 == 0 {
						recs = rec.Records(r.ID)
					}
					var h hostile
					ok := false
					if rng.IntN(3) == 0 {
						h, ok = fromHistory(rng, recs, r.Tenants)
					}
					if !ok {
						tenant := r.Tenants[rng.IntN(len(r.Tenants))]
						if rng.IntN(3) == 0 {
							tenant = "evil"
						}
						h = malformed(rng, tenant)
					}
					m := nats.NewMsg(h.subject)
					m.Data = h.data
					if h.proto {
						m.Header.Set(messages.HeaderContentType, messages.ContentTypeProtobuf)
					}
					invoke := rec.Now()
					resp, err := nc.RequestMsg(m, 3*time.Second)
					sent.Add(1)
					if h.kind == "replay" && err == nil {
						// The replay's answer joins the history: the dedupe checker holds
						// it to the original's code and lsn.
						req := h.data
						rep := &messages.Reply{}
						if messages.UnmarshalJSONTolerant(resp.Data, rep) == nil {
							b, _ := messages.MarshalJSON(rep)
							tenant := strings.Split(h.subject, ".")[2]
							rec.Add(history.Record{Kind: history.KindCall, Round: r.ID, Client: 900 + w, Op: h.op, Attempt: 1, Verb: h.verb,
								Tenant: tenant, Subject: h.subject, Intent: history.IntentHostile, Request: req, Reply: b,
								Invoke: invoke, Return: rec.Now()})
						}
					}
					mu.Lock()
					kinds[h.kind]++
					if msg := judge(h, resp, err); msg != "" {
						bad.Add(1)
						if len(failures) < 20 {
							failures = append(failures, fmt.Sprintf("%s on %s %q: %s", h.kind, h.subject, truncate(h.data, 200), msg))
						}
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		// The server is still up and answers the micro service's ping.
		if !srv.Running() {
			t.Errorf("the server died under hostile traffic:\n%s", srv.LogTail())
			return
		}
		nc, err := nats.Connect(srv.URL())
		if err != nil {
			t.Errorf("connecting after the hostile traffic: %v", err)
			return
		}
		defer nc.Close()
		resp, err := nc.Request("$SRV.PING.holdfast", nil, 2*time.Second)
		if err != nil {
			t.Errorf("$SRV.PING after the hostile traffic: %v", err)
			return
		}
		var ping struct{ Name string }
		if json.Unmarshal(resp.Data, &ping) != nil || ping.Name != "holdfast" {
			t.Errorf("$SRV.PING answered %s", resp.Data)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	res, err := harness.RunRound(ctx, srv, rec, harness.RoundConfig{ID: 1, Shards: 2, Clients: 4, Keys: 3, Duration: 5 * time.Second,
		Seed: s, Proto: 0.2, Logf: t.Logf, During: during})
	if err != nil {
		t.Fatalf("round: %v\n%s", err, srv.LogTail())
	}
	for _, p := range res.Problems {
		t.Errorf("harness: %s", p)
	}
	t.Logf("seed %d: %d hostile requests (%v), %d wrong answers", s, sent.Load(), kinds, bad.Load())
	for _, f := range failures {
		t.Errorf("hostile: %s", f)
	}
	rep := check.Round(rec.Records(1), check.Options{})
	t.Logf("correct clients:\n%s", rep)
	if !rep.OK() {
		t.Errorf("the correct clients' history has %d violations", len(rep.Violations))
	}
	if sent.Load() < 1000 {
		t.Errorf("only %d hostile requests were sent", sent.Load())
	}
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
