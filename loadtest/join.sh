#!/usr/bin/env bash
# join.sh runs the same `kvring bench` workload twice on a fresh 3-node
# cluster: once as it is, once with a fourth node joining JOIN_AFTER seconds
# into the run (the previous owners hand it its partitions' chunks while the
# bench goes on). It prints both reports' chunk hit ratio, failures and
# what the hand-off moved, and the ratio of the hit ratios (issue 19's goal:
# within 5 %). Every process it starts is stopped at the end.
#
# Usage: loadtest/join.sh
# Environment:
#   NODE_MEM_MB   memory limit of each node in MiB (default 256: no evictions)
#   JOIN_AFTER    seconds into the bench when node 4 starts (default 3)
#   BENCH_FLAGS   extra `kvring bench` flags
#                 (default: --workload synthetic --speedup 20 --duration 12s --engines 2)
set -euo pipefail
cd "$(dirname "$0")/.."

NODE_MEM_MB=${NODE_MEM_MB:-256}
JOIN_AFTER=${JOIN_AFTER:-3}
BENCH_FLAGS=${BENCH_FLAGS:---workload synthetic --speedup 20 --duration 12s --engines 2}

log() { echo "join: $*" >&2; }
work=$(mktemp -d /tmp/kvring-join-XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

log "building kvring"
go build -o "$work/kvring" ./cmd/kvring
kv="$work/kvring"

# shellcheck source=loadtest/nodes.sh
source loadtest/nodes.sh # start_nodes (the script runs from the repository root)

# run name join: a fresh cluster of three (four when join is 1), the bench,
# the report in $work/name.json.
run() {
	local name=$1 join=$2
	start_nodes "$work/$name.env" -n 3 -dir "$work/$name" -shm-root "$work/$name" -memory-limit "${NODE_MEM_MB}MiB" \
		-- --log-level warn
	local first_gossip=${gossips[0]} all_admins=("${admins[@]}")
	# shellcheck disable=SC2086
	"$kv" bench --addr "${grpcs[0]},${grpcs[1]},${grpcs[2]}" --json --progress 0 $BENCH_FLAGS >"$work/$name.json" 2>"$work/$name.bench.log" &
	local bpid=$!
	if [ "$join" = 1 ]; then
		sleep "$JOIN_AFTER"
		log "$name: node 4 joins at ${JOIN_AFTER}s"
		start_nodes "$work/$name-4.env" -no-join -dir "$work/$name-4" -shm-root "$work/$name-4" \
			-memory-limit "${NODE_MEM_MB}MiB" -- --log-level warn --join "$first_gossip"
		all_admins+=("${admins[0]}")
	fi
	wait "$bpid"
	if [ "$join" = 1 ]; then
		for _ in $(seq 200); do # until every hand-off is idle
			local busy=0
			for a in "${all_admins[@]}"; do
				curl -sf "http://$a/v1/handoff" | jq -e '.running or .last_pass.pending > 0' >/dev/null && busy=1
			done
			[ "$busy" = 0 ] && break
			sleep 0.1
		done
		for i in 1 2 3 4; do
			curl -sf "http://${all_admins[i - 1]}/v1/handoff" | jq -c --arg n "node$i" \
				'{node: $n, copied_chunks, copied_bytes, evicted_chunks, failed_copies}' >&2
		done
		log "node 4 holds $(curl -sf "http://${all_admins[3]}/v1/stats" | jq .chunks) chunks"
	fi
}

run plain 0
run join 1
report() { jq -r --arg n "$1" '"\($n): requests \(.requests_done), chunk hit ratio \(.chunk_hit_ratio), failed calls \(.lookup.errors + .get.errors + .put.errors), failed put chunks \(.failed), corrupt \(.corrupt), missing after ack \(.missing_after_ack)"' "$work/$1.json"; }
report plain
report join
jq -n --slurpfile a "$work/join.json" --slurpfile b "$work/plain.json" \
	'"hit ratio with the join / without: \($a[0].chunk_hit_ratio / $b[0].chunk_hit_ratio)"' -r
