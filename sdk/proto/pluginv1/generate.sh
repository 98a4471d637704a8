#!/usr/bin/env bash
# Regenerates the Go and Python code of the dsh plugin protocol from the
# .proto files beside this script. Needs protoc (Debian: protobuf-compiler)
# and the Go generators at the versions go.mod pins:
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
# The generated files are committed; CI regenerates and fails on a diff.
set -euo pipefail
cd "$(dirname "$0")"
PATH="$(go env GOPATH)/bin:$PATH"
protoc --go_out=. --go_opt=paths=source_relative \
  --go-grpc_out=. --go-grpc_opt=paths=source_relative \
  plugin.proto events.proto
# The Python classes live in the SDK's package, which imports them
# relative to itself (protoc writes a top-level import).
py=../../../sdk/python/dsh_plugin/proto
protoc --python_out="$py" plugin.proto events.proto
sed -i 's/^import events_pb2 as/from . import events_pb2 as/' "$py/plugin_pb2.py"
