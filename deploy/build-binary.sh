#!/bin/sh
# build-binary.sh OUT_DIR: the build stage of deploy/Dockerfile, also run
# outside a container (make image IMAGE_FROM=prebuilt, and deploy's tests).
# Writes OUT_DIR/kvring, a static binary, OUT_DIR/licenses: kvring's
# licence and those of the Mooncake trace built into the binary, and the
# empty directory OUT_DIR/empty (the image makes its working directory
# from it).
set -eu
out=${1:?usage: build-binary.sh OUT_DIR}
cd "$(dirname "$0")/.."
mkdir -p "$out/licenses/mooncake-trace" "$out/empty"
CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$out/kvring" ./cmd/kvring
cp LICENSE "$out/licenses/kvring-LICENSE"
cp loadtest/trace/testdata/LICENSE-APACHE.mooncake loadtest/trace/testdata/README.md \
	loadtest/trace/testdata/README.mooncake-FAST25.md "$out/licenses/mooncake-trace/"
