#!/usr/bin/env bash
# api/generate.sh — regenerates the Go code of idmint's gRPC API from
# api/idmintv1/idmint.proto: the messages (protoc-gen-go) and the service
# glue (protoc-gen-go-grpc), with the plugin versions pinned as tools in
# go.mod and Debian's protoc (apt-get install protobuf-compiler).
#   bash api/generate.sh        # rewrite the files in api/idmintv1
#   bash api/generate.sh DIR    # write them under DIR instead (the staleness test)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
out=${1:-.}
command -v protoc >/dev/null || { echo "generate.sh: protoc not found; install it: apt-get install protobuf-compiler" >&2; exit 1; }
mkdir -p "$out"
protoc \
	--plugin=protoc-gen-go="$(go tool -n protoc-gen-go)" \
	--plugin=protoc-gen-go-grpc="$(go tool -n protoc-gen-go-grpc)" \
	--go_out="$out" --go_opt=paths=source_relative \
	--go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
	idmintv1/idmint.proto
