#!/usr/bin/env bash
# Regenerates the Go code of the wire schema (proto/openengine/v1/*.pb.go)
# from proto/openengine/v1/*.proto with pinned tool versions. Run from
# anywhere; `make proto` calls it.
#
# Tools are built from the Go module proxy at the versions below, into a
# cache folder keyed by those versions (so a version bump rebuilds them):
#   - protoc-gen-go must match google.golang.org/protobuf in go.mod, or the
#     generated code may not compile against the runtime.
#   - protoc-gen-go-grpc v1.6.x emits code for grpc >= 1.64.
#   - buf compiles the .proto files (no dependency on the system protoc).
#
# Environment:
#   BATON_PROTO_TOOLS  folder for the built tools
#                      (default ${XDG_CACHE_HOME:-$HOME/.cache}/baton/proto-tools/<versions>)
#   BATON_PROTO_COMPILER=protoc  use the system protoc (e.g. /usr/bin/protoc
#                      from Debian's protobuf-compiler) instead of buf; the
#                      output differs only in the "protoc" version comment.
#
# After regenerating, `go test ./proto/...` checks the result against the
# .proto files (descriptor_test.go).
set -euo pipefail

PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2
BUF_VERSION=v1.75.0

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo_root"

compiler="${BATON_PROTO_COMPILER:-buf}"
if [[ "$compiler" != buf && "$compiler" != protoc ]]; then
  echo "generate.sh: unknown BATON_PROTO_COMPILER=$compiler (want buf or protoc)" >&2
  exit 2
fi
versions="go-${PROTOC_GEN_GO_VERSION}_grpc-${PROTOC_GEN_GO_GRPC_VERSION}"
if [[ "$compiler" == buf ]]; then
  versions="${versions}_buf-${BUF_VERSION}"
fi
tools="${BATON_PROTO_TOOLS:-${XDG_CACHE_HOME:-$HOME/.cache}/baton/proto-tools/$versions}"
mkdir -p "$tools"

# install PACKAGE@VERSION BINARY: builds BINARY into $tools unless present.
# Runs outside the repo so baton's go.mod does not affect the tool build.
install() {
  local pkg="$1" bin="$2"
  if [[ ! -x "$tools/$bin" ]]; then
    echo "generate.sh: building $pkg" >&2
    (cd / && GOBIN="$tools" GOFLAGS= go install "$pkg")
  fi
}

install "google.golang.org/protobuf/cmd/protoc-gen-go@${PROTOC_GEN_GO_VERSION}" protoc-gen-go
install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@${PROTOC_GEN_GO_GRPC_VERSION}" protoc-gen-go-grpc
if [[ "$compiler" == buf ]]; then
  install "github.com/bufbuild/buf/cmd/buf@${BUF_VERSION}" buf
fi
export PATH="$tools:$PATH"

# Generate into a scratch folder first, so a failure leaves the committed
# files untouched.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/proto"

case "$compiler" in
  buf)
    "$tools/buf" generate --template buf.gen.yaml --output "$scratch"
    ;;
  protoc)
    protoc="${PROTOC:-/usr/bin/protoc}"
    # shellcheck disable=SC2046
    "$protoc" -I proto \
      --go_out="$scratch/proto" --go_opt=paths=source_relative \
      --go-grpc_out="$scratch/proto" --go-grpc_opt=paths=source_relative \
      $(cd proto && find . -name '*.proto' | sed 's|^\./||' | sort | sed 's|^|proto/|')
    ;;
esac

if gofmt -l "$scratch/proto" | grep .; then
  echo "generate.sh: generated code is not gofmt-clean" >&2
  exit 1
fi

# Replace the old output; removing first means a deleted .proto leaves no
# stale Go file behind.
find proto -name '*.pb.go' -delete
(cd "$scratch/proto" && find . -name '*.pb.go' -print0) |
  while IFS= read -r -d '' f; do
    mkdir -p "proto/$(dirname "$f")"
    cp "$scratch/proto/$f" "proto/$f"
  done
echo "generate.sh: regenerated $(find proto -name '*.pb.go' | wc -l) files with $compiler" >&2
