#!/usr/bin/env bash
# spread.sh measures what hot-group spreading does on a real cluster: it starts NODES kvring nodes on loopback
# twice, first with spreading off (--spread-threshold -1), then with the nodes' defaults (a group looked up 32
# times in 10 s is copied to 8 members), replays the same `kvring bench` workload against each (the synthetic
# workload by default: multi-turn conversations on Zipf-popular system prompts, placed in groups of GROUP), and
# prints per run the access load's skew (the busiest node's lookups served, as coordinator or owner, over the
# mean), the CPU skew (process CPU seconds of the busiest node over the mean), the nodes one lookup asked, the
# bench's lookup latency and hit ratio, and the chunks copied to spread members. It stops every process it
# started and removes its work directory.
#
# Usage: loadtest/spread.sh
# Environment:
#   NODES         nodes to start (default 12)
#   NODE_MEM_MB   memory limit of each node in MiB (default 64)
#   GROUP         chunks per group (default 32)
#   MAX_REQUESTS  requests replayed per run (default 1500)
#   BENCH_FLAGS   extra `kvring bench` flags (default: --workload synthetic --seed 1 --speedup -1 --engines 4)
#   SPREAD_FLAGS  the second run's extra `kvring serve` flags (default none: the defaults)
#   OUT_DIR       if set, each run's bench report (bench-off.json, bench-on.json) is copied there
#   SHM_ROOT      where the nodes' segment files go (default /dev/shm, as `kvring serve`'s default --shm-dir)
# Needs curl and jq.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
NODES=${NODES:-12}
NODE_MEM_MB=${NODE_MEM_MB:-64}
GROUP=${GROUP:-32}
MAX_REQUESTS=${MAX_REQUESTS:-1500}
BENCH_FLAGS=${BENCH_FLAGS:---workload synthetic --seed 1 --speedup -1 --engines 4}
SPREAD_FLAGS=${SPREAD_FLAGS:-}

log() { echo "spread: $*" >&2; }

# shellcheck source=loadtest/cluster.sh
source "$root/loadtest/cluster.sh" # loadtest_init, start_cluster, stop_cluster
loadtest_init # $work, $shm, $pids, $kv; everything started is stopped and removed on exit

# load prints one line per node: lookups served (coordinated + Has answered), CPU seconds, fan-out sum and
# count, chunks copied to spread members.
load() {
	local a
	for a in "${admins[@]}"; do
		curl -sf "http://$a/metrics" | awk '
		  /^kvring_lookups_total / {l += $2}
		  /^kvring_peer_request_duration_seconds_count\{op="has"\}/ {l += $2}
		  /^process_cpu_seconds_total / {c = $2}
		  /^kvring_lookup_fanout_sum/ {fs = $2} /^kvring_lookup_fanout_count/ {fc = $2}
		  /^kvring_spread_copied_chunks_total / {sp = $2}
		  END {printf "%s %s %s %s %s\n", l + 0, c + 0, fs + 0, fc + 0, sp + 0}'
	done
}

printf '%-10s %8s %12s %11s %9s %10s %10s %10s %8s %8s\n' "spreading" "lookups" "nodes/lookup" "access max" "cpu max" \
	"lookup p50" "lookup p99" "hit ratio" "corrupt" "copied"
for mode in off on; do
	flags=(--settle-window -1s)
	if [ "$mode" = off ]; then
		flags+=(--spread-threshold -1)
	else
		# shellcheck disable=SC2206
		flags+=($SPREAD_FLAGS)
	fi
	start_cluster "$mode" "$NODES" "$NODE_MEM_MB" "${flags[@]}"
	log "$NODES nodes up (spreading $mode)"
	load >"$work/before-$mode"
	addrs=$(IFS=,; echo "${grpcs[*]}")
	# shellcheck disable=SC2086
	"$kv" bench --addr "$addrs" --max-requests "$MAX_REQUESTS" --progress 0 --json --chunks-per-group "$GROUP" \
		$BENCH_FLAGS >"$work/bench-$mode.json" 2>"$work/bench-$mode.log" ||
		{ log "bench failed:"; tail -n 20 "$work/bench-$mode.log" >&2; exit 1; }
	load >"$work/after-$mode"
	[ -z "${OUT_DIR:-}" ] || cp "$work/bench-$mode.json" "$OUT_DIR/"
	stats=$(paste -d' ' "$work/before-$mode" "$work/after-$mode" | awk '
	  { l = $6 - $1; c = $7 - $2; fs += $8 - $3; fc += $9 - $4; sp += $10 - $5
	    lt += l; ct += c; if (l > lm) lm = l; if (c > cm) cm = c; n++ }
	  END { printf "%d %.2f %.2f %.2f %d\n", fc, (fc > 0 ? fs / fc : 0), lm / (lt / n), cm / (ct / n), sp }')
	read -r lookups perlookup accessmax cpumax copied <<<"$stats"
	jq -r --arg mode "$mode" --arg l "$lookups" --arg p "$perlookup" --arg a "$accessmax" --arg c "$cpumax" --arg s "$copied" '
	  def f: (. * 100 | round / 100 | tostring);
	  "\($mode)\t\($l)\t\($p)\t\($a)\t\($c)\t\(.lookup.p50_ms | f)ms\t\(.lookup.p99_ms | f)ms\t\(.chunk_hit_ratio | f)\t\(.corrupt)\t\($s)"
	' "$work/bench-$mode.json" | awk -F'\t' '{printf "%-10s %8s %12s %11s %9s %10s %10s %10s %8s %8s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10}'
	stop_cluster
done
