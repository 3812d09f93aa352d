#!/usr/bin/env bash
# Builds the wheel (`pip wheel .`: scikit-build-core, LLVM/MLIR/LLD linked
# statically), checks that its binaries need nothing but glibc, installs it
# into a fresh virtualenv, and from a directory outside the checkout, with
# no access to build/, PATH's attn-opt, Debian's LLVM tools or a C compiler,
# runs `python -m attn_mlir info`, the examples and a test subset (the
# venv's bin/ is all of PATH).
#
#   scripts/check_wheel.sh          (scripts/test.sh runs it; CI too)
# Environment: WHEEL_DIR (default build/dist), WHEEL_VENV (a temporary one).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
WHEEL_DIR="${WHEEL_DIR:-$ROOT/build/dist}"
WORK="$(mktemp -d /tmp/attn-wheel-check.XXXXXX)"
VENV="${WHEEL_VENV:-$WORK/venv}"
ORIG_PATH="$PATH"
trap 'PATH="$ORIG_PATH" rm -rf "$WORK"' EXIT

if [ -z "${CXX:-}" ] && command -v clang++ >/dev/null; then
  export CC=clang CXX=clang++
fi
echo "== building the wheel into $WHEEL_DIR"
rm -f "$WHEEL_DIR"/attn_mlir-*.whl
python3 -m pip wheel -q --no-deps -w "$WHEEL_DIR" "$ROOT"
WHEEL="$(ls "$WHEEL_DIR"/attn_mlir-*.whl)"
echo "built $(basename "$WHEEL") ($(du -m "$WHEEL" | cut -f1) MB)"

echo "== shared libraries the wheel's binaries need (glibc only)"
python3 - "$WHEEL" "$WORK/unpacked" <<'PY'
import subprocess, sys, zipfile
from pathlib import Path
wheel, out = sys.argv[1], Path(sys.argv[2])
zipfile.ZipFile(wheel).extractall(out)
allowed = ("libc.so", "libm.so", "libdl.so", "librt.so", "libpthread.so",
           "ld-linux", "libgcc_s.so")
elves, bad = 0, []
for f in sorted(p for p in out.rglob("*") if p.is_file()):
    if f.read_bytes()[:4] != b"\x7fELF":
        continue
    elves += 1
    dyn = subprocess.run(["readelf", "-d", str(f)], capture_output=True,
                         text=True).stdout
    needed = [l.split("[")[1].rstrip("]") for l in dyn.splitlines()
              if "(NEEDED)" in l]
    print(f"  {f.relative_to(out)}: {', '.join(needed)}")
    bad += [f"{f.name} needs {n}" for n in needed
            if not n.startswith(allowed)]
assert elves >= 3, f"expected attn-opt, attn-compile and the runtime: {elves}"
if bad:
    sys.exit("wheel: " + "; ".join(bad))
PY
if command -v auditwheel >/dev/null; then auditwheel show "$WHEEL" || true; fi

echo "== installing into a fresh virtualenv"
python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q "$WHEEL" pytest

# Outside the checkout: the examples and tests copied, nothing else.
mkdir -p "$WORK/outside/test"
cp -r "$ROOT/examples" "$WORK/outside/"
cp -r "$ROOT/test/python" "$WORK/outside/test/"
cd "$WORK/outside"
# PATH: the venv alone (no Debian LLVM tools, linker or C compiler on it).
export PATH="$VENV/bin"
export ATTN_MLIR_CACHE="$WORK/cache" ATTN_MLIR_LLVM_BIN=/nonexistent \
  CC=/nonexistent CXX=/nonexistent
unset ATTN_MLIR_OPT PYTHONPATH ATTN_MLIR_CPU_PLAN

echo "== python -m attn_mlir info"
python -m attn_mlir info
python - "$VENV" <<'PY'
import sys
from pathlib import Path
import attn_mlir
from attn_mlir import _toolchain
venv = Path(sys.argv[1]).resolve()
for what, path in (("attn_mlir", attn_mlir.__file__),
                   ("attn-opt", _toolchain.attn_opt()),
                   ("attn-compile", _toolchain.attn_compile())):
    assert Path(path).resolve().is_relative_to(venv), f"{what}: {path}"
    print(f"  {what}: {path}")
assert _toolchain._links_itself(_toolchain.attn_compile()), "no in-process link"
PY

echo "== examples from the installed wheel"
python examples/run_examples.py

echo "== tests from the installed wheel"
python -m pytest -q -p no:cacheprovider test/python/test_flash.py \
  test/python/test_merge_states.py test/python/test_unified.py \
  test/python/test_prefix_prefill.py test/python/test_blocksparse.py \
  test/python/test_vllm_parity.py
