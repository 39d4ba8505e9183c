#!/bin/bash
# kill -9 (or SIG=TERM: stop) a node of a three-node deployment (MODE: r3-three, the
# default, or embedded-three, where the node's NATS server dies with it) AT seconds into
# the bench's load (scripts/cluster-bench.sh); the nodes' logs (WORK/MODE/hf-*.log) say
# when each shard was served again, the bench's per-second lines (bench-progress.log)
# how long writes stalled.
#   scripts/cluster-failover.sh [WORKDIR [BASEPORT]]   (as scripts/cluster-bench.sh)
# NODE is the node to kill: a (the default), b, c, or, with MODE=embedded-three,
# bucket-leader or events-leader (the node whose server leads the cluster bucket's or the
# events stream's raft group). With a leader chosen, the bench connects to node c's
# server only, the leadership is moved off c first if c holds it, and the bench runs
# --by-shard, so that its table shows what the survivors' shards paid, and --audit, so
# that every lease granted is read back after the load (nothing acknowledged lost).
cd "$(dirname "$0")"
MODE=${MODE:-r3-three}
W=${1:-${WORK:-/tmp/cb}}
B=${2:-${BASEPORT:-14220}}
NODE=${NODE:-a}
AT=${AT:-12}
mkdir -p $W; rm -f $W/$MODE/bench-progress.log
case $NODE in
bucket-leader | events-leader)
  STREAM=KV_HOLDFAST_CLUSTER; [ $NODE = events-leader ] && STREAM=HOLDFAST_EVENTS
  (cd .. && go build -o $W/jsleader ./scripts/jsleader) || exit 1
  U=nats://127.0.0.1:$((B + 1)),nats://127.0.0.1:$((B + 2))
  export BENCHURL=nats://127.0.0.1:$((B + 3)) BENCHARGS="${BENCHARGS:---by-shard --audit}" ;;
esac
(
  for i in $(seq 1 1200); do [ -f $W/$MODE/bench-progress.log ] && break; sleep 0.1; done
  if [ -n "${STREAM:-}" ]; then
    case "$($W/jsleader $U $STREAM | awk '{print $2}')" in *c*) $W/jsleader $U -stepdown $STREAM a >&2; sleep 1;; esac
  fi
  for i in $(seq 1 1200); do grep -q "bench \[holdfast *${AT}s\]" $W/$MODE/bench-progress.log 2>/dev/null && break; sleep 0.1; done
  N=$NODE
  if [ -n "${STREAM:-}" ]; then
    L=$($W/jsleader $U $STREAM | awk '{print $2}')
    case "$L" in *a*) N=a;; *b*) N=b;; *) echo "the $STREAM leader is $L, not a or b" >&2; exit 1;; esac
    echo "$STREAM is led by $L" >&2
  fi
  kill -${SIG:-9} $(cat $W/$MODE/pid-$N); echo "signal ${SIG:-9} to $N at $(date +%T.%N)" >&2
) &
SETTLE=${SETTLE:-8} DUR=${DUR:-25s} ./cluster-bench.sh $MODE $W $B
