#!/bin/bash
# Benchmarks a Holdfast deployment on this machine (docs/benchmarks.md, "Cluster"):
#   scripts/cluster-bench.sh MODE [WORKDIR [BASEPORT]]   (default /tmp/cb, 14220)
# Client ports are BASEPORT+1..3, route ports BASEPORT+1001..1003. MODE is one of:
#   single-file      one process, file journal, embedded NATS
#   r1-one           one node, jetstream journal, one nats-server
#   r3-three         three nodes, replicas 3, three nats-servers
#   embedded-three   three `holdfast serve --cluster` clustering their embedded NATS
#                    servers, replicas 3
# Needs /tmp/holdfast or HOLDFAST=path (go build -o /tmp/holdfast ./cmd/holdfast) and, for the nats-server
# modes, /tmp/nats-server or NATS_SERVER=path (go build -o /tmp/nats-server github.com/nats-io/nats-server/v2).
# The nats-servers run with sync_interval: always unless SYNC= (empty) is set (an embedded
# cluster always does). DUR, CLIENTS, SETTLE, SCENARIO, TTL tune it; BENCH=path runs another build's bench client (one client against two servers); BENCHARGS adds bench flags (--by-shard), BENCHURL sets its --server, SERVEARGS adds serve flags (embedded-three). Each process's pid is
# in WORK/MODE/pid-NAME (nats-servers n1..n3, nodes a..c, or hf): scripts/cluster-failover.sh
# signals a node by it. Only the processes started here are stopped, by pid.
set -u
HF=${HOLDFAST:-/tmp/holdfast} NS=${NATS_SERVER:-/tmp/nats-server}
MODE=$1
W=${2:-${WORK:-/tmp/cb}}
B=${3:-${BASEPORT:-14220}}
P1=$((B + 1)) P2=$((B + 2)) P3=$((B + 3)) R1=$((B + 1001)) R2=$((B + 1002)) R3=$((B + 1003))
rm -rf $W/$MODE; mkdir -p $W/$MODE; cd $W/$MODE
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 $p 2>/dev/null; done; }
trap cleanup EXIT
started() { pids+=($2); echo $2 > pid-$1; }
start_nats() { # n, port, cluster_port, routes
  cat > n$1.conf <<CONF
server_name: n$1
listen: 127.0.0.1:$2
jetstream { store_dir: "$W/$MODE/js$1" ${SYNC-, sync_interval: always} }
$4
CONF
  $NS -c n$1.conf > n$1.log 2>&1 & started n$1 $!
}
TTLFLAG=${TTL:+--ownership-ttl $TTL}
case $MODE in
single-file)
  $HF serve --data data --listen 127.0.0.1:$P2 --metrics-listen "" > hf.log 2>&1 & started hf $!
  URL=nats://127.0.0.1:$P2 ;;
r1-one)
  start_nats 1 $P2 0 ""
  sleep 1
  $HF serve --nats nats://127.0.0.1:$P2 --node a --data data --metrics-listen "" > hf.log 2>&1 & started a $!
  URL=nats://127.0.0.1:$P2 ;;
r3-three)
  for i in 1 2 3; do
    start_nats $i $((B + i)) 0 "cluster { name: hf, listen: 127.0.0.1:$((B + 1000 + i)), routes: [nats://127.0.0.1:$R1, nats://127.0.0.1:$R2, nats://127.0.0.1:$R3] }"
  done
  sleep 3
  URL=nats://127.0.0.1:$P1,nats://127.0.0.1:$P2,nats://127.0.0.1:$P3
  for n in a b c; do
    $HF serve --nats $URL --node $n --replicas 3 --data data-$n --metrics-listen "" $TTLFLAG > hf-$n.log 2>&1 & started $n $!
  done ;;
embedded-three)
  ROUTES=nats://127.0.0.1:$R1,nats://127.0.0.1:$R2,nats://127.0.0.1:$R3
  i=1
  for n in a b c; do
    $HF serve --node $n --data data-$n --listen 127.0.0.1:$((B + i)) --cluster nats://127.0.0.1:$((B + 1000 + i)) \
      --routes $ROUTES --replicas 3 --metrics-listen "" $TTLFLAG ${SERVEARGS:-} > hf-$n.log 2>&1 & started $n $!
    i=$((i + 1))
  done
  URL=nats://127.0.0.1:$P1,nats://127.0.0.1:$P2,nats://127.0.0.1:$P3 ;;
*) echo "unknown mode $MODE" >&2; exit 2 ;;
esac
for i in $(seq 1 120); do
  ready=1; for f in hf*.log; do grep -q "msg=ready" $f 2>/dev/null || ready=0; done
  [ $ready = 1 ] && break; sleep 0.5
done
for f in hf*.log; do grep -q "msg=ready" $f || echo "NOT READY $f" >&2; done
sleep ${SETTLE:-8}
${BENCH:-$HF} bench --server ${BENCHURL:-$URL} --scenario ${SCENARIO:-spread} --duration ${DUR:-20s} --clients ${CLIENTS:-64} ${BENCHARGS:-} 2>bench-progress.log | tail -40
