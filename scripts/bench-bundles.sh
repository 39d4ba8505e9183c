#!/usr/bin/env bash
# Bundles across shards against one-key bundles, one process each build, alternating:
#   HOLDFAST=./holdfast HOLDFAST_BEFORE=./holdfast-before scripts/bench-bundles.sh [ROUNDS]
# Each build serves a fresh data directory on 127.0.0.1:14222; the same bench client
# (HOLDFAST's) measures both. Stops only the server it started, by pid.
set -euo pipefail
rounds=${1:-2}
new=${HOLDFAST:?set HOLDFAST to the holdfast binary}
old=${HOLDFAST_BEFORE:-}
dir=$(mktemp -d)
pid=
serve() {
	rm -rf "$dir/data"
	"$1" serve --data "$dir/data" --listen 127.0.0.1:14222 --metrics-listen 127.0.0.1:0 >"$dir/serve.log" 2>&1 &
	pid=$!
	sleep 3
}
stop() { kill "$pid"; wait "$pid" 2>/dev/null || true; pid=; }
trap '[ -n "$pid" ] && kill "$pid"; rm -rf "$dir"' EXIT
row() {
	echo "== $1 ${2:-one member}"
	# shellcheck disable=SC2086
	"$new" bench --server nats://127.0.0.1:14222 --duration 8s $2 2>/dev/null | grep -E "grants/s|attempts/s|^  reserve|codes reserve"
}
for _ in $(seq "$rounds"); do
	if [ -n "$old" ]; then
		serve "$old"
		row before ""
		row before "--bundle 2 --one-key"
		stop
	fi
	serve "$new"
	row after ""
	row after "--bundle 2 --one-key"
	row after "--bundle 2"
	row after "--bundle 2 --resources 4 --clients 16"
	row after "--bundle 4 --resources 8 --clients 16"
	stop
done
