package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/holdfast/holdfast/examples/internal/testserver"
)

func TestGPUBundle(t *testing.T) {
	srv := testserver.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out bytes.Buffer
	if err := run(ctx, []string{"--server", srv.URL, "--node", "node14"}, &out); err != nil {
		t.Fatalf("%v\noutput:\n%s", err, out.String())
	}
	for _, want := range []string{
		"node node14: 4 GPUs, pool node14/mem of 80 GiB",
		"job A: gpu0 + 48 GiB, lease ",
		"job B: gpu1 + 48 GiB: insufficient_capacity; gpu1 stays available, 32 GiB available",
		"pool active=80 available=0",
		"job C across two nodes: rejected cross_shard",
		"job C with gpu2 twice: rejected duplicate_member",
		"job-b released ",
		": 80 GiB available",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	// The same over protobuf, on another node.
	out.Reset()
	if err := run(ctx, []string{"--server", srv.URL, "--node", "node15", "--protobuf"}, &out); err != nil {
		t.Fatalf("protobuf: %v\noutput:\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "job B: gpu1 + 48 GiB: insufficient_capacity; gpu1 stays available, 32 GiB available") {
		t.Errorf("protobuf run:\n%s", out.String())
	}
}
