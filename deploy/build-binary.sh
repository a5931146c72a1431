#!/bin/sh
# build-binary.sh OUT_DIR: the build stage of deploy/Dockerfile, also run
# outside a container (make image IMAGE_FROM=prebuilt, and deploy's tests).
# Writes OUT_DIR/kvring, a static binary, and OUT_DIR/licenses: kvring's
# licence and those of the Mooncake trace built into the binary.
set -eu
out=${1:?usage: build-binary.sh OUT_DIR}
cd "$(dirname "$0")/.."
mkdir -p "$out/licenses/mooncake-trace"
CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$out/kvring" ./cmd/kvring
cp LICENSE "$out/licenses/kvring-LICENSE"
cp loadtest/trace/testdata/LICENSE-APACHE.mooncake loadtest/trace/testdata/README.md \
	loadtest/trace/testdata/README.mooncake-FAST25.md "$out/licenses/mooncake-trace/"
