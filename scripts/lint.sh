#!/usr/bin/env bash
# Lint: clang-format (LLVM style, .clang-format) over the tracked C++ and
# ruff over python/. Exits non-zero on any finding; .ci/run runs it first.
# Installs ruff (pip) when it is missing.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
rc=0

CLANG_FORMAT="${CLANG_FORMAT:-$(command -v clang-format-22 || command -v clang-format || true)}"
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
