#!/usr/bin/env bash
# The disk tier's hit ratio on the built-in Mooncake trace: one node with
# --memory-limit MEM and a disk tier of --disk-limit DISK (regions of
# REGION), replayed whole by kvring bench at 512-token chunks of 32 B per
# token (16 KiB chunks, 43,925 distinct), as docs/benchmarks.md records:
#   MEM=34MiB DISK=1GiB   scripts/disk-hit-ratio.sh   # DRAM 5 %, disk >= 100 %
#   MEM=34MiB DISK=176MiB REGION=8MiB scripts/disk-hit-ratio.sh   # disk 25 %
#   MEM=205MiB DISK= scripts/disk-hit-ratio.sh        # DRAM 30 % alone (LRU)
# Prints the bench's report, then the node's disk stats. DIR (default a
# temporary directory under /var/tmp) holds the node's data, its disk tier
# and its log; its shared memory goes in a fresh /dev/shm directory, removed
# at the end. KVRING (default: go build ./cmd/kvring) is the binary;
# BENCH_ARGS adds flags to kvring bench (--max-requests 200: a short run).
set -euo pipefail
cd "$(dirname "$0")/.."
MEM="${MEM:-34MiB}"
DISK="${DISK-1GiB}"
REGION="${REGION:-}"
DIR="${DIR:-$(mktemp -d /var/tmp/kvring-hit-ratio.XXXXXX)}"
mkdir -p "$DIR"
KVRING="${KVRING:-$DIR/kvring}"
[ -x "$KVRING" ] || go build -o "$KVRING" ./cmd/kvring
shm=$(mktemp -d /dev/shm/kvring-hit-ratio.XXXXXX)
flags=(--grpc-addr 127.0.0.1:0 --admin-addr 127.0.0.1:0 --gossip-addr 127.0.0.1:0 --resp-addr 127.0.0.1:0
  --data-dir "$DIR/data" --shm-dir "$shm" --socket "" --memory-limit "$MEM" --log-level info)
if [ -n "$DISK" ]; then
  rm -rf "$DIR/disk"
  flags+=(--disk-dir "$DIR/disk" --disk-limit "$DISK")
  [ -n "$REGION" ] && flags+=(--disk-region-size "$REGION")
fi
rm -rf "$DIR/data"
"$KVRING" serve "${flags[@]}" >"$DIR/node.log" 2>&1 &
node=$!
trap 'kill "$node" 2>/dev/null; wait "$node" 2>/dev/null; rm -rf "$shm"' EXIT
for _ in $(seq 600); do
  grep -q 'msg="node ready"' "$DIR/node.log" && break
  kill -0 "$node" 2>/dev/null || { cat "$DIR/node.log" >&2; exit 1; }
  sleep 0.1
done
ready=$(grep 'msg="node ready"' "$DIR/node.log")
grpc=$(sed -E 's/.* grpc=([^ ]+).*/\1/' <<<"$ready")
admin=$(sed -E 's/.* admin=([^ ]+).*/\1/' <<<"$ready")
echo "node: memory $MEM, disk ${DISK:-off}${REGION:+, regions of $REGION}; load $(cut -d' ' -f1-3 /proc/loadavg)"
"$KVRING" bench --addr "$grpc" --admin "$admin" --chunk-tokens 512 --bytes-per-token 32 --speedup -1 --engines 4 --progress 1m ${BENCH_ARGS:-}
[ -n "$DISK" ] && curl -s "http://$admin/v1/stats" | python3 -c 'import json,sys; d=json.load(sys.stdin).get("disk"); print(json.dumps(d, indent=1))'
echo "load $(cut -d' ' -f1-3 /proc/loadavg)"
