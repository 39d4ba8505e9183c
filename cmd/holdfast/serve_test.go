package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/holdfast/holdfast/actors"
	"github.com/holdfast/holdfast/contract"
	"github.com/holdfast/holdfast/internal/rafttiming"
	"github.com/holdfast/holdfast/kernel"
)

// serveLogBuffer collects a serve run's log lines safely across goroutines.
type serveLogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *serveLogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *serveLogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// serveRun is one `holdfast serve` running in-process.
type serveRun struct {
	log    *serveLogBuffer
	cancel context.CancelFunc
	done   chan int
}

func startServe(t *testing.T, args ...string) *serveRun {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &serveRun{log: &serveLogBuffer{}, cancel: cancel, done: make(chan int, 1)}
	go func() { r.done <- serveMain(ctx, args, r.log) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

var (
	serveReadyLine = regexp.MustCompile(`(?m)^.*msg=ready .*$`)
	serveNATSAttr  = regexp.MustCompile(`nats=(\S+)`)
	serveMetrics   = regexp.MustCompile(`metrics=(\S+)`)
)

// ready waits for the ready line and returns the NATS URL and the metrics URL.
func (r *serveRun) ready(t *testing.T) (string, string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		if line := serveReadyLine.FindString(r.log.String()); line != "" {
			return serveNATSAttr.FindStringSubmatch(line)[1], serveMetrics.FindStringSubmatch(line)[1]
		}
		select {
		case code := <-r.done:
			r.done <- code
			t.Fatalf("serve exited with %d before ready:\n%s", code, r.log)
		case <-deadline:
			t.Fatalf("no ready line:\n%s", r.log)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// stop cancels the run (as SIGTERM would) and returns its exit code.
func (r *serveRun) stop(t *testing.T) int {
	t.Helper()
	r.cancel()
	select {
	case code := <-r.done:
		r.done <- code
		return code
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not stop:\n%s", r.log)
		return -1
	}
}

func serveRequest(t *testing.T, nc *nats.Conn, subject, body string) map[string]any {
	t.Helper()
	m, err := nc.Request(subject, []byte(body), 10*time.Second)
	if err != nil {
		t.Fatalf("%s: %v", subject, err)
	}
	var out map[string]any
	if err := json.Unmarshal(m.Data, &out); err != nil {
		t.Fatalf("%s: %v: %s", subject, err, m.Data)
	}
	return out
}

func TestServeEndToEnd(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	args := []string{"--data", data, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--shards", "2", "--slot", "10ms"}
	run := startServe(t, args...)
	url, metrics := run.ready(t)
	if n := len(serveReadyLine.FindAllString(run.log.String(), -1)); n != 1 {
		t.Fatalf("%d ready lines:\n%s", n, run.log)
	}
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r := serveRequest(t, nc, "holdfast.v1.acme.resource.create", `{"operation_id":"c1","resource_id":"gpu0"}`)
	if r["code"] != "ok" || r["lsn"] != "2" { // lsn 1: the shard's settings
		t.Fatalf("resource.create: %v", r)
	}
	r = serveRequest(t, nc, "holdfast.v1.acme.lease.reserve", `{"operation_id":"r1","holder_id":"h","ttl_ms":60000,"members":[{"resource_id":"gpu0"}]}`)
	if r["code"] != "ok" {
		t.Fatalf("lease.reserve: %v", r)
	}
	if _, err := nc.Request("$SRV.PING.holdfast", nil, 5*time.Second); err != nil {
		t.Fatalf("ping: %v", err)
	}
	resp, err := http.Get(metrics + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/healthz: %d %s", resp.StatusCode, body)
	}
	if code := run.stop(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, run.log)
	}
	if !strings.Contains(run.log.String(), "msg=stopped") {
		t.Fatalf("no stopped line:\n%s", run.log)
	}
	b, err := os.ReadFile(filepath.Join(data, serveLayoutFile))
	if err != nil || !strings.Contains(string(b), `"shards":2`) {
		t.Fatalf("layout file: %v %s", err, b)
	}

	// A different explicit shard count is refused, clearly.
	bad := startServe(t, "--data", data, "--listen", "127.0.0.1:0", "--metrics-listen", "", "--shards", "3")
	if code := <-bad.done; code != 1 || !strings.Contains(bad.log.String(), "--shards 2") {
		t.Fatalf("different --shards: exit %d:\n%s", code, bad.log)
	}
	bad.done <- 1

	// Without --shards the directory's count is used; state and events survived.
	run = startServe(t, "--data", data, "--listen", "127.0.0.1:0", "--metrics-listen", "", "--slot", "10ms")
	url, _ = run.ready(t)
	nc2, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	r = serveRequest(t, nc2, "holdfast.v1.acme.resource.get", `{"resource_id":"gpu0"}`)
	res, _ := r["resource"].(map[string]any)
	if r["code"] != "ok" || res["state"] != "reserved" || res["current_lease_id"] != contract.FormatLeaseID(contract.ShardOf("acme", "gpu0", 2), 3) {
		t.Fatalf("after restart: %v", r)
	}
	js, err := jetstream.New(nc2)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, contract.StreamName)
	if err != nil {
		t.Fatal(err)
	}
	// The restart republished both events; the stream kept one copy of each.
	deadline := time.Now().Add(5 * time.Second)
	for {
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Msgs == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream holds %d events, want 2", info.State.Msgs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := run.stop(t); code != 0 {
		t.Fatalf("exit %d:\n%s", code, run.log)
	}
}

func TestServeExternalNATSWithoutJetStream(t *testing.T) {
	// An embedded server of our own with JetStream off stands in for a deployment.
	ns := startServeTestNATS(t, false)
	run := startServe(t, "--data", t.TempDir(), "--nats", ns, "--metrics-listen", "")
	select {
	case code := <-run.done:
		run.done <- code
		if code != 1 || !strings.Contains(run.log.String(), "JetStream") {
			t.Fatalf("exit %d:\n%s", code, run.log)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not refuse:\n%s", run.log)
	}
}

func TestServeFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--max-ttl", "2h"}, "--max-ttl"},
		{[]string{"--max-ttl", "1h0m0.5s"}, "--max-ttl"},
		{[]string{"--slot", "0"}, "--slot"},
		{[]string{"--slot", "1500us"}, "--slot"},
		{[]string{"--shards", "0"}, "--shards"},
		{[]string{"--prefix", "a.*"}, "--prefix"},
		{[]string{"--dedupe-window", "1ms"}, "--dedupe-window"},
		{[]string{"--max-bundle", "0"}, "bundle"},
		{[]string{"--max-resources", "0"}, "resources"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--log-format", "xml"}, "--log-format"},
		{[]string{"--events-duplicate-window", "5s"}, "--events-duplicate-window"},
		{[]string{"--max-memory", "12KiB"}, "--max-memory"},
		{[]string{"--max-memory", "lots"}, "max-memory"},
		{[]string{"--events-max-bytes", "-1"}, "events-max-bytes"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"--journal", "disk"}, "--journal"},
		{[]string{"--replicas", "2"}, "--replicas"},
		{[]string{"--ownership-ttl", "1500ms"}, "--ownership-ttl"},
		{[]string{"--snapshot-every", "0"}, "--snapshot-every"},
		{[]string{"--routes", "nats://127.0.0.1:1"}, "need --cluster"},
		{[]string{"--cluster", "nats://127.0.0.1:1", "--nats", "nats://127.0.0.1:2"}, "not with --nats"},
		{[]string{"--cluster", "nats://127.0.0.1:x"}, "--cluster"},
		{[]string{"extra"}, "extra"},
		{[]string{"--holders", "users"}, "--holders"},
		{[]string{"--holders", "bound"}, "needs --nats"},
		{[]string{"--operators", "ops"}, "only with --holders bound"},
		{[]string{"--raft-timing", "faster"}, "only for an embedded NATS server clustered"},
		{[]string{"--raft-timing", "slow"}, "--raft-timing"},
	} {
		var out bytes.Buffer
		if code := serveMain(context.Background(), c.args, &out); code != 2 || !strings.Contains(out.String(), c.want) {
			t.Errorf("%v: exit %d, output %q", c.args, code, out.String())
		}
	}
	c, err := parseServeFlags([]string{"--max-leases", "1000", "--slot", "250ms", "--dedupe-window", "1s", "--max-ttl", "1m"})
	if err != nil {
		t.Fatal(err)
	}
	if c.kernel.MaxLeases != 1000 || c.kernel.MaxExpirations != 1000 || c.kernel.MaxMembers != 4000 ||
		c.kernel.SlotMillis != 250 || c.kernel.DedupeWindowSlots != 4 || c.kernel.HistoryWindowSlots != 2400 ||
		c.kernel.MaxTTLMillis != 60000 || c.shards != 8 || c.explicitBounds["shards"] || c.kernel.MaxOperations != 1<<23 ||
		c.snapshotEvery != actors.DefaultSnapshotEvery {
		t.Fatalf("parsed: %+v", c)
	}
	for name, want := range map[string]rafttiming.Timing{"default": {}, "fast": rafttiming.Fast, "faster": rafttiming.Faster} {
		c, err := parseServeFlags([]string{"--cluster", "nats://127.0.0.1:6222", "--raft-timing", name})
		if err != nil || c.raftTiming != want {
			t.Fatalf("--raft-timing %s: %+v, %v", name, c.raftTiming, err)
		}
	}
	// --max-memory is split over the shards: 1 GiB over 4 is 128 MiB for operations and
	// 128 MiB for leases per shard; an explicit bound wins.
	c, err = parseServeFlags([]string{"--max-memory", "1GiB", "--shards", "4", "--max-operations", "77", "--snapshot-every", "500"})
	if err != nil {
		t.Fatal(err)
	}
	if k := c.kernel; k.MaxOperations != 77 || k.MaxLeases != (128<<20)/kernel.LeaseBytes || k.MaxMembers != 4*k.MaxLeases ||
		c.events.MaxAge != 24*time.Hour || c.events.MaxBytes != 16<<30 || c.snapshotEvery != 500 {
		t.Fatalf("parsed: %+v", c)
	}
}

// Every serve flag can come from HOLDFAST_<FLAG>; the command line wins, and a bad value
// names its variable.
func TestServeFlagsFromEnvironment(t *testing.T) {
	t.Setenv("HOLDFAST_SHARDS", "4")
	t.Setenv("HOLDFAST_MAX_MEMORY", "1GiB")
	t.Setenv("HOLDFAST_SLOT", "250ms")
	t.Setenv("HOLDFAST_PREFIX", "acme.hf")
	c, err := parseServeFlags([]string{"--slot", "50ms"})
	if err != nil {
		t.Fatal(err)
	}
	if c.shards != 4 || !c.explicitBounds["shards"] || c.kernel.SlotMillis != 50 || c.prefix != "acme.hf" ||
		c.kernel.MaxLeases != (128<<20)/kernel.LeaseBytes {
		t.Fatalf("parsed: shards %d slot %d prefix %q leases %d", c.shards, c.kernel.SlotMillis, c.prefix, c.kernel.MaxLeases)
	}
	t.Setenv("HOLDFAST_MAX_LEASES", "many")
	if _, err := parseServeFlags(nil); err == nil || !strings.Contains(err.Error(), "HOLDFAST_MAX_LEASES") {
		t.Fatalf("bad value: %v", err)
	}
}

func TestServeLayout(t *testing.T) {
	dir := t.TempDir()
	l := func(shards uint32, slotMS uint64) serveLayout { return serveLayout{Shards: shards, SlotMillis: slotMS} }
	none, shards, slot := map[string]bool{}, map[string]bool{"shards": true}, map[string]bool{"slot": true}
	if got, err := ensureLayout(dir, l(4, 100), none); err != nil || got.Shards != 4 || got.SlotMillis != 100 {
		t.Fatalf("create: %+v %v", got, err)
	}
	if got, err := ensureLayout(dir, l(8, 10), none); err != nil || got.Shards != 4 || got.SlotMillis != 100 {
		t.Fatalf("default flags adopt the directory's settings: %+v %v", got, err)
	}
	if _, err := ensureLayout(dir, l(8, 100), shards); err == nil || !strings.Contains(err.Error(), "--shards 4") {
		t.Fatalf("explicit different count: %v", err)
	}
	if _, err := ensureLayout(dir, l(4, 10), slot); err == nil || !strings.Contains(err.Error(), "created with --slot 100ms") ||
		!strings.Contains(err.Error(), "got --slot 10ms") {
		t.Fatalf("explicit different slot: %v", err)
	}
	// A layout file from before the slot was recorded: the first start records its --slot.
	if err := os.WriteFile(filepath.Join(dir, serveLayoutFile), []byte(`{"format":1,"shards":4}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := ensureLayout(dir, l(4, 250), slot); err != nil || got.SlotMillis != 250 {
		t.Fatalf("recording the slot: %+v %v", got, err)
	}
	if _, err := ensureLayout(dir, l(4, 100), slot); err == nil || !strings.Contains(err.Error(), "--slot 250ms") {
		t.Fatalf("after recording: %v", err)
	}
	// A directory from before the layout file: its shard directories decide.
	old := t.TempDir()
	for _, d := range []string{"shard-000", "shard-001", "shard-002"} {
		if err := os.Mkdir(filepath.Join(old, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ensureLayout(old, l(8, 100), shards); err == nil {
		t.Fatal("explicit count differing from the shard directories accepted")
	}
	if got, err := ensureLayout(old, l(8, 100), none); err != nil || got.Shards != 3 {
		t.Fatalf("legacy directory: %+v %v", got, err)
	}
}

// A restart with another --slot exits non-zero naming the setting, before serving; one
// without --slot runs with the recorded length.
func TestServeRefusesAnotherSlot(t *testing.T) {
	data := t.TempDir()
	run := startServe(t, "--data", data, "--listen", "127.0.0.1:0", "--metrics-listen", "", "--slot", "10ms", "--shards", "1")
	run.ready(t)
	if code := run.stop(t); code != 0 {
		t.Fatalf("first run exited %d", code)
	}
	var out bytes.Buffer
	if code := serveMain(context.Background(), []string{"--data", data, "--listen", "127.0.0.1:0", "--metrics-listen", "", "--slot", "20ms"}, &out); code == 0 ||
		!strings.Contains(out.String(), "--slot 10ms") || strings.Contains(out.String(), "msg=ready") {
		t.Fatalf("restart with --slot 20ms: exit %d\n%s", code, out.String())
	}
	run = startServe(t, "--data", data, "--listen", "127.0.0.1:0", "--metrics-listen", "")
	run.ready(t)
	if !strings.Contains(run.log.String(), "using the data directory's slot length") {
		t.Fatalf("restart without --slot:\n%s", run.log)
	}
}

// startServeTestNATS runs a plain NATS server (JetStream on or off) and returns its URL.
func startServeTestNATS(t *testing.T, jetStream bool) string {
	return startServeTestNATSWith(t, &server.Options{JetStream: jetStream})
}

// startServeTestNATSWith runs an in-process NATS server with o (address, store and
// logging filled in) and returns its client URL.
func startServeTestNATSWith(t *testing.T, o *server.Options) string {
	t.Helper()
	o.Host, o.Port, o.StoreDir, o.NoLog, o.NoSigs = "127.0.0.1", server.RANDOM_PORT, t.TempDir(), true, true
	ns, err := server.NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns.ClientURL()
}

// A NATS deployment that asks for a password: serve connects with it in the URL, and
// neither its log nor a client's error shows it; a client with --user/--password is
// served, one with a wrong password exits 5 without echoing it.
func TestServeExternalNATSWithPasswordNeverPrintsIt(t *testing.T) {
	plain := startServeTestNATSWith(t, &server.Options{JetStream: true, Username: "admin", Password: "s3cret"})
	withPassword := strings.Replace(plain, "nats://", "nats://admin:s3cret@", 1)
	srv := startServe(t, "--data", t.TempDir(), "--nats", withPassword, "--metrics-listen", "", "--journal", "file")
	srv.ready(t)
	code, out, errOut := run(t, cmdResource, "create", "seat-1", "--server", plain, "--user", "admin", "--password", "s3cret")
	if code != exitOK {
		t.Fatalf("client with --user/--password: exit %d %s %s", code, out, errOut)
	}
	code, _, errOut = run(t, cmdResource, "get", "seat-1", "--server", strings.Replace(plain, "nats://", "nats://admin:wr0ng@", 1), "--timeout", "2s")
	if code != exitConnect || strings.Contains(errOut, "wr0ng") {
		t.Fatalf("wrong password: exit %d, stderr %q", code, errOut)
	}
	if c := srv.stop(t); c != 0 {
		t.Fatalf("exit %d", c)
	}
	if strings.Contains(srv.log.String(), "s3cret") {
		t.Fatalf("the password is in the log:\n%s", srv.log)
	}
}
