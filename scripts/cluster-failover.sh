#!/bin/bash
# kill -9 (or SIG=TERM: stop) node a of a three-node deployment (MODE: r3-three, the
# default, or embedded-three, where the node's NATS server dies with it) 12 s into a bench
# (scripts/cluster-bench.sh); the nodes' logs (WORK/MODE/hf-*.log) say when each shard was
# served again, the bench's per-second lines (bench-progress.log) how long writes stalled.
#   scripts/cluster-failover.sh [WORKDIR [BASEPORT]]   (as scripts/cluster-bench.sh)
cd "$(dirname "$0")"
MODE=${MODE:-r3-three}
W=${1:-${WORK:-/tmp/cb}}
SETTLE=${SETTLE:-15}
( sleep $((SETTLE + 12)); kill -${SIG:-9} $(cat $W/$MODE/pid-${NODE:-a}); echo "signal ${SIG:-9} to ${NODE:-a} at $(date +%T.%N)" >&2 ) &
SETTLE=$SETTLE DUR=${DUR:-25s} ./cluster-bench.sh $MODE $W ${2:-${BASEPORT:-14220}}
