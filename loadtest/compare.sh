#!/usr/bin/env bash
# compare.sh runs the same `kvring bench` workload against a 3-node kvring
# cluster and a redis-server (allkeys-lru) with equal memory budgets on
# loopback, prints both reports and a side-by-side line with ratios
# (kvring / redis), and stops every process it started.
#
# Usage: loadtest/compare.sh   (or `make bench-compare`)
# Environment:
#   NODE_MEM_MB   memory limit of each kvring node in MiB (default 64); redis
#                 gets --maxmemory 3×NODE_MEM_MB mb
#   MAX_REQUESTS  requests replayed (default 800)
#   BENCH_FLAGS   extra `kvring bench` flags, the same for both
#                 (default: --speedup -1 --engines 4)
#   TRACE         Mooncake trace (default the repository's synthetic trace)
# Needs curl and jq; installs redis-server (and jq) with apt-get if missing.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
NODE_MEM_MB=${NODE_MEM_MB:-64}
MAX_REQUESTS=${MAX_REQUESTS:-800}
BENCH_FLAGS=${BENCH_FLAGS:---speedup -1 --engines 4}
TRACE=${TRACE:-loadtest/trace/testdata/synthetic_trace.jsonl}

work=$(mktemp -d)
pids=()
cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

log() { echo "compare: $*" >&2; }

need_apt=()
command -v redis-server >/dev/null || need_apt+=(redis-server)
command -v jq >/dev/null || need_apt+=(jq)
if ((${#need_apt[@]})); then
	log "installing ${need_apt[*]} with apt-get"
	sudo=""
	[ "$(id -u)" -eq 0 ] || sudo=sudo
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi
command -v curl >/dev/null || { log "curl is required"; exit 1; }

log "building kvring"
go build -o "$work/kvring" ./cmd/kvring
kv="$work/kvring"

# free_port prints a loopback TCP+UDP port nobody listens on and this script
# has not handed out yet.
used=" "
free_port() {
	local p
	while :; do
		p=$((20000 + RANDOM % 40000))
		case "$used" in *" $p "*) continue ;; esac
		if [ -z "$(ss -Htuan "( sport = :$p )" 2>/dev/null)" ]; then
			used+="$p "
			echo "$p"
			return
		fi
	done
}

wait_http() { # url what
	for _ in $(seq 200); do
		curl -sf -o /dev/null "$1" && return 0
		sleep 0.05
	done
	log "$2 did not come up; its log:"
	cat "$work/$2.log" >&2
	exit 1
}

grpcs=() admins=() gossip1=""
for i in 1 2 3; do
	g=$(free_port) a=$(free_port) m=$(free_port)
	join=()
	[ -z "$gossip1" ] || join=(--join "$gossip1")
	mkdir -p "$work/node$i/shm"
	"$kv" serve --grpc-addr "127.0.0.1:$g" --admin-addr "127.0.0.1:$a" --gossip-addr "127.0.0.1:$m" \
		--data-dir "$work/node$i/data" --shm-dir "$work/node$i/shm" --memory-limit "${NODE_MEM_MB}MiB" \
		--log-level warn "${join[@]}" >"$work/node$i.log" 2>&1 &
	pids+=($!)
	[ -n "$gossip1" ] || gossip1="127.0.0.1:$m"
	grpcs+=("127.0.0.1:$g")
	admins+=("127.0.0.1:$a")
done
for i in 0 1 2; do
	wait_http "http://${admins[$i]}/readyz" "node$((i + 1))"
done
for _ in $(seq 200); do # until every node sees three members
	n=0
	for a in "${admins[@]}"; do
		c=$(curl -sf "http://$a/v1/cluster" | jq '[.members[] | select(.state == "active")] | length' 2>/dev/null || echo 0)
		[ "$c" -ge 3 ] && n=$((n + 1))
	done
	[ "$n" -eq 3 ] && break
	sleep 0.05
done

rp=$(free_port)
redis-server --bind 127.0.0.1 --port "$rp" --save '' --appendonly no --dir "$work" \
	--maxmemory "$((3 * NODE_MEM_MB))mb" --maxmemory-policy allkeys-lru >"$work/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 200); do
	(exec 3<>"/dev/tcp/127.0.0.1/$rp") 2>/dev/null && break
	sleep 0.05
done
log "3 kvring nodes (${grpcs[*]}) at ${NODE_MEM_MB}MiB each; redis 127.0.0.1:$rp at $((3 * NODE_MEM_MB))MiB allkeys-lru"

grpc_list=$(IFS=,; echo "${grpcs[*]}")
admin_list=$(IFS=,; echo "${admins[*]}")
# shellcheck disable=SC2086 # BENCH_FLAGS is a list of flags
common=(bench --trace "$TRACE" --max-requests "$MAX_REQUESTS" --progress 0 $BENCH_FLAGS)

log "bench: kvring"
"$kv" "${common[@]}" --backend kvring --addr "$grpc_list" --admin "$admin_list" --json >"$work/kvring.json" || log "kvring bench failed ($?)"
log "bench: redis"
"$kv" "${common[@]}" --backend redis --redis-addr "127.0.0.1:$rp" --json >"$work/redis.json" || log "redis bench failed ($?)"

table() { # report.json: the same table `kvring bench` prints, from the JSON
	jq -r '
	  def f: (. * 1000 | round / 1000 | tostring);
	  "backend \(.backend)  requests \(.requests_done)/\(.requests_planned)  elapsed \(.elapsed_ns / 1e9 | f)s",
	  "  chunk hit ratio \(.chunk_hit_ratio | f) (ideal \(.ideal_chunk_hit_ratio | f))  token hit ratio \(.token_hit_ratio | f)",
	  (["lookup", "get", "put"][] as $op | .[$op] |
	    "  \($op)\tcalls \(.calls)\terrors \(.errors)\t\(.gb_per_sec | f) GB/s\t\(.ops_per_sec | round) ops/s\tp50 \(.p50_ms | f)ms p95 \(.p95_ms | f)ms p99 \(.p99_ms | f)ms"),
	  "  stored \(.stored) already_held \(.already_held) rejected \(.rejected) failed \(.failed) get_misses \(.get_misses) corrupt \(.corrupt) missing_after_ack \(.missing_after_ack) evictions \(.evictions // {} | tostring)"
	' "$1"
}
for b in kvring redis; do
	[ -s "$work/$b.json" ] && table "$work/$b.json"
done

[ -s "$work/kvring.json" ] && [ -s "$work/redis.json" ] || { log "a run printed no report"; exit 1; }
echo
jq -rn --slurpfile k "$work/kvring.json" --slurpfile r "$work/redis.json" '
  def f: (. * 1000 | round / 1000 | tostring);
  def ratio(a; b): if b == 0 then "n/a" else (a / b | f) + "x" end;
  def col(name; a; b; unit): "\(name)\tkvring \(a | f)\(unit)\tredis \(b | f)\(unit)\tkvring/redis \(ratio(a; b))";
  $k[0] as $k | $r[0] as $r |
  "side by side (same workload, equal budgets):",
  "corrupt kvring \($k.corrupt) redis \($r.corrupt); missing_after_ack kvring \($k.missing_after_ack) redis \($r.missing_after_ack); failed kvring \($k.failed) redis \($r.failed)",
  col("chunk hit ratio"; $k.chunk_hit_ratio; $r.chunk_hit_ratio; ""),
  col("put GB/s       "; $k.put.gb_per_sec; $r.put.gb_per_sec; ""),
  col("get GB/s       "; $k.get.gb_per_sec; $r.get.gb_per_sec; ""),
  col("lookup p99     "; $k.lookup.p99_ms; $r.lookup.p99_ms; "ms"),
  col("get p99        "; $k.get.p99_ms; $r.get.p99_ms; "ms"),
  col("put p99        "; $k.put.p99_ms; $r.put.p99_ms; "ms")
' | { IFS= read -r l1; IFS= read -r l2; echo "$l1"; echo "$l2"; column -t -s "$(printf '\t')"; }
