package main

import (
	"testing"

	"github.com/holdfast/holdfast/internal/testserver"
)

func TestGang(t *testing.T) {
	out := testserver.Start(t).Run(t, run, "--rack", "r1")
	testserver.WantAll(t, out,
		"rack r1: 8 nodes of 2 GPUs",
		"job A: 8 GPUs on 8 nodes, one lease ",
		"job B with r1-n7/gpu0 held: resource_busy (", "); r1-n0/gpu1 stays available",
		"job B: 8 GPUs, lease ",
		"both jobs released: all 16 GPUs available",
	)
}
