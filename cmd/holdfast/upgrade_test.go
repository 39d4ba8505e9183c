package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/cluster"
	"github.com/holdfast/holdfast/internal/buildbin"
	"github.com/holdfast/holdfast/internal/natstest"
	"github.com/holdfast/holdfast/messages"
)

// previousRelease is the build an upgrade starts from: the one whose data directory
// testdata/datadir-0feea80.tar.gz holds.
const previousRelease = "0feea80"

// A rolling upgrade under load: three nodes of the previous release cluster their
// embedded NATS servers and serve clients that reserve and release without pause; each
// node in turn gets SIGTERM and starts again as this build on the same data directory and
// ports. No request fails (the clients retry as the Go client does), and every answer
// holds afterwards: each lease answered released reads released.
func TestRollingUpgrade(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the previous release and runs three nodes")
	}
	old, err := buildbin.BuildRevision(t.TempDir(), previousRelease)
	if err != nil {
		t.Skipf("the previous release does not build here (a checkout without history?): %v", err)
	}
	nodes := newThreeNodes(t)
	args, urls := nodes.Args, nodes.URLs
	dir := t.TempDir()
	var olds []*exec.Cmd
	for i := range 3 {
		data := filepath.Join(dir, fmt.Sprint("n", i+1))
		cmd := exec.Command(old, append([]string{"serve"}, args(i, data)...)...)
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("old-%d.log", i+1)))
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
		olds = append(olds, cmd)
	}
	for i := range 3 {
		waitLogLine(t, filepath.Join(dir, fmt.Sprintf("old-%d.log", i+1)), "msg=ready")
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cl, err := client.New(nc, client.WithTimeout(20*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var ids []string
	for k := range 12 {
		id := fmt.Sprintf("k%d/r", k)
		if r, err := cl.CreateResource(ctx, id); err != nil || (!r.OK() && r.Code != messages.CodeAlreadyExists) {
			t.Fatalf("create %s: %v %+v", id, err, r)
		}
		ids = append(ids, id)
	}

	load, stopLoad := context.WithCancel(ctx)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		released []string
		failed   []string
		cycles   atomic.Int64
	)
	for c := range 6 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 7))
			for load.Err() == nil {
				id := ids[rng.IntN(len(ids))]
				r, err := cl.Reserve(ctx, client.ReserveRequest{Holder: fmt.Sprint("h", c), TTL: time.Hour,
					Members: []*messages.Member{client.Resource(id)}})
				switch {
				case err != nil:
					mu.Lock()
					failed = append(failed, fmt.Sprintf("reserve %s: %v", id, err))
					mu.Unlock()
					continue
				case !r.OK():
					continue // resource_busy: another client holds it
				}
				rel, err := cl.Release(ctx, fmt.Sprint("h", c), r.Fence())
				mu.Lock()
				if err != nil || !rel.OK() {
					failed = append(failed, fmt.Sprintf("release %s: %v %+v", r.Lease.GetLeaseId(), err, rel))
				} else {
					released = append(released, r.Lease.GetLeaseId())
				}
				mu.Unlock()
				cycles.Add(1)
			}
		})
	}
	time.Sleep(3 * time.Second)
	for i := range 3 {
		before := cycles.Load()
		if err := olds[i].Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if state, _ := olds[i].Process.Wait(); state == nil || state.ExitCode() != 0 {
			t.Fatalf("the previous release's n%d did not stop cleanly on SIGTERM: %v", i+1, state)
		}
		r := startServe(t, args(i, filepath.Join(dir, fmt.Sprint("n", i+1)))...)
		r.ready(t)
		time.Sleep(3 * time.Second)
		t.Logf("n%d upgraded; %d cycles meanwhile", i+1, cycles.Load()-before)
	}
	stopLoad()
	wg.Wait()
	if len(failed) > 0 {
		t.Fatalf("%d requests failed during the upgrade, first %s", len(failed), failed[0])
	}
	if len(released) == 0 {
		t.Fatal("no cycle completed: the test shows nothing")
	}
	for _, id := range released {
		if l, err := cl.GetLease(ctx, id); err != nil || !l.OK() || l.Lease.GetState() != messages.StateReleased {
			t.Fatalf("lease %s was answered released, and reads %v %+v", id, err, l)
		}
	}
	t.Logf("%d leases reserved and released across the upgrade, each read back released", len(released))
}

// waitLogLine waits (2 minutes at most) for a line containing s in the log file.
func waitLogLine(t *testing.T, path, s string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if b, _ := os.ReadFile(path); strings.Contains(string(b), s) {
			return
		}
	}
	b, _ := os.ReadFile(path)
	t.Fatalf("%s: no %q in 2 minutes:\n%s", path, s, b)
}

// A build that cannot read what a prefix holds refuses to serve it, naming both formats,
// and exits: here the registry of a cluster records a data format newer than this build's.
func TestNewerClusterIsRefused(t *testing.T) {
	js := natstest.Start(t, 1)
	_, jsc := natstest.Connect(t, js.URL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	kv, err := cluster.OpenBucket(ctx, jsc, cluster.NamesFor("holdfast"), 1)
	if err != nil {
		t.Fatal(err)
	}
	reg := fmt.Sprintf(`{"journal":"jetstream","node":"x","shards":3,"slot_ms":100,"format":%d}`, cluster.DataFormat+1)
	if _, err := kv.Put(ctx, "registry", []byte(reg)); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	code := serveMain(ctx, []string{"--nats", js.URL(), "--journal", "jetstream", "--node", "a", "--shards", "3",
		"--data", t.TempDir(), "--metrics-listen", ""}, &out)
	want := fmt.Sprintf("holds data of format %d, written by a newer Holdfast, and this build reads format %d at most", cluster.DataFormat+1, cluster.DataFormat)
	if code == 0 || !strings.Contains(out.String(), want) {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
}
