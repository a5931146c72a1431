#!/usr/bin/env bash
# resp-compare.sh runs redis-benchmark against one kvring node's
# Redis-protocol port and one redis-server (--save '', allkeys-lru) with the
# same memory, alternating kvring and Redis REPS times per value size, and
# prints requests/s per run and the median ratio kvring / redis per test.
# CLUSTER=3 adds a three-node kvring cluster (--resp-cluster) and, as its
# peer, a three-node Redis Cluster (redis-servers with cluster-enabled yes,
# the same memory each, no replicas, made with redis-cli --cluster create),
# both driven by `redis-benchmark --cluster`. CLIENT=respbench drives every
# target with loadtest/respbench instead (the same flags and output; a client
# that reads replies into buffers it reuses, where redis-benchmark is the
# bottleneck from 4 MiB up). Every process it starts is stopped on exit.
#
# Usage: loadtest/resp-compare.sh
# Environment:
#   SIZES    value sizes in bytes (default "32768 262144 2097152")
#   REPS     alternations per size (default 3)
#   CLIENTS  redis-benchmark -c (default 16)
#   MEM_MB   memory of the node and of redis-server, MiB (default 1024)
#   TESTS    redis-benchmark -t (default set,get)
#   CLIENT   redis-benchmark (default) or respbench
#   CLUSTER  nodes of a kvring cluster to add (default 0: none)
#   BYTES    bytes each test moves, which sets its request count (default
#            8 GiB, at most 200000 requests): runs of a second or less
#            swing by a third from one to the next on a shared host
set -euo pipefail
cd "$(dirname "$0")/.."

SIZES=${SIZES:-"32768 262144 2097152"}
REPS=${REPS:-3}
CLIENTS=${CLIENTS:-16}
MEM_MB=${MEM_MB:-1024}
TESTS=${TESTS:-set,get}
CLUSTER=${CLUSTER:-0}
BYTES=${BYTES:-$((8 * 1024 * 1024 * 1024))}
CLIENT=${CLIENT:-redis-benchmark}
case $CLIENT in redis-benchmark | respbench) ;; *) echo "CLIENT must be redis-benchmark or respbench" >&2; exit 2 ;; esac

# shellcheck source=scratch.sh
. loadtest/scratch.sh
scratch resp-compare

go build -o "$work/kvring" ./cmd/kvring
go build -o "$work/respbench" ./loadtest/respbench

kv="$work/kvring"

# start_node NAME [-n N] [flags...]: one kvring node, or N joined in one
# cluster (start_nodes); sets resp_port, node 1's Redis-protocol port.
start_node() {
	local name=$1 n=1
	shift
	[ "${1:-}" = -n ] && { n=$2; shift 2; }
	start_nodes "$work/$name.env" -n "$n" -dir "$work/$name" -shm-root "$shm/$name" -memory-limit "${MEM_MB}MiB" -resp \
		-- --admin-actions --log-level warn "$@"
	resp_port=${resps[0]##*:}
}

start_node n1
kv_port=$resp_port
redis_port=$(free_port)

# start_redis PORT [flags...]: a redis-server with the node's memory; it
# runs in this shell, so its pid reaches pids and the cleanup.
start_redis() {
	local port=$1; shift
	mkdir -p "$work/redis-$port"
	redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --maxmemory "${MEM_MB}mb" \
		--maxmemory-policy allkeys-lru --dir "$work/redis-$port" --logfile "$work/redis-$port.log" "$@" &
	pids+=($!)
	for _ in $(seq 1 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
}

start_redis "$redis_port"

cluster_port="" rc_port=""
if [ "$CLUSTER" -gt 1 ]; then
	start_node cluster -n "$CLUSTER" --resp-cluster
	cluster_port=$resp_port
	rc_addrs=()
	for _ in $(seq 1 "$CLUSTER"); do
		p=$(free_port)
		start_redis "$p" --cluster-enabled yes --cluster-config-file "nodes-$p.conf"
		rc_addrs+=("127.0.0.1:$p")
		rc_port=${rc_port:-$p}
	done
	redis-cli --cluster create "${rc_addrs[@]}" --cluster-replicas 0 --cluster-yes >"$work/rcluster-create.log" 2>&1
	for _ in $(seq 1 100); do
		redis-cli -p "$rc_port" cluster info 2>/dev/null | grep -q 'cluster_state:ok' && break
		sleep 0.1
	done
fi

# bench PORT SIZE [flags]: one run of $CLIENT; prints "test rps" lines,
# and stops the script when it reports an error.
bench() {
	local port=$1 size=$2; shift 2
	local n=$((BYTES / size)) keys=$((MEM_MB * 1024 * 1024 / size / 4))
	[ "$n" -gt 200000 ] && n=200000
	local out="$work/bench-$port-$size.txt"
	if [ "$CLIENT" = respbench ]; then
		if ! "$work/respbench" -addr "127.0.0.1:$port" -c "$CLIENTS" -n "$n" -d "$size" -r "$keys" -t "$TESTS" "$@" >"$out" 2>&1; then
			echo "respbench against port $port failed:" >&2
			head "$out" >&2
			exit 1
		fi
	else
		redis-benchmark -p "$port" -c "$CLIENTS" -n "$n" -d "$size" -r "$keys" -t "$TESTS" -q "$@" >"$out" 2>&1
	fi
	if grep -qi "error" "$out"; then
		echo "$CLIENT against port $port reported errors:" >&2
		tr '\r' '\n' <"$out" | grep -i error | sort | uniq -c | head >&2
		exit 1
	fi
	# "test rps client-CPU-per-request" (the CPU only from respbench, "-" otherwise)
	tr '\r' '\n' <"$out" | awk -F'[: ]+' '/requests per second/ {c="-"; for (i=1;i<NF;i++) if ($i=="CPU") c=$(i+1); print $1, $2, c}'
}

# runs TEST KVFILE PEERFILE: each run's ratio, in order, and with respbench
# the medians of the client's CPU per request against each.
runs() {
	local ratios cpu
	ratios=$(paste -d' ' <(awk -v t="$1" '$1==t {print $2}' "$2") <(awk -v t="$1" '$1==t {print $2}' "$3") |
		awk '{printf "%s%.2f", (NR>1?",":""), $1/$2}')
	cpu=""
	if [ "$CLIENT" = respbench ]; then
		cpu=" client CPU/req $(awk -v t="$1" '$1==t {print $3}' "$2" | median) / $(awk -v t="$1" '$1==t {print $3}' "$3" | median) us"
	fi
	echo "runs $ratios$cpu"
}

median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

echo "# $CLIENT -c $CLIENTS -t $TESTS, ${MEM_MB} MiB each process, $REPS alternations:"
echo "# node: one kvring node vs one redis-server; cluster$CLUSTER: kvring --resp-cluster vs a Redis Cluster of as many redis-servers"
printf "%-8s %-5s %-10s %12s %12s %7s  %s\n" size test target kvring redis ratio "each run's ratio"
# flush PORT: empty a target before each run. redis-benchmark writes one
# key space (key:NNN) in every run, and kvring keeps a key's first value
# (values are immutable): without this, a run's SETs would find their keys
# held and its GETs would read the previous size's values.
flush() { redis-cli -p "$1" flushdb >/dev/null; }
# flush_rc: empty every master of the Redis Cluster.
flush_rc() { redis-cli --cluster call "127.0.0.1:$rc_port" flushall >/dev/null; }

for size in $SIZES; do
	: >"$work/k" && : >"$work/r" && : >"$work/c" && : >"$work/rc"
	for _ in $(seq 1 "$REPS"); do
		flush "$kv_port" && bench "$kv_port" "$size" >>"$work/k"
		flush "$redis_port" && bench "$redis_port" "$size" >>"$work/r"
		if [ -n "$cluster_port" ]; then
			flush "$cluster_port" && bench "$cluster_port" "$size" --cluster >>"$work/c"
			flush_rc && bench "$rc_port" "$size" --cluster >>"$work/rc"
		fi
	done
	for t in $(awk '{print $1}' "$work/k" | sort -u); do
		k=$(awk -v t="$t" '$1==t {print $2}' "$work/k" | median)
		r=$(awk -v t="$t" '$1==t {print $2}' "$work/r" | median)
		printf "%-8s %-5s %-10s %12.0f %12.0f %7.2f  %s\n" "$size" "$t" node "$k" "$r" "$(echo "$k / $r" | bc -l)" \
			"$(runs "$t" "$work/k" "$work/r")"
		if [ -s "$work/c" ]; then
			c=$(awk -v t="$t" '$1==t {print $2}' "$work/c" | median)
			rc=$(awk -v t="$t" '$1==t {print $2}' "$work/rc" | median)
			printf "%-8s %-5s %-10s %12.0f %12.0f %7.2f  %s\n" "$size" "$t" "cluster$CLUSTER" "$c" "$rc" "$(echo "$c / $rc" | bc -l)" \
				"$(runs "$t" "$work/c" "$work/rc")"
		fi
	done
done
