#!/bin/sh
# check-image.sh: what CI checks of the container image. Installs buildah
# (Debian) if no builder is there, builds the image from a binary compiled
# on this machine (IMAGE_FROM=prebuilt: the registry holding golang images
# cannot be reached from CI), checks the user, working directory and
# entrypoint, runs the binary inside it (with buildah: `kvring serve` as the
# image's user in its working directory, until it is ready), and removes the
# image.
set -eu
cd "$(dirname "$0")/.."
if ! command -v buildah >/dev/null 2>&1 && ! command -v podman >/dev/null 2>&1; then
	apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq buildah >/dev/null
fi
IMAGE=localhost/kvring:ci-check
export IMAGE IMAGE_FROM=prebuilt CONTAINER_BUILDER=buildah
command -v buildah >/dev/null 2>&1 || CONTAINER_BUILDER=podman
trap 'rm -rf .image; $CONTAINER_BUILDER rmi -f "$IMAGE" >/dev/null 2>&1 || true' EXIT
deploy/build-image.sh
config=$($CONTAINER_BUILDER inspect --type image --format '{{.OCIv1.Config.User}} {{.OCIv1.Config.WorkingDir}} {{.OCIv1.Config.Entrypoint}} {{.OCIv1.Config.Cmd}}' "$IMAGE")
[ "$config" = "65532:65532 /var/lib/kvring [/kvring] [serve]" ] || { echo "image config: $config" >&2; exit 1; }
if [ "$CONTAINER_BUILDER" = buildah ]; then
	ctr=$(buildah from "$IMAGE")
	trap 'rm -rf .image; buildah rm "$ctr" >/dev/null 2>&1; buildah rmi -f "$IMAGE" >/dev/null 2>&1 || true' EXIT
	# Whole outputs first: grep -q leaving early made buildah fail on a broken pipe now and then.
	out=$(buildah run --isolation chroot "$ctr" /kvring serve --help)
	echo "$out" | grep -q -- '--join' || { echo "serve --help in the image: $out" >&2; exit 1; }
	out=$(buildah run --isolation chroot "$ctr" /kvring bench --help)
	echo "$out" | grep -q 'built into the binary' || { echo "bench --help in the image: $out" >&2; exit 1; }
	# The default command, as the image's user in its working directory (./kvring-data there), on ports the
	# kernel picks (the host's network) and with its segments in the container (not the host's /dev/shm).
	log=$(mktemp)
	buildah run --isolation chroot "$ctr" /kvring serve --grpc-addr 127.0.0.1:0 --gossip-addr 127.0.0.1:0 \
		--admin-addr 127.0.0.1:0 --shm-dir /var/lib/kvring/shm --memory-limit 16MiB >"$log" 2>&1 &
	run=$!
	for _ in $(seq 1 300); do
		grep -q 'msg="node ready"' "$log" && break
		kill -0 "$run" 2>/dev/null || break
		sleep 0.1
	done
	kill -TERM "$run" 2>/dev/null || true
	wait "$run" || true
	if ! grep -q 'msg="node ready"' "$log" || ! grep -q 'phase="local socket".* path=kvring-data/kvring.sock' "$log"; then
		echo "kvring serve did not start in the image as its user:" >&2
		cat "$log" >&2
		rm -f "$log"
		exit 1
	fi
	rm -f "$log"
fi
echo "image check: ok ($($CONTAINER_BUILDER images --format '{{.Size}}' "$IMAGE" | head -1))"
