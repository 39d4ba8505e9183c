#!/bin/bash
# kill -9 (or SIG=TERM: stop) node a of the r3-three deployment 12 s into a bench (scripts/cluster-bench.sh);
# the nodes' logs (WORK/r3-three/hf-*.log) say when each shard was served again.
cd "$(dirname "$0")"
( sleep $((${SETTLE:-15} + 12)); pkill -${SIG:-9} -f "node a " ; echo "signal ${SIG:-9} to a at $(date +%T.%N)" >&2 ) &
SETTLE=${SETTLE:-15} DUR=${DUR:-25s} ./cluster-bench.sh r3-three
