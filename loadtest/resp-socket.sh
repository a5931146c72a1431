#!/usr/bin/env bash
# resp-socket.sh runs redis-benchmark against one kvring node's Redis-protocol
# port over TCP loopback (-h/-p) and over its Unix socket (--resp-socket,
# -s), and, as the peer, against one redis-server over TCP and over its own
# Unix socket (--unixsocket), alternating the four targets REPS times per
# value size in the same run. It prints requests/s (median of the
# alternations) and the ratio unix / tcp of each. Every process it starts
# is stopped on exit; the run is bounded by BYTES per test.
#
# Usage: loadtest/resp-socket.sh
# Environment:
#   SIZES    value sizes in bytes (default "4096 262144")
#   REPS     alternations per size (default 2)
#   CLIENTS  redis-benchmark -c (default 16)
#   MEM_MB   memory of the node and of redis-server, MiB (default 1024)
#   TESTS    redis-benchmark -t (default set,get)
#   BYTES    bytes each test moves, which sets its request count (default
#            2 GiB, at most 200000 requests)
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES=${SIZES:-"4096 262144"}
REPS=${REPS:-2}
CLIENTS=${CLIENTS:-16}
MEM_MB=${MEM_MB:-1024}
TESTS=${TESTS:-set,get}
BYTES=${BYTES:-$((2 * 1024 * 1024 * 1024))}

# shellcheck source=scratch.sh
. loadtest/scratch.sh
scratch resp-socket

go build -o "$work/kvring" ./cmd/kvring

kv="$work/kvring" kv_sock="$work/kvring.sock"
start_nodes "$work/kv.env" -dir "$work/kv" -shm-root "$shm" -memory-limit "${MEM_MB}MiB" -resp \
	-- --resp-socket "$kv_sock" --admin-actions --log-level warn
kv_port=${resps[0]##*:}

redis_port=$(free_port) redis_sock="$work/redis.sock"
mkdir -p "$work/redis"
redis-server --port "$redis_port" --bind 127.0.0.1 --unixsocket "$redis_sock" --unixsocketperm 600 --save '' \
	--appendonly no --maxmemory "${MEM_MB}mb" --maxmemory-policy allkeys-lru --dir "$work/redis" \
	--logfile "$work/redis.log" &
pids+=($!)
for _ in $(seq 1 100); do redis-cli -s "$redis_sock" ping >/dev/null 2>&1 && break; sleep 0.1; done

# bench NAME SIZE ADDR...: one redis-benchmark run against ADDR (-p PORT or
# -s PATH); prints "test rps" lines, and stops the script when
# redis-benchmark reports an error.
bench() {
	local name=$1 size=$2; shift 2
	local n=$((BYTES / size)) keys=$((MEM_MB * 1024 * 1024 / size / 4))
	[ "$n" -gt 200000 ] && n=200000
	local out="$work/bench-$name-$size.txt"
	redis-benchmark "$@" -c "$CLIENTS" -n "$n" -d "$size" -r "$keys" -t "$TESTS" -q >"$out" 2>&1
	if grep -qi "error" "$out"; then
		echo "redis-benchmark against $name reported errors:" >&2
		tr '\r' '\n' <"$out" | grep -i error | sort | uniq -c | head >&2
		exit 1
	fi
	tr '\r' '\n' <"$out" | awk -F'[: ]+' '/requests per second/ {print $1, $2}'
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# flush ADDR...: empty a target before each run (kvring keeps a key's first
# value: without it a run's SETs would find their keys held).
flush() { redis-cli "$@" flushdb >/dev/null; }

echo "# redis-benchmark -c $CLIENTS -t $TESTS, ${MEM_MB} MiB each process, $REPS alternations of kvring tcp, kvring unix, redis tcp, redis unix:"
printf "%-8s %-5s %12s %12s %6s %12s %12s %6s\n" size test kvring-tcp kvring-unix ratio redis-tcp redis-unix ratio
for size in $SIZES; do
	for t in kt ku rt ru; do : >"$work/$t"; done
	for _ in $(seq 1 "$REPS"); do
		flush -p "$kv_port" && bench kvring-tcp "$size" -h 127.0.0.1 -p "$kv_port" >>"$work/kt"
		flush -s "$kv_sock" && bench kvring-unix "$size" -s "$kv_sock" >>"$work/ku"
		flush -p "$redis_port" && bench redis-tcp "$size" -h 127.0.0.1 -p "$redis_port" >>"$work/rt"
		flush -s "$redis_sock" && bench redis-unix "$size" -s "$redis_sock" >>"$work/ru"
	done
	for t in $(awk '{print $1}' "$work/kt" | sort -u); do
		kt=$(awk -v t="$t" '$1==t {print $2}' "$work/kt" | median)
		ku=$(awk -v t="$t" '$1==t {print $2}' "$work/ku" | median)
		rt=$(awk -v t="$t" '$1==t {print $2}' "$work/rt" | median)
		ru=$(awk -v t="$t" '$1==t {print $2}' "$work/ru" | median)
		printf "%-8s %-5s %12.0f %12.0f %6.2f %12.0f %12.0f %6.2f\n" "$size" "$t" "$kt" "$ku" "$(echo "$ku / $kt" | bc -l)" \
			"$rt" "$ru" "$(echo "$ru / $rt" | bc -l)"
	done
done
