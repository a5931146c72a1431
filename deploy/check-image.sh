#!/bin/sh
# check-image.sh: what CI checks of the container image. Installs buildah
# (Debian) if no builder is there, builds the image from a binary compiled
# on this machine (IMAGE_FROM=prebuilt: the registry holding golang images
# cannot be reached from CI), runs the binary inside it, checks the user and
# the entrypoint, and removes the image.
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
config=$($CONTAINER_BUILDER inspect --type image --format '{{.OCIv1.Config.User}} {{.OCIv1.Config.Entrypoint}} {{.OCIv1.Config.Cmd}}' "$IMAGE")
[ "$config" = "65532:65532 [/kvring] [serve]" ] || { echo "image config: $config" >&2; exit 1; }
if [ "$CONTAINER_BUILDER" = buildah ]; then
	ctr=$(buildah from "$IMAGE")
	buildah run --isolation chroot "$ctr" /kvring serve --help | grep -q -- '--join'
	buildah run --isolation chroot "$ctr" /kvring bench --help | grep -q 'built into the binary'
	buildah rm "$ctr" >/dev/null
fi
echo "image check: ok ($($CONTAINER_BUILDER images --format '{{.Size}}' "$IMAGE" | head -1))"
