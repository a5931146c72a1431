#!/usr/bin/env bash
# resp-ab.sh compares two kvring binaries' Redis-protocol ports with
# redis-benchmark: one node of each per value size (the same memory),
# after a SET run each that is not counted (a fresh node's first writes
# fault its shared memory in), alternating them REPS times per value
# size, and prints per run requests/s and the node's
# CPU time per request (user + system, from /proc: less swayed by a loaded
# machine than the rate), and the median ratios new / old per test. Every
# process it starts is stopped on exit.
#
# Usage: loadtest/resp-ab.sh OLD_BINARY NEW_BINARY
# Environment:
#   SIZES    value sizes in bytes (default "4096 262144")
#   REPS     alternations per size (default 3)
#   CLIENTS  redis-benchmark -c (default 16)
#   MEM_MB   memory of each node, MiB (default 1024)
#   BYTES    bytes each test moves, which sets its request count (default
#            2 GiB, at most 200000 requests)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: $0 OLD_BINARY NEW_BINARY" >&2; exit 2; }
old=$1 new=$2
SIZES=${SIZES:-"4096 262144"}
REPS=${REPS:-3}
CLIENTS=${CLIENTS:-16}
MEM_MB=${MEM_MB:-1024}
BYTES=${BYTES:-$((2 * 1024 * 1024 * 1024))}

# shellcheck source=scratch.sh
. loadtest/scratch.sh
scratch resp-ab

# start_node NAME BINARY: a kvring node (start_nodes); sets resp_port and
# node_pid, and kvnodes_pid (killing it stops the node).
start_node() {
	local name=$1 bin=$2
	start_nodes "$work/$name.env" -kvring "$bin" -dir "$work/$name" -shm-root "$shm/$name" \
		-memory-limit "${MEM_MB}MiB" -resp -- --log-level warn
	resp_port=${resps[0]##*:} node_pid=${node_pids[0]} kvnodes_pid=$nodes_pid
}

# cpu_ticks PID: the process's user + system time, in clock ticks.
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

# bench PORT PID SIZE TEST: one redis-benchmark run of TEST (set or get,
# after a flush and, for get, a set run that fills the keys); prints "rps
# cpu_us_per_request", and stops the script when redis-benchmark reports an
# error.
bench() {
	local port=$1 pid=$2 size=$3 test=$4
	local n=$((BYTES / size)) keys=$((MEM_MB * 1024 * 1024 / size / 4))
	[ "$n" -gt 200000 ] && n=200000
	local out="$work/bench-$port-$size.txt"
	redis-cli -p "$port" flushdb >/dev/null
	[ "$test" = get ] && redis-benchmark -p "$port" -c "$CLIENTS" -n "$n" -d "$size" -r "$keys" -t set -q >/dev/null 2>&1
	local t0 t1
	t0=$(cpu_ticks "$pid")
	local rc=0
	redis-benchmark -p "$port" -c "$CLIENTS" -n "$n" -d "$size" -r "$keys" -t "$test" -q >"$out" 2>&1 || rc=$?
	t1=$(cpu_ticks "$pid")
	if [ "$rc" -ne 0 ] || grep -qi "error" "$out"; then
		echo "redis-benchmark against port $port failed ($rc) or reported errors:" >&2
		tr '\r' '\n' <"$out" | tail -5 >&2
		exit 1
	fi
	local rps
	rps=$(tr '\r' '\n' <"$out" | awk -F'[: ]+' '/requests per second/ {print $2}')
	echo "$rps $(echo "($t1 - $t0) * 1000000 / $hz / $n" | bc -l)"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "# redis-benchmark -c $CLIENTS, ${MEM_MB} MiB each node, $REPS alternations old/new; cpu: the node's us per request"
printf "%-8s %-5s %10s %10s %7s %9s %9s %7s\n" size test old_rps new_rps ratio old_cpu new_cpu ratio
for size in $SIZES; do
	# Fresh nodes per size: a FLUSHDB does not always remove every key of
	# the size before (a key then refuses the new size's bytes).
	start_node "old$size" "$old"
	old_port=$resp_port old_pid=$node_pid old_kvnodes=$kvnodes_pid
	start_node "new$size" "$new"
	new_port=$resp_port new_pid=$node_pid new_kvnodes=$kvnodes_pid
	bench "$old_port" "$old_pid" "$size" set >/dev/null
	bench "$new_port" "$new_pid" "$size" set >/dev/null
	for t in set get; do
		: >"$work/rows"
		for _ in $(seq 1 "$REPS"); do
			read -r orps ocpu < <(bench "$old_port" "$old_pid" "$size" "$t")
			read -r nrps ncpu < <(bench "$new_port" "$new_pid" "$size" "$t")
			printf "%-8s %-5s %10.0f %10.0f %7.3f %9.1f %9.1f %7.3f\n" "$size" "$t" "$orps" "$nrps" \
				"$(echo "$nrps / $orps" | bc -l)" "$ocpu" "$ncpu" "$(echo "$ncpu / $ocpu" | bc -l)" | tee -a "$work/rows"
		done
		printf "%-8s %-5s %10s %10s %7.3f %9s %9s %7.3f  (medians)\n" "$size" "$t" "" "" \
			"$(awk '{print $5}' "$work/rows" | median)" "" "" "$(awk '{print $8}' "$work/rows" | median)"
	done
	kill "$old_kvnodes" "$new_kvnodes"
	wait "$old_kvnodes" "$new_kvnodes" 2>/dev/null || true
done
