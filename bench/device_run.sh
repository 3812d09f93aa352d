#!/usr/bin/env bash
# One device call: the GPU test suite (whole CPU grid on CUDA), a
# compute-sanitizer memcheck per op, then the benchmark beside the peers.
# Expects AOT bundles in .device/bundles and the peers in .peers (carried).
set -uo pipefail
export PYTHONUNBUFFERED=1 ATTN_MLIR_BUNDLES="$PWD/.device/bundles" ATTN_MLIR_CACHE=/tmp/attn_cache
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
what="${1:-all}"
if [[ "$what" == all || "$what" == tests ]]; then
  ATTN_MLIR_TEST_DEVICE=cuda timeout 300 python3 -m pytest -q -p no:cacheprovider test/python \
    -k "${TESTS_K:-not nothing}" 2>&1 | tee "$OUT/gpu_tests.log" | tail -40
fi
if [[ "$what" == all || "$what" == bench ]]; then
  timeout 400 python3 bench/bench_gpu.py ${BENCH_CASES:-} 2>&1 | tee "$OUT/bench.log" | tail -40
fi
