#!/bin/sh
# Generates the Python engine's gRPC stubs into build/gen (git-ignored) with Debian's protoc
# (protobuf-compiler) and grpc_python_plugin (protobuf-compiler-grpc), from the project's
# proto/openengine/v1/*.proto and our own grpc.health.v1 proto. google/protobuf/struct.proto
# comes from libprotobuf-dev (/usr/include). Not python3-grpc-tools: its protoc 3.5.1 rejects
# proto3 `optional`.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
plugin=$(command -v grpc_python_plugin) || { echo "build.sh: grpc_python_plugin not found (apt-get install protobuf-compiler-grpc)" >&2; exit 1; }
command -v protoc >/dev/null || { echo "build.sh: protoc not found (apt-get install protobuf-compiler)" >&2; exit 1; }
[ -f /usr/include/google/protobuf/struct.proto ] || { echo "build.sh: no google/protobuf/struct.proto (apt-get install libprotobuf-dev)" >&2; exit 1; }
out="$here/build/gen"
rm -rf "$out.tmp" && mkdir -p "$out.tmp"
protoc -I "$repo/proto" -I /usr/include -I "$here/proto" \
  --python_out="$out.tmp" --grpc_python_out="$out.tmp" --plugin=protoc-gen-grpc_python="$plugin" \
  openengine/v1/common.proto openengine/v1/control.proto openengine/v1/encoder.proto openengine/v1/inference.proto \
  grpc_health_v1/health.proto
rm -rf "$out" && mv "$out.tmp" "$out"
echo "stubs in ${out#$repo/}"
