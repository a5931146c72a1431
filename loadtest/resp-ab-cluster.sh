#!/usr/bin/env bash
# resp-ab-cluster.sh compares two kvring binaries (an A and a B build, e.g. before and
# after a change) on the Redis-protocol port's reads of values other nodes
# hold: it starts a three-node cluster of each (no --resp-cluster, so one
# node's port serves every key and reads two thirds of them from the other
# members), and per value size runs redis-benchmark -t set,get against node 1
# of each, alternating A and B (which goes first alternates too) REPS times;
# from the second run on, a run's SETs find their keys held (values are
# immutable: the same bytes are taken as kept), so the GETs are what
# differs. New clusters are started per size.
# It prints requests/s per run and the median ratio B / A per test. Every
# process it starts is stopped on exit.
#
# Usage: loadtest/resp-ab-cluster.sh A_BINARY B_BINARY
# Environment:
#   SIZES    value sizes in bytes (default "262144 2097152")
#   REPS     alternations per size (default 3)
#   CLIENTS  redis-benchmark -c (default 16)
#   MEM_MB   memory of each node, MiB (default 512)
#   BYTES    bytes each test moves, which sets its request count (default
#            4 GiB, at most 200000 requests)
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: $0 A_BINARY B_BINARY" >&2; exit 2; }
bins=("$1" "$2")

SIZES=${SIZES:-"262144 2097152"}
REPS=${REPS:-3}
CLIENTS=${CLIENTS:-16}
MEM_MB=${MEM_MB:-512}
BYTES=${BYTES:-$((4 * 1024 * 1024 * 1024))}

# shellcheck source=scratch.sh
. loadtest/scratch.sh
scratch resp-ab

# start_clusters SIZE: a three-node cluster of each binary (start_nodes),
# its node 1's port in ports[k]. Each size gets new clusters: values are
# immutable, and a FLUSHDB on a cluster does not wait for every member to
# drop its keys.
start_clusters() {
	ports=()
	for k in 0 1; do
		start_nodes "$work/c$k-$1.env" -n 3 -kvring "${bins[$k]}" -dir "$work/c$k-$1" -shm-root "$shm/c$k-$1" \
			-memory-limit "${MEM_MB}MiB" -resp -- --log-level warn
		ports[k]=${resps[0]##*:}
	done
}

# stop_clusters: stops every node and removes its directories.
stop_clusters() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
	rm -rf "${work:?}"/c[01]-* "${shm:?}"/c[01]-*
}

# bench PORT SIZE: one redis-benchmark run (its SETs write the keys its GETs
# read); prints "test rps" lines, and stops the script on an error.
bench() {
	local port=$1 size=$2
	local n=$((BYTES / size)) keys=$((MEM_MB * 1024 * 1024 / size / 4))
	[ "$n" -gt 200000 ] && n=200000
	local out="$work/bench-$port-$size.txt"
	redis-benchmark -p "$port" -c "$CLIENTS" -n "$n" -d "$size" -r "$keys" -t set,get -q >"$out" 2>&1
	if grep -qi "error" "$out"; then
		echo "redis-benchmark against port $port reported errors:" >&2
		tr '\r' '\n' <"$out" | grep -i error | sort | uniq -c | head >&2
		exit 1
	fi
	tr '\r' '\n' <"$out" | awk -F'[: ]+' '/requests per second/ {print $1, $2}'
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "# redis-benchmark -c $CLIENTS -t set,get against node 1 of a 3-node cluster, ${MEM_MB} MiB per node, $REPS alternations"
printf "%-8s %-5s %12s %12s %7s\n" size test A B B/A
for size in $SIZES; do
	: >"$work/a" && : >"$work/b"
	start_clusters "$size"
	for r in $(seq 1 "$REPS"); do
		if [ $((r % 2)) -eq 1 ]; then
			bench "${ports[0]}" "$size" >>"$work/a" && bench "${ports[1]}" "$size" >>"$work/b"
		else
			bench "${ports[1]}" "$size" >>"$work/b" && bench "${ports[0]}" "$size" >>"$work/a"
		fi
	done
	stop_clusters
	for t in SET GET; do
		a=$(awk -v t="$t" '$1 == t {print $2}' "$work/a" | median)
		b=$(awk -v t="$t" '$1 == t {print $2}' "$work/b" | median)
		printf "%-8s %-5s %12.0f %12.0f %7.2f   (A: %s; B: %s)\n" "$size" "$t" "$a" "$b" "$(echo "$b / $a" | bc -l)" \
			"$(awk -v t="$t" '$1 == t {printf "%s ", $2}' "$work/a")" "$(awk -v t="$t" '$1 == t {printf "%s ", $2}' "$work/b")"
	done
done
