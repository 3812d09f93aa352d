#!/usr/bin/env bash
# Builds (installing what is missing) and runs every test:
#   - lit: dialect round-trips, one case per verifier rule, pass and pipeline
#     tests, verifier fuzzing;
#   - downstream: the package installed into a temporary prefix, and
#     examples/downstream built against it (scripts/check_downstream.sh);
#   - the wheel: built (LLVM linked statically), installed into a fresh
#     virtualenv, examples and a test subset run from outside the checkout
#     (scripts/check_wheel.sh; ATTN_MLIR_SKIP_WHEEL=1 leaves it out);
#   - pytest: the compiled CPU kernels against float64 references through
#     attn_mlir.vllm, and argument validation.
# Ends with one line: "tests: N passed, N failed, N skipped".
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/build.sh" || exit 1
"$ROOT/scripts/python-deps.sh" || exit 1

echo "== lit tests"
/usr/lib/llvm-22/bin/lit -sv --xunit-xml-output "$BUILD_DIR/lit-results.xml" "$BUILD_DIR/test"
lit_rc=$?

echo "== downstream project against the installed package"
"$ROOT/scripts/check_downstream.sh"
downstream_rc=$?

echo "== the wheel, installed into a fresh virtualenv (scripts/check_wheel.sh)"
if [ "${ATTN_MLIR_SKIP_WHEEL:-0}" = 1 ]; then
  echo "skipped (ATTN_MLIR_SKIP_WHEEL=1)"
  wheel_rc=0
else
  "$ROOT/scripts/check_wheel.sh"
  wheel_rc=$?
fi

echo "== pytest (compiled CPU kernels vs float64 references)"
# A private kernel cache per build tree keeps runs reproducible.
export ATTN_MLIR_CACHE="${ATTN_MLIR_CACHE:-$BUILD_DIR/kernel-cache}"
python3 -m pytest -q -p no:cacheprovider --junitxml "$BUILD_DIR/pytest-results.xml" "$ROOT/test/python"
py_rc=$?

# The GPU targets' tile schedules through the same CPU program and grid: the
# ROCDL plans of CDNA (gfx942; gfx90a picks the same tiles) and RDNA3, and
# sm_90a's NVVM plan, so their schedule logic is checked without hardware.
plan_xmls=()
for plan in rocdl:gfx942 rocdl:gfx1100 nvvm:sm_90a; do
  echo "== pytest under the $plan tile schedules"
  xml="$BUILD_DIR/pytest-results-${plan/:/-}.xml"
  ATTN_MLIR_CPU_PLAN="$plan" python3 -m pytest -q -p no:cacheprovider \
    --junitxml "$xml" "$ROOT/test/python" --ignore "$ROOT/test/python/test_errors.py"
  [ $? -eq 0 ] || py_rc=1
  plan_xmls+=("$xml")
done

python3 - "$lit_rc" "$py_rc" "$downstream_rc" "$wheel_rc" "$BUILD_DIR/lit-results.xml" "$BUILD_DIR/pytest-results.xml" "${plan_xmls[@]}" <<'PY'
import os, sys, xml.etree.ElementTree as ET
downstream_rc, wheel_rc = int(sys.argv[3]), int(sys.argv[4])
passed = int(downstream_rc == 0) + int(wheel_rc == 0)
failed, skipped = int(downstream_rc != 0) + int(wheel_rc != 0), 0
for path in sys.argv[5:]:
    if not os.path.exists(path):
        failed += 1
        continue
    root = ET.parse(path).getroot()
    for s in ([root] if root.tag == "testsuite" else root.findall("testsuite")):
        total = int(s.get("tests", 0))
        bad = int(s.get("failures", 0)) + int(s.get("errors", 0))
        skip = int(s.get("skipped", 0))
        passed += total - bad - skip
        failed += bad
        skipped += skip
print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed or int(sys.argv[1]) or int(sys.argv[2]) or downstream_rc
         or wheel_rc else 0)
PY
