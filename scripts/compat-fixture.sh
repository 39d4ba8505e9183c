#!/usr/bin/env bash
# Writes a data directory with another build of Holdfast, as a fixture for
# cmd/holdfast's TestDataDirectoryOfAnEarlierBuild:
#   HOLDFAST=/path/to/old/holdfast scripts/compat-fixture.sh cmd/holdfast/testdata/datadir-NAME.tar.gz
# Everything it holds is permanent (active leases, a released one, objects), so the test's
# reads do not depend on when it runs. Stops only the server it started, by pid.
set -euo pipefail
B=${HOLDFAST:?set HOLDFAST to the build that writes the fixture}
out=$(realpath -m "$1")
dir=$(mktemp -d)
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
"$B" serve --data "$dir/data" --listen 127.0.0.1:14399 --metrics-listen "" --shards 4 --snapshot-every 4 >"$dir/serve.log" 2>&1 &
pid=$!
sleep 3
S="--server nats://127.0.0.1:14399"
"$B" resource create n1/gpu0 $S --op c1 >/dev/null
"$B" resource create n1/gpu1 $S --op c2 >/dev/null
"$B" resource create n2/gpu0 $S --op c3 >/dev/null
"$B" pool create n1/mem --capacity 80 $S --op c4 >/dev/null
"$B" range create n1/ports --first 30000 --last 30100 --strategy least_recently_freed --exclude 30022..30022 $S --op c5 >/dev/null
"$B" range create vxlan --first 1000 --last 1999 $S --op c6 >/dev/null
"$B" lease reserve --holder sched --resource n1/gpu0 --pool n1/mem:8 --range n1/ports --activate \
	--label owner_type=instance,owner_uuid=vm-1 $S --op r1 >/dev/null
id=$("$B" lease reserve --holder sched --resource n1/gpu1 --activate $S --op r2 --json | sed 's/.*"lease_id":"\([^"]*\)".*/\1/')
"$B" lease reserve --holder net --range vxlan=1500 --activate $S --op r3 >/dev/null
"$B" lease release "$id" --holder sched --epoch 1 $S --op x1 >/dev/null
kill "$pid"
wait "$pid" || true
pid=
rm -f "$dir/data/LOCK"
tar -C "$dir" -czf "$out" data
echo "wrote $out ($(du -h "$out" | cut -f1))"
