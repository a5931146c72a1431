#!/usr/bin/env bash
# churn.sh measures reads while the ring changes all the time: it starts NODES kvring nodes on loopback
# (replication 2, placement groups of GROUP), replays the synthetic `kvring bench` workload while every node,
# one after another, is stopped with SIGTERM (it drains: hands its chunks to their next owners) and started
# again on its data directory (a rolling restart, as a StatefulSet does it: the next node once the last one is
# ready and every node sees it active again), stops the bench when the last restart is done (SIGINT: it sends
# no new requests and reports), then replays the same requests on a fresh cluster of the same size without
# restarts. It prints per run the nodes one lookup
# asked (kvring_lookup_fanout over every node, every process life counted), the chunk hit ratio, failed calls
# and corrupt reads, the busiest node's lookup load over the mean (lookups coordinated plus Has calls
# answered), the gossip bytes each node sent per second (kvring_gossip_bytes_total) and, for the restarts,
# how long each node took to drain and how long after its restart every node saw it active again and every
# node had stopped naming it as a member that may hold chunks it does not own (the hand-offs done). It also
# measures an idle cluster: gossip bytes and CPU per node per second, and, from a CPU profile of one idle node,
# the share of a core spent in gossip (memberlist, the membership glue and the hand-off summaries' views). It stops
# every process it started and removes its work directory.
#
# Usage: loadtest/churn.sh
# Environment:
#   NODES         nodes to start (default 64)
#   NODE_MEM_MB   memory limit of each node in MiB (default 16)
#   GROUP         chunks per group (default 32)
#   REPLICATION   namespaces' replication factor (default 2)
#   RESTARTS      how many nodes the rolling restart restarts, spread evenly over them (default NODES: every one)
#   WARMUP        seconds of bench before the first restart (default 20)
#   IDLE          seconds of the idle measurement (default 20)
#   HANDOFF_WAIT  after a restart, the most seconds to wait until every node sees the node active again before
#                 the next restart (default 20; a change not converged by then is reported as -1). The hand-offs
#                 are not waited for: the time until no node names a moving member is reported when it comes
#                 within that wait, else -1
#   RESTART_BUDGET  stop restarting after this many seconds of restarts (default 0: restart every node of
#                 RESTARTS); the report says how many nodes were restarted
#   BENCH_FLAGS   `kvring bench` flags (default: --workload synthetic --seed 1 --speedup 1 --engines 4: its 2,000
#                 requests arrive over about 400 s; give more with --max-requests, so that the bench outlasts the
#                 restarts). The run without restarts replays as many requests as the first run sent
#   STEADY_FLAGS  more `kvring bench` flags for the run without restarts only (e.g. "--speedup 2": the same
#                 requests in half the time, so that both runs fit a time budget)
#   SERVE_FLAGS   more `kvring serve` flags for every node (e.g. "--spread-threshold 8": at --speedup 1 the
#                 hottest system prompt is looked up about 12 times in 10 s, below the default threshold of 32)
#   OUT_DIR       if set, the reports and per-restart figures are copied there
#   SHM_ROOT      where the nodes' segment files go (default /dev/shm)
# Needs curl, jq and xargs.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
NODES=${NODES:-64}
NODE_MEM_MB=${NODE_MEM_MB:-16}
GROUP=${GROUP:-32}
REPLICATION=${REPLICATION:-2}
RESTARTS=${RESTARTS:-$NODES}
WARMUP=${WARMUP:-20}
IDLE=${IDLE:-20}
HANDOFF_WAIT=${HANDOFF_WAIT:-20}
BENCH_FLAGS=${BENCH_FLAGS:---workload synthetic --seed 1 --speedup 1 --engines 4}

log() { echo "churn: $(date +%T) $*" >&2; }

# shellcheck source=loadtest/cluster.sh
source "$root/loadtest/cluster.sh" # loadtest_init, start_cluster, stop_cluster
loadtest_init # $work, $shm, $pids, $kv; everything started is stopped and removed on exit
cluster_opts=(-stop-timeout 10m -ready-timeout 5m) # a drain and a start on a loaded host take a while
flags=(--replication "$REPLICATION" --pprof)
# shellcheck disable=SC2206 # SERVE_FLAGS is split into flags on purpose
flags+=(${SERVE_FLAGS:-})

# scrape prints one line per admin address given: lookups served (coordinated + Has answered), fan-out sum
# and count, gossip bytes, CPU seconds, moving members (as that node sees them), active members.
scrape() {
	printf '%s\n' "$@" | xargs -P 16 -I{} sh -c 'curl -sf -m 5 "http://{}/metrics" | awk -v a={} "
	  /^kvring_lookups_total / {l += \$2}
	  /^kvring_peer_request_duration_seconds_count\{op=\"has\"\}/ {l += \$2}
	  /^kvring_lookup_fanout_sum/ {fs = \$2} /^kvring_lookup_fanout_count/ {fc = \$2}
	  /^kvring_gossip_bytes_total / {g = \$2}
	  /^process_cpu_seconds_total / {c = \$2}
	  /^kvring_moving_members / {mv = \$2}
	  /^kvring_cluster_members\{liveness=\"alive\",state=\"active\"\}/ {act = \$2}
	  END {printf \"%s %s %s %s %s %s %s %s\n\", a, l + 0, fs + 0, fc + 0, g + 0, c + 0, mv + 0, act + 0}"'
}

# converged FILE writes, for every node that answers, two lines: "active N" (the active members it sees) and
# "moving N" (the members it knows may hold chunks they do not own). One curl process fetches every node's
# metrics (a process per node, five times a second, cost this 2-core host more CPU than the nodes).
converged() {
	local a urls=()
	for a in "${admins[@]}"; do urls+=("http://$a/metrics"); done
	curl -sf -m 5 --parallel --parallel-max 16 "${urls[@]}" 2>/dev/null | awk '
	  /^kvring_cluster_members\{liveness="alive",state="active"\}/ {print "active", $2}
	  /^kvring_moving_members / {print "moving", $2}' >"$1" || true
}

# life accumulates the counters of processes that ended (lookups, fan-out sum, count, gossip bytes), per
# node index, so that a restarted node's counters, which start again at 0, still count.
declare -A done_l done_fs done_fc done_g
reset_life() {
	local i
	for i in $(seq "$NODES"); do done_l[$i]=0 done_fs[$i]=0 done_fc[$i]=0 done_g[$i]=0; done
}
# totals prints per node: lookups served, fan-out sum, fan-out count, gossip bytes (ended lives included).
totals() {
	local i line
	scrape "${admins[@]}" >"$work/scrape"
	for i in $(seq "$NODES"); do
		line=$(grep -F "${admins[i - 1]} " "$work/scrape" || echo "x 0 0 0 0 0 0 0")
		awk -v l="${done_l[$i]}" -v fs="${done_fs[$i]}" -v fc="${done_fc[$i]}" -v g="${done_g[$i]}" \
			'{printf "%s %s %s %s\n", $2 + l, $3 + fs, $4 + fc, $5 + g}' <<<"$line"
	done
}

# restart i: SIGTERM node i (it drains), start it again with the same addresses and directories, and time
# its drain, its convergence (every node sees NODES active members) and the hand-off (no node counts a
# moving member).
restart() {
	local i=$1 a line t0 t1 t2 t3 t4 pid k
	a=${admins[i - 1]}
	line=$(scrape "$a")
	read -r _ l fs fc g _ <<<"$line"
	done_l[$i]=$(awk "BEGIN {print ${done_l[$i]} + $l}") done_fs[$i]=$(awk "BEGIN {print ${done_fs[$i]} + $fs}")
	done_fc[$i]=$(awk "BEGIN {print ${done_fc[$i]} + $fc}") done_g[$i]=$(awk "BEGIN {print ${done_g[$i]} + $g}")
	t0=$(date +%s.%N)
	nodes_ctl stop "$i" || true # a drain that fails is measured all the same
	t1=$(date +%s.%N)
	local join=()
	[ "$i" -ne 1 ] || join=(--join "${gossips[1]}") # the others join node 1 already
	nodes_ctl restart "$i" "${join[@]}"
	t2=$(date +%s.%N)
	t3="" t4=""
	local end=$(($(date +%s) + HANDOFF_WAIT))
	while [ "$(date +%s)" -lt "$end" ]; do
		converged "$work/poll"
		if [ -z "$t4" ] && [ "$(awk '$1 == "moving" && $2 > 0' "$work/poll" | wc -l)" -eq 0 ] &&
			[ "$(grep -c '^moving ' "$work/poll")" -eq "$NODES" ]; then
			t4=$(date +%s.%N)
		fi
		if [ "$(awk -v n="$NODES" '$1 == "active" && $2 == n' "$work/poll" | wc -l)" -eq "$NODES" ]; then
			t3=$(date +%s.%N)
			break
		fi
		sleep 0.5
	done
	: "${t3:=-1}" "${t4:=-1}" # -1: not within HANDOFF_WAIT
	awk -v i="$i" -v t0="$t0" -v t1="$t1" -v t2="$t2" -v t3="$t3" -v t4="$t4" \
		'function d(t) { return t < 0 ? -1 : t - t2 } BEGIN {printf "%d %.2f %.2f %.2f %.2f\n", i, t1 - t0, t2 - t1, d(t3), d(t4)}' \
		>>"$work/restarts-$name"
	log "node $i: $(tail -n 1 "$work/restarts-$name" | awk '{printf "drained in %s s, started in %s s, converged %s s and hand-offs done %s s after ready (-1: not within HANDOFF_WAIT)", $2, $3, $4, $5}')"
}

# report name elapsed: one line of figures of the run.
report() {
	local name=$1 elapsed=$2
	totals >"$work/totals-$name"
	local stats
	stats=$(awk -v n="$NODES" -v s="$elapsed" '{ l += $1; fs += $2; fc += $3; g += $4; if ($1 > lm) lm = $1 }
	  END { printf "%d %.2f %.2f %.0f\n", fc, (fc > 0 ? fs / fc : 0), (l > 0 ? lm / (l / n) : 0), g / n / s }' "$work/totals-$name")
	read -r lookups perlookup accessmax gossip <<<"$stats"
	jq -r --arg name "$name" --arg l "$lookups" --arg p "$perlookup" --arg a "$accessmax" --arg g "$gossip" --arg s "$elapsed" '
	  def f: (. * 1000 | round / 1000 | tostring);
	  "\($name)\t\($s | tonumber | round)s\t\($l)\t\($p)\t\(.chunk_hit_ratio | f)\t\(.lookup.errors + .get.errors + .put.errors)\t\(.failed)\t\(.corrupt)\t\($a)\t\($g)"
	' "$work/bench-$name.json"
}

addrs() { (IFS=,; echo "${grpcs[*]}"); }

# Run 1: a rolling restart of every node under the bench.
name=churn
reset_life
start_cluster "$name" "$NODES" "$NODE_MEM_MB" "${flags[@]}"
log "$NODES nodes up"
# Idle: gossip bytes and CPU per node per second.
scrape "${admins[@]}" >"$work/idle0"
curl -sf -m $((IDLE + 30)) -o "$work/idle.pprof" "http://${admins[0]}/debug/pprof/profile?seconds=$IDLE" &
prof=$!
sleep "$IDLE"
scrape "${admins[@]}" >"$work/idle1"
wait "$prof" || log "no CPU profile of an idle node"
# gossip_cpu: the percentage of a core node 1 spent in gossip while idle (the samples under memberlist, the
# membership glue and the hand-off summaries' views, over the profile's length).
gossip_cpu=$(go tool pprof -top -unit ms -nodefraction 0 -focus 'hashicorp/memberlist|node/membership|node/internal/moves' "$kv" \
	"$work/idle.pprof" 2>/dev/null | awk -v s="$IDLE" '/^Showing nodes accounting for/ {
	  v = $5; sub(/(ms)?,?$/, "", v); printf "%.2f", v / 10 / s; found = 1 } END { if (!found) printf "nan" }')
idle=$(join <(sort "$work/idle0") <(sort "$work/idle1") | awk -v s="$IDLE" '{ g += $12 - $5; c += $13 - $6; n++ }
  END { printf "%.0f %.2f", g / n / s, 100 * c / n / s }')
log "idle: gossip bytes and CPU per node per second: $idle"
start=$(date +%s.%N)
# shellcheck disable=SC2086
"$kv" bench --addr "$(addrs)" --progress 0 --json --chunks-per-group "$GROUP" $BENCH_FLAGS \
	>"$work/bench-$name.json" 2>"$work/bench-$name.log" &
bench=$!
pids+=($bench)
sleep "$WARMUP"
restarted=0
budget_end=$(($(date +%s) + ${RESTART_BUDGET:-0}))
for k in $(seq 0 $((RESTARTS - 1))); do
	i=$((1 + k * NODES / RESTARTS))
	if [ "${RESTART_BUDGET:-0}" -gt 0 ] && [ "$(date +%s)" -ge "$budget_end" ]; then
		log "RESTART_BUDGET (${RESTART_BUDGET} s) spent: $restarted of $RESTARTS nodes restarted"
		break
	fi
	kill -0 "$bench" 2>/dev/null || log "the bench ended before node $i restarted"
	restart "$i"
	restarted=$((restarted + 1))
done
kill -INT "$bench" 2>/dev/null || true # no new requests; the bench reports what it did
wait "$bench" || { log "bench failed:"; tail -n 20 "$work/bench-$name.log" >&2; exit 1; }
elapsed=$(awk "BEGIN {print $(date +%s.%N) - $start}")
line_churn=$(report "$name" "$elapsed")
stop_cluster

# Run 2: the same workload without restarts.
name=steady
reset_life
start_cluster "$name" "$NODES" "$NODE_MEM_MB" "${flags[@]}"
log "$NODES nodes up"
# shellcheck disable=SC2086
start=$(date +%s.%N)
"$kv" bench --addr "$(addrs)" --progress 0 --json --chunks-per-group "$GROUP" $BENCH_FLAGS \
	--max-requests "$(jq .requests_done "$work/bench-churn.json")" ${STEADY_FLAGS:-} >"$work/bench-$name.json" 2>"$work/bench-$name.log" ||
	{ log "bench failed:"; tail -n 20 "$work/bench-$name.log" >&2; exit 1; }
line_steady=$(report "$name" "$(awk "BEGIN {print $(date +%s.%N) - $start}")")
stop_cluster
[ -z "${OUT_DIR:-}" ] || cp "$work"/bench-*.json "$work/restarts-churn" "$work"/churn*.log "$OUT_DIR/"

echo "$NODES nodes, replication $REPLICATION, groups of $GROUP, ${NODE_MEM_MB} MiB each; bench: $BENCH_FLAGS; $restarted nodes restarted"
echo "idle cluster: gossip $(cut -d' ' -f1 <<<"$idle") bytes/s per node, CPU $(cut -d' ' -f2 <<<"$idle") % of a core per node" \
	"(the whole process), of which gossip $gossip_cpu % (node 1's profile)"
printf '%-8s %8s %8s %12s %9s %12s %11s %8s %11s %13s\n' run length lookups nodes/lookup "hit ratio" "failed calls" \
	"failed puts" corrupt "access max" "gossip B/s"
printf '%s\n%s\n' "$line_churn" "$line_steady" |
	awk -F'\t' '{printf "%-8s %8s %8s %12s %9s %12s %11s %8s %11s %13s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10}'
awk '{ d += $2; n++; if ($4 >= 0) { c += $4; cn++; if ($4 > cm) cm = $4 } else cl++
    if ($5 >= 0) { h += $5; hn++; if ($5 > hm) hm = $5 } else hl++ }
  END { printf "restarts: %d; drain %.1f s mean; converged %.1f s mean (max %.1f) after ready, %d not within the wait; hand-offs done %.1f s mean (max %.1f) after ready, %d not within the wait\n", n, d / n, (cn ? c / cn : -1), cm, cl, (hn ? h / hn : -1), hm, hl }' \
	"$work/restarts-churn"
jq -nr --slurpfile a "$work/bench-churn.json" --slurpfile b "$work/bench-steady.json" \
	'def r: . * 1000 | round / 1000;
	 "hit ratio with the restarts / without: \($a[0].chunk_hit_ratio / $b[0].chunk_hit_ratio | r); each over its ideal (the hits an unbounded cache that never misses would give): \($a[0].chunk_hit_ratio / $a[0].ideal_chunk_hit_ratio | r) / \($b[0].chunk_hit_ratio / $b[0].ideal_chunk_hit_ratio | r)"'
