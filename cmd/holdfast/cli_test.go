package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/alecthomas/kong"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/internal/testserver"
	"github.com/holdfast/holdfast/messages"
)

// startNATS starts an embedded NATS server on 127.0.0.1 at a random port and
// returns its URL and a connection for the fake responders.
func startNATS(t *testing.T) (string, *nats.Conn) {
	t.Helper()
	s, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	go s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(s.Shutdown)
	nc, err := nats.Connect(s.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return s.ClientURL(), nc
}

// responder answers requests on subject with reply(request); it records the
// request bodies.
type responder struct {
	mu   sync.Mutex
	reqs []string
}

func (r *responder) bodies() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.reqs...)
}

func respond(t *testing.T, nc *nats.Conn, subject string, reply func(req []byte) string) *responder {
	t.Helper()
	r := &responder{}
	_, err := nc.Subscribe(subject, func(m *nats.Msg) {
		r.mu.Lock()
		r.reqs = append(r.reqs, string(m.Data))
		r.mu.Unlock()
		_ = m.Respond([]byte(reply(m.Data)))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return r
}

// run runs a command as the binary would and returns its exit code, stdout
// and stderr.
func run(t *testing.T, cmd func(*env, []string) int, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, ctx: context.Background()}
	code := cmd(e, args)
	return code, out.String(), errb.String()
}

// runCtx is run with the command's context (an interrupt is its cancellation).
func runCtx(ctx context.Context, cmd func(*env, []string) int, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	e := &env{stdout: &out, stderr: &errb, ctx: ctx}
	code := cmd(e, args)
	return code, out.String(), errb.String()
}

// command runs one top-level command with args, as the binary does.
func command(name string) func(*env, []string) int {
	return func(e *env, args []string) int { return runCLI(e, append([]string{name}, args...)) }
}

var (
	cmdResource = command("resource")
	cmdPool     = command("pool")
	cmdRange    = command("range")
	cmdLease    = command("lease")
	cmdRun      = command("run")
	cmdWork     = command("work")
	cmdCluster  = command("cluster")
	cmdWatch    = command("watch")
	cmdBench    = command("bench")
)

const leaseReply = `{"outcome":"committed","code":"ok","lsn":"1042","lease":{"lease_id":"3-1042","holder_id":"alice",
"state":"reserved","lease_epoch":"1","created_lsn":"1042","deadline_slot":"99",
"members":[{"resource_id":"n14/gpu0"},{"pool_id":"n14/mem","quantity":"4"},{"range_id":"n14/vx","value":"42"}],
"labels":{"owner_uuid":"vm-1","owner_type":"instance"}}}`

func TestMemberListKeepsCommandLineOrder(t *testing.T) {
	var out bytes.Buffer
	e := &env{stdout: &out, stderr: &out, ctx: context.Background()}
	_, root, err := parse(e, []string{"lease", "reserve", "--range", "n/vx", "--resource", "n/a", "--holder", "h", "--pool", "n/mem:x:4",
		"--range=n/vx=18446744073709551615", "--resource", "n/b"})
	if err != nil {
		t.Fatalf("parse: %v %s", err, out.String())
	}
	members := root.Lease.Reserve.members()
	var got []string
	for _, m := range members {
		got = append(got, memberString(m))
	}
	want := []string{"range n/vx", "resource n/a", "pool n/mem:x:4", "range n/vx=18446744073709551615", "resource n/b"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("members = %q, want %q", got, want)
	}
	if members[2].PoolId != "n/mem:x" || members[2].Quantity != 4 {
		t.Fatalf("pool member = %v", members[2])
	}
	if members[0].Value != nil || members[3].GetValue() != 1<<64-1 {
		t.Fatal("range values")
	}
}

func TestParseMemberErrors(t *testing.T) {
	for _, c := range []struct {
		kind memberKind
		s    string
	}{
		{memberResource, ""}, {memberPool, "mem"}, {memberPool, ":4"}, {memberPool, "mem:0"}, {memberPool, "mem:-1"},
		{memberPool, "mem:x"}, {memberRange, "=4"}, {memberRange, "vx=x"}, {memberRange, "vx=-1"}, {memberRange, "vx=18446744073709551616"},
	} {
		if _, err := parseMember(c.kind, c.s); err == nil {
			t.Errorf("parseMember(%d, %q) accepted", c.kind, c.s)
		}
	}
}

func TestReserveExitCodesAndOutput(t *testing.T) {
	url, nc := startNATS(t)
	var (
		mu    sync.Mutex
		reply = leaseReply
	)
	set := func(s string) { mu.Lock(); reply = s; mu.Unlock() }
	r := respond(t, nc, "holdfast.v1.acme.lease.reserve", func([]byte) string { mu.Lock(); defer mu.Unlock(); return reply })
	args := []string{"reserve", "--server", url, "--tenant", "acme", "--timeout", "2s", "--holder", "alice",
		"--resource", "n14/gpu0", "--pool", "n14/mem:4", "--range", "n14/vx=42", "--ttl", "1500ms", "--op", "op-1"}

	code, out, errOut := run(t, cmdLease, args...)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	wantOut := `ok lease.reserve lsn=1042 op=op-1
lease 3-1042
  holder   alice
  state    reserved
  epoch    1
  fence    3-1042@1
  log      created_lsn=1042 deadline_slot=99
  member   resource n14/gpu0
  member   pool n14/mem:4
  member   range n14/vx=42
  label    owner_type=instance
  label    owner_uuid=vm-1
`
	if out != wantOut {
		t.Fatalf("output:\n%s\nwant:\n%s", out, wantOut)
	}
	if got := r.bodies()[0]; got != `{"operation_id":"op-1","holder_id":"alice","members":[{"resource_id":"n14/gpu0"},{"pool_id":"n14/mem","quantity":"4"},{"range_id":"n14/vx","value":"42"}],"ttl_ms":"1500"}` {
		t.Fatalf("request = %s", got)
	}

	// --json prints the reply as received.
	code, out, _ = run(t, cmdLease, append(args, "--json")...)
	if code != exitOK || out != leaseReply+"\n" {
		t.Fatalf("--json: exit %d, output %q", code, out)
	}

	set(`{"outcome":"committed","code":"resource_busy","lsn":"1043"}`)
	code, out, _ = run(t, cmdLease, args...)
	if code != exitDomain || out != "resource_busy lease.reserve lsn=1043 op=op-1\n" {
		t.Fatalf("busy: exit %d, output %q", code, out)
	}

	set(`{"outcome":"rejected","code":"cross_shard","category":"definite","message":"members span placement keys"}`)
	code, out, errOut = run(t, cmdLease, args...)
	if code != exitDefinite || out != "" || !strings.Contains(errOut, "rejected (definite): cross_shard: members span placement keys") {
		t.Fatalf("definite: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = run(t, cmdLease, append(args, "--json")...)
	if code != exitDefinite || !strings.Contains(out, `"code":"cross_shard"`) {
		t.Fatalf("definite --json: exit %d, stdout %q", code, out)
	}

	set(`{"outcome":"rejected","code":"engine_halted","category":"indefinite"}`)
	short := append(append([]string(nil), args...), "--timeout", "300ms")
	code, _, errOut = run(t, cmdLease, short...)
	if code != exitIndefinite || !strings.Contains(errOut, "outcome unknown: engine_halted") || !strings.Contains(errOut, "retry with --op op-1") {
		t.Fatalf("indefinite: exit %d, stderr %q", code, errOut)
	}
	for _, b := range r.bodies() {
		if !strings.Contains(b, `"operation_id":"op-1"`) {
			t.Fatalf("request without the given operation id: %s", b)
		}
	}

	// Without --op an id is generated and reported for the retry.
	noOp := append([]string(nil), short[:len(short)-4]...)
	noOp = append(noOp, "--timeout", "300ms", "--json")
	code, out, errOut = run(t, cmdLease, noOp...)
	if code != exitIndefinite || !strings.Contains(out, `"operation_id":"`) || !strings.Contains(errOut, "retry with --op ") {
		t.Fatalf("indefinite without --op: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// No Holdfast behind a live NATS: said at once, as definite (nothing received the
// request), not after 10 s of retries.
func TestNoServiceFailsFast(t *testing.T) {
	url, _ := startNATS(t)
	start := time.Now()
	code, _, errOut := run(t, cmdResource, "create", "r1", "--server", url)
	if code != exitDefinite || !strings.Contains(errOut, `no Holdfast service serves prefix "holdfast"`) {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("took %v", took)
	}
}

func TestCannotConnect(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	code, _, errOut := run(t, cmdResource, "get", "r1", "--server", "nats://"+addr, "--timeout", "1s")
	if code != exitConnect || !strings.Contains(errOut, "cannot connect") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		cmd  func(*env, []string) int
		args []string
		want string
	}{
		{cmdLease, nil, `expected one of "reserve"`},
		{cmdLease, []string{"frobnicate"}, "unexpected argument frobnicate"},
		{cmdLease, []string{"reserve", "--resource", "a"}, "--holder is required"},
		{cmdLease, []string{"reserve", "--holder", "h"}, "at least one"},
		{cmdLease, []string{"reserve", "--holder", "h", "--pool", "mem"}, "POOL_ID:QUANTITY"},
		{cmdLease, []string{"reserve", "--holder", "h", "--resource", "a", "extra"}, "unexpected argument extra"},
		{cmdLease, []string{"reserve", "--nope"}, "unknown flag --nope"},
		{cmdLease, []string{"activate", "1-2", "--holder", "h"}, "--epoch is required"},
		{cmdLease, []string{"activate", "1-2", "--epoch", "1"}, "--holder is required"},
		{cmdLease, []string{"release", "--holder", "h", "--fence", "1-2"}, "invalid fence"},
		{cmdLease, []string{"release", "1-2", "--holder", "h", "--fence", "1-2@1"}, "give the lease once"},
		{cmdLease, []string{"renew", "1-2", "--holder", "h", "--epoch", "1", "--ttl", "0s"}, "--ttl must be positive"},
		{cmdLease, []string{"revoke"}, "missing lease id"},
		{cmdLease, []string{"get", "a", "b"}, "unexpected argument b"},
		{cmdLease, []string{"list"}, "--holder or --label is required"},
		{cmdLease, []string{"list", "--holder", "h", "--limit", "10001"}, "--limit"},
		{cmdResource, []string{"create"}, `expected "<resource-id>"`},
		{cmdResource, []string{"get", "r", "--tenant", "a.b"}, "invalid --tenant"},
		{cmdPool, []string{"create", "p"}, "--capacity must be > 0"},
		{cmdRange, []string{"create", "v", "--first", "5", "--last", "4"}, "above --last"},
		{cmdRange, []string{"create", "v", "--strategy", "best"}, "--strategy must be one of"},
		{cmdResource, []string{"get", "r", "--timeout", "0s"}, "--timeout must be positive"},
		{cmdWatch, []string{"--from-start", "--seq", "3"}, "at most one"},
		{cmdBench, []string{"--scenario", "calm"}, "--scenario must be one of"},
		{cmdBench, []string{"--encoding", "xml"}, "--encoding must be one of"},
		{cmdBench, []string{"--clients", "0"}, "--clients"},
	}
	for _, c := range cases {
		code, out, errOut := run(t, c.cmd, c.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.args, code, out, errOut, c.want)
		}
	}
	// Help is not an error: on stdout, exit 0.
	code, out, errOut := run(t, cmdLease, "reserve", "--help")
	if code != exitOK || errOut != "" || !strings.Contains(out, "Exit codes:") || !strings.Contains(out, "retry the same command with the same --op") {
		t.Fatalf("help: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// A mistyped flag, or a duration without its unit: one line of hint, not the usage.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"reserve", "--holdr", "h"}, `did you mean one of "--holder", "--hold"?`},
		{[]string{"reserve", "--holder", "h", "--resource", "r", "--ttl", "30"}, `--ttl: "30" needs a unit, e.g. 30s or 30ms`},
	} {
		code, out, errOut := run(t, cmdLease, c.args...)
		if code != exitUsage || out != "" || !strings.Contains(errOut, c.want) || strings.Contains(errOut, "Exit codes:") || strings.Count(errOut, "\n") > 3 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 and %q", c.args, code, out, errOut, c.want)
		}
	}
}

func TestCommandsSendTheRightRequests(t *testing.T) {
	url, nc := startNATS(t)
	ok := func(body string) func([]byte) string { return func([]byte) string { return body } }
	subjects := map[string]*responder{}
	for subj, body := range map[string]string{
		"resource.create": `{"outcome":"committed","code":"ok","lsn":"5","resource":{"resource_id":"n1/gpu0","state":"available","version":"1"}}`,
		"resource.get":    `{"outcome":"committed","code":"resource_not_found","applied_lsn":"9"}`,
		"pool.create":     `{"outcome":"committed","code":"already_exists","lsn":"6","pool":{"pool_id":"n1/mem","capacity":"80","available":"80"}}`,
		"pool.get":        `{"outcome":"committed","code":"ok","applied_lsn":"9","pool":{"pool_id":"n1/mem","capacity":"80","reserved":"8","active":"32","available":"40"}}`,
		"range.create":    `{"outcome":"committed","code":"ok","lsn":"7","range":{"range_id":"vx","first":"10","last":"20","free":"11"}}`,
		"range.get":       `{"outcome":"rejected","code":"fence_not_applied","category":"definite"}`,
		"range.resize":    `{"outcome":"committed","code":"ok","lsn":"8","range":{"range_id":"vx","first":"10","last":"40","free":"31"}}`,
		"range.release":   leaseReply,
		"lease.activate":  leaseReply,
		"lease.renew":     `{"outcome":"committed","code":"stale_epoch","lsn":"1050"}`,
		"lease.release":   leaseReply,
		"lease.revoke":    leaseReply,
		"lease.reclaim":   `{"outcome":"committed","code":"invalid_state","lsn":"1051"}`,
		"lease.get":       `{"outcome":"committed","code":"lease_retired","applied_lsn":"9"}`,
		"lease.list": `{"outcome":"committed","code":"ok","truncated":true,"leases":[{"lease_id":"0-3","holder_id":"h","state":"active","lease_epoch":"1",
			"members":[{"resource_id":"a"}]},{"lease_id":"2-8","holder_id":"h","state":"reserved","lease_epoch":"1","deadline_slot":"77","members":[{"range_id":"vx","value":"12"}]}]}`,
	} {
		subjects[subj] = respond(t, nc, "holdfast.v1.default."+subj, ok(body))
	}
	s := []string{"--server", url, "--timeout", "2s"}
	cases := []struct {
		cmd      func(*env, []string) int
		args     []string
		subject  string
		wantCode int
		wantReq  string
		wantOut  string
	}{
		{cmdResource, []string{"create", "n1/gpu0", "--op", "o1"}, "resource.create", 0,
			`{"operation_id":"o1","resource_id":"n1/gpu0"}`, "ok resource.create lsn=5 op=o1\nresource n1/gpu0 state=available version=1\n"},
		{cmdResource, []string{"get", "n1/gpu9"}, "resource.get", 1,
			`{"resource_id":"n1/gpu9"}`, "resource_not_found resource.get applied_lsn=9\n"},
		{cmdPool, []string{"create", "n1/mem", "--capacity", "80", "--op", "o2"}, "pool.create", 1,
			`{"operation_id":"o2","pool_id":"n1/mem","capacity":"80"}`, "already_exists pool.create lsn=6 op=o2\npool n1/mem capacity=80 reserved=0 active=0 available=80\n"},
		{cmdPool, []string{"get", "n1/mem", "--min-lsn", "8", "--wait", "2s"}, "pool.get", 0,
			`{"pool_id":"n1/mem","min_lsn":"8","wait_ms":2000}`, "ok pool.get applied_lsn=9\npool n1/mem capacity=80 reserved=8 active=32 available=40\n"},
		{cmdRange, []string{"create", "vx", "--first", "10", "--last", "20", "--op", "o3", "--strategy", "random"}, "range.create", 0,
			`{"operation_id":"o3","range_id":"vx","first":"10","last":"20","strategy":"random"}`, "ok range.create lsn=7 op=o3\nrange vx [10..20] strategy=lowest_free allocated=0 free=11\n"},
		// An omitted bound is not sent: the range keeps it (a zero here once moved the start).
		{cmdRange, []string{"resize", "vx", "--last", "40", "--op", "o9"}, "range.resize", 0,
			`{"operation_id":"o9","range_id":"vx","last":"40"}`, ""},
		{cmdRange, []string{"release", "vx", "12", "--holder", "h", "--lease", "0-3", "--epoch", "1", "--op", "o10"}, "range.release", 0,
			`{"operation_id":"o10","range_id":"vx","value":"12","holder_id":"h","lease_epoch":"1","lease_id":"0-3"}`, ""},
		{cmdRange, []string{"get", "vx", "--min-lsn", "100", "--wait", "0s"}, "range.get", 3,
			`{"range_id":"vx","min_lsn":"100","wait_ms":0}`, ""},
		{cmdLease, []string{"activate", "3-1042", "--holder", "alice", "--epoch", "1", "--op", "o4"}, "lease.activate", 0,
			`{"operation_id":"o4","lease_id":"3-1042","holder_id":"alice","lease_epoch":"1"}`, ""},
		{cmdLease, []string{"renew", "--fence", "3-1042@2", "--holder", "alice", "--ttl", "1m", "--op", "o5"}, "lease.renew", 1,
			`{"operation_id":"o5","lease_id":"3-1042","holder_id":"alice","lease_epoch":"2","ttl_ms":"60000"}`, "stale_epoch lease.renew lsn=1050 op=o5\n"},
		{cmdLease, []string{"release", "--lease", "3-1042", "--holder", "alice", "--epoch", "1", "--op", "o6"}, "lease.release", 0,
			`{"operation_id":"o6","lease_id":"3-1042","holder_id":"alice","lease_epoch":"1"}`, ""},
		{cmdLease, []string{"revoke", "3-1042", "--op", "o7"}, "lease.revoke", 0,
			`{"operation_id":"o7","lease_id":"3-1042"}`, ""},
		{cmdLease, []string{"reclaim", "--lease", "3-1042", "--op", "o8"}, "lease.reclaim", 1,
			`{"operation_id":"o8","lease_id":"3-1042"}`, "invalid_state lease.reclaim lsn=1051 op=o8\n"},
		{cmdLease, []string{"get", "3-1"}, "lease.get", 1,
			`{"lease_id":"3-1"}`, "lease_retired lease.get applied_lsn=9\n"},
		{cmdLease, []string{"list", "--holder", "h", "--limit", "2"}, "lease.list", 0,
			`{"holder_id":"h","limit":2}`, "ok lease.list\n2 live lease(s) of h (truncated by --limit)\n" +
				"lease 0-3 holder=h state=active epoch=1 fence=0-3@1 members=resource a\n" +
				"lease 2-8 holder=h state=reserved epoch=1 fence=2-8@1 deadline_slot=77 members=range vx=12\n"},
	}
	for _, c := range cases {
		code, out, errOut := run(t, c.cmd, append(c.args, s...)...)
		if code != c.wantCode {
			t.Errorf("%v: exit %d, want %d (stderr %q)", c.args, code, c.wantCode, errOut)
			continue
		}
		reqs := subjects[c.subject].bodies()
		if len(reqs) == 0 || reqs[len(reqs)-1] != c.wantReq {
			t.Errorf("%v: requests %q, want last %s", c.args, reqs, c.wantReq)
		}
		if c.wantOut != "" && out != c.wantOut {
			t.Errorf("%v: output\n%s\nwant\n%s", c.args, out, c.wantOut)
		}
	}
}

func TestWatchCommand(t *testing.T) {
	url, nc := startNATS(t)
	// The service's slot length, so that the lines show times.
	respond(t, nc, "$SRV.INFO.holdfast", func([]byte) string { return `{"metadata":{"prefix":"holdfast","slot_ms":"100"}}` })
	done := make(chan struct{})
	var (
		code     int
		out, eo  string
		received = make(chan struct{})
	)
	go func() {
		defer close(done)
		code, out, eo = run(t, cmdWatch, "--server", url, "--count", "2", "--for", "20s", "--filter", "lease.>")
		close(received)
	}()
	ev := `{"event":"lease.reserved","tenant":"default","shard":3,"lsn":"%d","slot":"50","lease":{"lease_id":"3-%d","holder_id":"a","state":"reserved","lease_epoch":"1","deadline_slot":"80","members":[{"resource_id":"n/r"}]}}`
	for lsn := 1; ; lsn++ {
		_ = nc.Publish("holdfast.v1.default.events.resource.created", []byte(`{"event":"resource.created"}`))
		_ = nc.Publish("holdfast.v1.default.events.lease.reserved", fmt.Appendf(nil, ev, lsn, lsn))
		_ = nc.Flush()
		select {
		case <-received:
		case <-time.After(50 * time.Millisecond):
			continue
		}
		break
	}
	<-done
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != exitOK || len(lines) != 2 {
		t.Fatalf("exit %d, output %q, stderr %q", code, out, eo)
	}
	if !strings.HasPrefix(lines[0], "lease.reserved tenant=default shard=3 lsn=") ||
		!strings.Contains(lines[0], "slot=50 time=1970-01-01T00:00:05.000Z lease 3-") ||
		!strings.HasSuffix(lines[0], "holder=a state=reserved epoch=1 fence=3-"+strings.TrimPrefix(strings.Fields(lines[0])[3], "lsn=")+"@1 deadline_slot=80 deadline=1970-01-01T00:00:08.000Z members=resource n/r") {
		t.Fatalf("event line %q", lines[0])
	}

	// --json and --for.
	code, out, _ = run(t, cmdWatch, "--server", url, "--for", "200ms", "--json")
	if code != exitOK || out != "" {
		t.Fatalf("--for: exit %d, output %q", code, out)
	}
	// Replay without a stream fails with 1.
	code, _, eo = run(t, cmdWatch, "--server", url, "--from-start", "--timeout", "2s")
	if code != exitDomain || eo == "" {
		t.Fatalf("replay without stream: exit %d, stderr %q", code, eo)
	}
}

func TestOutputLines(t *testing.T) {
	v := uint64(7)
	ev := client.Event{Event: &messages.Event{Event: "range.created", Tenant: "t", Shard: 1, Lsn: 2, Slot: 3,
		Range: &messages.Range{RangeId: "vx", First: 1, Last: 9, Allocated: 1, Free: 8}}, Sequence: 44}
	if got := eventLine(ev, 0); got != "seq=44 range.created tenant=t shard=1 lsn=2 slot=3 range vx [1..9] strategy=lowest_free allocated=1 free=8" {
		t.Fatalf("eventLine = %q", got)
	}
	// With the slot length known, times in UTC: slot 3 of 100ms starts 300ms after the epoch.
	if got := eventLine(ev, 100*time.Millisecond); got != "seq=44 range.created tenant=t shard=1 lsn=2 slot=3 time=1970-01-01T00:00:00.300Z range vx [1..9] strategy=lowest_free allocated=1 free=8" {
		t.Fatalf("eventLine with the slot length = %q", got)
	}
	reserved := &messages.Lease{LeaseId: "1-2", HolderId: "h", State: "reserved", LeaseEpoch: 1, DeadlineSlot: 17955640224}
	if got := leaseLine(reserved, 100*time.Millisecond); got != "lease 1-2 holder=h state=reserved epoch=1 fence=1-2@1 deadline_slot=17955640224 deadline=2026-11-24T23:47:02.400Z" {
		t.Fatalf("leaseLine with the slot length = %q", got)
	}
	l := &messages.Lease{LeaseId: "1-2", HolderId: "h", State: "active", LeaseEpoch: 2, DeadlineSlot: 9,
		Members: []*messages.Member{{RangeId: "vx", Value: &v}, {PoolId: "p", Quantity: 3}}}
	if got := leaseLine(l, 0); got != "lease 1-2 holder=h state=active epoch=2 fence=1-2@2 members=range vx=7, pool p:3" {
		t.Fatalf("leaseLine = %q", got)
	}
	if got := resourceLine(&messages.Resource{ResourceId: "r", State: "reserved", CurrentLeaseId: "1-2", Version: 3}); got != "resource r state=reserved lease=1-2 version=3" {
		t.Fatalf("resourceLine = %q", got)
	}
	r := &client.Result{Code: "ok", Op: "lease.release", LSN: 9, FromRetryCache: true, OperationID: "x", Message: "m"}
	if got := statusLine(r); got != "ok lease.release lsn=9 (from retry cache) op=x: m" {
		t.Fatalf("statusLine = %q", got)
	}
	for d, want := range map[time.Duration]string{0: "0", 999: "999ns", 1500: "1.50µs", 812 * time.Microsecond: "812µs",
		2310 * time.Microsecond: "2.31ms", 15 * time.Millisecond: "15.0ms", 1200 * time.Millisecond: "1.20s"} {
		if got := fmtDur(d); got != want {
			t.Errorf("fmtDur(%v) = %q, want %q", d, got, want)
		}
	}
	if got := formatCodes(map[string]uint64{"resource_busy": 5, "ok": 2, "transport:timeout": 5, "a": 1}); got != "ok=2 resource_busy=5 transport:timeout=5 a=1" {
		t.Fatalf("formatCodes = %q", got)
	}
}

func TestClusterStatusCommand(t *testing.T) {
	url, nc := startNATS(t)
	r := respond(t, nc, "holdfast.v1.acme.cluster.status", func([]byte) string {
		return `{"outcome":"committed","code":"ok","nodes":[{"node":"a","shards":[0,2]},{"node":"b","shards":[1]}],` +
			`"shards":[{"shard":0,"owner":"a","applied_lsn":"7"},{"shard":1,"owner":"b"},{"shard":2}],"shard":1,"slot_ms":"100"}`
	})
	code, out, errOut := run(t, cmdCluster, "status", "--server", url, "--tenant", "acme", "--timeout", "2s", "--key", "gpu")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	want := `ok cluster.status
node a: shards 0 2
node b: shards 1
shard 0: a, applied lsn 7
shard 1: b, applied lsn 0
shard 2: (none: moving), applied lsn 0
key gpu: shard 1
slot 100ms
`
	if out != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out, want)
	}
	if got := r.bodies()[0]; got != `{"placement_key":"gpu"}` {
		t.Fatalf("request = %s", got)
	}
}

// Slots read as times: the service advertises its slot length, and a lease's deadline
// shows how long it has left and when it ends.
func TestLeaseShowsItsDeadlineAsATime(t *testing.T) {
	srv := startServe(t, "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--metrics-listen", "", "--slot", "100ms")
	url, _ := srv.ready(t)
	if code, _, errOut := run(t, cmdResource, "create", "seat", "--server", url); code != exitOK {
		t.Fatalf("create: %d %s", code, errOut)
	}
	code, out, errOut := run(t, cmdLease, "reserve", "--server", url, "--holder", "h", "--resource", "seat", "--ttl", "60s")
	if code != exitOK {
		t.Fatalf("reserve: %d %s", code, errOut)
	}
	if !strings.Contains(out, "  expires  in 1m0s (") && !strings.Contains(out, "  expires  in 59.") {
		t.Fatalf("no deadline as a time:\n%s", out)
	}
	now := time.Date(2026, 11, 24, 14, 16, 12, 0, time.UTC)
	if got := whenString(now.Add(28400*time.Millisecond), now); got != "in 28.4s (14:16:40.400Z)" {
		t.Fatalf("whenString: %q", got)
	}
	if got := whenString(now.Add(-3*time.Second), now); got != "3s ago (14:16:09.000Z)" {
		t.Fatalf("whenString past: %q", got)
	}
}

// Connection flags may come before the command, as the nats CLI takes them.
func TestFlagsBeforeTheCommand(t *testing.T) {
	url, nc := startNATS(t)
	respond(t, nc, "holdfast.v1.acme.resource.get", func([]byte) string {
		return `{"outcome":"committed","code":"ok","resource":{"resource_id":"r","state":"available"}}`
	})
	code, out, errOut := run(t, runCLI, "--server", url, "--tenant=acme", "--json", "resource", "get", "r", "--timeout", "2s")
	if code != exitOK || !strings.Contains(out, `"resource_id":"r"`) {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	for _, c := range []struct{ in, want []string }{
		{[]string{"--help"}, []string{"--help"}},
		{[]string{"--server", "u", "lease", "get", "1-1"}, []string{"lease", "get", "1-1", "--server", "u"}},
		{[]string{"--json", "--server=u", "lease", "list"}, []string{"lease", "list", "--json", "--server=u"}},
		{[]string{"lease", "--server", "u", "get"}, []string{"lease", "--server", "u", "get"}},
	} {
		p, err := newParser(&env{stdout: io.Discard, stderr: io.Discard, ctx: context.Background()}, &cliRoot{})
		if err != nil {
			t.Fatal(err)
		}
		if got := hoistFlags(p.Model, c.in); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("hoistFlags(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// The top level: help on stdout with exit 0, a version, a mistyped command in one line.
func TestTopLevel(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runMain([]string{"--help"}, &out, &errb); code != exitOK || errb.Len() != 0 || !strings.Contains(out.String(), "lease ") {
		t.Fatalf("--help: exit %d, stdout %q, stderr %q", code, out.String(), errb.String())
	}
	out.Reset()
	if code := runMain([]string{"version"}, &out, &errb); code != exitOK || !strings.HasPrefix(out.String(), "holdfast 0.") {
		t.Fatalf("version: exit %d, %q", code, out.String())
	}
	out.Reset()
	code := runMain([]string{"leese", "get", "1-1"}, &out, &errb)
	if code != exitUsage || out.Len() != 0 || !strings.Contains(errb.String(), `did you mean "lease"?`) || strings.Count(errb.String(), "\n") != 1 {
		t.Fatalf("typo: exit %d, stderr %q", code, errb.String())
	}
}

// The operator's run and work commands against a real server.
func TestRunAndWorkCommands(t *testing.T) {
	srv := testserver.Start(t)
	for _, c := range []struct {
		cmd  func(*env, []string) int
		args []string
		code int
		want string
	}{
		{cmdRun, []string{"create", "crawl", "--shard", "a=a..m", "--shard", "b=m.."}, exitOK, "run crawl status=active work=2 active=2"},
		{cmdRun, []string{"create", "bad", "--shard", "a"}, exitUsage, "want NAME=START..END"},
		{cmdRun, []string{"get", "crawl"}, exitOK, "run crawl status=active"},
		{cmdWork, []string{"get", "crawl", "b"}, exitOK, `work crawl/b ["m","") status=active claims=0`},
		{cmdWork, []string{"get", "crawl"}, exitUsage, `expected "<name>"`},
		{cmdWork, []string{"unpark", "crawl", "a"}, exitDomain, "invalid_state"},
		{cmdRun, []string{"complete", "crawl"}, exitDomain, "invalid_state"},
		{cmdRun, []string{"cancel", "crawl", "--reason", "enough"}, exitOK, `status=cancelled`},
		{cmdRun, []string{"fail", "crawl"}, exitDomain, "run_terminal"},
		{cmdRun, []string{"delete", "crawl"}, exitOK, "ok run.delete"},
		{cmdRun, []string{"get", "crawl"}, exitDomain, "run_not_found"},
		{cmdResource, []string{"create", "n1/gpu"}, exitOK, "resource n1/gpu state=available"},
		{cmdLease, []string{"reserve", "--holder", "h", "--resource", "n1/gpu", "--ttl", "1m"}, exitOK, "state    reserved"},
		{cmdResource, []string{"delete", "n1/gpu"}, exitDomain, "object_in_use resource.delete"},
		{cmdPool, []string{"create", "mem", "--capacity", "4"}, exitOK, "pool mem"},
		{cmdPool, []string{"delete", "mem"}, exitOK, "ok pool.delete"},
		{cmdPool, []string{"delete", "mem"}, exitDomain, "pool_not_found"},
		{cmdRange, []string{"create", "vx", "--first", "1", "--last", "9"}, exitOK, "range vx"},
		{cmdRange, []string{"delete", "vx"}, exitOK, "ok range.delete"},
	} {
		code, out, errOut := run(t, c.cmd, append(c.args, "--server", srv.URL)...)
		if code != c.code || !strings.Contains(out+errOut, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d and %q", c.args, code, out, errOut, c.code, c.want)
		}
	}
}

// Completion candidates come from the commands' own definitions.
func TestCompletions(t *testing.T) {
	for _, c := range []struct {
		words []string
		want  string
	}{
		{[]string{"le"}, "lease"},
		{[]string{"lease", "re"}, "reclaim release release-all renew reserve revoke revoke-all"},
		{[]string{"lease", "reserve", "--ho"}, "--hold --holder"},
		{[]string{"run", "create", "--sh"}, "--shard"},
		{[]string{"serve", "--max-me"}, "--max-memory"},
		{[]string{"completion", ""}, "bash zsh"},
		{[]string{"range", "create", "r", "--strategy", ""}, "least_recently_freed lowest_free random"},
		{[]string{"run", ""}, "cancel complete create delete fail get list register"},
		{[]string{"lease", "get", "--js"}, "--json"},
		{[]string{"__c"}, ""}, // hidden
	} {
		if got := strings.Join(completions(c.words), " "); got != c.want {
			t.Errorf("%q: %q, want %q", c.words, got, c.want)
		}
	}
}

// Every command and verb has its help: on stdout, exit 0, naming its path and each of
// its flags (a declaration kong cannot build fails here first).
func TestEveryCommandHasHelp(t *testing.T) {
	p, err := newParser(&env{stdout: io.Discard, stderr: io.Discard, ctx: context.Background()}, &cliRoot{})
	if err != nil {
		t.Fatal(err)
	}
	var walk func(n *kong.Node)
	n := 0
	walk = func(node *kong.Node) {
		for _, child := range node.Children {
			if child.Hidden {
				continue
			}
			path := strings.Fields(strings.TrimSpace(child.Path()))
			code, out, errOut := run(t, runCLI, append(path, "--help")...)
			if code != exitOK || errOut != "" || !strings.Contains(out, "Usage: holdfast "+strings.Join(path, " ")) {
				t.Errorf("%v --help: exit %d, stderr %q, stdout %q", path, code, errOut, out)
			}
			for _, f := range child.Flags {
				if !f.Hidden && !strings.Contains(out, "--"+f.Name) {
					t.Errorf("%v --help does not show --%s", path, f.Name)
				}
			}
			n++
			walk(child)
		}
	}
	walk(p.Model.Node)
	if n < 30 {
		t.Fatalf("%d commands walked", n)
	}
}
