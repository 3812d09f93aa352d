#!/usr/bin/env bash
# The main job: builds attn-mlir (installing what is missing), compiles every
# example kernel in examples/ with attn-opt's CPU pipeline, runs each on
# random inputs of its model's shapes, and prints each op's max error against
# the float64 reference.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/build.sh" >/dev/null
"$ROOT/scripts/python-deps.sh"
exec python3 "$ROOT/examples/run_examples.py"
