#!/usr/bin/env bash
# existslease.sh measures how often LMCache's GET after an EXISTS = 1 reads
# nil under eviction pressure (loadtest/existslease), against a three-node
# kvring cluster in --resp-cluster mode with --resp-exists-lease on (2s) and
# off (-1s), and, as the peer, a three-node Redis Cluster (cluster-enabled
# redis-servers, allkeys-lru, no replicas) with the same memory per node.
# The working set is 20 times the cluster's memory (each node's memory is 5 %
# of its share). Every process it starts is stopped on exit.
#
# Usage: loadtest/existslease.sh
# Environment:
#   MEM_MB   memory of each node and redis-server, MiB (default 16)
#   SIZE     bytes of each kv_bytes (default 262144)
#   LEASES   kvring --resp-exists-lease values to run (default "2s -1s")
#   READERS  reader connections (default 4); WRITERS (default 4)
#   GAP      a reader's wait between EXISTS = 1 and its GETs (default 100ms)
#   RATE     chunks written per second, all writers together (default 100:
#            the same churn for kvring and Redis; 0: as fast as they can)
#   REDIS    1: run the Redis Cluster peer too (default 1)
#   NODE_FLAGS  more flags for every kvring node (e.g. "--max-pinned 12MiB")
set -euo pipefail
cd "$(dirname "$0")/.."

MEM_MB=${MEM_MB:-16}
SIZE=${SIZE:-262144}
LEASES=${LEASES:-"2s -1s"}
READERS=${READERS:-4}
WRITERS=${WRITERS:-4}
GAP=${GAP:-100ms}
RATE=${RATE:-100}
REDIS=${REDIS:-1}
NODE_FLAGS=${NODE_FLAGS:-}
NODES=3
ws=$((20 * NODES * MEM_MB * 1024 * 1024))
window=$((NODES * MEM_MB * 1024 * 1024 / SIZE))

work=$(mktemp -d /tmp/kvring-existslease.XXXXXX)
shm=$(mktemp -d /dev/shm/kvring-existslease.XXXXXX)
pids=()
stop_all() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}
cleanup() {
	stop_all
	rm -rf "$work" "$shm"
}
trap cleanup EXIT INT TERM
# shellcheck source=ports.sh
. loadtest/ports.sh
# shellcheck source=nodes.sh
. loadtest/nodes.sh

go build -o "$work/kvring" ./cmd/kvring
kv="$work/kvring"
go build -o "$work/existslease" ./loadtest/existslease

# kvring_run LEASE: a fresh three-node cluster with that lease (start_nodes,
# --resp-cluster), measured.
kvring_run() {
	local lease=$1 run=$2
	# shellcheck disable=SC2086 # NODE_FLAGS is split into flags on purpose
	start_nodes "$work/$run.env" -n "$NODES" -dir "$work/$run" -shm-root "$shm/$run" -memory-limit "${MEM_MB}MiB" -resp \
		-- --resp-cluster --log-level warn $NODE_FLAGS --resp-exists-lease "$lease"
	for _ in $(seq 1 200); do
		[ "$(redis-cli -p "${resps[0]##*:}" cluster nodes | wc -l)" -eq $NODES ] && break
		sleep 0.1
	done
	"$work/existslease" -cluster -addrs "$(IFS=,; echo "${resps[*]}")" -admin "$(IFS=,; echo "${admins[*]}")" \
		-label "kvring --resp-exists-lease $lease" -size "$SIZE" -working-set "$ws" -window "$window" \
		-readers "$READERS" -writers "$WRITERS" -gap "$GAP" -rate "$RATE"
	stop_all
}

# redis_run: a three-node Redis Cluster, measured.
redis_run() {
	local rc=() p
	for _ in $(seq 1 $NODES); do
		p=$(free_port)
		mkdir -p "$work/redis-$p"
		redis-server --port "$p" --bind 127.0.0.1 --save '' --appendonly no --maxmemory "${MEM_MB}mb" \
			--maxmemory-policy allkeys-lru --cluster-enabled yes --cluster-config-file "nodes-$p.conf" \
			--dir "$work/redis-$p" --logfile "$work/redis-$p.log" &
		pids+=($!)
		for _ in $(seq 1 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.1; done
		rc+=("127.0.0.1:$p")
	done
	redis-cli --cluster create "${rc[@]}" --cluster-replicas 0 --cluster-yes >"$work/rcluster-create.log" 2>&1
	for _ in $(seq 1 100); do
		redis-cli -p "${rc[0]##*:}" cluster info 2>/dev/null | grep -q 'cluster_state:ok' && break
		sleep 0.1
	done
	"$work/existslease" -cluster -addrs "$(IFS=,; echo "${rc[*]}")" -label "Redis Cluster (allkeys-lru)" -size "$SIZE" \
		-working-set "$ws" -window "$window" -readers "$READERS" -writers "$WRITERS" -gap "$GAP" -rate "$RATE"
	stop_all
}

echo "# $NODES nodes of ${MEM_MB} MiB; working set $((ws >> 20)) MiB of $((SIZE >> 10)) KiB kv_bytes (+ metadata), readers pick among the last $window chunks written; $WRITERS writers ($RATE chunks/s), $READERS readers, gap $GAP"
n=0
for lease in $LEASES; do
	n=$((n + 1))
	kvring_run "$lease" "k$n"
done
if [ "$REDIS" = 1 ]; then redis_run; fi
