#!/bin/sh
# build-binary.sh OUT_DIR: the build stage of deploy/Dockerfile, also run
# outside a container (make image IMAGE_FROM=prebuilt, and deploy's tests).
# Writes OUT_DIR/kvring, a static binary, OUT_DIR/licenses: kvring's
# licence and those of the Mooncake trace built into the binary, and the
# empty directory OUT_DIR/empty (the image makes its working directory
# from it). VERSION=v0.4.0 sets the binary's version (kvring version).
set -eu
out=${1:?usage: build-binary.sh OUT_DIR}
cd "$(dirname "$0")/.."
mkdir -p "$out/licenses/mooncake-trace" "$out/empty"
# The commit goes in from git when the tree is a checkout (the Go toolchain
# stamps none in a git worktree or a container's copy); VERSION, when set,
# replaces the tree's version (internal/buildinfo.Release).
stamp=""
if commit=$(git rev-parse HEAD 2>/dev/null); then
	modified=false
	[ -z "$(git status --porcelain 2>/dev/null)" ] || modified=true
	stamp="-X main.commit=$commit -X main.commitTime=$(TZ=UTC git show -s --date=iso-strict-local --format=%cd HEAD) -X main.modified=$modified"
fi
[ -z "${VERSION:-}" ] || stamp="$stamp -X main.version=$VERSION"
CGO_ENABLED=0 go build -trimpath -ldflags="-s -w $stamp" -o "$out/kvring" ./cmd/kvring
cp LICENSE "$out/licenses/kvring-LICENSE"
cp loadtest/trace/testdata/LICENSE-APACHE.mooncake loadtest/trace/testdata/README.md \
	loadtest/trace/testdata/README.mooncake-FAST25.md "$out/licenses/mooncake-trace/"
