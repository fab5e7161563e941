#!/usr/bin/env bash
# The main job on the bundled default: builds the tools, then verifies the
# bundled one-layer Qwen2-architecture graph (examples/tiny-qwen2.mlir) with
# shard-opt and prints it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/build.sh" build >/dev/null
echo "== shard-opt --nn-verify examples/tiny-qwen2.mlir =="
"$root/build/bin/shard-opt" --nn-verify "$root/examples/tiny-qwen2.mlir"
