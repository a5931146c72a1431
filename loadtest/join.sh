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

# shellcheck source=loadtest/ports.sh
source loadtest/ports.sh # free_port (the script runs from the repository root)
wait_ready() { # admin address
	for _ in $(seq 400); do
		curl -sf -o /dev/null "http://$1/readyz" && return 0
		sleep 0.05
	done
	log "node at $1 did not become ready"
	return 1
}

# run name join: a fresh cluster of three (four when join is 1), the bench,
# the report in $work/name.json.
run() {
	local name=$1 join=$2 grpcs=() admins=() gossips=()
	for i in 1 2 3 4; do
		grpcs+=("127.0.0.1:$(free_port)") admins+=("127.0.0.1:$(free_port)") gossips+=("127.0.0.1:$(free_port)")
		mkdir -p "$work/$name/n$i/shm"
	done
	start() {
		local i=$1 j=()
		[ "$i" -eq 1 ] || j=(--join "${gossips[0]}")
		"$kv" serve --grpc-addr "${grpcs[i - 1]}" --admin-addr "${admins[i - 1]}" --gossip-addr "${gossips[i - 1]}" \
			--data-dir "$work/$name/n$i/data" --shm-dir "$work/$name/n$i/shm" --resp-addr "" --socket "" \
			--memory-limit "${NODE_MEM_MB}MiB" --log-level warn "${j[@]}" >>"$work/$name/n$i.log" 2>&1 &
		pids+=($!)
	}
	for i in 1 2 3; do start "$i"; done
	for i in 1 2 3; do wait_ready "${admins[i - 1]}"; done
	sleep 2 # gossip: every node sees the three
	# shellcheck disable=SC2086
	"$kv" bench --addr "${grpcs[0]},${grpcs[1]},${grpcs[2]}" --json --progress 0 $BENCH_FLAGS >"$work/$name.json" 2>"$work/$name.bench.log" &
	local bpid=$!
	if [ "$join" = 1 ]; then
		sleep "$JOIN_AFTER"
		log "$name: node 4 joins at ${JOIN_AFTER}s"
		start 4
		wait_ready "${admins[3]}"
	fi
	wait "$bpid"
	if [ "$join" = 1 ]; then
		for _ in $(seq 200); do # until every hand-off is idle
			local busy=0
			for a in "${admins[@]}"; do
				curl -sf "http://$a/v1/handoff" | jq -e '.running or .last_pass.pending > 0' >/dev/null && busy=1
			done
			[ "$busy" = 0 ] && break
			sleep 0.1
		done
		for i in 1 2 3 4; do
			curl -sf "http://${admins[i - 1]}/v1/handoff" | jq -c --arg n "node$i" \
				'{node: $n, copied_chunks, copied_bytes, evicted_chunks, failed_copies}' >&2
		done
		log "node 4 holds $(curl -sf "http://${admins[3]}/v1/stats" | jq .chunks) chunks"
	fi
}

run plain 0
run join 1
report() { jq -r --arg n "$1" '"\($n): requests \(.requests_done), chunk hit ratio \(.chunk_hit_ratio), failed calls \(.lookup.errors + .get.errors + .put.errors), failed put chunks \(.failed), corrupt \(.corrupt), missing after ack \(.missing_after_ack)"' "$work/$1.json"; }
report plain
report join
jq -n --slurpfile a "$work/join.json" --slurpfile b "$work/plain.json" \
	'"hit ratio with the join / without: \($a[0].chunk_hit_ratio / $b[0].chunk_hit_ratio)"' -r
