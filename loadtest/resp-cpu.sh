#!/usr/bin/env bash
# resp-cpu.sh measures where the CPU of a Redis-protocol test goes, for one
# kvring node and one redis-server with the same memory (--save '',
# allkeys-lru): it fills both with loadtest/respbench SETs (every key of
# the key space about four times), then runs TEST alone against each,
# alternating REPS times, and prints per run the requests/s, the server's
# CPU time per request (user + system of its process, from /proc) and the
# client's (respbench's own). On a host where client and server share the
# cores, the ratio of two servers' requests/s is at most (client + peer) /
# (client + kvring) CPU per request. Every process it starts is stopped on
# exit.
#
# Usage: loadtest/resp-cpu.sh
# Environment:
#   SIZE     value size in bytes (default 262144)
#   N        requests per run (default 30000)
#   REPS     alternations (default 3)
#   TEST     get or set (default get)
#   CLIENTS  connections (default 16)
#   MEM_MB   memory of the node and of redis-server, MiB (default 1024)
set -euo pipefail
cd "$(dirname "$0")/.."

SIZE=${SIZE:-262144}
N=${N:-30000}
REPS=${REPS:-3}
TEST=${TEST:-get}
CLIENTS=${CLIENTS:-16}
MEM_MB=${MEM_MB:-1024}
KEYS=$((MEM_MB * 1024 * 1024 / SIZE / 4))

# shellcheck source=scratch.sh
. loadtest/scratch.sh
scratch resp-cpu

go build -o "$work/kvring" ./cmd/kvring
go build -o "$work/respbench" ./loadtest/respbench
kv="$work/kvring"

start_nodes "$work/n1.env" -n 1 -dir "$work/n1" -shm-root "$shm/n1" -memory-limit "${MEM_MB}MiB" -resp -- --log-level warn
kv_port=${resps[0]##*:}
kv_pid=${node_pids[0]}

redis_port=$(free_port)
mkdir -p "$work/redis"
redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --maxmemory "${MEM_MB}mb" \
	--maxmemory-policy allkeys-lru --dir "$work/redis" --logfile "$work/redis.log" &
redis_pid=$!
pids+=("$redis_pid")
for _ in $(seq 1 100); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done

for port in "$kv_port" "$redis_port"; do
	"$work/respbench" -addr "127.0.0.1:$port" -c "$CLIENTS" -n $((KEYS * 4)) -d "$SIZE" -r "$KEYS" -t set >/dev/null
done

# ticks PID: the process's user + system CPU time, in clock ticks.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)

echo "# $TEST, $SIZE-byte values, $CLIENTS connections, $N requests a run, $REPS alternations; CPU per request in us"
printf "%-4s %-7s %12s %12s %12s\n" run target "requests/s" "server CPU" "client CPU"
for r in $(seq 1 "$REPS"); do
	for t in kvring:"$kv_port":"$kv_pid" redis:"$redis_port":"$redis_pid"; do
		IFS=: read -r name port pid <<<"$t"
		before=$(ticks "$pid")
		out=$("$work/respbench" -addr "127.0.0.1:$port" -c "$CLIENTS" -n "$N" -d "$SIZE" -r "$KEYS" -t "$TEST")
		after=$(ticks "$pid")
		rps=$(awk -F'[: ]+' '/requests per second/ {print $2}' <<<"$out")
		client=$(awk '{for (i = 1; i < NF; i++) if ($i == "CPU") print $(i + 1)}' <<<"$out")
		server=$(echo "($after - $before) * 1000000 / $hz / $N" | bc -l)
		printf "%-4s %-7s %12.0f %12.1f %12s\n" "$r" "$name" "$rps" "$server" "$client"
	done
done
