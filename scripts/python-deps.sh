#!/usr/bin/env bash
# Installs the Python packages the runtime and tests need, when missing.
set -euo pipefail
if ! python3 -c "import numpy, ml_dtypes, pytest" 2>/dev/null; then
  echo "== installing Python packages: numpy ml_dtypes pytest"
  python3 -m pip install -q numpy ml_dtypes pytest
fi
# Optional: transformers for test/python/test_transformers.py (it skips
# without torch or transformers). ATTN_MLIR_SKIP_TORCH=1 (no torch-based
# tests) leaves it out; a failed install only warns.
if [ "${ATTN_MLIR_SKIP_TORCH:-0}" != 1 ] &&
   ! python3 -c "import transformers" 2>/dev/null; then
  echo "== installing optional Python package: transformers"
  python3 -m pip install -q "transformers>=5,<6" ||
    echo "warning: transformers not installed; test_transformers.py will skip" >&2
fi
