#!/usr/bin/env bash
# Lint: clang-format (LLVM style, .clang-format) over the tracked C++ and
# ruff over python/. Exits non-zero on any finding; .ci/run runs it first.
# Installs ruff (pip) when it is missing.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
rc=0

find_clang_format() {
  command -v clang-format-22 || command -v clang-format || true
}
CLANG_FORMAT="${CLANG_FORMAT:-$(find_clang_format)}"
if [ -z "$CLANG_FORMAT" ] && command -v apt-get >/dev/null; then
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  echo "== installing clang-format"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
    $SUDO apt-get install -y -qq clang-format >/dev/null
  CLANG_FORMAT="$(find_clang_format)"
fi
if [ -z "$CLANG_FORMAT" ]; then
  echo "lint: clang-format not found (apt-get install clang-format)" >&2
  rc=1
else
  echo "== clang-format ($("$CLANG_FORMAT" --version | head -1))"
  mapfile -t files < <(git ls-files '*.cpp' '*.h')
  if ! "$CLANG_FORMAT" --dry-run --Werror "${files[@]}"; then
    echo "lint: run '$CLANG_FORMAT -i' on the files above" >&2
    rc=1
  fi
fi

echo "== ruff"
if ! python3 -m ruff --version >/dev/null 2>&1; then
  python3 -m pip install -q ruff >/dev/null 2>&1 || true
fi
if python3 -m ruff --version >/dev/null 2>&1; then
  python3 -m ruff check python || rc=1
else
  echo "lint: ruff is not installed and could not be installed" >&2
  rc=1
fi
[ $rc -eq 0 ] && echo "lint: clean"
exit $rc
