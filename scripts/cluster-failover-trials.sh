#!/bin/bash
# Failover time over TRIALS kill -9s (docs/benchmarks.md, "Cluster"): three nodes with
# --replicas 3 on three nats-servers (NATS default sync unless SYNC is unset), each trial
# kills the node serving the probe key's shard and times until a write to that shard is
# acknowledged again (the CLI retries indefinite answers), then restarts the node.
# Needs /tmp/holdfast and /tmp/nats-server (or HOLDFAST=, NATS_SERVER=) (see scripts/cluster-bench.sh). WORK sets the directory, BASEPORT the ports (BASEPORT+1..3, +1001..1003).
set -u
HF=${HOLDFAST:-/tmp/holdfast} NS=${NATS_SERVER:-/tmp/nats-server}
B=${BASEPORT:-14320}
TRIALS=${TRIALS:-20}
TTL=${TTL:-5s}
W=${WORK:-/tmp/cb}/trials
rm -rf $W; mkdir -p $W; cd $W
pids=()
declare -A node_pid
cleanup() { for p in "${pids[@]}" "${node_pid[@]}"; do kill -9 $p 2>/dev/null; done; }
trap cleanup EXIT
for i in 1 2 3; do
  cat > n$i.conf <<CONF
server_name: n$i
listen: 127.0.0.1:$((B + i))
jetstream { store_dir: "$W/js$i" ${SYNC-} }
cluster { name: hf, listen: 127.0.0.1:$((B + 1000 + i)), routes: [nats://127.0.0.1:$((B + 1001)), nats://127.0.0.1:$((B + 1002)), nats://127.0.0.1:$((B + 1003))] }
CONF
  $NS -c n$i.conf > n$i.log 2>&1 & pids+=($!)
done
sleep 3
URL=nats://127.0.0.1:$((B + 1)),nats://127.0.0.1:$((B + 2)),nats://127.0.0.1:$((B + 3))
start_node() { $HF serve --nats $URL --node $1 --replicas 3 --ownership-ttl $TTL --data $W/data-$1 --metrics-listen "" >> hf-$1.log 2>&1 & node_pid[$1]=$!; }
for n in a b c; do start_node $n; done
sleep 15
for t in $(seq 1 $TRIALS); do
  key=probe$t
  shard=$($HF cluster status --server $URL --key $key | sed -n "s/^key $key: shard //p")
  owner=$($HF cluster status --server $URL | sed -n "s/^shard $shard: \([a-z]*\),.*/\1/p")
  [ -z "$owner" ] && { echo "trial $t: shard $shard has no owner"; sleep 5; continue; }
  t0=$(date +%s.%N)
  kill -9 ${node_pid[$owner]}
  $HF resource create $key --server $URL --timeout 60s > /dev/null || echo "trial $t: write failed"
  t1=$(date +%s.%N)
  echo "trial $t: shard $shard owner $owner: writable again after $(echo "$t1 - $t0" | bc) s"
  start_node $owner
  sleep 12
done
