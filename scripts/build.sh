#!/usr/bin/env bash
# Installs what the build needs (Debian's LLVM/MLIR 22, CMake, Ninja) when it
# is missing, then configures and builds attn-mlir into build/ (incremental
# on a second run).
#
#   scripts/build.sh            # attn-opt, libraries and generated docs
#   BUILD_DIR=out scripts/build.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
LLVM_PREFIX="${LLVM_PREFIX:-/usr/lib/llvm-22}"
DEB_PACKAGES=(llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools lld-22 liblld-22-dev cmake ninja-build)

missing=()
for pkg in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# Prefer clang when present (faster to compile LLVM-heavy headers); g++ works.
if [ -z "${CXX:-}" ]; then
  if command -v clang++ >/dev/null; then export CC=clang CXX=clang++; else export CC=gcc CXX=g++; fi
fi

if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  echo "== configuring $BUILD_DIR"
  cmake -G Ninja -S "$ROOT" -B "$BUILD_DIR" \
    -DCMAKE_BUILD_TYPE=Release \
    -DMLIR_DIR="$LLVM_PREFIX/lib/cmake/mlir" \
    -DLLVM_EXTERNAL_LIT="$LLVM_PREFIX/bin/lit" >/dev/null
fi
echo "== building"
ninja -C "$BUILD_DIR" all mlir-doc
echo "== built $BUILD_DIR/bin/attn-opt (dialect reference: $BUILD_DIR/docs/attn/AttnDialect.md)"
