#!/usr/bin/env bash
# Regenerate actorrt/rpc/ from protos/. tests/unit/test_protos.py fails when the two disagree.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
python -m grpc_tools.protoc -I protos --python_out="$out" --grpc_python_out="$out" --pyi_out="$out" protos/actorrt/*.proto
# Generated modules import each other as `actorrt.x_pb2`, but they live in `actorrt.rpc`.
for f in "$out"/actorrt/*.py "$out"/actorrt/*.pyi; do
  sed -i 's/^from actorrt import \(.*_pb2\)/from actorrt.rpc import \1/' "$f"
done
rm -f actorrt/rpc/*_pb2*.py actorrt/rpc/*_pb2*.pyi
cp "$out"/actorrt/* actorrt/rpc/
