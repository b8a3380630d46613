#!/usr/bin/env bash
# Regenerates the Go code from the .proto sources (make gen). Needs protoc
# (Debian: protobuf-compiler); protoc-gen-go is pinned in go.mod as a tool.
set -euo pipefail
cd "$(dirname "$0")"
plugin="$(mktemp -d)"
trap 'rm -rf "$plugin"' EXIT
go build -o "$plugin/protoc-gen-go" google.golang.org/protobuf/cmd/protoc-gen-go
find sovereign -name '*.pb.go' -delete
protoc --plugin=protoc-gen-go="$plugin/protoc-gen-go" --go_out=. --go_opt=paths=source_relative \
  $(find sovereign -name '*.proto' | sort)
