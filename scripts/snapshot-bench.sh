#!/bin/bash
# Times backups of a large state (docs/benchmarks.md, "Backup and restore"):
#   scripts/snapshot-bench.sh [N [WORKDIR [PORT]]]   (default 1000000 leases, /tmp/sb, 14931)
# One process with 8 shards is filled with N leases (scripts/fill: lease.import of pool
# units), then: `holdfast snapshot save` (the copy, then its check), `restore` into a new
# data directory, and a start of that directory (recovery from its own snapshots: the time
# a save and a restore are held against); last, `holdfast bench` on the source twice, once
# alone and once with a save 3 s in, per-second samples side by side (the load on writers
# while a copy is taken). Needs HOLDFAST=path (default /tmp/holdfast). Only the processes
# started here are stopped, by pid.
set -u
HF=${HOLDFAST:-/tmp/holdfast}
N=${1:-1000000}
W=${2:-/tmp/sb}
P=${3:-14931}
rm -rf $W; mkdir -p $W; cd $W
pids=()
cleanup() { for p in "${pids[@]}"; do kill $p 2>/dev/null; done; }
trap cleanup EXIT
ready() { while ! grep -q "msg=ready" $1; do sleep 0.02; done; }
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }
(cd - > /dev/null && go build -o $W/fill ./scripts/fill) || exit 1

$HF serve --data src --listen 127.0.0.1:$P --metrics-listen "" --shards 8 > src.log 2>&1 & pids+=($!)
ready src.log
./fill nats://127.0.0.1:$P 8 $N || exit 1
sleep 5                                          # the last snapshots are written
S="--server nats://127.0.0.1:$P"

t=$(now); $HF $S snapshot save a.copy --timeout 5m > save.out 2> save.err || { cat save.err; exit 1; }
echo "save (copy, check, counts): $(since $t) s; $(grep saved save.err)"; tail -1 save.out
t=$(now); $HF snapshot restore a.copy --data dst 2> restore.err || { cat restore.err; exit 1; }
echo "restore (read, check, write): $(since $t) s"
t=$(now); $HF serve --data dst --listen 127.0.0.1:$((P + 1)) --metrics-listen "" > dst.log 2>&1 & pid=$!
ready dst.log; echo "start of the restored directory, to ready: $(since $t) s"; kill $pid; wait $pid 2>/dev/null

$HF $S bench --duration 8s --clients 16 --sample 1s --tenant benchw > bench-alone.txt 2>&1
(sleep 3; $HF $S snapshot save b.copy --timeout 5m > /dev/null 2> save-b.err) & saver=$!
$HF $S bench --duration 8s --clients 16 --sample 1s --tenant benchw > bench-with-save.txt 2>&1
wait $saver
grep saved save-b.err
paste <(grep -E "holdfast +[0-9]+s\]" bench-alone.txt | awk '{print $3, $5}') \
      <(grep -E "holdfast +[0-9]+s\]" bench-with-save.txt | awk '{print $5}') | sed 's/^/second, grants\/s alone, with a save at 3 s: /'
for run in alone with-save; do echo "$run: $(grep -E 'grants/s  ' bench-$run.txt)"; grep -E '^  reserve ' bench-$run.txt; done
