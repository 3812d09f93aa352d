#!/usr/bin/env bash
# The main job: builds attn-mlir (installing what is missing), then compiles
# every example kernel in examples/ with attn-opt and prints what came out.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/build.sh" >/dev/null
OPT="$BUILD_DIR/bin/attn-opt"
for f in "$ROOT"/examples/*.mlir; do
  echo "=== $(basename "$f")"
  "$OPT" "$f"
done
