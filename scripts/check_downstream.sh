#!/usr/bin/env bash
# Installs the build into a temporary prefix, then configures and builds
# examples/downstream (an out-of-tree project: find_package(AttnMLIR), its
# own opt tool) against that prefix alone and runs its lit test: what a
# compiler adopting attn-mlir does.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
LLVM_PREFIX="${LLVM_PREFIX:-/usr/lib/llvm-22}"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
echo "== install into $WORK/prefix"
cmake --install "$BUILD_DIR" --prefix "$WORK/prefix" >/dev/null
echo "== examples/downstream against the installed package"
cmake -G Ninja -S "$ROOT/examples/downstream" -B "$WORK/build" \
  -DCMAKE_BUILD_TYPE=Release \
  -DAttnMLIR_DIR="$WORK/prefix/lib/cmake/attn-mlir" \
  -DMLIR_DIR="$LLVM_PREFIX/lib/cmake/mlir" >/dev/null
cmake --build "$WORK/build" --target check-downstream
