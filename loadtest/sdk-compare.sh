#!/usr/bin/env bash
# sdk-compare.sh replays the same `kvring bench` workload through the Go SDK
# against one kvring node and against one redis-server (allkeys-lru) with the
# same memory, each fresh for every run, and prints per run both replay times,
# their ratio (redis time / kvring time: above 1, kvring is faster), the
# node's and redis-server's CPU time over the run (user + system, from /proc:
# less swayed by a loaded machine than the times), each side's lookup p50 and
# chunk hit ratio, and kvring's failed calls, failed put chunks and corrupt
# reads (0 expected).
# With several binaries it alternates them run by run (old and new builds in
# one session, each against a redis-server of its own run), and ends with the
# median ratio and node CPU of each. The bench of each binary drives both
# backends. Every process it starts is stopped on exit.
#
# Usage: loadtest/sdk-compare.sh BINARY [BINARY...]
# Environment:
#   REPS         runs per binary (default 3)
#   MEM_MB       --memory-limit of the node and --maxmemory of redis-server,
#                MiB (default 2048)
#   BENCH_FLAGS  `kvring bench` flags, the same for both backends (default:
#                the shared-prefix workload's 2,000 requests in 32 KiB
#                chunks, 4 engines, as fast as they go:
#                --workload synthetic --seed 1 --speedup -1 --engines 4 --chunk-tokens 512;
#                add --bytes-per-token 512 for 256 KiB chunks)
# Needs jq and redis-server.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: $0 BINARY [BINARY...]" >&2; exit 2; }
REPS=${REPS:-3}
MEM_MB=${MEM_MB:-2048}
BENCH_FLAGS=${BENCH_FLAGS:---workload synthetic --seed 1 --speedup -1 --engines 4 --chunk-tokens 512}
read -r -a flags <<<"$BENCH_FLAGS"

# shellcheck source=scratch.sh
. loadtest/scratch.sh
scratch sdk-compare

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

# one_run N BINARY: a fresh node and a fresh redis-server, the bench against
# each; appends "binary ratio node_cpu" to $work/results and prints the run.
one_run() {
	local n=$1 bin=$2 grpc admin gossip rp node redis t0 t1 r0 r1 ok=0
	grpc=$(free_port) admin=$(free_port) gossip=$(free_port) rp=$(free_port)
	rm -rf "$work/data" "${shm:?}/node"
	mkdir -p "$shm/node"
	"$bin" serve --grpc-addr "127.0.0.1:$grpc" --admin-addr "127.0.0.1:$admin" --gossip-addr "127.0.0.1:$gossip" \
		--data-dir "$work/data" --shm-dir "$shm/node" --socket "" --memory-limit "${MEM_MB}MiB" --log-level warn \
		$("$bin" serve --help 2>&1 | grep -q -- --resp-addr && echo --resp-addr=) >>"$work/node.log" 2>&1 &
	node=$!
	pids+=("$node")
	for _ in $(seq 1 200); do
		curl -sf -o /dev/null "http://127.0.0.1:$admin/readyz" && { ok=1; break; }
		sleep 0.05
	done
	[ "$ok" = 1 ] || { echo "sdk-compare: $bin's node did not start; its log:" >&2; tail -n 20 "$work/node.log" >&2; exit 1; }
	t0=$(cpu_ticks "$node")
	"$bin" bench --addr "127.0.0.1:$grpc" --json --progress 0 "${flags[@]}" >"$work/kvring.json"
	t1=$(cpu_ticks "$node")
	kill "$node"
	wait "$node" 2>/dev/null || true

	redis-server --bind 127.0.0.1 --port "$rp" --save '' --appendonly no --dir "$work" \
		--maxmemory "${MEM_MB}mb" --maxmemory-policy allkeys-lru >>"$work/redis.log" 2>&1 &
	redis=$!
	pids+=("$redis")
	for _ in $(seq 1 200); do
		(exec 3<>"/dev/tcp/127.0.0.1/$rp") 2>/dev/null && break
		sleep 0.05
	done
	r0=$(cpu_ticks "$redis")
	"$bin" bench --backend redis --redis-addr "127.0.0.1:$rp" --json --progress 0 "${flags[@]}" >"$work/redis.json"
	r1=$(cpu_ticks "$redis")
	kill "$redis"
	wait "$redis" 2>/dev/null || true

	local ke re bad
	ke=$(jq .elapsed_ns "$work/kvring.json")
	re=$(jq .elapsed_ns "$work/redis.json")
	bad=$(jq '.corrupt + .lookup.errors + .get.errors + .put.errors + .failed' "$work/kvring.json")
	awk -v n="$n" -v b="$(basename "$bin")" -v ke="$ke" -v re="$re" -v nc="$((t1 - t0))" -v rc="$((r1 - r0))" -v hz="$hz" \
		-v kl="$(jq .lookup.p50_ms "$work/kvring.json")" -v rl="$(jq .lookup.p50_ms "$work/redis.json")" -v bad="$bad" \
		-v kh="$(jq .chunk_hit_ratio "$work/kvring.json")" -v rh="$(jq .chunk_hit_ratio "$work/redis.json")" \
		-v load="$(cut -d' ' -f1 /proc/loadavg)" 'BEGIN {
		printf "%-3d %-24s kvring %6.2f s  redis %6.2f s  ratio %5.2f  CPU node %5.2f s, redis-server %5.2f s  lookup p50 %.2f / %.2f ms  hit ratio %.3f / %.3f  failed or corrupt %d  load %s\n",
			n, b, ke / 1e9, re / 1e9, re / ke, nc / hz, rc / hz, kl, rl, kh, rh, bad, load }'
	echo "$bin $(awk -v ke="$ke" -v re="$re" 'BEGIN {print re / ke}') $(awk -v c="$((t1 - t0))" -v hz="$hz" 'BEGIN {print c / hz}')" >>"$work/results"
}

echo "# kvring bench ${flags[*]}; node and redis-server at ${MEM_MB} MiB, fresh each run"
for n in $(seq 1 "$REPS"); do
	for bin in "$@"; do
		one_run "$n" "$bin"
	done
done
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
for bin in "$@"; do
	printf "median %-24s ratio %.2f  node CPU %.2f s\n" "$(basename "$bin")" \
		"$(awk -v b="$bin" '$1 == b {print $2}' "$work/results" | median)" \
		"$(awk -v b="$bin" '$1 == b {print $3}' "$work/results" | median)"
done
