#!/usr/bin/env bash
# resp-lmcache.sh times LMCache's batched pattern through redis-py
# (loadtest/resp_lmcache_bench.py: concurrent SETs of a batch of chunks,
# kv_bytes then metadata, then concurrent GETs of them, every GET checked
# against the bytes SET) against one kvring node, one redis-server with the
# same memory (--save '', allkeys-lru) and, unless NODES=1, a cluster of
# NODES kvring nodes without --resp-cluster, all its traffic through node
# 1's address (as LMCache's one redis:// URL). The targets alternate round
# by round; it prints put and get GB/s per round and, per chunk size, the
# medians and the ratios kvring / redis-server. Exits 1 when a GET read nil
# for an acknowledged SET, other bytes or an error, after printing the end of
# every server's log. Every process it starts is
# stopped and every directory it makes removed on exit.
#
# Usage: loadtest/resp-lmcache.sh
# Environment:
#   SIZES    chunk sizes in bytes (default "3145728,33554432": LMCache's
#            256-token chunks of a 0.5B model and of Llama-3.1-8B)
#   BYTES    kv_bytes each way per round and target (default 1 GiB)
#   THREADS  the client's thread pool, and its connections (default 16)
#   REPS     rounds (alternations) per size (default 3)
#   MEM_MB   memory of each kvring node and of redis-server, MiB (default
#            2048: BYTES must fit, or redis-server evicts what was SET)
#   NODES    nodes of the kvring cluster (default 3; 1: no cluster)
#   PARSER   redis-py's reply parser: default (hiredis when installed,
#            as `pip install redis[hiredis]` does; Debian: python3-hiredis),
#            hiredis, or python (redis-py's own, which bounds the gets)
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES=${SIZES:-"3145728,33554432"}
BYTES=${BYTES:-$((1 << 30))}
THREADS=${THREADS:-16}
REPS=${REPS:-3}
MEM_MB=${MEM_MB:-2048}
NODES=${NODES:-3}

if [ $((BYTES * 4)) -gt $((MEM_MB * 3 << 20)) ]; then
	echo "resp-lmcache.sh: BYTES ($BYTES) is more than 3/4 of MEM_MB ($MEM_MB MiB): redis-server would evict chunks it acknowledged" >&2
	exit 2
fi

# shellcheck source=scratch.sh
. loadtest/scratch.sh
scratch resp-lmcache

go build -o "$work/kvring" ./cmd/kvring

kv="$work/kvring"

# start_node NAME [-n N]: one kvring node, or N joined in one cluster
# (start_nodes; node i's log is $work/NAMEi.log), ready and seeing each
# other; sets resp_port, node 1's Redis-protocol port.
start_node() {
	local name=$1 n=1
	[ "${2:-}" = -n ] && n=$3
	start_nodes "$work/$name.env" -n "$n" -dir "$work/$name" -shm-root "$shm/$name" -log-prefix "$work/$name" \
		-memory-limit "${MEM_MB}MiB" -resp -- --admin-actions --log-level warn
	resp_port=${resps[0]##*:}
}

targets=()
start_node n
targets+=(--target "kvring-1=127.0.0.1:$resp_port")

redis_port=$(free_port)
mkdir -p "$work/redis"
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --maxmemory "${MEM_MB}mb" \
	--maxmemory-policy allkeys-lru --dir "$work/redis" --logfile "$work/redis.log" &
pids+=($!)
for _ in $(seq 1 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
targets+=(--target "redis=127.0.0.1:$redis_port")

if [ "$NODES" -gt 1 ]; then
	start_node c -n "$NODES" # every node sees every member, so the first round spreads
	targets+=(--target "kvring-$NODES=127.0.0.1:$resp_port")
	cluster_note="; kvring-$NODES: $NODES nodes (no --resp-cluster), all traffic through node 1"
fi

echo "# LMCache's pattern through redis-py: $((BYTES >> 20)) MiB each way per round, $THREADS threads, ${MEM_MB} MiB per process, $REPS rounds"
echo "# kvring-1: one node; redis: one redis-server${cluster_note:-}"
rc=0
/usr/bin/python3 loadtest/resp_lmcache_bench.py "${targets[@]}" --peer redis --sizes "$SIZES" --bytes "$BYTES" \
	--threads "$THREADS" --reps "$REPS" --parser "${PARSER:-default}" || rc=$?
if [ "$rc" -ne 0 ]; then
	for f in "$work"/*.log; do echo "== the last lines of $(basename "$f")"; tail -n 5 "$f"; done >&2
	exit "$rc"
fi
