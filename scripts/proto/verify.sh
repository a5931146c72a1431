#!/usr/bin/env bash
# Fails if the committed generated code in proto/kvring/v1 (Go) or python/kvring/v1 (Python) differs from a fresh
# generation with the pinned generators. Regenerates into a temporary directory; never touches the working tree.
#
# Usage: scripts/proto/verify.sh   (same environment as gen.sh)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
committed="$root/proto/kvring/v1"
py_committed="$root/python/kvring/v1"

tmp="$(mktemp -d "${TMPDIR:-/tmp}/kvring-proto-verify.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

"$here/gen.sh" "$tmp/go" "$tmp/py"
fresh="$tmp/go/kvring/v1"
py_fresh="$tmp/py/kvring/v1"

list() { (cd "$1" && LC_ALL=C find . -maxdepth 1 -name '*.pb.go' | LC_ALL=C sort); }
pylist() {
	(cd "$1" && LC_ALL=C find . -maxdepth 1 \( -name '*_pb2.py' -o -name '*_pb2.pyi' -o -name '*_pb2_grpc.py' \) |
		LC_ALL=C sort)
}

status=0
if ! diff <(list "$committed") <(list "$fresh") >"$tmp/files.diff"; then
	echo "proto/verify: the set of generated files differs ('<' committed only, '>' fresh only):" >&2
	cat "$tmp/files.diff" >&2
	status=1
fi
while read -r f; do
	[ -f "$committed/$f" ] || continue
	if ! diff -u "$committed/$f" "$fresh/$f" >"$tmp/file.diff"; then
		echo "proto/verify: proto/kvring/v1/${f#./} differs from a fresh generation:" >&2
		head -n 60 "$tmp/file.diff" >&2
		status=1
	fi
done < <(list "$fresh")

mkdir -p "$py_committed"
if ! diff <(pylist "$py_committed") <(pylist "$py_fresh") >"$tmp/files.diff"; then
	echo "proto/verify: the set of generated Python files differs ('<' committed only, '>' fresh only):" >&2
	cat "$tmp/files.diff" >&2
	status=1
fi
while read -r f; do
	[ -f "$py_committed/$f" ] || continue
	if ! diff -u "$py_committed/$f" "$py_fresh/$f" >"$tmp/file.diff"; then
		echo "proto/verify: python/kvring/v1/${f#./} differs from a fresh generation:" >&2
		head -n 60 "$tmp/file.diff" >&2
		status=1
	fi
done < <(pylist "$py_fresh")

if [ "$status" -ne 0 ]; then
	echo "proto/verify: FAIL: generated code in proto/kvring/v1 or python/kvring/v1 is stale or hand-edited." >&2
	echo "proto/verify: run scripts/proto/gen.sh (make proto) and commit the result." >&2
	exit 1
fi
echo "proto/verify: OK: proto/kvring/v1 and python/kvring/v1 match a fresh generation" >&2
