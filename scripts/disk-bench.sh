#!/usr/bin/env bash
# Compares the disk tier's throughput (store/disk BenchmarkWrite,
# BenchmarkRead and BenchmarkStoreLendFromDisk) with fio's on the same
# directory, block size and queue depth, in one run, and prints each ratio
# (tier / fio):
#   writes: fio sequential direct writes (psync, iodepth 1) vs offloads
#   reads:  fio direct random reads (libaio, iodepth QD) vs store.Lend of
#           disk-held chunks from QD goroutines, a node's get up to the bytes
#           it replies with ("get"), Tier.Read alone ("read"), and a plain
#           Go O_DIRECT pread loop over fio's own file ("pread": the reading
#           method without the tier); QD goroutines with one chunk each in
#           flight against fio's iodepth QD, payload bytes over wall time
# Writes run ROUNDS times (default 3), tier and fio one after the other, and
# print every round's ratio and their median; reads alternate within one
# process (BenchmarkGetVsFio): the host's load moves both by ±30 % within
# seconds.
# Usage: scripts/disk-bench.sh [DIR] (default: a temporary directory under
# /var/tmp). QDS="1 4" sets the read queue depths ("" none), BENCHTIME the Go
# write benchmarks' -benchtime (default 2s), FIO_RUNTIME fio's seconds
# (default 4).
# Needs fio (apt-get install fio). The directory must be on the filesystem
# to measure; tmpfs refuses O_DIRECT on older kernels.
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-$(mktemp -d /var/tmp/kvring-disk-bench.XXXXXX)}"
mkdir -p "$DIR"
QDS="${QDS-1 4}"
BENCHTIME="${BENCHTIME:-2s}"
FIO_RUNTIME="${FIO_RUNTIME:-4}"
ROUNDS="${ROUNDS:-3}"
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

# compare CASE GOBENCH QD FIOARGS...: ROUNDS rounds of the Go benchmark and
# fio, one after the other; prints each round's ratio and the median.
compare() {
  local name=$1 bench=$2 qd=$3; shift 3
  local ratios=() tiers=() fios=()
  for _ in $(seq "$ROUNDS"); do
    local tier f
    tier=$(gobench "$bench" "$qd")
    f=$(fiobw "$@")
    tiers+=("$tier"); fios+=("$f")
    ratios+=("$(python3 -c "print('%.2f' % ($tier / $f))")")
  done
  printf '%-26s %-22s %-22s %-16s %s\n' "$name" "${tiers[*]}" "${fios[*]}" "${ratios[*]}" \
    "$(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')"
}

echo "directory: $DIR ($(stat -f -c %T "$DIR")), kernel $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-26s %-22s %-22s %-16s %s\n' "case" "tier MB/s" "fio MB/s" "ratios" "median"
for bs in 256KiB 2MiB; do
  fbs=${bs/KiB/k}; fbs=${fbs/MiB/m}
  compare "write $bs seq qd1" "BenchmarkWrite/$bs" 1 \
    --name=seqwrite --rw=write --bs="$fbs" --ioengine=psync --iodepth=1 --fallocate=native --end_fsync=1 --overwrite=0
  rm -f "$work"/*
done
# Writes paired with a plain Go O_DIRECT sequential pwrite loop of the same
# block size, 64 MiB each, one after the other (BenchmarkWritePaired).
echo "writes paired with a plain pwrite loop (8 pairs of 64 MiB):"
KVRING_DISK_BENCH_DIR="$DIR" $GO test -run '^$' -bench '^BenchmarkWritePaired$' -benchtime 1x ./store/disk | grep '^BenchmarkWritePaired'
# Reads: BenchmarkGetVsFio alternates gets (store.Lend of disk-held chunks),
# Tier.Read and fio in one-second rounds within one process, so all three
# see the same load.
for qd in $QDS; do
  echo "reads at qd $qd (MB/s summed over $ROUNDS rounds of a second each):"
  KVRING_DISK_BENCH_DIR="$DIR" KVRING_DISK_BENCH_QD="$qd" KVRING_DISK_BENCH_ROUNDS="$ROUNDS" \
    $GO test -run '^$' -bench '^BenchmarkGetVsFio$' -benchtime 1x ./store/disk | grep '^BenchmarkGetVsFio'
done
