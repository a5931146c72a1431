#!/usr/bin/env bash
# compare.sh runs the same `kvring bench` workload against a 3-node kvring
# cluster (NODES) and a redis-server (allkeys-lru) with equal memory budgets on
# loopback, prints both reports and a side-by-side line with ratios
# (kvring / redis), each run's timeline (requests/s, put GB/s, errors and hit
# ratio per interval) and its failures, and stops every process it started.
#
# Usage: loadtest/compare.sh   (or `make bench-compare`)
# Environment:
#   NODES         kvring nodes (default 3; 1: one node against one redis-server)
#   NODE_MEM_MB   memory limit of each kvring node in MiB (default 64)
#   REDIS_MEM_MB  redis --maxmemory in MiB (default NODES×NODE_MEM_MB: equal bytes;
#                 redis counts its per-key overhead in it, about 1,440 bytes
#                 for a 1 KiB chunk, so equal chunk counts need ~1.41× that)
#   TIMELINE      1: print each run's timeline even without a fault
#   KEEP_LOGS     a directory to copy the node, redis and bench logs, the JSON
#                 reports and the nodes' /metrics after the kvring run to
#                 before the work directory is removed
#   MAX_REQUESTS  requests replayed (default 800; 0: the whole trace)
#   BENCH_FLAGS   extra `kvring bench` flags, the same for both
#                 (default: --speedup -1 --engines 4)
#   TRACE         Mooncake trace (default the repository's synthetic trace)
#   SHM_ROOT      where the nodes' segment files go (default /dev/shm, as
#                 `kvring serve`'s default --shm-dir); a directory on a disk
#                 makes every chunk write a page-cache write of a disk file
#                 (32 KiB replay on one node: 0.49-0.55x Redis instead of
#                 0.59-0.79x, docs/benchmarks.md)
#   KILL_AFTER    inject a fault: KILL_AFTER seconds after each bench process
#                 starts, SIGKILL kvring node 2 (kvring run) or redis-server
#                 (Redis run). Empty (default): no fault. Decimals allowed.
#   DOWN_FOR      seconds the killed process stays down before it is started
#                 again (default 5): node 2 with the same addresses, data dir
#                 and shm dir (a warm restart, waited for with /readyz);
#                 redis-server on the same port, empty (it has no persistence,
#                 so every chunk it held is gone).
#
# With a fault, the bench must run longer than KILL_AFTER + DOWN_FOR to show
# the recovery, but the default (--speedup -1, 800 requests) takes a few
# seconds. Pace the replay and give it enough requests, and cap it with
# --duration if you like; the first 600 requests of the synthetic trace span
# 166 s, so --speedup 20 makes them last 8.3 s or more (longer when the
# backend cannot keep up):
#   MAX_REQUESTS=600 KILL_AFTER=3 DOWN_FOR=3 BENCH_FLAGS='--speedup 20 --engines 2' loadtest/compare.sh
#   MAX_REQUESTS=0 KILL_AFTER=5 DOWN_FOR=5 BENCH_FLAGS='--speedup 20 --duration 20s' loadtest/compare.sh
# The fault times count from the bench process's start; its timeline starts
# a little later, once the trace is read and the clients have connected.
# Failed calls do not stop a bench: they are counted and its timeline shows
# when. The script warns when a bench ended before the fault was over.
# Needs curl and jq; installs redis-server (and jq) with apt-get if missing.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
NODES=${NODES:-3}
NODE_MEM_MB=${NODE_MEM_MB:-64}
REDIS_MEM_MB=${REDIS_MEM_MB:-$((NODES * NODE_MEM_MB))}
TIMELINE=${TIMELINE:-}
KEEP_LOGS=${KEEP_LOGS:-}
MAX_REQUESTS=${MAX_REQUESTS:-800}
BENCH_FLAGS=${BENCH_FLAGS:---speedup -1 --engines 4}
TRACE=${TRACE:-loadtest/trace/testdata/synthetic_trace.jsonl}
KILL_AFTER=${KILL_AFTER:-}
DOWN_FOR=${DOWN_FOR:-5}
SHM_ROOT=${SHM_ROOT:-/dev/shm}

log() { echo "compare: $*" >&2; }

is_seconds() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]]; }
if [ -n "$KILL_AFTER" ] && ! is_seconds "$KILL_AFTER"; then
	log "KILL_AFTER must be a number of seconds, got '$KILL_AFTER'"
	exit 2
fi
[[ $NODES =~ ^[1-9][0-9]*$ ]] || { log "NODES must be a positive number, got '$NODES'"; exit 2; }
if [ -n "$KILL_AFTER" ] && [ "$NODES" -lt 2 ]; then
	log "KILL_AFTER kills node 2: it needs NODES >= 2"
	exit 2
fi
is_seconds "$DOWN_FOR" || { log "DOWN_FOR must be a number of seconds, got '$DOWN_FOR'"; exit 2; }

work=$(mktemp -d)
# The segment files live in memory, as in a deployment: the work directory is
# on a disk here (mktemp's /tmp), and segments on a disk file system cost
# kvring writeback and block allocation that no node pays on /dev/shm.
shm=$(mktemp -d "$SHM_ROOT/kvring-compare-XXXXXX")
pids=() # every process started and not yet reaped
cleanup() {
	local pid
	for pid in "${pids[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${pids[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	if [ -n "$KEEP_LOGS" ]; then
		mkdir -p "$KEEP_LOGS"
		cp "$work"/*.log "$work"/*.json "$work"/*.metrics "$KEEP_LOGS"/ 2>/dev/null || true
		echo "compare: logs and reports kept in $KEEP_LOGS" >&2
	fi
	rm -rf "$work" "$shm"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# forget_pid drops a reaped process from pids.
forget_pid() {
	local p keep=()
	for p in "${pids[@]}"; do
		[ "$p" = "$1" ] || keep+=("$p")
	done
	pids=("${keep[@]}")
}

# now_us prints the wall clock in microseconds; secs_us converts seconds
# (decimals allowed) to microseconds; since prints the seconds from a now_us.
now_us() { echo "${EPOCHREALTIME/./}"; }
secs_us() { awk -v s="$1" 'BEGIN { printf "%d", s * 1e6 }'; }
since() { awk -v a="$1" -v b="$(now_us)" 'BEGIN { printf "%.1f", (b - a) / 1e6 }'; }

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

# shellcheck source=loadtest/ports.sh
source "$root/loadtest/ports.sh" # free_port
# shellcheck source=loadtest/nodes.sh
source "$root/loadtest/nodes.sh" # start_nodes, nodes_ctl

# The nodes (kvnodes: the others join node 1; node i's log is $work/node$i.log). Node i listens on grpcs[i-1],
# admins[i-1] and gossips[i-1], and keeps them, its data dir and its shm dir across a kill and a restart.
start_nodes "$work/nodes.env" -n "$NODES" -dir "$work/nodes" -shm-root "$shm" -log-prefix "$work/node" \
	-memory-limit "${NODE_MEM_MB}MiB" -socket -- --log-level warn
active_members() { # admin address: how many active members the node sees
	curl -sf "http://$1/v1/cluster" | jq '[.members[] | select(.state == "active")] | length' 2>/dev/null || echo 0
}

rp=$(free_port)
redis_pid=""
start_redis() {
	redis-server --bind 127.0.0.1 --port "$rp" --save '' --appendonly no --dir "$work" \
		--maxmemory "${REDIS_MEM_MB}mb" --maxmemory-policy allkeys-lru >>"$work/redis.log" 2>&1 &
	redis_pid=$!
	pids+=($!)
	for _ in $(seq 200); do
		(exec 3<>"/dev/tcp/127.0.0.1/$rp") 2>/dev/null && return 0
		sleep 0.05
	done
	log "redis-server did not come up; its log:"
	tail -n 50 "$work/redis.log" >&2
	return 1
}
start_redis || exit 1
log "$NODES kvring node(s) (${grpcs[*]}) at ${NODE_MEM_MB}MiB each; redis 127.0.0.1:$rp at ${REDIS_MEM_MB}MiB allkeys-lru"

# kill_pid SIGKILLs a process this script started and reaps it.
kill_pid() {
	kill -KILL "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
	forget_pid "$1"
}
# A restart function sets back_us once the victim serves again.
back_us=""
kill_kvring() { nodes_ctl kill 2; }
restart_kvring() {
	if nodes_ctl restart 2; then
		back_us=$(now_us)
		log "node 2 ready again at $(since "$bench_start")s (warm restart: same addresses, data and shm dirs)"
	else
		log "node 2 did not become ready again"
		return 0
	fi
	for _ in $(seq 200); do
		[ "$(active_members "${admins[0]}")" -ge "$NODES" ] && [ "$(active_members "${admins[1]}")" -ge "$NODES" ] && break
		sleep 0.05
	done
	log "node 1 sees $(active_members "${admins[0]}") active members, node 2 $(active_members "${admins[1]}"), at $(since "$bench_start")s"
}
kill_redis() { kill_pid "$redis_pid"; }
restart_redis() {
	start_redis || { log "redis-server did not come back"; return 0; }
	back_us=$(now_us)
	log "redis-server back at $(since "$bench_start")s, EMPTY: it has no persistence, every chunk it held is gone"
}

# sleep_while bench_pid seconds: sleeps that long, or until the bench exits;
# false when it exited.
sleep_while() {
	local deadline=$(($(now_us) + $(secs_us "$2")))
	while [ "$(now_us)" -lt "$deadline" ]; do
		kill -0 "$1" 2>/dev/null || return 1
		sleep 0.05
	done
	kill -0 "$1" 2>/dev/null
}

# run_bench name what kill_fn restart_fn args...: runs `kvring bench args... --json`
# into $work/name.json, with the fault of KILL_AFTER and DOWN_FOR (kill_fn
# and restart_fn inject it; what names the victim). killed_at[name] and
# back_at[name] are the fault's times (microseconds since the epoch).
bench_start=0
declare -A killed_at=() back_at=()
run_bench() {
	local name=$1 what=$2 kill_fn=$3 restart_fn=$4 rc=0 bpid
	shift 4
	log "bench: $name"
	bench_start=$(now_us)
	"$kv" "$@" --json >"$work/$name.json" &
	bpid=$!
	pids+=("$bpid")
	if [ -n "$KILL_AFTER" ]; then
		if sleep_while "$bpid" "$KILL_AFTER"; then
			"$kill_fn"
			killed_at[$name]=$(now_us)
			log "SIGKILLed $what at $(since "$bench_start")s; restarting it in ${DOWN_FOR}s"
			sleep_while "$bpid" "$DOWN_FOR" || log "WARNING: the $name bench ended while $what was down; give it more requests or a slower --speedup"
			back_us=""
			"$restart_fn"
			back_at[$name]=$back_us
			kill -0 "$bpid" 2>/dev/null || log "WARNING: the $name bench ended before $what was back: the timeline shows no recovery"
		else
			log "WARNING: the $name bench ended before KILL_AFTER=${KILL_AFTER}s: no fault injected; give it more requests or a slower --speedup"
		fi
	fi
	wait "$bpid" || rc=$?
	forget_pid "$bpid"
	log "bench: $name took $(since "$bench_start")s"
	[ "$rc" -eq 0 ] || log "$name bench failed ($rc)"
}

grpc_list=$(IFS=,; echo "${grpcs[*]}")
admin_list=$(IFS=,; echo "${admins[*]}")
# shellcheck disable=SC2086 # BENCH_FLAGS is a list of flags
common=(bench --trace "$TRACE" --max-requests "$MAX_REQUESTS" --progress 0 $BENCH_FLAGS)

run_bench kvring "kvring node 2" kill_kvring restart_kvring "${common[@]}" --backend kvring --addr "$grpc_list" --admin "$admin_list"
if [ -n "$KEEP_LOGS" ]; then # the nodes' Prometheus metrics after the kvring run
	for ((i = 0; i < NODES; i++)); do
		curl -sf "http://${admins[$i]}/metrics" >"$work/node$((i + 1)).metrics" || true
	done
fi
run_bench redis "redis-server" kill_redis restart_redis "${common[@]}" --backend redis --redis-addr "127.0.0.1:$rp"

table() { # report.json: the same table `kvring bench` prints, from the JSON
	jq -r '
	  def f: (. * 1000 | round / 1000 | tostring);
	  "backend \(.backend)  requests \(.requests_done)/\(.requests_planned)  elapsed \(.elapsed_ns / 1e9 | f)s",
	  "  chunk hit ratio \(.chunk_hit_ratio | f) (ideal \(.ideal_chunk_hit_ratio | f))  token hit ratio \(.token_hit_ratio | f)",
	  (["lookup", "get", "put"][] as $op | .[$op] |
	    "  \($op)\tcalls \(.calls)\terrors \(.errors)\t\(.gb_per_sec | f) GB/s\t\(.ops_per_sec | round) ops/s\tp50 \(.p50_ms | f)ms p95 \(.p95_ms | f)ms p99 \(.p99_ms | f)ms"),
	  "  stored \(.stored) already_held \(.already_held) rejected \(.rejected) failed \(.failed) get_misses \(.get_misses) corrupt \(.corrupt) missing_after_ack \(.missing_after_ack) (found again after the run: \(.missing_found_later // 0)) evictions \(.evictions // {} | tostring)",
	  "  failures: \(.lookup.errors + .get.errors + .put.errors) failed calls (lookup \(.lookup.errors), get \(.get.errors), put \(.put.errors)), \(.failed) failed and \(.rejected) rejected put chunks",
	  (["lookup", "get", "put"][] as $op | .[$op].first_error // empty | "  first \($op) error: \(.)")
	' "$1"
}
timeline() { # report.json killed_us back_us: one row per interval of the run, the fault's marked
	jq -r --arg killed "$2" --arg back "$3" '
	  def f: (. * 1000 | round / 1000 | tostring);
	  def epoch: capture("^(?<s>[^.]+?)(?<f>\\.[0-9]+)?Z$") | (.s + "Z" | fromdateiso8601) + ((.f // "0") | tonumber);
	  def since($us; $t0): if $us == "" then null else ($us | tonumber) / 1e6 - $t0 end;
	  (.started_at | epoch) as $t0 | since($killed; $t0) as $k | since($back; $t0) as $b |
	  def within($x): $x != null and $x >= .t_s and $x < .t_s + .len_s;
	  "  t_s\treq/s\tput GB/s\terrors\tfailed\thit ratio\t",
	  ((.timeline // [])[] |
	    (if within($k) then "<- killed at \($k | f)s" elif within($b) then "<- back at \($b | f)s"
	     elif $k != null and .t_s > $k and ($b == null or .t_s < $b) then "<- down" else "" end) as $note |
	    "  \(.t_s | f)\t\(.requests_per_sec | round)\t\(.put_gb_per_sec | f)\t\(.errors)\t\(.failed)\t\(.chunk_hit_ratio | f)\t\($note)")
	' "$1" | column -t -s "$(printf '\t')" | sed 's/ *$//'
}
for b in kvring redis; do
	[ -s "$work/$b.json" ] || continue
	table "$work/$b.json"
	[ -n "$KILL_AFTER$TIMELINE" ] || continue
	echo "  timeline (requests/s, put GB/s acknowledged, failed calls, failed put chunks, chunk hit ratio of the requests done):"
	timeline "$work/$b.json" "${killed_at[$b]:-}" "${back_at[$b]:-}"
done
if [ -n "$KILL_AFTER" ]; then
	echo
	echo "fault: KILL_AFTER=${KILL_AFTER}s DOWN_FOR=${DOWN_FOR}s after each bench process started; the timelines mark it in their own time"
	echo "  (\"back\": the victim serves again; kvring: /readyz answers)."
	echo "  kvring: node 2 SIGKILLed and restarted warm (same addresses, data and shm dirs); its eviction counters restarted, so the evictions undercount."
	echo "  redis:  redis-server SIGKILLed and restarted EMPTY (no persistence), its eviction counter too; missing_after_ack counts the"
	echo "          chunks the restart lost, at most one per request (a lookup stops at the first missing chunk)."
fi

[ -s "$work/kvring.json" ] && [ -s "$work/redis.json" ] || { log "a run printed no report"; exit 1; }
echo
jq -rn --slurpfile k "$work/kvring.json" --slurpfile r "$work/redis.json" '
  def f: (. * 1000 | round / 1000 | tostring);
  def ratio(a; b): if b == 0 then "n/a" else (a / b | f) + "x" end;
  def col(name; a; b; unit): "\(name)\tkvring \(a | f)\(unit)\tredis \(b | f)\(unit)\tkvring/redis \(ratio(a; b))";
  $k[0] as $k | $r[0] as $r |
  "side by side (same workload, equal budgets):",
  "corrupt kvring \($k.corrupt) redis \($r.corrupt); missing_after_ack kvring \($k.missing_after_ack) (found again \($k.missing_found_later // 0)) redis \($r.missing_after_ack) (found again \($r.missing_found_later // 0)); failed chunks kvring \($k.failed) redis \($r.failed); failed calls kvring \($k.lookup.errors + $k.get.errors + $k.put.errors) redis \($r.lookup.errors + $r.get.errors + $r.put.errors)",
  col("chunk hit ratio"; $k.chunk_hit_ratio; $r.chunk_hit_ratio; ""),
  col("put GB/s       "; $k.put.gb_per_sec; $r.put.gb_per_sec; ""),
  col("get GB/s       "; $k.get.gb_per_sec; $r.get.gb_per_sec; ""),
  col("lookup p99     "; $k.lookup.p99_ms; $r.lookup.p99_ms; "ms"),
  col("get p99        "; $k.get.p99_ms; $r.get.p99_ms; "ms"),
  col("put p99        "; $k.put.p99_ms; $r.put.p99_ms; "ms")
' | { IFS= read -r l1; IFS= read -r l2; echo "$l1"; echo "$l2"; column -t -s "$(printf '\t')"; }
