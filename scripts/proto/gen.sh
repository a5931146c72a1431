#!/usr/bin/env bash
# Regenerates the Go and Python code for proto/kvring/v1/*.proto with pinned generators (see versions.sh).
#
# Usage: scripts/proto/gen.sh [OUT_ROOT [PY_OUT_ROOT]]
#   OUT_ROOT defaults to <repo>/proto; files land in OUT_ROOT/kvring/v1/*.pb.go (paths=source_relative).
#   PY_OUT_ROOT defaults to <repo>/python; files land in PY_OUT_ROOT/kvring/v1/*_pb2.py, *_pb2.pyi and
#   *_pb2_grpc.py (the Python package kvring, python/, imports them as kvring.v1).
#   verify.sh passes temporary directories.
#
# Environment:
#   PROTOC          protoc binary to use (default: protoc on PATH). Its --version must match versions.sh.
#   PROTO_BIN_DIR   where protoc-gen-go and protoc-gen-go-grpc are installed (default: <repo>/.bin).
#   GRPC_PYTHON_PLUGIN  gRPC's Python plugin (default: /usr/bin/grpc_python_plugin, Debian's
#                   protobuf-compiler-grpc; its package version must match versions.sh).
#
# If protoc or the gRPC Python plugin is missing and apt-get is available as root, protobuf-compiler and
# protobuf-compiler-grpc are installed from Debian.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=versions.sh
. "$here/versions.sh"

out_root="${1:-$root/proto}"
py_out_root="${2:-$root/python}"
grpc_python_plugin="${GRPC_PYTHON_PLUGIN:-/usr/bin/grpc_python_plugin}"
bin_dir="${PROTO_BIN_DIR:-$root/.bin}"
protoc="${PROTOC:-protoc}"

die() { echo "proto/gen: $*" >&2; exit 1; }

# --- protoc -----------------------------------------------------------------------------------------------------
if ! command -v "$protoc" >/dev/null 2>&1; then
	if [ "$protoc" = protoc ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "proto/gen: protoc not found; installing Debian's protobuf-compiler" >&2
		apt-get update -qq >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler >&2
	else
		die "protoc not found: install Debian's protobuf-compiler (apt-get install protobuf-compiler) or set PROTOC"
	fi
fi
protoc_got="$("$protoc" --version 2>&1 || true)"
if [ "$protoc_got" != "$PROTOC_VERSION_WANT" ]; then
	die "protoc version mismatch: want \"$PROTOC_VERSION_WANT\", got \"$protoc_got\" from $(command -v "$protoc").
  The generated code records the protoc version, so a different protoc makes verify fail.
  Use Debian bookworm's protobuf-compiler (3.21.12) or point PROTOC at that build."
fi

# --- gRPC's Python plugin (Debian's protobuf-compiler-grpc) -------------------------------------------------------
if [ ! -x "$grpc_python_plugin" ]; then
	if [ -z "${GRPC_PYTHON_PLUGIN:-}" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "proto/gen: grpc_python_plugin not found; installing Debian's protobuf-compiler-grpc" >&2
		apt-get update -qq >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq protobuf-compiler-grpc >&2
	else
		die "$grpc_python_plugin not found: install Debian's protobuf-compiler-grpc or set GRPC_PYTHON_PLUGIN"
	fi
fi
# The plugin has no --version: when it is Debian's, the package version says which it is.
if [ -z "${GRPC_PYTHON_PLUGIN:-}" ] && command -v dpkg-query >/dev/null 2>&1; then
	grpc_py_got="$(dpkg-query -W -f='${Version}' protobuf-compiler-grpc 2>/dev/null || true)"
	[ "$grpc_py_got" = "$GRPC_PYTHON_PLUGIN_DEB_VERSION" ] ||
		die "protobuf-compiler-grpc version mismatch: want \"$GRPC_PYTHON_PLUGIN_DEB_VERSION\", got \"$grpc_py_got\""
fi

# --- Go plugins, installed into bin_dir (no global state) --------------------------------------------------------
# ensure_plugin <binary> <package> <version> <expected --version output>
ensure_plugin() {
	local name="$1" pkg="$2" version="$3" want="$4" got=""
	if [ -x "$bin_dir/$name" ]; then
		got="$("$bin_dir/$name" --version 2>&1 || true)"
	fi
	if [ "$got" != "$want" ]; then
		echo "proto/gen: installing $pkg@$version into $bin_dir" >&2
		mkdir -p "$bin_dir"
		# @version installs ignore the repository's go.mod; GOFLAGS/GOWORK are cleared so local settings
		# (e.g. -mod=vendor) cannot interfere.
		(cd "$root" && GOBIN="$bin_dir" GOFLAGS= GOWORK=off go install "$pkg@$version") ||
			die "cannot install $pkg@$version"
		got="$("$bin_dir/$name" --version 2>&1 || true)"
		[ "$got" = "$want" ] || die "$bin_dir/$name --version: want \"$want\", got \"$got\""
	fi
}
ensure_plugin protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go \
	"$PROTOC_GEN_GO_VERSION" "protoc-gen-go $PROTOC_GEN_GO_VERSION"
ensure_plugin protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc \
	"$PROTOC_GEN_GO_GRPC_VERSION" "protoc-gen-go-grpc ${PROTOC_GEN_GO_GRPC_VERSION#v}"

# --- generate ---------------------------------------------------------------------------------------------------
cd "$root/proto"
mapfile -t protos < <(LC_ALL=C find kvring/v1 -maxdepth 1 -name '*.proto' | LC_ALL=C sort)
[ "${#protos[@]}" -gt 0 ] || die "no .proto files under $root/proto/kvring/v1"

mkdir -p "$out_root/kvring/v1"
# Remove stale generated files (e.g. of a deleted .proto); hand-written files such as doc.go stay.
find "$out_root/kvring/v1" -maxdepth 1 -name '*.pb.go' -delete

"$protoc" \
	-I . \
	--plugin=protoc-gen-go="$bin_dir/protoc-gen-go" \
	--plugin=protoc-gen-go-grpc="$bin_dir/protoc-gen-go-grpc" \
	--go_out="$out_root" --go_opt=paths=source_relative \
	--go-grpc_out="$out_root" --go-grpc_opt=paths=source_relative \
	"${protos[@]}"

echo "proto/gen: generated $(cd "$out_root/kvring/v1" && ls -- *.pb.go | tr '\n' ' ')in $out_root/kvring/v1" >&2

# Python: protoc's own generator (messages and .pyi type stubs) and gRPC's plugin (service stubs). protoc 3.21's
# output runs on python3-protobuf >= 3.20 (Debian bookworm: 4.21.12) and embeds no runtime version check.
mkdir -p "$py_out_root/kvring/v1"
find "$py_out_root/kvring/v1" -maxdepth 1 \( -name '*_pb2.py' -o -name '*_pb2.pyi' -o -name '*_pb2_grpc.py' \) -delete
"$protoc" \
	-I . \
	--plugin=protoc-gen-grpc_python="$grpc_python_plugin" \
	--python_out="$py_out_root" --pyi_out="$py_out_root" --grpc_python_out="$py_out_root" \
	"${protos[@]}"

echo "proto/gen: generated $(cd "$py_out_root/kvring/v1" && ls -- *_pb2* | tr '\n' ' ')in $py_out_root/kvring/v1" >&2
