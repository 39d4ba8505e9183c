package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// serveSession is one `holdfast serve` run on a data directory, with a connection.
type serveSession struct {
	run *serveRun
	nc  *nats.Conn
}

func startSession(t *testing.T, data string, flags ...string) *serveSession {
	t.Helper()
	args := append([]string{"--data", data, "--listen", "127.0.0.1:0", "--metrics-listen", "", "--shards", "1", "--slot", "10ms"}, flags...)
	run := startServe(t, args...)
	url, _ := run.ready(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	return &serveSession{run: run, nc: nc}
}

func (s *serveSession) stop(t *testing.T) {
	t.Helper()
	s.nc.Close()
	if code := s.run.stop(t); code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, s.run.log)
	}
}

// req sends one request of tenant acme and checks its code.
func (s *serveSession) req(t *testing.T, verb, body, code string) map[string]any {
	t.Helper()
	r := serveRequest(t, s.nc, "holdfast.v1.acme."+verb, body)
	if r["code"] != code {
		t.Fatalf("%s %s: got %v, want %s", verb, body, r, code)
	}
	return r
}

func field(r map[string]any, path ...string) any {
	var v any = r
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// The first contact that lost a lease: a lease of 50 minutes acknowledged, the server
// stopped and started again on its data directory with lower --max-ttl, --max-bundle and
// --max-resources. The lease keeps its members and deadline, the objects created under
// the higher bound stay, a retry of the reserve replays; new requests meet the new
// limits (docs/api.md §6: "takes effect for new requests") and the new bound ("journaled
// at the next start": kept, refusing only new objects).
func TestServeRestartWithLowerLimitsKeepsTheLease(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	s := startSession(t, data)
	for _, id := range []string{"n/a", "n/b", "n/c", "n/d"} {
		s.req(t, "resource.create", fmt.Sprintf(`{"operation_id":"c-%s","resource_id":%q}`, id[2:], id), "ok")
	}
	reserve := `{"operation_id":"r1","holder_id":"alice","ttl_ms":3000000,"members":[{"resource_id":"n/a"},{"resource_id":"n/b"},{"resource_id":"n/c"}]}`
	granted := s.req(t, "lease.reserve", reserve, "ok")
	id, deadline := field(granted, "lease", "lease_id"), field(granted, "lease", "deadline_slot")
	s.stop(t)

	s = startSession(t, data, "--max-ttl", "10m", "--max-bundle", "2", "--max-resources", "2")
	defer s.stop(t)
	got := s.req(t, "lease.get", fmt.Sprintf(`{"lease_id":%q}`, id), "ok")
	if field(got, "lease", "state") != "reserved" || field(got, "lease", "deadline_slot") != deadline ||
		len(field(got, "lease", "members").([]any)) != 3 {
		t.Fatalf("the 50-minute lease after a restart with --max-ttl 10m: %v (granted %v)", got, granted)
	}
	for _, r := range []string{"n/a", "n/c"} {
		if st := field(s.req(t, "resource.get", fmt.Sprintf(`{"resource_id":%q}`, r), "ok"), "resource", "state"); st != "reserved" {
			t.Fatalf("%s: %v", r, st)
		}
	}
	s.req(t, "resource.get", `{"resource_id":"n/d"}`, "ok")
	if again := s.req(t, "lease.reserve", reserve, "ok"); again["from_retry_cache"] != true || field(again, "lease", "lease_id") != id {
		t.Fatalf("the reserve's retry: %v", again)
	}
	s.req(t, "lease.reserve", `{"operation_id":"r2","holder_id":"bob","ttl_ms":3000000,"members":[{"resource_id":"n/d"}]}`, "ttl_out_of_range")
	s.req(t, "lease.reserve", `{"operation_id":"r3","holder_id":"bob","ttl_ms":1000,"members":[{"resource_id":"n/d"},{"resource_id":"n/e"},{"resource_id":"n/f"}]}`, "bundle_too_large")
	s.req(t, "resource.create", `{"operation_id":"c-e","resource_id":"n/e"}`, "resource_table_full")
	s.req(t, "lease.reserve", `{"operation_id":"r4","holder_id":"bob","ttl_ms":600000,"members":[{"resource_id":"n/d"}]}`, "ok")
	if !strings.Contains(s.run.log.String(), "journaling new settings") {
		t.Fatalf("no line says the new settings were journaled:\n%s", s.run.log)
	}
}

// Retention windows are journaled: what ended or was remembered under a window keeps it
// across a restart with another, and what comes after takes the new one.
func TestServeRestartWithOtherWindows(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	s := startSession(t, data, "--history-window", "1s", "--dedupe-window", "1s")
	s.req(t, "resource.create", `{"operation_id":"c1","resource_id":"a"}`, "ok")
	a := field(s.req(t, "lease.reserve", `{"operation_id":"r1","holder_id":"h","activate":true,"members":[{"resource_id":"a"}]}`, "ok"), "lease", "lease_id")
	s.req(t, "lease.release", fmt.Sprintf(`{"operation_id":"x1","lease_id":%q,"holder_id":"h","lease_epoch":1}`, a), "ok")
	s.stop(t)

	s = startSession(t, data, "--history-window", "10m", "--dedupe-window", "10m")
	defer s.stop(t)
	b := field(s.req(t, "lease.reserve", `{"operation_id":"r2","holder_id":"h","activate":true,"members":[{"resource_id":"a"}]}`, "ok"), "lease", "lease_id")
	s.req(t, "lease.release", fmt.Sprintf(`{"operation_id":"x2","lease_id":%q,"holder_id":"h","lease_epoch":1}`, b), "ok")
	s.req(t, "resource.create", `{"operation_id":"c2","resource_id":"b"}`, "ok")
	time.Sleep(1500 * time.Millisecond)
	s.req(t, "lease.get", fmt.Sprintf(`{"lease_id":%q}`, a), "lease_retired")
	s.req(t, "lease.get", fmt.Sprintf(`{"lease_id":%q}`, b), "ok")
	// c1 was remembered for a second: executed again, it finds its resource there; c2,
	// remembered for ten minutes, replays.
	if r := s.req(t, "resource.create", `{"operation_id":"c1","resource_id":"a"}`, "already_exists"); r["from_retry_cache"] == true {
		t.Fatalf("c1 replayed after its one-second window: %v", r)
	}
	if r := s.req(t, "resource.create", `{"operation_id":"c2","resource_id":"b"}`, "ok"); r["from_retry_cache"] != true {
		t.Fatalf("c2 inside its ten-minute window: %v", r)
	}
}

// `holdfast cluster configure` shows a cluster's settings and changes the ones given;
// the nodes serve the change at once (a 50-minute reserve is refused under the new
// --max-ttl) and keep what they had acknowledged. A single process's prefix refuses it:
// its settings are its serve flags.
func TestClusterConfigure(t *testing.T) {
	url := startServeTestNATS(t, true)
	srv := startServe(t, "--nats", url, "--journal", "jetstream", "--node", "a", "--data", t.TempDir(), "--shards", "2",
		"--metrics-listen", "", "--ownership-ttl", "1s")
	srv.ready(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	s := &serveSession{run: srv, nc: nc}
	s.req(t, "resource.create", `{"operation_id":"c0","resource_id":"k"}`, "ok")
	lease := field(s.req(t, "lease.reserve", `{"operation_id":"r1","holder_id":"h","ttl_ms":3000000,"members":[{"resource_id":"k"}]}`, "ok"), "lease", "lease_id")

	code, out, errb := run(t, cmdCluster, "configure", "--server", url)
	if code != exitOK || !strings.Contains(out, "max-ttl           1h0m0s") || !strings.Contains(out, "settings (revision") {
		t.Fatalf("configure without flags: exit %d\n%s%s", code, out, errb)
	}
	code, out, errb = run(t, cmdCluster, "configure", "--server", url, "--max-ttl", "10m", "--max-resources", "1")
	if code != exitOK || !strings.Contains(out, "max_ttl_ms 600000 (not 3600000)") || !strings.Contains(out, "max_resources 1 (not") {
		t.Fatalf("configure --max-ttl 10m --max-resources 1: exit %d\n%s%s", code, out, errb)
	}
	deadline := time.Now().Add(10 * time.Second)
	for try := 0; ; try++ {
		// A new operation each time: one that reached a node before the new limits did
		// is remembered with the answer it got then (resource_busy), and a retry replays it.
		r := serveRequest(t, nc, "holdfast.v1.acme.lease.reserve",
			fmt.Sprintf(`{"operation_id":"r2-%d","holder_id":"h","ttl_ms":3000000,"members":[{"resource_id":"k"}]}`, try))
		if r["code"] == "ttl_out_of_range" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a 50-minute reserve after configure --max-ttl 10m: %v", r)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if r := s.req(t, "lease.get", fmt.Sprintf(`{"lease_id":%q}`, lease), "ok"); field(r, "lease", "state") != "reserved" {
		t.Fatalf("the 50-minute lease: %v", r)
	}
	if code, _, errb := run(t, cmdCluster, "configure", "--server", url, "--max-ttl", "2h"); code != exitUsage || !strings.Contains(errb, "--max-ttl") {
		t.Fatalf("--max-ttl 2h: exit %d: %s", code, errb)
	}

	// A single process: its flags decide, at its next start.
	single := startSession(t, filepath.Join(t.TempDir(), "data"))
	defer single.stop(t)
	if code, _, errb := run(t, cmdCluster, "configure", "--server", single.nc.ConnectedUrl(), "--max-ttl", "10m"); code != exitUsage ||
		!strings.Contains(errb, "its settings are its serve flags") {
		t.Fatalf("configure against a single process: exit %d: %s", code, errb)
	}
}
