#!/usr/bin/env bash
# Builds (installing what is missing) and runs every test: the lit suite
# (dialect round-trips, verifier diagnostics, pass tests, verifier fuzzing).
# Ends with one summary line, "tests: N passed, N failed".
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
"$ROOT/scripts/build.sh" || exit 1

echo "== lit tests"
ninja -C "$BUILD_DIR" attn-opt >/dev/null || exit 1
/usr/lib/llvm-22/bin/lit -sv --xunit-xml-output "$BUILD_DIR/lit-results.xml" "$BUILD_DIR/test"
lit_rc=$?

python3 - "$BUILD_DIR/lit-results.xml" "$lit_rc" <<'PY'
import sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
total = sum(int(s.get("tests", 0)) for s in suites)
failed = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
skipped = sum(int(s.get("skipped", 0)) for s in suites)
passed = total - failed - skipped
print(f"tests: {passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed or int(sys.argv[2]) else 0)
PY
