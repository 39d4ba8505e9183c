#!/bin/bash
# A rolling upgrade under load (docs/operations.md "Upgrades"):
#   scripts/rolling-upgrade.sh [WORKDIR [BASEPORT]]   (default /tmp/ru, 14720)
# Three `holdfast serve --cluster` nodes of the previous build (HOLDFAST_OLD, default
# /tmp/holdfast-old) cluster their embedded NATS servers; `holdfast bench --audit` of this
# build runs against all three while each node in turn gets SIGTERM and is started again
# as this build (HOLDFAST, default /tmp/holdfast) on the same data directory and ports.
# The bench's error count and its audit (every acknowledged grant read back) are the
# result. Only the processes started here are stopped, by pid.
set -u
OLD=${HOLDFAST_OLD:-/tmp/holdfast-old} NEW=${HOLDFAST:-/tmp/holdfast}
W=${1:-/tmp/ru}
B=${2:-14720}
rm -rf $W; mkdir -p $W; cd $W
declare -A pid
cleanup() { for p in "${pid[@]}"; do kill -9 $p 2>/dev/null; done; }
trap cleanup EXIT
ROUTES=nats://127.0.0.1:$((B + 1001)),nats://127.0.0.1:$((B + 1002)),nats://127.0.0.1:$((B + 1003))
URL=nats://127.0.0.1:$((B + 1)),nats://127.0.0.1:$((B + 2)),nats://127.0.0.1:$((B + 3))
start() { # node index binary log
  $3 serve --node n$1 --data data-$1 --listen 127.0.0.1:$((B + $1)) --cluster nats://127.0.0.1:$((B + 1000 + $1)) \
    --routes $ROUTES --replicas 3 --metrics-listen "" > $2 2>&1 &
  pid[$1]=$!
}
ready() { local j; for j in $(seq 1 240); do grep -q "msg=ready" $1 && return 0; sleep 0.25; done; echo "NOT READY: $1" >&2; tail -5 $1 >&2; return 1; }
for i in 1 2 3; do start $i old-$i.log $OLD; done
for i in 1 2 3; do ready old-$i.log || exit 1; done
sleep ${SETTLE:-8}
$NEW bench --server $URL --duration ${DUR:-50s} --clients ${CLIENTS:-16} --audit > bench.txt 2> bench-progress.log &
bench=$!
sleep 8
for i in 1 2 3; do
  t=$(date +%s.%N)
  kill -TERM ${pid[$i]}; wait ${pid[$i]}; echo "n$i (old) stopped: exit $? after $(echo "$(date +%s.%N) - $t" | bc) s"
  start $i new-$i.log $NEW
  ready new-$i.log && echo "n$i (new) ready after $(echo "$(date +%s.%N) - $t" | bc) s" || { cat new-$i.log | tail -20; }
  grep -iE "level=(ERROR|WARN)" new-$i.log | head -5
  sleep 8
done
wait $bench
grep -E "errors|codes|audit|grants/s|requests/s" bench.txt
