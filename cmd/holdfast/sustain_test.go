package main

import (
	"fmt"
	"testing"

	"github.com/nats-io/nats.go"
)

// The short form of the sustained-load check (docs/benchmarks.md has the hour-long one):
// a real server with windows of two seconds under a hotspot storm with a second tenant
// writing on the hot shard, then under spread load. Once the windows are full, the
// remembered operations and the heap stop growing, no write is refused for want of
// room, the bystander tenant is never refused, and the events stream stays within its
// byte limit.
func TestSustainedLoadPlateaus(t *testing.T) {
	if testing.Short() {
		t.Skip("sustained load: 45 s")
	}
	dir := t.TempDir()
	const streamLimit = 4 << 20
	srv := startServe(t, "--data", dir, "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
		"--shards", "2", "--slot", "10ms", "--dedupe-window", "2s", "--history-window", "2s",
		"--max-memory", "256MiB", "--events-max-bytes", fmt.Sprint(streamLimit), "--events-duplicate-window", "10s")
	url, metrics := srv.ready(t)
	nc, err := nats.Connect(url)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// JetStream remembers every event's id for the duplicate window (10 s): the heap
	// levels off once that is full too, so spread (events at the full rate) runs longer.
	const window = 2.0 // seconds: --dedupe-window
	for _, sc := range []string{"hotspot", "spread"} {
		d, from := "16s", 2
		if sc == "spread" {
			d, from = "26s", 6
		}
		args := []string{"--server", url, "--scenario", sc, "--duration", d, "--sample", "2s",
			"--metrics-url", metrics + "/metrics", "--resources", "2000", "--clients", "32"}
		if sc == "hotspot" {
			args = append(args, "--resources", "1", "--bystander-tenant", "bystander")
		}
		rep, out := benchRun(t, nc, args...)
		t.Logf("%s:\n%s", sc, out)
		if n := len(rep.Samples); n < from+4 {
			t.Fatalf("%s: %d samples", sc, n)
		}
		for _, s := range rep.Samples {
			if s.Err != "" || s.TableFull != 0 || s.Bystander != 0 {
				t.Errorf("%s at %v: error %q, %d table_full, %d bystander refusals", sc, s.Elapsed, s.Err, s.TableFull, s.Bystander)
			}
			if s.StreamBytes > streamLimit {
				t.Errorf("%s at %v: stream holds %d bytes, limit %d", sc, s.Elapsed, s.StreamBytes, streamLimit)
			}
		}
		// What a shard remembers follows the write rate over the window, not the time
		// the load has run: at most what three windows of the recent rate can write.
		// (Checked against the rate, not as a constant, so a machine that slows down
		// under other work does not fail it.)
		for i := from; i < len(rep.Samples); i++ {
			s, prev := rep.Samples[i], rep.Samples[i-1]
			if bound := 3*window*max(s.RequestsPS, prev.RequestsPS) + 1000; s.Operations == 0 || s.Operations > bound {
				t.Errorf("%s at %v: %.0f remembered operations at %.0f requests/s (bound %.0f): retention does not follow the window",
					sc, s.Elapsed, s.Operations, s.RequestsPS, bound)
			}
		}
		late := rep.Samples[from:] // the windows have been full for a while
		if first, last := late[0].Heap, late[len(late)-1].Heap; last > 1.5*first+32<<20 {
			t.Errorf("%s: heap grew from %.0f MB to %.0f MB once the windows were full", sc, first/(1<<20), last/(1<<20))
		}
		if sc == "hotspot" {
			if ok, all := rep.Bystander["ok"], total(rep.Bystander); ok == 0 || ok != all {
				t.Errorf("bystander tenant: %v", rep.Bystander)
			}
		}
		if full := rep.Holdfast.Codes["reserve"]["operation_table_full"] + rep.Holdfast.Codes["release"]["operation_table_full"]; full != 0 {
			t.Errorf("%s: %d operation_table_full", sc, full)
		}
	}
}

func total(m map[string]uint64) uint64 {
	var n uint64
	for _, v := range m {
		n += v
	}
	return n
}
