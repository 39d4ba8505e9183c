package main

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// freePorts returns n loopback ports free right now.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ports []int
	var lns []net.Listener
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	return ports
}

// threeNodes is a three-node cluster of embedded NATS servers on loopback ports free now:
// Args gives node i's `holdfast serve` flags (3 shards, replicas 3, no metrics listener)
// on data directory data, and URLs each node's client URL.
type threeNodes struct {
	URLs   []string
	routes []string
	ports  []int
}

func newThreeNodes(t *testing.T) *threeNodes {
	c := &threeNodes{ports: freePorts(t, 6)}
	for i := range 3 {
		c.routes = append(c.routes, fmt.Sprintf("nats://127.0.0.1:%d", c.ports[3+i]))
		c.URLs = append(c.URLs, fmt.Sprintf("nats://127.0.0.1:%d", c.ports[i]))
	}
	return c
}

func (c *threeNodes) Args(i int, data string, extra ...string) []string {
	return append([]string{"--node", fmt.Sprintf("n%d", i+1), "--data", data, "--listen", fmt.Sprintf("127.0.0.1:%d", c.ports[i]),
		"--cluster", c.routes[i], "--routes", strings.Join(c.routes, ","), "--cluster_name", "hf", "--replicas", "3",
		"--shards", "3", "--metrics-listen", ""}, extra...)
}

// The README's three commands: three `holdfast serve` processes (here three in one test
// process) cluster their embedded NATS servers with --cluster, --routes and
// --cluster_name, and serve one Holdfast with --replicas 3 — no nats-server installed.
// A node that stops hands its shards over; the others serve them, and what was
// acknowledged is there.
func TestServeEmbeddedCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("three embedded NATS servers")
	}
	nodes := newThreeNodes(t)
	var runs []*serveRun
	for i := range 3 {
		runs = append(runs, startServe(t, nodes.Args(i, t.TempDir(), "--ownership-ttl", "2s", "--raft-timing", "faster")...))
	}
	var urls []string
	for _, r := range runs {
		u, _ := r.ready(t)
		urls = append(urls, u)
	}
	if !strings.Contains(runs[0].log.String(), "journal=jetstream") {
		t.Fatalf("--cluster did not make the journal jetstream:\n%s", runs[0].log)
	}
	// The client connects to n1, which stays (a client of n2's NATS server would
	// reconnect to another when n2 goes).
	nc, err := nats.Connect(urls[0], nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	want := func(subject, body, code string) map[string]any {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			var r map[string]any
			if m, err := nc.Request("holdfast.v1.acme."+subject, []byte(body), 3*time.Second); err == nil {
				_ = json.Unmarshal(m.Data, &r)
			}
			if r["code"] == code {
				return r
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s %s: %v, want %s", subject, body, r, code)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	var leases []string
	for i := 0; i < 6; i++ {
		want("resource.create", fmt.Sprintf(`{"operation_id":"c%d","resource_id":"gpu%d"}`, i, i), "ok")
		r := want("lease.reserve", fmt.Sprintf(`{"operation_id":"r%d","holder_id":"h","activate":true,"members":[{"resource_id":"gpu%d"}]}`, i, i), "ok")
		leases = append(leases, r["lease"].(map[string]any)["lease_id"].(string))
	}
	// Settled first: nodes that start together may find the first of them holding every
	// shard and handing two of them on, one at a time.
	var status map[string]any
	for settle := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		status = want("cluster.status", `{}`, "ok")
		owners := map[any]bool{}
		for _, sh := range status["shards"].([]any) {
			owners[sh.(map[string]any)["owner"]] = true
		}
		if len(owners) == 3 && !owners[""] && !owners[nil] {
			break
		}
		if time.Now().After(settle) {
			t.Fatalf("not one shard per node after 30 s: %v", status)
		}
	}
	if n := len(status["nodes"].([]any)); n != 3 {
		t.Fatalf("cluster.status: %d nodes: %v", n, status)
	}

	before := map[float64]any{}
	for _, sh := range status["shards"].([]any) {
		k, _ := sh.(map[string]any)["shard"].(float64) // absent: shard 0
		before[k] = sh.(map[string]any)["owner"]
	}

	// n2 stops: its shards move to n1 and n3, within the ownership TTL and a second. Its
	// NATS server hands its raft leaderships over before it goes (lame duck), so the
	// others keep renewing their claims and keep their shards.
	runs[1].stop(t)
	start := time.Now()
	for _, l := range leases {
		if r := want("lease.get", fmt.Sprintf(`{"lease_id":%q}`, l), "ok"); r["lease"].(map[string]any)["state"] != "active" {
			t.Fatalf("lease %s after n2 stopped: %v", l, r)
		}
	}
	for {
		st := want("cluster.status", `{}`, "ok")
		owned := 0
		for _, s := range st["shards"].([]any) {
			if o := s.(map[string]any)["owner"]; o == "n1" || o == "n3" {
				owned++
			}
		}
		if owned == 3 {
			for _, sh := range st["shards"].([]any) {
				k, _ := sh.(map[string]any)["shard"].(float64)
				o := sh.(map[string]any)["owner"]
				if was := before[k]; was != "n2" && was != o {
					t.Fatalf("shard %v moved from %v to %v when n2 stopped", k, was, o)
				}
			}
			break
		}
		if time.Since(start) > 3*time.Second {
			t.Fatalf("3 s after n2 stopped: %v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("n2's shards served again after %v", time.Since(start).Round(time.Millisecond))

	// Then the others, one at a time: each stops within the stop bound and logs nothing
	// of its own but its hand-over — the last one, whose peers' NATS servers are gone
	// with them (no quorum), closes its shards and leaves their claims to lapse. (The
	// embedded NATS server's own lines, component=nats, say it lost its peers.)
	nc.Close()
	for _, i := range []int{2, 0} {
		from := len(runs[i].log.String())
		start := time.Now()
		runs[i].stop(t)
		took := time.Since(start)
		var complaints []string
		for _, line := range strings.Split(runs[i].log.String()[from:], "\n") {
			if (strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR")) && !strings.Contains(line, "component=nats") {
				complaints = append(complaints, line)
			}
		}
		if took > 30*time.Second || len(complaints) > 0 {
			t.Fatalf("n%d stopped in %v, logging:\n%s", i+1, took, strings.Join(complaints, "\n"))
		}
		t.Logf("n%d stopped in %v", i+1, took.Round(time.Millisecond))
	}
}
