package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/protobuf/proto"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/internal/testserver"
	"github.com/holdfast/holdfast/messages"
)

// fakeHoldfast answers resource.create, lease.reserve and lease.release in
// the request's encoding: creates alternate ok and already_exists, every
// third reserve is resource_busy, releases are ok.
func fakeHoldfast(t *testing.T, nc *nats.Conn) (reserves *atomic.Int64) {
	reserves, _ = fakeService(t, nc)
	return reserves
}

// fakeService is fakeHoldfast, and the handler it answers with: a request sent straight
// to a shard (its public subject in a header) is answered as on that subject.
func fakeService(t *testing.T, nc *nats.Conn) (reserves *atomic.Int64, handle nats.MsgHandler) {
	t.Helper()
	reserves = &atomic.Int64{}
	var creates, lsn atomic.Int64
	handle = func(m *nats.Msg) {
		subject := m.Subject
		if public := m.Header.Get(contract.HeaderSubject); public != "" && strings.HasPrefix(subject, "holdfast._shard.") {
			subject = public
		}
		pb := m.Header.Get(messages.HeaderContentType) == messages.ContentTypeProtobuf
		decode := func(req proto.Message) error {
			if pb {
				return messages.UnmarshalProto(m.Data, req)
			}
			return messages.UnmarshalJSON(m.Data, req)
		}
		rep := &messages.Reply{Outcome: "committed", Code: "ok", Lsn: uint64(lsn.Add(1))}
		switch {
		case strings.HasSuffix(subject, ".resource.create"):
			var req messages.CreateResourceRequest
			if decode(&req) != nil {
				rep = &messages.Reply{Outcome: "rejected", Code: "invalid_request", Category: "definite"}
			} else if creates.Add(1)%2 == 0 {
				rep.Code = "already_exists"
			}
		case strings.HasSuffix(subject, ".lease.reserve"):
			var req messages.ReserveRequest
			if decode(&req) != nil || len(req.Members) != 1 || req.OperationId == "" || req.TtlMs != 10000 {
				rep = &messages.Reply{Outcome: "rejected", Code: "invalid_request", Category: "definite"}
			} else if reserves.Add(1)%3 == 0 {
				rep.Code = "resource_busy"
			} else {
				rep.Lease = &messages.Lease{LeaseId: "0-" + req.OperationId[len(req.OperationId)-1:], HolderId: req.HolderId, LeaseEpoch: 1, Members: req.Members}
			}
		case strings.HasSuffix(subject, ".resource.delete"):
			var req messages.DeleteResourceRequest
			if decode(&req) != nil || req.ResourceId == "" {
				rep = &messages.Reply{Outcome: "rejected", Code: "invalid_request", Category: "definite"}
			}
		case strings.HasSuffix(subject, ".lease.release"):
			var req messages.ReleaseRequest
			if decode(&req) != nil || req.LeaseEpoch != 1 || req.HolderId == "" {
				rep = &messages.Reply{Outcome: "rejected", Code: "invalid_request", Category: "definite"}
			}
		default:
			rep = &messages.Reply{Outcome: "rejected", Code: "invalid_request", Category: "definite"}
		}
		var data []byte
		hdr := nats.Header{}
		if pb {
			data, _ = messages.MarshalProto(rep)
			hdr.Set(messages.HeaderContentType, messages.ContentTypeProtobuf)
		} else {
			data, _ = messages.MarshalJSON(rep)
		}
		_ = m.RespondMsg(&nats.Msg{Data: data, Header: hdr})
	}
	if _, err := nc.Subscribe("holdfast.v1.bench.>", handle); err != nil { // bench writes in tenant bench
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return reserves, handle
}

// In a cluster that routes directly the bench sends its load straight to each shard's
// owner, as the Go client does: every reserve to its resource's shard, every release to
// its lease's, the public subject in the header; --no-direct keeps them on the public
// subjects.
func TestBenchRoutesDirectlyWhereTheServiceDoes(t *testing.T) {
	for _, noDirect := range []bool{false, true} {
		t.Run(fmt.Sprintf("no-direct=%v", noDirect), func(t *testing.T) {
			_, nc := startNATS(t)
			_, handle := fakeService(t, nc)
			const shards = 4
			var direct, misplaced atomic.Int64
			if _, err := nc.Subscribe("$SRV.INFO.holdfast", func(m *nats.Msg) {
				_ = m.Respond([]byte(`{"metadata":{"prefix":"holdfast","shards":"4","routing":"direct"}}`))
			}); err != nil {
				t.Fatal(err)
			}
			if _, err := nc.Subscribe("holdfast._shard.*", func(m *nats.Msg) {
				if strings.HasSuffix(m.Header.Get(contract.HeaderSubject), ".lease.reserve") {
					direct.Add(1)
					var req messages.ReserveRequest
					if messages.UnmarshalProto(m.Data, &req) != nil || len(req.Members) != 1 ||
						m.Subject != contract.ShardSubject("holdfast", contract.ShardOf("bench", contract.PlacementKey(req.Members[0].ResourceId), shards)) {
						misplaced.Add(1)
					}
				}
				handle(m)
			}); err != nil {
				t.Fatal(err)
			}
			args := []string{"--clients", "2", "--resources", "8", "--duration", "600ms", "--timeout", "2s"}
			if noDirect {
				args = append(args, "--no-direct")
			}
			rep, _ := benchRun(t, nc, args...)
			switch {
			case rep.Holdfast.Codes["reserve"]["ok"] == 0:
				t.Fatalf("no reserve answered ok: %v", rep.Holdfast.Codes)
			case noDirect && (direct.Load() != 0 || rep.Routing != "public"):
				t.Fatalf("--no-direct: %d reserves sent to a shard, routing %q", direct.Load(), rep.Routing)
			case !noDirect && (rep.Routing != "direct" || direct.Load() < int64(rep.Holdfast.Verbs[0].Count)):
				t.Fatalf("routing %q: %d of %d reserves sent to their shard", rep.Routing, direct.Load(), rep.Holdfast.Verbs[0].Count)
			case misplaced.Load() != 0:
				t.Fatalf("%d reserves sent to another shard than their resource's", misplaced.Load())
			}
		})
	}
}

func TestBenchRunsAndStopsByItself(t *testing.T) {
	for _, enc := range []string{"protobuf", "json"} {
		t.Run(enc, func(t *testing.T) {
			url, nc := startNATS(t)
			reserves := fakeHoldfast(t, nc)
			start := time.Now()
			// --duration is the whole run: 1.2 s for the holdfast phase, 1.2 s for echo.
			code, out, errOut := run(t, cmdBench, "--server", url, "--clients", "4", "--resources", "5", "--duration", "2400ms",
				"--echo", "--encoding", enc, "--conns", "2", "--timeout", "2s")
			if code != exitOK {
				t.Fatalf("exit %d, stderr %s", code, errOut)
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Fatalf("bench took %v", took)
			}
			if reserves.Load() == 0 {
				t.Fatal("no reserve reached the service")
			}
			for _, want := range []string{
				"holdfast bench: scenario=spread clients=4 resources=5 duration=2.4s encoding=" + enc + " conns=2 routing=public\n",
				"setup: 5 resource(s) ready in ", "(3 created, 2 existed)",
				"  attempts/s ", "  grants/s ", "  requests/s ", "(reserve + release requests)",
				"  verb          count       p50       p99      p999       max\n",
				"  reserve  ", "  release  ", "  codes reserve: ok=", " resource_busy=", "  codes release: ok=",
				"echo: ", "(echo requests)", "  echo     ", "ratio: holdfast requests/s / echo requests/s = ",
				"cleanup: 5 resource(s) deleted in ",
			} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if !strings.Contains(errOut, "bench [holdfast   1s] reserve") || !strings.Contains(errOut, "bench [echo   1s]") {
				t.Errorf("no progress lines on stderr:\n%s", errOut)
			}
		})
	}
}

// benchRun parses args as bench's command line and runs it on nc without progress lines:
// the report and what it printed.
func benchRun(t *testing.T, nc *nats.Conn, args ...string) (*benchReport, string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, ctx: context.Background()}
	cfg, code := parseBench(e, args)
	if code >= 0 {
		t.Fatalf("parse: %d %s", code, errb.String())
	}
	cfg.progress = false
	rep, err := runBench(e, cfg, []*nats.Conn{nc})
	if err != nil {
		t.Fatal(err)
	}
	return rep, out.String()
}

func TestBenchReportNumbers(t *testing.T) {
	url, nc := startNATS(t)
	fakeHoldfast(t, nc)
	rep, _ := benchRun(t, nc, "--server", url, "--clients", "3", "--resources", "2", "--duration", "300ms", "--echo") // 150 ms a phase
	h := rep.Holdfast
	okRes, busy, okRel := h.Codes["reserve"]["ok"], h.Codes["reserve"]["resource_busy"], h.Codes["release"]["ok"]
	if okRes == 0 || busy == 0 || okRel != okRes || h.Verbs[0].Count != okRes+busy || h.Verbs[1].Count != okRel {
		t.Fatalf("codes %v verbs %+v", h.Codes, h.Verbs)
	}
	if h.Cycles != h.Verbs[0].Count || h.Elapsed < 150*time.Millisecond {
		t.Fatalf("cycles %d elapsed %v", h.Cycles, h.Elapsed)
	}
	secs := h.Elapsed.Seconds()
	if diff := h.RequestsPS - float64(okRes+busy+okRel)/secs; diff > 1e-6 || diff < -1e-6 {
		t.Fatalf("requests/s %v", h.RequestsPS)
	}
	if h.GrantsPS > h.AttemptsPS || h.Verbs[0].P50 <= 0 || h.Verbs[0].P50 > h.Verbs[0].P99 || h.Verbs[0].P99 > h.Verbs[0].P999 || h.Verbs[0].P999 > h.Verbs[0].Max {
		t.Fatalf("rates or latencies out of order: %+v", h)
	}
	if rep.Echo == nil || rep.Echo.RequestsPS <= 0 || rep.Ratio != h.RequestsPS/rep.Echo.RequestsPS {
		t.Fatalf("echo %+v ratio %v", rep.Echo, rep.Ratio)
	}
	if b, err := json.Marshal(rep); err != nil || !strings.Contains(string(b), `"ratio_holdfast_to_echo_requests"`) {
		t.Fatalf("json: %s %v", b, err)
	}
}

func TestBenchScenarioDefaults(t *testing.T) {
	var out bytes.Buffer
	e := &env{stdout: &out, stderr: &out, ctx: context.Background()}
	for _, c := range []struct {
		args               []string
		clients, resources int
	}{
		{nil, 64, 10000},
		{[]string{"--scenario", "hotspot"}, 64, 1},
		{[]string{"--scenario", "hotspot", "--resources", "3", "--clients", "8"}, 8, 3},
		{[]string{"--scenario", "spread", "--clients", "2"}, 2, 10000},
		{[]string{"--scenario", "claim"}, 64, 2048},
		{[]string{"--scenario", "bundles"}, 64, 10000},
		{[]string{"--scenario", "bundle-hotspot"}, 16, 8},
		{[]string{"--scenario", "bundle-hotspot", "--clients", "4"}, 4, 8},
	} {
		cfg, code := parseBench(e, c.args)
		if code >= 0 || cfg.clients != c.clients || cfg.resources != c.resources || cfg.encoding != client.Protobuf {
			t.Fatalf("%v: code %d cfg %+v (%s)", c.args, code, cfg, out.String())
		}
	}
}

func TestBenchCannotConnect(t *testing.T) {
	code, _, errOut := run(t, cmdBench, "--server", "nats://127.0.0.1:1", "--duration", "1s")
	if code != exitConnect || !strings.Contains(errOut, "cannot connect") {
		t.Fatalf("exit %d %s", code, errOut)
	}
}

func TestBenchReportExplainsAFullOperationTable(t *testing.T) {
	note := "operation table filled"
	for _, c := range []struct {
		codes map[string]uint64
		want  bool
	}{
		{codes: map[string]uint64{"ok": 10, "resource_busy": 5}},
		{codes: map[string]uint64{"ok": 10, "operation_table_full": 5}, want: true},
	} {
		rep := &benchReport{Holdfast: phaseReport{Codes: map[string]map[string]uint64{"reserve": c.codes}}}
		var out bytes.Buffer
		rep.print(&out)
		if got := strings.Contains(out.String(), note); got != c.want {
			t.Errorf("codes %v: note printed %v, want %v:\n%s", c.codes, got, c.want, out.String())
		}
	}
}

// The claim scenario against a real Holdfast: every work shard of the runs claimed,
// checkpointed and completed once.
func TestBenchClaimScenario(t *testing.T) {
	srv := testserver.Start(t)
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	rep, _ := benchRun(t, nc, "--scenario", "claim", "--resources", "300", "--clients", "4", "--checkpoints", "2", "--duration", "30s")
	var buf bytes.Buffer
	rep.print(&buf)
	out := buf.String()
	if rep.Holdfast.Cycles != 300 || rep.Holdfast.Codes["checkpoint"]["ok"] != 600 || rep.Holdfast.Codes["complete"]["ok"] != 300 {
		t.Fatalf("claim scenario: %+v\n%s", rep.Holdfast, out)
	}
	for _, want := range []string{"scenario=claim clients=4 resources=300", "work shards completed: 300 of 300", "  claim  ", "  checkpt  ",
		"cleanup: 2 run(s) deleted in "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The runs are gone, with their work shards: the tables are as before.
	cl, err := client.New(nc, client.WithTenant("bench"))
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range []string{"run0", "run1"} {
		id := "bench-" + rep.RunID + "-" + run
		if r, err := cl.GetRun(context.Background(), id); err != nil || r.Code != messages.CodeRunNotFound {
			t.Fatalf("run %s after the bench: %v %+v", id, err, r)
		}
	}
}

// A bench deletes what it used unless --keep: run twice against a real Holdfast, once with
// --keep, the resources are there after the first and gone after the second.
func TestBenchDeletesWhatItUsedUnlessKeep(t *testing.T) {
	srv := testserver.Start(t)
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cl, err := client.New(nc, client.WithTenant("bench"))
	if err != nil {
		t.Fatal(err)
	}
	exists := func() int {
		n := 0
		for _, id := range []string{"bench-r0", "bench-r1", "bench-r2"} {
			r, err := cl.GetResource(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if r.Code == messages.CodeOK {
				n++
			}
		}
		return n
	}
	printed := func(rep *benchReport) string {
		var b bytes.Buffer
		rep.print(&b)
		return b.String()
	}
	rep, _ := benchRun(t, nc, "--resources", "3", "--clients", "2", "--duration", "300ms", "--keep")
	out := printed(rep)
	if rep.Cleanup != nil || !rep.Kept || !strings.Contains(out, "kept: the resource(s) stay in tenant bench (--keep)") || exists() != 3 {
		t.Fatalf("--keep: cleanup %+v, %d resources left\n%s", rep.Cleanup, exists(), out)
	}
	rep, _ = benchRun(t, nc, "--resources", "3", "--clients", "2", "--duration", "300ms", "--bystander-tenant", "other")
	out = printed(rep)
	if !strings.Contains(out, "cleanup: 4 resource(s) deleted in ") {
		t.Errorf("output:\n%s", out)
	}
	if c := rep.Cleanup; c == nil || c.Deleted != 4 || c.Left != 0 || c.Error != "" || rep.Setup.Existed != 3 || exists() != 0 {
		t.Fatalf("cleanup %+v, setup %+v, %d resources left\n%s", c, rep.Setup, exists(), out)
	}
}

// The claim bench's checkpoint keys order as their numbers do ("k10" before "k9" was a
// cursor_regression of its own making past nine checkpoints), and a claimed work shard
// resumes after its cursor.
func TestBenchCheckpointKeys(t *testing.T) {
	for k := 0; k < 20; k++ {
		if bytes.Compare(checkpointKey(k), checkpointKey(k+1)) >= 0 {
			t.Fatalf("key %d %q does not sort before key %d %q", k, checkpointKey(k), k+1, checkpointKey(k+1))
		}
		if got := resumeAfter(checkpointKey(k)); got != k+1 {
			t.Fatalf("resume after %q: %d, want %d", checkpointKey(k), got, k+1)
		}
	}
	if resumeAfter(nil) != 0 || resumeAfter([]byte("other")) != 0 {
		t.Fatal("a cursor that is not the bench's resumes from 0")
	}
}

// --by-shard pins each client to one shard's resources and reports every shard's part:
// the parts add up to the run, and each shard's clients reserved only its resources.
func TestBenchByShard(t *testing.T) {
	srv := testserver.Start(t)
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	rep, out := benchRun(t, nc, "--server", srv.URL, "--clients", "16", "--resources", "200", "--duration", "600ms", "--by-shard")
	if len(rep.Shards) != 8 {
		t.Fatalf("%d shards reported, want 8:\n%s", len(rep.Shards), out)
	}
	var clients int
	var requests uint64
	for _, s := range rep.Shards {
		clients += s.Clients
		requests += s.Requests
		if s.Failures != 0 || s.Requests == 0 || s.Latency.Count != s.Requests {
			t.Errorf("shard %d: %+v", s.Shard, s)
		}
	}
	var total uint64
	for _, v := range rep.Holdfast.Verbs {
		total += v.Count
	}
	if clients != 16 || requests != total {
		t.Fatalf("shards add up to %d clients and %d requests; the run had 16 and %d", clients, requests, total)
	}
	var printed bytes.Buffer
	rep.print(&printed)
	if !strings.Contains(printed.String(), "  shard  clients   requests  failures") {
		t.Fatalf("no shard table:\n%s", printed.String())
	}
	// Pinned: each shard's resources are its own.
	by := shardResources("bench", []string{"bench-r0", "bench-r1", "bench-r2", "bench-r3"}, 8)
	pinned, shard := pinWorkers(by, 16)
	for i, rs := range pinned {
		for _, r := range rs {
			req := &messages.ReserveRequest{Members: []*messages.Member{{ResourceId: r}}}
			if k, _ := client.PlaceRequest("bench", req, 8); k != shard[i] {
				t.Fatalf("client %d on shard %d got %s of shard %d", i, shard[i], r, k)
			}
		}
	}
}

// --audit reads back every lease granted: on a real service, all are found and all whose
// release was answered ok read released; on a service that forgets them (the fake keeps
// nothing), the run says what is missing and exits non-zero.
func TestBenchAudit(t *testing.T) {
	srv := testserver.Start(t)
	nc, err := nats.Connect(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	rep, out := benchRun(t, nc, "--resources", "20", "--clients", "4", "--duration", "500ms", "--audit")
	a := rep.Audit
	granted := int(rep.Holdfast.Codes["reserve"]["ok"])
	if a == nil || a.failed() != nil || a.Granted != granted || granted == 0 || a.Released+a.Unanswered != granted ||
		a.Released != int(rep.Holdfast.Codes["release"]["ok"]) {
		t.Fatalf("audit %+v of %d grants\n%s", a, granted, out)
	}
	var b bytes.Buffer
	rep.print(&b)
	if !strings.Contains(b.String(), fmt.Sprintf("audit: %d lease(s) granted, read back: %d released as answered", granted, a.Released)) {
		t.Fatalf("report:\n%s", b.String())
	}

	url, fnc := startNATS(t)
	fakeHoldfast(t, fnc)
	code, _, errOut := run(t, cmdBench, "--server", url, "--clients", "2", "--resources", "5", "--duration", "300ms", "--audit", "--timeout", "2s")
	if code == exitOK || !strings.Contains(errOut, "audit: ") || !strings.Contains(errOut, "missing") {
		t.Fatalf("a service that forgets: exit %d, stderr %s", code, errOut)
	}
	if code, _, errOut := run(t, cmdBench, "--server", url, "--scenario", "claim", "--audit"); code != exitUsage || !strings.Contains(errOut, "--audit") {
		t.Fatalf("--audit with claim: exit %d, %s", code, errOut)
	}
}

// --bundle takes N members per reserve: distinct keys, or with --one-key the members of one.
func TestBenchBundleFlags(t *testing.T) {
	var out bytes.Buffer
	e := &env{stdout: &out, stderr: &out, ctx: context.Background()}
	cfg, code := parseBench(e, []string{"--bundle", "3", "--one-key"})
	if code >= 0 || cfg.bundle != 3 || !cfg.oneKey {
		t.Fatalf("code %d cfg %+v (%s)", code, cfg, out.String())
	}
	for _, args := range [][]string{{"--one-key"}, {"--bundle", "17"}, {"--bundle", "0"}, {"--bundle", "2", "--by-shard"},
		{"--bundle", "2", "--scenario", "claim"}, {"--bundle", "3", "--resources", "2"}} {
		if _, code := parseBench(e, args); code != exitUsage {
			t.Errorf("%v: exit %d, want a usage error", args, code)
		}
	}
	w := newBenchWorker(&benchConfig{bundle: 3}, nil, nil, "h", "op", rand.New(rand.NewPCG(1, 2)))
	for range 100 {
		w.pick([]string{"a", "b", "c", "d"})
		if a, b, c := w.members[0].ResourceId, w.members[1].ResourceId, w.members[2].ResourceId; a == b || b == c || a == c {
			t.Fatalf("a bundle of %s, %s, %s repeats a member", a, b, c)
		}
	}
	w = newBenchWorker(&benchConfig{bundle: 2, oneKey: true}, nil, nil, "h", "op", rand.New(rand.NewPCG(1, 2)))
	w.pick([]string{"k0/m0", "k0/m1"})
	if w.members[0].ResourceId != "k0/m0" || w.members[1].ResourceId != "k0/m1" {
		t.Fatalf("one key's members: %v", w.members)
	}
}
