#!/usr/bin/env bash
# Installs the Python packages the runtime and tests need, when missing.
set -euo pipefail
if ! python3 -c "import numpy, ml_dtypes, pytest" 2>/dev/null; then
  echo "== installing Python packages: numpy ml_dtypes pytest"
  python3 -m pip install -q numpy ml_dtypes pytest
fi
