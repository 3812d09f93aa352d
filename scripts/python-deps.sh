#!/usr/bin/env bash
# Installs the Python packages the runtime and tests need, when missing.
set -euo pipefail
if ! python3 -c "import numpy, ml_dtypes, pytest" 2>/dev/null; then
  echo "== installing Python packages: numpy ml_dtypes pytest"
  python3 -m pip install -q numpy ml_dtypes pytest
fi
# Optional, for the torch-based tests (test_torch_ops.py, test_transformers.py,
# test_vllm_backend.py skip without them): torch, then transformers.
# ATTN_MLIR_SKIP_TORCH=1 leaves both out; a failed install only warns.
if [ "${ATTN_MLIR_SKIP_TORCH:-0}" != 1 ]; then
  if ! python3 -c "import torch" 2>/dev/null; then
    echo "== installing Python packages: torch (ATTN_MLIR_SKIP_TORCH=1 skips it)"
    python3 -m pip install -q "torch>=2.4" ||
      echo "warning: torch not installed; the torch-based tests will skip" >&2
  fi
  if ! python3 -c "import transformers" 2>/dev/null; then
    echo "== installing optional Python package: transformers"
    python3 -m pip install -q "transformers>=5,<6" ||
      echo "warning: transformers not installed; test_transformers.py will skip" >&2
  fi
fi
