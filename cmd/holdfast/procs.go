package main

import (
	"os"
	"runtime"
)

// serveProcs sets GOMAXPROCS for the server when the environment leaves it unset, and
// returns the value in force.
//
// Every shard's journal writer spends much of its time blocked in fsync. A goroutine
// in a system call keeps its P (the runtime's right to run Go code) until the runtime's
// monitor notices and hands the P off, which takes from tens of microseconds to
// milliseconds; with GOMAXPROCS equal to the core count of a small machine, the shards'
// replies and the embedded NATS server wait behind those stuck Ps. One P per shard lets
// the operating system, which knows the thread is asleep in the disk, run the rest.
// Measured with `holdfast bench --scenario spread` on 2 cores (docs/benchmarks.md):
// GOMAXPROCS 2 → 17k requests/s, 8 → 19–21k, 16 → 19k, 32 → 18k.
func serveProcs(shards uint32) int {
	cur := runtime.GOMAXPROCS(0)
	if os.Getenv("GOMAXPROCS") != "" {
		return cur
	}
	want := min(int(shards), 4*runtime.NumCPU())
	if want > cur {
		runtime.GOMAXPROCS(want)
		return want
	}
	return cur
}
