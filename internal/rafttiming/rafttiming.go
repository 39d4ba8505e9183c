// Package rafttiming sets the raft timing of the NATS servers this process embeds. Every
// JetStream stream, KV bucket and consumer is a raft group of its own; when the server
// leading one dies or is cut off, nothing is written to it until the others elect a
// leader, 4–9 s with nats-server's defaults (a heartbeat a second). Those timings are
// package variables of nats-server, set from constants, which no server option reaches
// — nats-server's own tests assign them — so they are reached here by //go:linkname. It
// binds the build to unexported names: a rename upstream breaks the build, which is the
// failure wanted (not a silent default).
//
// Set them before any server of the process starts, and run every server of a cluster
// with the same values. Shorter timeouts must be tested for spurious elections under
// the machine's fsync latency (TestNoSpuriousElections).
package rafttiming

import (
	"time"
	_ "unsafe" // go:linkname

	_ "github.com/nats-io/nats-server/v2/server" // the variables below are its
)

//go:linkname minElectionTimeout github.com/nats-io/nats-server/v2/server.minElectionTimeout
var minElectionTimeout time.Duration

//go:linkname maxElectionTimeout github.com/nats-io/nats-server/v2/server.maxElectionTimeout
var maxElectionTimeout time.Duration

//go:linkname hbInterval github.com/nats-io/nats-server/v2/server.hbInterval
var hbInterval time.Duration

//go:linkname lostQuorumInterval github.com/nats-io/nats-server/v2/server.lostQuorumInterval
var lostQuorumInterval time.Duration

//go:linkname lostQuorumCheck github.com/nats-io/nats-server/v2/server.lostQuorumCheck
var lostQuorumCheck time.Duration

// Timing is a raft timing: a leader's heartbeat period, the range of a follower's
// election timeout (no heartbeat for that long: it campaigns), and how long a leader
// goes without hearing from a quorum before it steps down (checked every LostQuorumCheck).
type Timing struct {
	Heartbeat                   time.Duration
	ElectionMin, ElectionMax    time.Duration
	LostQuorum, LostQuorumCheck time.Duration
}

// Default is nats-server's.
var Default = Timing{Heartbeat: time.Second, ElectionMin: 4 * time.Second, ElectionMax: 9 * time.Second,
	LostQuorum: 10 * time.Second, LostQuorumCheck: 10 * time.Second}

// Fast is nats-server's own test timing (jetstream_helpers_test.go): heartbeats every
// 50 ms, elections after 1.5–3.5 s without one, a leader without a quorum for 5 s steps
// down.
var Fast = Timing{Heartbeat: 50 * time.Millisecond, ElectionMin: 1500 * time.Millisecond, ElectionMax: 3500 * time.Millisecond,
	LostQuorum: 5 * time.Second, LostQuorumCheck: 200 * time.Millisecond}

// Faster is etcd's order of magnitude: heartbeats every 50 ms, elections after
// 0.4–0.9 s without one, a leader without a quorum for 2 s steps down (serve
// --raft-timing faster; docs/benchmarks.md "Partitions"). A disk whose fsync takes
// longer than the election timeout would start spurious elections.
var Faster = Timing{Heartbeat: 50 * time.Millisecond, ElectionMin: 400 * time.Millisecond, ElectionMax: 900 * time.Millisecond,
	LostQuorum: 2 * time.Second, LostQuorumCheck: 200 * time.Millisecond}

// Current is the timing in force.
func Current() Timing {
	return Timing{Heartbeat: hbInterval, ElectionMin: minElectionTimeout, ElectionMax: maxElectionTimeout,
		LostQuorum: lostQuorumInterval, LostQuorumCheck: lostQuorumCheck}
}

// Set puts t in force for the servers started from now on, and returns the timing it
// replaced.
func Set(t Timing) Timing {
	prev := Current()
	hbInterval, minElectionTimeout, maxElectionTimeout = t.Heartbeat, t.ElectionMin, t.ElectionMax
	lostQuorumInterval, lostQuorumCheck = t.LostQuorum, t.LostQuorumCheck
	return prev
}
