package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/holdfast/holdfast/backup"
	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/cluster"
	"github.com/holdfast/holdfast/internal/natstest"
	"github.com/holdfast/holdfast/messages"
)

var cmdSnapshot = command("snapshot")

// serveClient starts holdfast serve on data and gives a client of it, its URL, and a
// stop that checks it exits 0.
func serveClient(t *testing.T, data string, args ...string) (*client.Client, string, func()) {
	t.Helper()
	r := startServe(t, append([]string{"--data", data, "--listen", "127.0.0.1:0", "--metrics-listen", ""}, args...)...)
	url, _ := r.ready(t)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("serve --data %s:\n%s", data, r.log)
		}
	})
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return cl, url, func() {
		nc.Close()
		if code := r.stop(t); code != 0 {
			t.Fatalf("serve exited %d:\n%s", code, r.log)
		}
	}
}

// snapshotWorld is what the test puts in the service: resources on eight placement keys
// (so on every shard), a pool, a least_recently_freed range and a run of work.
type snapshotWorld struct{ resources []string }

func newSnapshotWorld(t *testing.T, ctx context.Context, cl *client.Client) *snapshotWorld {
	w := &snapshotWorld{}
	for k := range 8 {
		for r := range 4 {
			id := fmt.Sprintf("k%d/r%d", k, r)
			if res, err := cl.CreateResource(ctx, id); err != nil || !res.OK() {
				t.Fatalf("create %s: %v %+v", id, err, res)
			}
			w.resources = append(w.resources, id)
		}
	}
	if res, err := cl.CreatePool(ctx, "k0/mem", 64); err != nil || !res.OK() {
		t.Fatalf("create pool: %v %+v", err, res)
	}
	if res, err := cl.CreateRange(ctx, "vx", 1, 64, "least_recently_freed"); err != nil || !res.OK() {
		t.Fatalf("create range: %v %+v", err, res)
	}
	if res, err := cl.CreateRun(ctx, "k3run", []*messages.WorkSpec{client.Shard("a", nil, nil), client.Shard("b", nil, nil)}); err != nil || !res.OK() {
		t.Fatalf("create run: %v %+v", err, res)
	}
	return w
}

// churn reserves bundles across keys and releases them, keeping the last two, until ctx
// ends: the copy catches bundles at every step, and holds a few.
func (w *snapshotWorld) churn(ctx context.Context, cl *client.Client, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	var kept []client.Fence
	for ctx.Err() == nil {
		a, b := w.resources[rng.IntN(len(w.resources))], w.resources[rng.IntN(len(w.resources))]
		if a == b {
			continue
		}
		members := []*messages.Member{client.Resource(a), client.Resource(b), client.RangeAny("vx")}
		if rng.IntN(3) == 0 {
			members = append(members, client.PoolUnits("k0/mem", 1))
		}
		r, err := cl.Reserve(ctx, client.ReserveRequest{Holder: "h", TTL: time.Hour, Activate: rng.IntN(2) == 0, Members: members,
			Labels: map[string]string{"owner": fmt.Sprint("o", rng.IntN(4))}})
		if err != nil || !r.OK() {
			continue
		}
		if kept = append(kept, r.Fence()); len(kept) > 2 {
			_, _ = cl.Release(ctx, "h", kept[0])
			kept = kept[1:]
		}
	}
}

// reads is what a client sees of the world: every resource, the lease of each held one
// (members, labels, state, fence), the pool, every value of the range, the run.
func (w *snapshotWorld) reads(t *testing.T, ctx context.Context, cl *client.Client) []string {
	t.Helper()
	var out []string
	show := func(what string, m any) { out = append(out, fmt.Sprintf("%s %v", what, m)) }
	for _, id := range w.resources {
		r, err := cl.GetResource(ctx, id)
		if err != nil || !r.OK() {
			t.Fatalf("get %s: %v %+v", id, err, r)
		}
		show(id, r.Resource)
		if l := r.Resource.GetCurrentLeaseId(); l != "" {
			lr, err := cl.GetLease(ctx, l)
			if err != nil || !lr.OK() {
				t.Fatalf("get lease %s of %s: %v %+v", l, id, err, lr)
			}
			show("lease "+l, lr.Lease)
		}
	}
	p, err := cl.GetPool(ctx, "k0/mem")
	if err != nil || !p.OK() {
		t.Fatalf("get pool: %v %+v", err, p)
	}
	show("pool", p.Pool)
	for v := uint64(1); v <= 64; v++ {
		lk, err := cl.LookupValue(ctx, "vx", v)
		if err != nil {
			t.Fatalf("lookup %d: %v", v, err)
		}
		show(fmt.Sprint("vx ", v), lk.State+" "+lk.Lease.GetLeaseId())
	}
	run, err := cl.GetRun(ctx, "k3run")
	if err != nil || !run.OK() {
		t.Fatalf("get run: %v %+v", err, run)
	}
	show("run", run.Run)
	return out
}

// whole waits (5 s at most) until every lease a resource names is live and holds that
// resource, and each of its resources names it back: no bundle is half there. (A member
// on another shard than its lease's home may still name a lease the copy has ended: the
// restored home sends the end again, and it is freed.)
func (w *snapshotWorld) whole(t *testing.T, ctx context.Context, cl *client.Client) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		leases, why := w.halfBundle(t, ctx, cl)
		if why == "" {
			return leases
		}
		if time.Now().After(deadline) {
			t.Fatal(why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// halfBundle counts the live leases the resources name, or says what is half there.
func (w *snapshotWorld) halfBundle(t *testing.T, ctx context.Context, cl *client.Client) (int, string) {
	t.Helper()
	leases := map[string]bool{}
	for _, id := range w.resources {
		r, err := cl.GetResource(ctx, id)
		if err != nil || !r.OK() {
			t.Fatalf("get %s: %v %+v", id, err, r)
		}
		l := r.Resource.GetCurrentLeaseId()
		if l == "" || leases[l] {
			continue
		}
		lr, err := cl.GetLease(ctx, l)
		switch {
		case err != nil || !lr.OK():
			return 0, fmt.Sprintf("%s names lease %s, which reads %v %+v", id, l, err, lr)
		case lr.Lease.GetState() != messages.StateReserved && lr.Lease.GetState() != messages.StateActive:
			return 0, fmt.Sprintf("%s names lease %s, which is %s", id, l, lr.Lease.GetState())
		}
		leases[l] = true
		for _, m := range lr.Lease.GetMembers() {
			if m.GetResourceId() == "" {
				continue
			}
			mr, err := cl.GetResource(ctx, m.GetResourceId())
			if err != nil || mr.Resource.GetCurrentLeaseId() != l {
				return 0, fmt.Sprintf("lease %s's member %s names %q: half a bundle", l, m.GetResourceId(), mr.Resource.GetCurrentLeaseId())
			}
		}
	}
	return len(leases), ""
}

// A copy taken while bundles across shards are reserved and released restores to a
// service where every bundle is whole; a copy taken at rest restores to a service that
// answers every read as the source did. `snapshot status` checks each file.
func TestSnapshotSaveAndRestore(t *testing.T) {
	dir := t.TempDir()
	cl, url, stop := serveClient(t, filepath.Join(dir, "src"), "--shards", "4")
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newSnapshotWorld(t, ctx, cl)

	load, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() { w.churn(load, cl, uint64(i)) })
	}
	var busy []string
	for i := range 8 {
		time.Sleep(100 * time.Millisecond)
		file := filepath.Join(dir, fmt.Sprintf("busy-%d.copy", i))
		if code, _, errOut := run(t, cmdSnapshot, "save", file, "--server", url); code != 0 {
			t.Fatalf("save under load: exit %d: %s", code, errOut)
		}
		busy = append(busy, file)
	}
	stopLoad()
	wg.Wait()

	atRest := filepath.Join(dir, "rest.copy")
	if code, out, errOut := run(t, cmdSnapshot, "save", atRest, "--server", url); code != 0 || !strings.Contains(out, "4 shards") {
		t.Fatalf("save: exit %d: %s%s", code, out, errOut)
	}
	want := w.reads(t, ctx, cl)
	for _, f := range append(busy, atRest) {
		if code, out, errOut := run(t, cmdSnapshot, "status", f); code != 0 {
			t.Fatalf("status %s: exit %d: %s%s", f, code, out, errOut)
		}
	}

	restored := filepath.Join(dir, "restored")
	if code, _, errOut := run(t, cmdSnapshot, "restore", atRest, "--data", restored); code != 0 {
		t.Fatalf("restore: exit %d: %s", code, errOut)
	}
	cl2, _, stop2 := serveClient(t, restored)
	got := w.reads(t, ctx, cl2)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the restored service reads\n%s\nthe source read\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if w.whole(t, ctx, cl2) == 0 {
		t.Fatal("the copy at rest holds no lease: the test shows nothing")
	}
	stop2()

	for i, f := range busy {
		d := filepath.Join(dir, fmt.Sprint("busy-", i))
		if code, _, errOut := run(t, cmdSnapshot, "restore", f, "--data", d); code != 0 {
			t.Fatalf("restore %s: exit %d: %s", f, code, errOut)
		}
		cl3, _, stop3 := serveClient(t, d)
		t.Logf("copy %d under load: %d leases held, every bundle whole", i, w.whole(t, ctx, cl3))
		stop3()
	}

	// Restore makes a new data directory only.
	if code, _, errOut := run(t, cmdSnapshot, "restore", atRest, "--data", restored); code == 0 || !strings.Contains(errOut, "not empty") {
		t.Fatalf("restore into a used directory: exit %d: %s", code, errOut)
	}
}

// A damaged copy is refused by status and restore, naming what is wrong.
func TestSnapshotFileDamage(t *testing.T) {
	dir := t.TempDir()
	cl, url, stop := serveClient(t, filepath.Join(dir, "src"), "--shards", "2")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	newSnapshotWorld(t, ctx, cl)
	file := filepath.Join(dir, "a.copy")
	if code, _, errOut := run(t, cmdSnapshot, "save", file, "--server", url); code != 0 {
		t.Fatalf("save: exit %d: %s", code, errOut)
	}
	stop()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	cp, err := backup.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	end := len(b) - 4 - int(cp.Parts[1].Size) // shard 1's part ends here, before the file's checksum
	for _, c := range []struct {
		name string
		at   int
		want string
	}{
		{"a part's byte", end + int(cp.Parts[1].Size)/2, "shard 1's part sums to"},
		{"the file's checksum", len(b) - 1, "the file's checksum"},
		{"the magic", 0, "not a Holdfast copy"},
	} {
		bad := append([]byte(nil), b...)
		bad[c.at] ^= 0x40
		f := filepath.Join(dir, "bad.copy")
		if err := os.WriteFile(f, bad, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"status", f}, {"restore", f, "--data", filepath.Join(dir, "never")}} {
			if code, _, errOut := run(t, cmdSnapshot, args...); code == 0 || !strings.Contains(errOut, c.want) {
				t.Errorf("%s damaged, %s: exit %d: %s", c.name, args[0], code, errOut)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "never")); err == nil {
		t.Error("a refused restore made the data directory")
	}
	newer := strings.Replace(string(b), `"format":1`, `"format":2`, 1)
	f := filepath.Join(dir, "newer.copy")
	if err := os.WriteFile(f, []byte(newer), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errOut := run(t, cmdSnapshot, "status", f); code == 0 || !strings.Contains(errOut, "copy format 2, and this build reads format 1") {
		t.Errorf("a newer format: exit %d: %s", code, errOut)
	}
}

// The same file moves a cluster into one process: a copy of three embedded nodes, each
// serving a shard, taken while bundles across their shards run, restores into a data
// directory that one `holdfast serve` answers from as the cluster did at the cut.
func TestSnapshotOfAClusterIntoOneProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("three embedded NATS servers")
	}
	nodes := newThreeNodes(t)
	var runs []*serveRun
	for i := range 3 { // together: one node alone has no JetStream quorum, and is never ready
		runs = append(runs, startServe(t, nodes.Args(i, t.TempDir())...))
	}
	var url string
	for i, r := range runs {
		if u, _ := r.ready(t); i == 0 {
			url = u
		}
	}
	nc, err := nats.Connect(url, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	cl, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for settle := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		st, err := cl.ClusterStatus(ctx, "")
		owners := map[string]bool{}
		if err == nil && st.OK() {
			for _, sh := range st.Shards {
				owners[sh.GetOwner()] = true
			}
		}
		if len(owners) == 3 && !owners[""] && !owners["?"] {
			break
		}
		if time.Now().After(settle) {
			t.Fatalf("not one shard per node after a minute: %v %+v", err, st)
		}
	}
	w := newSnapshotWorld(t, ctx, cl)
	load, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() { w.churn(load, cl, uint64(i)) })
	}
	dir := t.TempDir()
	busy := filepath.Join(dir, "busy.copy")
	time.Sleep(500 * time.Millisecond)
	if code, _, errOut := run(t, cmdSnapshot, "save", busy, "--server", url); code != 0 {
		t.Fatalf("save under load: exit %d: %s", code, errOut)
	}
	stopLoad()
	wg.Wait()
	atRest := filepath.Join(dir, "rest.copy")
	if code, _, errOut := run(t, cmdSnapshot, "save", atRest, "--server", url); code != 0 {
		t.Fatalf("save: exit %d: %s", code, errOut)
	}
	want := w.reads(t, ctx, cl)

	one := filepath.Join(dir, "one")
	if code, _, errOut := run(t, cmdSnapshot, "restore", atRest, "--data", one); code != 0 {
		t.Fatalf("restore: exit %d: %s", code, errOut)
	}
	cl1, _, stop1 := serveClient(t, one)
	if got := w.reads(t, ctx, cl1); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("one process restored from the cluster reads\n%s\nthe cluster read\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	stop1()
	underLoad := filepath.Join(dir, "busy")
	if code, _, errOut := run(t, cmdSnapshot, "restore", busy, "--data", underLoad); code != 0 {
		t.Fatalf("restore: exit %d: %s", code, errOut)
	}
	cl2, _, stop2 := serveClient(t, underLoad)
	t.Logf("the copy under load: %d leases, every bundle whole", w.whole(t, ctx, cl2))
	stop2()
}

// A copy restored into the JetStream of a NATS deployment (a prefix nobody has served)
// starts a node with journal jetstream there, which answers as the source did; the same
// prefix is not restored into twice.
func TestSnapshotIntoJetStream(t *testing.T) {
	dir := t.TempDir()
	cl, url, stop := serveClient(t, filepath.Join(dir, "src"), "--shards", "3")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := newSnapshotWorld(t, ctx, cl)
	busy, done := context.WithTimeout(ctx, time.Second)
	w.churn(busy, cl, 1) // a second of bundles: the copy holds the last two
	done()
	file := filepath.Join(dir, "a.copy")
	if code, _, errOut := run(t, cmdSnapshot, "save", file, "--server", url); code != 0 {
		t.Fatalf("save: exit %d: %s", code, errOut)
	}
	want := w.reads(t, ctx, cl)
	stop()

	for _, layout := range []string{"streams", "feed"} {
		t.Run(layout, func(t *testing.T) {
			js := natstest.Start(t, 1)
			restore := func() (int, string) {
				code, _, errOut := run(t, cmdSnapshot, "restore", file, "--jetstream", "--server", js.URL(), "--prefix", "copy", "--journal-layout", layout)
				return code, errOut
			}
			if code, errOut := restore(); code != 0 {
				t.Fatalf("restore into JetStream: exit %d: %s", code, errOut)
			}
			if code, errOut := restore(); code == 0 || !strings.Contains(errOut, "already") {
				t.Fatalf("restore into the same prefix again: exit %d: %s", code, errOut)
			}
			r := startServe(t, "--nats", js.URL(), "--journal", "jetstream", "--node", "a", "--shards", "3", "--prefix", "copy",
				"--data", filepath.Join(t.TempDir(), "node"), "--metrics-listen", "")
			r.ready(t)
			nc, jsc := natstest.Connect(t, js.URL())
			cl2, err := client.New(nc, client.WithPrefix("copy"))
			if err != nil {
				t.Fatal(err)
			}
			if got := w.reads(t, ctx, cl2); strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("the node on the restored JetStream reads\n%s\nthe source read\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			w.whole(t, ctx, cl2)
			// The layout asked for is the one served: the journals on the events stream's
			// subjects, or a stream each.
			_, err = jsc.Stream(ctx, cluster.NamesFor("copy").JournalStream(0))
			if (err == nil) != (layout == "streams") {
				t.Fatalf("layout %s: a stream for shard 0's journal: %v", layout, err)
			}
		})
	}
}
