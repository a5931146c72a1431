# Pinned protobuf generator versions for kvring. Sourced by gen.sh and verify.sh.
# Changing a version here changes the generated code: regenerate (scripts/proto/gen.sh) and commit both.

# Exact `protoc --version` output expected: Debian bookworm's protobuf-compiler 3.21.12-3.
PROTOC_VERSION_WANT="libprotoc 3.21.12"
# google.golang.org/protobuf/cmd/protoc-gen-go, same version as go.mod's google.golang.org/protobuf.
PROTOC_GEN_GO_VERSION="v1.36.12"
# google.golang.org/grpc/cmd/protoc-gen-go-grpc (its own module, versioned apart from grpc-go).
PROTOC_GEN_GO_GRPC_VERSION="v1.6.2"
# Debian's protobuf-compiler-grpc package version (it ships grpc_python_plugin, which has no --version), for the
# Python service stubs in python/kvring/v1; the same gRPC release as Debian bookworm's python3-grpcio.
GRPC_PYTHON_PLUGIN_DEB_VERSION="1.51.1-3+b1"
