package main

import (
	"strings"
	"testing"

	"github.com/holdfast/holdfast/internal/testserver"
)

func TestGPUBundle(t *testing.T) {
	srv := testserver.Start(t)
	out := srv.Run(t, run, "--node", "node14")
	testserver.WantAll(t, out,
		"node node14: 4 GPUs, pool node14/mem of 80 GiB",
		"job A: gpu0 + 48 GiB, lease ",
		"job B: gpu1 + 48 GiB: insufficient_capacity; gpu1 stays available, 32 GiB available",
		"pool active=80 available=0",
		"job C across two nodes, one pool missing: pool_not_found; gpu2 stays available",
		"job C with gpu2 twice: rejected duplicate_member",
		"job-b released ",
		": 80 GiB available",
	)
	// The same over protobuf, on another node.
	out = srv.Run(t, run, "--node", "node15", "--protobuf")
	if !strings.Contains(out, "job B: gpu1 + 48 GiB: insufficient_capacity; gpu1 stays available, 32 GiB available") {
		t.Errorf("protobuf run:\n%s", out)
	}
}
