#!/usr/bin/env bash
# fanout.sh measures what placement groups do to lookups on a real cluster:
# it starts NODES kvring nodes on loopback, replays the same `kvring bench`
# workload twice, first with every chunk placed by its own id
# (--chunks-per-group 0, each run in its own namespace) and then with groups
# of GROUP chunks, and prints per run the nodes one lookup asked (the mean
# of kvring_lookup_fanout over every node) and the bench's lookup latency.
# It stops every process it started and removes its work directory.
#
# Usage: loadtest/fanout.sh
# Environment:
#   NODES         nodes to start (default 12)
#   NODE_MEM_MB   memory limit of each node in MiB (default 32)
#   GROUP         chunks per group of the second run (default 32)
#   MAX_REQUESTS  requests replayed per run (default 400)
#   BENCH_FLAGS   extra `kvring bench` flags (default: --speedup -1 --engines 4)
#   TRACE         Mooncake trace (default the repository's synthetic trace)
#   SETTLE_WINDOW the nodes' --settle-window (default -1s: none). Within a
#                 node's settle window (after its start or a ring change)
#                 every read asks every member, which would hide what
#                 placement does; the runs start right after the nodes do.
#   SHM_ROOT      where the nodes' segment files go (default /dev/shm, as `kvring serve`'s default --shm-dir)
# Needs curl and jq.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
NODES=${NODES:-12}
NODE_MEM_MB=${NODE_MEM_MB:-32}
GROUP=${GROUP:-32}
MAX_REQUESTS=${MAX_REQUESTS:-400}
BENCH_FLAGS=${BENCH_FLAGS:---speedup -1 --engines 4}
TRACE=${TRACE:-loadtest/trace/testdata/synthetic_trace.jsonl}
SETTLE_WINDOW=${SETTLE_WINDOW:--1s}

log() { echo "fanout: $*" >&2; }

# shellcheck source=loadtest/cluster.sh
source "$root/loadtest/cluster.sh" # loadtest_init, start_cluster
loadtest_init # $work, $shm, $pids, $kv; everything started is stopped and removed on exit
start_cluster node "$NODES" "$NODE_MEM_MB" --settle-window "$SETTLE_WINDOW"
log "$NODES nodes up, each sees them all"

fanout() { # sum and count of kvring_lookup_fanout over every node
	local a
	for a in "${admins[@]}"; do curl -sf "http://$a/metrics"; done |
		awk '/^kvring_lookup_fanout_sum/ {s += $2} /^kvring_lookup_fanout_count/ {c += $2} END {printf "%s %s\n", s, c}'
}

addrs=$(IFS=,; echo "${grpcs[*]}")
printf '%-18s %8s %12s %10s %10s %10s %9s\n' "placement" "lookups" "nodes/lookup" "lookup p50" "lookup p99" "hit ratio" "corrupt"
for k in 0 "$GROUP"; do
	read -r s0 c0 < <(fanout)
	# shellcheck disable=SC2086
	"$kv" bench --addr "$addrs" --trace "$TRACE" --max-requests "$MAX_REQUESTS" --progress 0 --json \
		--chunks-per-group "$k" $BENCH_FLAGS >"$work/bench-$k.json" 2>"$work/bench-$k.log" ||
		{ log "bench --chunks-per-group $k failed:"; tail -n 20 "$work/bench-$k.log" >&2; exit 1; }
	read -r s1 c1 < <(fanout)
	name="per chunk"
	[ "$k" -le 1 ] || name="groups of $k"
	jq -r --arg name "$name" --argjson s "$(awk "BEGIN {print $s1 - $s0}")" --argjson c "$(awk "BEGIN {print $c1 - $c0}")" '
	  def f: (. * 100 | round / 100 | tostring);
	  "\($name)\t\($c)\t\(if $c > 0 then ($s / $c | f) else "-" end)\t\(.lookup.p50_ms | f)ms\t\(.lookup.p99_ms | f)ms\t\(.chunk_hit_ratio | f)\t\(.corrupt)"
	' "$work/bench-$k.json" | awk -F'\t' '{printf "%-18s %8s %12s %10s %10s %10s %9s\n", $1, $2, $3, $4, $5, $6, $7}'
done
