#!/usr/bin/env bash
# neighbour-compare.sh runs the noisy-neighbour benchmark (loadtest/neighbour)
# against two builds of kvring in turn, alternating them (old, new, new, old,
# old, new, ...), so that both meet the same load drifts, and prints a summary
# per attack: the victim's stored share and its put and lookup p99 as a ratio
# to its runs alone, per build (the median over the runs), and new ÷ old.
# The same neighbour program (built from this checkout) drives both.
#
# Usage: loadtest/neighbour-compare.sh OLD_REV [NEW_REV]
#   OLD_REV, NEW_REV  git revisions to build (NEW_REV: default the checkout
#                     as it is, uncommitted changes included)
# Environment:
#   RUNS       runs of each build (default 3)
#   OUT        directory for the builds and each run's JSON (default a
#              temporary directory, removed at the end unless OUT is set)
#   NEIGHBOUR_FLAGS  extra flags for every run (e.g. --attacks beginless)
set -euo pipefail
old_rev=${1:?usage: loadtest/neighbour-compare.sh OLD_REV [NEW_REV]}
new_rev=${2:-}
runs=${RUNS:-3}
root=$(git rev-parse --show-toplevel)
out=${OUT:-}
if [ -z "$out" ]; then
	out=$(mktemp -d /tmp/kvring-neighbour-compare-XXXXXX)
	trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"

build() { # build REV BIN: kvring at REV (or the checkout when REV is empty)
	local rev=$1 bin=$2
	if [ -z "$rev" ]; then
		(cd "$root" && go build -o "$bin" ./cmd/kvring)
		return
	fi
	local src="$out/src-$(basename "$bin")"
	rm -rf "$src" && mkdir -p "$src"
	git -C "$root" archive "$rev" | tar -x -C "$src"
	(cd "$src" && go build -o "$bin" ./cmd/kvring)
	rm -rf "$src"
}
build "$old_rev" "$out/kvring-old"
build "$new_rev" "$out/kvring-new"
(cd "$root" && go build -o "$out/neighbour" ./loadtest/neighbour)

order=(old new)
for i in $(seq 1 "$runs"); do
	for b in "${order[@]}"; do
		echo "run $i: $b ($(date -u +%H:%M:%S), load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
		# shellcheck disable=SC2086
		"$out/neighbour" --kvring "$out/kvring-$b" --json ${NEIGHBOUR_FLAGS:-} >"$out/run$i-$b.json"
	done
	order=("${order[1]}" "${order[0]}") # alternate which goes first
done

python3 - "$out" <<'PY'
import glob, json, statistics, sys
out = sys.argv[1]
runs = {"old": [], "new": []}
for f in sorted(glob.glob(out + "/run*-*.json")):
    runs[f.rsplit("-", 1)[1][:-5]].append(json.load(open(f)))
print("%-10s %17s %26s %26s" % ("attack", "stored old / new", "put p99 x alone old/new", "lookup p99 x alone old/new"))
attacks = [r["attack"] for r in runs["new"][0] if not r["attack"].startswith("alone")]
for a in attacks:
    f = {b: [r for rs in runs[b] for r in rs if r["attack"] == a] for b in runs}
    med = lambda b, k: statistics.median(r[k] for r in f[b])
    stored = {b: min(r["stored_share"] for r in f[b]) for b in f}
    p = {b: med(b, "put_p99_ratio") for b in f}
    l = {b: med(b, "lookup_p99_ratio") for b in f}
    print("%-10s %7.2f%% / %6.2f%% %8.2f / %5.2f (%5.2fx) %8.2f / %5.2f (%5.2fx)" % (
        a, 100 * stored["old"], 100 * stored["new"], p["old"], p["new"], p["new"] / p["old"], l["old"], l["new"], l["new"] / l["old"]))
PY
