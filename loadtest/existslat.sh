#!/usr/bin/env bash
# existslat.sh measures EXISTS latency for a key another node owns
# (loadtest/existslat): three kvring nodes without --resp-cluster, the client
# on node 1, keys picked with node 1's GET /v1/resp/locate so that node 1
# neither owns nor holds them; as the peer, one redis-server with the same
# memory. One connection, sequential EXISTS, the targets alternating round by
# round; it prints p50 / p99 per run, their medians and the ratios kvring /
# redis-server (keys node 1 holds are measured too, for reference). Every
# process it starts is stopped and every directory it makes removed on exit.
#
# Usage: loadtest/existslat.sh
# Environment:
#   N        EXISTS per run (default 20000)
#   KEYS     keys of each kind the EXISTS cycle over (default 64)
#   REPS     rounds (default 3)
#   MEM_MB   memory of each kvring node and of redis-server, MiB (default 256)
#   NODES    kvring nodes (default 3, at least 2)
#   NODE_FLAGS  more flags for every kvring node (default
#            "--spread-threshold -1": hot-group spreading off, since a
#            key asked 32 times in 10 s is otherwise copied to node 1, and
#            its EXISTS becomes a local one; "" measures that too)
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-20000}
KEYS=${KEYS:-64}
REPS=${REPS:-3}
MEM_MB=${MEM_MB:-256}
NODES=${NODES:-3}
NODE_FLAGS=${NODE_FLAGS---spread-threshold -1}

# shellcheck source=scratch.sh
. loadtest/scratch.sh
scratch existslat

go build -o "$work/kvring" ./cmd/kvring
go build -o "$work/existslat" ./loadtest/existslat

# The nodes (start_nodes: the others join node 1; node i's log is
# $work/n$i.log), ready and seeing each other.
kv="$work/kvring"
# shellcheck disable=SC2086 # NODE_FLAGS is split into flags on purpose
start_nodes "$work/nodes.env" -n "$NODES" -dir "$work/nodes" -shm-root "$shm" -log-prefix "$work/n" \
	-memory-limit "${MEM_MB}MiB" -resp -- --log-level warn $NODE_FLAGS
n1_resp=${resps[0]##*:} n1_admin=${admins[0]##*:}

redis_port=$(free_port)
mkdir -p "$work/redis"
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --maxmemory "${MEM_MB}mb" \
	--maxmemory-policy allkeys-lru --dir "$work/redis" --logfile "$work/redis.log" &
pids+=($!)
for _ in $(seq 1 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done

echo "# $NODES kvring nodes (no --resp-cluster${NODE_FLAGS:+, $NODE_FLAGS}), client on node 1; redis-server; ${MEM_MB} MiB each"
"$work/existslat" -addr "127.0.0.1:$n1_resp" -admin "127.0.0.1:$n1_admin" -peer "127.0.0.1:$redis_port" \
	-keys "$KEYS" -n "$N" -reps "$REPS"
