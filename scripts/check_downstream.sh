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
# The installed attn-opt links ROCDL code objects with the ld.lld installed
# beside it, not the build tree's (hidden meanwhile, as on a machine that
# only has the install).
TOOLKIT="$WORK/prefix/lib/attn-mlir/rocm-toolkit/llvm/bin/ld.lld"
if "$WORK/prefix/bin/attn-opt" --help | grep -q attn-lower-to-rocdl-pipeline; then
  echo "== installed attn-opt: ROCDL code object through $TOOLKIT"
  test -x "$TOOLKIT"
  cat > "$WORK/merge.mlir" <<'MLIR'
func.func @merge(%p: memref<?x2x?x16xf32>, %l: memref<?x2x?xf32>, %o: memref<?x2x16xf32>) {
  attn.merge_states partial(%p : memref<?x2x?x16xf32>) segment_lse(%l : memref<?x2x?xf32>) out(%o : memref<?x2x16xf32>)
  return
}
MLIR
  mv "$BUILD_DIR/rocm-toolkit" "$BUILD_DIR/rocm-toolkit.hidden"
  trap 'mv "$BUILD_DIR/rocm-toolkit.hidden" "$BUILD_DIR/rocm-toolkit"; rm -rf "$WORK"' EXIT
  env -u ROCM_PATH "$WORK/prefix/bin/attn-opt" "$WORK/merge.mlir" \
    --attn-lower-to-rocdl-pipeline="chip=gfx942 format=bin" > "$WORK/merge.out"
  grep -q 'bin = "' "$WORK/merge.out"
  mv "$BUILD_DIR/rocm-toolkit.hidden" "$BUILD_DIR/rocm-toolkit"
  trap 'rm -rf "$WORK"' EXIT
fi
echo "== examples/downstream against the installed package"
cmake -G Ninja -S "$ROOT/examples/downstream" -B "$WORK/build" \
  -DCMAKE_BUILD_TYPE=Release \
  -DAttnMLIR_DIR="$WORK/prefix/lib/cmake/attn-mlir" \
  -DMLIR_DIR="$LLVM_PREFIX/lib/cmake/mlir" >/dev/null
cmake --build "$WORK/build" --target check-downstream
