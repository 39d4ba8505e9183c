package main

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast/client"
	"github.com/holdfast/holdfast/messages"
)

// A data directory written by the build of 0feea80 — journals of command formats before
// 6, snapshots of formats before 9, its holdfast.json and embedded JetStream store — opens
// with this build and answers as that build did: the objects, the active leases with their
// members and labels, a released lease's members free, range values held and excluded
// (scripts/compat-fixture.sh wrote it). This build then appends its own entries, a bundle
// across shards among them, and the mixed journals open again.
func TestDataDirectoryOfAnEarlierBuild(t *testing.T) {
	dir := t.TempDir()
	untar(t, "testdata/datadir-0feea80.tar.gz", dir)
	data := filepath.Join(dir, "data")
	serve := func() (*client.Client, func()) {
		cl, _, stop := serveClient(t, data)
		return cl, stop
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	must := func(what string, ok bool, err error, r any) {
		t.Helper()
		if err != nil || !ok {
			t.Fatalf("%s: %v %+v", what, err, r)
		}
	}
	earlier := func(cl *client.Client) string {
		t.Helper()
		gpu, err := cl.GetResource(ctx, "n1/gpu0")
		must("n1/gpu0", err == nil && gpu.Resource.GetState() == messages.StateActive, err, gpu)
		lease, err := cl.GetLease(ctx, gpu.Resource.GetCurrentLeaseId())
		must("its lease", err == nil && lease.OK(), err, lease)
		l := lease.Lease
		if l.GetHolderId() != "sched" || l.GetState() != messages.StateActive || len(l.GetMembers()) != 3 ||
			l.Members[1].GetQuantity() != 8 || l.Members[2].GetValue() != 30000 || l.GetLabels()["owner_uuid"] != "vm-1" {
			t.Fatalf("the earlier build's lease reads %+v", l)
		}
		pool, err := cl.GetPool(ctx, "n1/mem")
		must("n1/mem", err == nil && pool.Pool.GetActive() == 8 && pool.Pool.GetCapacity() == 80, err, pool)
		for v, want := range map[uint64]string{30000: client.ValueHeld, 30022: client.ValueExcluded, 30001: client.ValueFree} {
			lk, err := cl.LookupValue(ctx, "n1/ports", v)
			must("n1/ports value", err == nil && lk.State == want, err, lk)
		}
		vx, err := cl.LookupValue(ctx, "vxlan", 1500)
		must("vxlan 1500", err == nil && vx.State == client.ValueHeld && vx.Lease.GetHolderId() == "net", err, vx)
		return l.GetLeaseId()
	}

	cl, stop := serve()
	lease := earlier(cl)
	free, err := cl.GetResource(ctx, "n1/gpu1")
	must("the released lease's member", err == nil && free.Resource.GetState() == messages.StateAvailable, err, free)
	again, err := cl.Reserve(ctx, client.ReserveRequest{Holder: "sched", TTL: time.Hour,
		Members: []*messages.Member{client.Resource("n1/gpu1")}}, client.WithOperationID("after-1"))
	must("a reserve in this build", err == nil && again.OK(), err, again)
	bundle, err := cl.Reserve(ctx, client.ReserveRequest{Holder: "vm", TTL: time.Hour,
		Members: []*messages.Member{client.Resource("n2/gpu0"), client.RangeAny("vxlan")}}, client.WithOperationID("after-2"))
	must("a bundle across keys", err == nil && bundle.OK() && len(bundle.Lease.GetMembers()) == 2, err, bundle)
	stop()

	cl, stop = serve()
	defer stop()
	if earlier(cl) != lease {
		t.Fatal("the earlier build's lease moved")
	}
	for _, r := range []*client.LeaseResult{again, bundle} {
		got, err := cl.GetLease(ctx, r.Lease.GetLeaseId())
		must("this build's lease after a restart", err == nil && got.OK() && len(got.Lease.GetMembers()) == len(r.Lease.GetMembers()) &&
			got.Lease.GetState() == messages.StateReserved, err, got)
	}
}

// untar unpacks a .tar.gz into dir.
func untar(t *testing.T, file, dir string) {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, h.Name)
		if !strings.HasPrefix(path, filepath.Clean(dir)+string(os.PathSeparator)) {
			t.Fatalf("%s leaves the directory", h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(path, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, b, os.FileMode(h.Mode)&0o777); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// A data directory written by a newer build (here: its layout file's format) is refused
// at start, naming both formats, and nothing in it is touched.
func TestDataDirectoryOfANewerBuildIsRefused(t *testing.T) {
	dir := t.TempDir()
	untar(t, "testdata/datadir-0feea80.tar.gz", dir)
	layout := filepath.Join(dir, "data", "holdfast.json")
	b, err := os.ReadFile(layout)
	if err != nil {
		t.Fatal(err)
	}
	newer := strings.Replace(string(b), `"format":1`, `"format":2`, 1)
	if newer == string(b) {
		t.Fatalf("layout file %s", b)
	}
	if err := os.WriteFile(layout, []byte(newer), 0o644); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	code := serveMain(context.Background(), []string{"--data", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--metrics-listen", ""}, &out)
	if code == 0 || !strings.Contains(out.String(), "layout format 2, and this build reads format 1") {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
	if after, _ := os.ReadFile(layout); string(after) != newer {
		t.Fatalf("the layout file was rewritten: %s", after)
	}
}
