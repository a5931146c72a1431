#!/usr/bin/env bash
# Compares the disk tier's throughput (store/disk BenchmarkWrite and
# BenchmarkRead) with fio's on the same directory, block size and queue
# depth, in one run, and prints each ratio (tier / fio):
#   writes: fio sequential direct writes (psync, iodepth 1) vs offloads
#   reads:  fio direct random reads (libaio, iodepth QD) vs Read from QD goroutines
# Usage: scripts/disk-bench.sh [DIR] (default: a temporary directory under
# /var/tmp). QDS="1 4" sets the read queue depths, BENCHTIME the Go
# benchmarks' -benchtime (default 3s), FIO_RUNTIME fio's seconds (default 10).
# Needs fio (apt-get install fio). The directory must be on the filesystem
# to measure; tmpfs refuses O_DIRECT on older kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-$(mktemp -d /var/tmp/kvring-disk-bench.XXXXXX)}"
mkdir -p "$DIR"
QDS="${QDS:-1 4}"
BENCHTIME="${BENCHTIME:-3s}"
FIO_RUNTIME="${FIO_RUNTIME:-10}"
GO="${GO:-go}"
command -v fio >/dev/null || { echo "fio is not installed (apt-get install fio)" >&2; exit 1; }
work=$(mktemp -d "$DIR/fio.XXXXXX")
trap 'rm -rf "$work"' EXIT

# gobench NAME QD: the MB/s (10^6 bytes/s) of one Go benchmark.
gobench() {
  KVRING_DISK_BENCH_DIR="$DIR" KVRING_DISK_BENCH_QD="$2" \
    $GO test -run '^$' -bench "^$1\$" -benchtime "$BENCHTIME" ./store/disk |
    awk '/MB\/s/ { for (i = 1; i <= NF; i++) if ($(i+1) == "MB/s") print $i }'
}

# fiobw ARGS...: fio's bandwidth in MB/s (10^6 bytes/s).
fiobw() {
  fio --output-format=json --directory="$work" --direct=1 --size=512M "$@" |
    python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]; print("%.2f" % ((j["read"]["bw_bytes"] + j["write"]["bw_bytes"]) / 1e6))'
}

echo "directory: $DIR ($(stat -f -c %T "$DIR")), kernel $(uname -r)"
printf '%-28s %10s %10s %7s\n' "case" "tier MB/s" "fio MB/s" "ratio"
for bs in 256KiB 2MiB; do
  fbs=${bs/KiB/k}; fbs=${fbs/MiB/m}
  tier=$(gobench "BenchmarkWrite/$bs" 1)
  f=$(fiobw --name=seqwrite --rw=write --bs="$fbs" --ioengine=psync --iodepth=1 --fallocate=native --end_fsync=1)
  rm -f "$work"/*
  printf '%-28s %10s %10s %7s\n' "write $bs seq qd1" "$tier" "$f" "$(python3 -c "print('%.2f' % ($tier / $f))")"
  for qd in $QDS; do
    tier=$(gobench "BenchmarkRead/$bs" "$qd")
    f=$(fiobw --name=randread --rw=randread --bs="$fbs" --ioengine=libaio --iodepth="$qd" --time_based --runtime="$FIO_RUNTIME")
    printf '%-28s %10s %10s %7s\n' "read $bs random qd$qd" "$tier" "$f" "$(python3 -c "print('%.2f' % ($tier / $f))")"
  done
  rm -f "$work"/*
done
