#!/bin/sh
# build-image.sh: `make image`. Builds deploy/Dockerfile with whichever of
# docker (with a running daemon), podman or buildah is installed
# (CONTAINER_BUILDER to choose), tagged
# IMAGE (default kvring:latest).
#   IMAGE_FROM=source    (default) compile inside golang:$GO_VERSION: pulls it
#   IMAGE_FROM=prebuilt  compile on this machine (deploy/build-binary.sh) and
#                        build FROM scratch: pulls nothing
set -eu
cd "$(dirname "$0")/.."
IMAGE=${IMAGE:-kvring:latest}
IMAGE_FROM=${IMAGE_FROM:-source}
builder=${CONTAINER_BUILDER:-}
if [ -z "$builder" ]; then
	for b in docker podman buildah; do
		command -v "$b" >/dev/null 2>&1 || continue
		# A docker client without a daemon to talk to cannot build.
		if [ "$b" = docker ] && ! docker info >/dev/null 2>&1; then
			echo "make image: docker is installed but its daemon does not answer; trying the others" >&2
			continue
		fi
		builder=$b
		break
	done
fi
if [ -z "$builder" ]; then
	echo "make image: no container builder found: install docker, podman or buildah (apt-get install buildah)," >&2
	echo "or build the binary alone with deploy/build-binary.sh OUT_DIR" >&2
	exit 1
fi
case $IMAGE_FROM in
source) target=image ;;
prebuilt)
	target=prebuilt
	rm -rf .image
	deploy/build-binary.sh .image
	;;
*)
	echo "make image: IMAGE_FROM must be source or prebuilt, got '$IMAGE_FROM'" >&2
	exit 2
	;;
esac
echo "make image: $builder, target $target, tag $IMAGE" >&2
case $builder in
buildah)
	# --isolation chroot: no container runtime daemon or user namespaces needed.
	buildah bud --isolation chroot --layers=false -f deploy/Dockerfile --target "$target" -t "$IMAGE" .
	;;
*)
	"$builder" build -f deploy/Dockerfile --target "$target" -t "$IMAGE" .
	;;
esac
