package main

import (
	"testing"

	"github.com/holdfast/holdfast/internal/testserver"
)

func TestWorkers(t *testing.T) {
	srv := testserver.Start(t)
	out := srv.Run(t, run, "--run", "crawl")
	testserver.WantAll(t, out,
		"run crawl: 4 work shards over k0000..k0999",
		"worker-0 died in s0 after k0039, 15 keys unwritten",
		"resumed s0 after k0024 (token \"done-through=k0024\")",
		"split s3 at k0650: s3:r0",
		"zombie worker-0's late batch of 15 keys refused: holdfast: stale fence",
		"every key written, 0 written twice; run crawl: done, 5 work shards (0 split)",
	)
}
