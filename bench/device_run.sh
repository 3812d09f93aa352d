#!/usr/bin/env bash
# One device call: the GPU test suite (whole CPU grid on CUDA, plus
# attn_mlir.vllm on CUDA tensors), a compute-sanitizer memcheck of one call
# per op, the benchmark beside the peers, and an Nsight Compute profile of
# the dense kernel. Expects AOT bundles in .device/bundles (or the wheel's
# attn-opt as .device/attn-opt.xz) and the peers in .peers (carried). Usage:
#   bench/device_run.sh [all|tests|sanitize|bench|host|profile|sass]...
#   bench/device_run.sh grid-record | grid | cp | decode-sweep | fuzz   (not
#   in all; cp needs 2 GPUs)
# (TESTS_PATHS/TESTS_TIMEOUT narrow the tests step; SANITIZE_TOOLS and
# SANITIZE_SCRIPTS the sanitize step's tools and sm_90a scripts, and
# SANITIZE_VLLM=0 leaves out its memcheck of one call per op; GRID_TIME_LIMIT stops
# the grid's processes after that many seconds and reports what finished;
# GRID_IDS names a file of the test ids to run instead of the whole grid;
# FUZZ_OPS, FUZZ_MODES (host, torch), FUZZ_CASES, FUZZ_SEED, FUZZ_TIMEOUT,
# FUZZ_JOBS and FUZZ_MEMCHECK shape the fuzz step.)
# (grid-record: the specializations of vLLM's full kernel-test grids, into
# $OUT/grid_spec.jsonl for `python -m attn_mlir.aot`; grid: those grids on
# CUDA tensors, GRID_JOBS processes (8: at 16, processes holding vLLM's
# 1 GB caches ended without a summary), the GRID_SHARD=I/N part of it.)
# (sass: cuobjdump -sass of the cubins carried in .device/sass, for reading
# the generated machine code; there is no cuobjdump off the device.)
set -uo pipefail
# Bundles may travel as one xz tarball (cubins compress about 6x; the carry
# is 64 MiB): unpacked over .device/bundles when present.
if [ -f .device/bundles.tar.xz ]; then
  rm -rf .device/bundles && mkdir -p .device/bundles
  tar -xJf .device/bundles.tar.xz -C .device/bundles
  echo "bundles: $(ls .device/bundles | wc -l) unpacked from .device/bundles.tar.xz"
fi
export PYTHONUNBUFFERED=1 ATTN_MLIR_BUNDLES="$PWD/.device/bundles" ATTN_MLIR_CACHE=/tmp/attn_cache
# The wheel's attn-opt (LLVM and MLIR linked in statically; 175 MB, 32 MB
# as xz) may travel instead of, or beside, the bundles: any kernel then
# compiles here on demand (the device has no LLVM of its own), and 16 cores
# compile a recording's specializations in seconds (python -m attn_mlir.aot
# -j 16: 463 in 29 s). Made here by
#   unzip -p dist/attn_mlir-*.whl attn_mlir/_bin/attn-opt | xz -T2 > .device/attn-opt.xz
if [ -f .device/attn-opt.xz ]; then
  xz -dc .device/attn-opt.xz > /tmp/attn-opt && chmod +x /tmp/attn-opt
  export ATTN_MLIR_OPT=/tmp/attn-opt
  echo "attn-opt: $(/tmp/attn-opt --version | head -1), kernels compile here"
fi
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
steps=("${@:-all}")
want() { [[ " ${steps[*]} " == *" all "* || " ${steps[*]} " == *" $1 "* ]]; }
if want tests; then
  echo "== GPU tests"
  ATTN_MLIR_TEST_DEVICE=cuda timeout "${TESTS_TIMEOUT:-300}" python3 -m pytest -q -p no:cacheprovider \
    ${TESTS_PATHS:-test/python} \
    ${TESTS_K:+-k "$TESTS_K"} 2>&1 | tee "$OUT/gpu_tests.log" | tail -30
fi
if want sanitize; then
  # One call per op (prefix prefill, unified, split-KV + merge_states, flash,
  # blocksparse) on CUDA tensors, under memcheck.
  SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  if [ "${SANITIZE_VLLM:-1}" = 1 ]; then
    echo "== compute-sanitizer memcheck"
    ATTN_MLIR_TEST_DEVICE=cuda timeout 400 "$SAN" --tool memcheck --error-exitcode 9 \
      python3 -m pytest -q -p no:cacheprovider test/python/test_vllm_cuda.py 2>&1 \
      | tee "$OUT/memcheck.log" | tail -15
    echo "memcheck exit: ${PIPESTATUS[0]}"
  fi
  # The sm_90a flash and block-sparse schedules (plan, persistent, steps
  # back) on NaN-poisoned outputs against float64, under memcheck,
  # racecheck, and synccheck (the mbarrier/named-barrier protocol of the
  # warp-specialized programs).
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck synccheck}; do
    for what in ${SANITIZE_SCRIPTS:-flash blocksparse prefix unified}; do
      echo "== compute-sanitizer $tool: bench/sanitize_$what.py"
      timeout 250 "$SAN" --tool $tool python3 bench/sanitize_$what.py 2>&1 \
        | tee "$OUT/${tool}_$what.log" | tail -4
    done
  done
fi
if want bench; then
  echo "== benchmark"
  timeout 400 python3 bench/bench_gpu.py ${BENCH_CASES:-} 2>&1 | tee "$OUT/bench.log" | tail -40
fi
if [[ " ${steps[*]} " == *" cp "* ]]; then
  # Context parallel over the machine's GPUs (a 2-GPU kind): the NCCL tests,
  # the example under torchrun, and the scaling against one GPU.
  # NVLink multicast stays off (the device machines' rule).
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  echo "== context parallel: tests on $(nvidia-smi -L | wc -l) GPUs"
  timeout 200 python3 -m pytest -q -p no:cacheprovider -rs \
    test/python/test_distributed_cuda.py 2>&1 | tee "$OUT/cp_tests.log" | tail -8
  timeout 120 torchrun --nproc-per-node 2 examples/context_parallel.py --head-dim 128 2>&1 \
    | tee "$OUT/cp_example.log" | tail -4
  echo "== context parallel: scaling"
  timeout "${CP_TIMEOUT:-300}" python3 bench/bench_context_parallel.py ${CP_ARGS:-} 2>&1 \
    | tee "$OUT/cp_bench.log" | tail -12
fi
if [[ " ${steps[*]} " == *" decode-sweep "* ]]; then
  # Split-KV segment counts against decode bandwidth (plan_segments), and
  # Nsight Compute of the B=1 split decode (PROFILE_DECODE_ARGS).
  echo "== decode: segment sweep"
  timeout 300 python3 bench/sweep_decode_segments.py 2>&1 | tee "$OUT/decode_sweep.log" | tail -30
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  timeout 200 "$NCU" --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section Occupancy --section LaunchStats \
    -k regex:^attn_ -c 2 python3 bench/profile_decode.py ${PROFILE_DECODE_ARGS:-1 32768 32} 2>&1 \
    | tee "$OUT/ncu_decode.log" | grep -E "attn_|Throughput|Occupancy|Registers|Stall|Block Limit|Waves" | head -60
fi
if [[ " ${steps[*]} " == *" fuzz "* ]]; then
  # The fuzzers of the vLLM entry points (test/python/test_*_fuzz.py) on
  # CUDA: FUZZ_CASES cases each from FUZZ_SEED, for FUZZ_OPS. Each campaign
  # records its specializations (a dry run), compiles them here (needs
  # .device/attn-opt.xz; 600 in about 30 s), then runs; unified and flash
  # also on torch CUDA tensors (the drop-in planning for this GPU), and a
  # memcheck of FUZZ_MEMCHECK of those cases.
  [ -n "${ATTN_MLIR_OPT:-}" ] || echo "fuzz: no .device/attn-opt.xz: kernels missing from the bundles will fail"
  export ATTN_MLIR_FUZZ_SEED="${FUZZ_SEED:-2026}" ATTN_MLIR_FUZZ_CASES=${FUZZ_CASES:-400}
  # A command on the GPU, on torch tensors when $torch is 1.
  fuzz() { ATTN_MLIR_TEST_DEVICE=cuda ATTN_MLIR_FUZZ_TORCH=$torch "$@"; }
  # `shards LOG ENV=VALUE...`: the op's cases in FUZZ_JOBS pytest processes
  # (the float64 references take most of the time, on the CPU), shard j
  # with SHARD=j in its environment and its output in LOG.j.
  shards() {
    local log=$1 jobs=${FUZZ_JOBS:-8} j i; shift
    for ((j = 0; j < jobs; j++)); do
      local ids=()
      for ((i = j; i < ATTN_MLIR_FUZZ_CASES; i += jobs)); do
        ids+=("test/python/test_${op}_fuzz.py::test_${op}_fuzz[case_$i]")
      done
      [ ${#ids[@]} -gt 0 ] || continue
      SHARD=$j fuzz env "$@" timeout "${FUZZ_TIMEOUT:-300}" python3 -m pytest -q \
        -p no:cacheprovider "${ids[@]}" > "$log.$j" 2>&1 &
    done
    wait
  }
  for op in ${FUZZ_OPS:-unified flash prefix blocksparse}; do
    modes="host"; case $op in unified|flash) modes="host torch" ;; esac
    modes=${FUZZ_MODES:-$modes}
    for mode in $modes; do
      torch=$([ "$mode" = torch ] && echo 1 || echo 0)
      echo "== fuzz: $op, $mode, $ATTN_MLIR_FUZZ_CASES cases, seed $ATTN_MLIR_FUZZ_SEED"
      rec="/tmp/fuzz_${op}_$mode.jsonl"; rm -f "$rec"* /tmp/fuzz_log.*
      # Each shard records into its own file: ATTN_MLIR_RECORD=$rec.$SHARD.
      shards /tmp/fuzz_log ATTN_MLIR_DRY_RUN=1 ATTN_MLIR_TEST_RECORD_ALL=1 \
        bash -c 'ATTN_MLIR_RECORD='"$rec"'.$SHARD exec "$0" "$@"'
      tail -qn1 /tmp/fuzz_log.*; cat "$rec".* | sort -u > "$rec"
      PYTHONPATH="python${PYTHONPATH:+:$PYTHONPATH}" python3 -m attn_mlir.aot \
        --chip sm_90a --record "$rec" --out "/tmp/fuzz_b_${op}_$mode" -j "$(nproc)" 2>&1 | tail -2
      rm -f /tmp/fuzz_log.*
      shards /tmp/fuzz_log ATTN_MLIR_BUNDLES="/tmp/fuzz_b_${op}_$mode:$ATTN_MLIR_BUNDLES"
      cat /tmp/fuzz_log.* > "$OUT/fuzz_${op}_$mode.log"
      grep -E "passed|failed|^E +Assert|Terminated" "$OUT/fuzz_${op}_$mode.log" | tail -20
      if [ "$mode" = torch ] && [ "${FUZZ_MEMCHECK:-0}" -gt 0 ]; then
        SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
        ATTN_MLIR_BUNDLES="/tmp/fuzz_b_${op}_$mode:$ATTN_MLIR_BUNDLES" \
          ATTN_MLIR_FUZZ_CASES=$FUZZ_MEMCHECK fuzz timeout 300 "$SAN" --tool memcheck \
          python3 -m pytest -q -p no:cacheprovider "test/python/test_${op}_fuzz.py" 2>&1 \
          | tee "$OUT/fuzz_${op}_memcheck.log" | grep -E "passed|failed|ERROR SUMMARY"
      fi
    done
  done
fi
if want host; then
  echo "== host time per call"
  timeout 120 python3 bench/host_overhead.py 2>&1 | tee "$OUT/host_overhead.log" | head -60
fi
if want profile; then
  echo "== ncu (dense D=128 S=8192)"
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  timeout 200 "$NCU" --section SpeedOfLight --section WarpStateStats --section SchedulerStats \
    --section LaunchStats --section Occupancy -k regex:^attn_ -c 1 \
    python3 bench/profile_dense.py ${PROFILE_ARGS:-128} 2>&1 | tee "$OUT/ncu.log" | tail -80
fi
if [[ " ${steps[*]} " == *" grid-record "* ]]; then
  echo "== record vLLM's full grids"
  timeout 560 python3 bench/run_grid.py --jobs "${GRID_JOBS:-8}" --out /tmp/gridrec \
    --time-limit "${GRID_TIME_LIMIT:-540}" --record "$OUT/grid_spec.jsonl" 2>&1 | tail -3
fi
if [[ " ${steps[*]} " == *" grid "* ]]; then
  echo "== vLLM's full grids on CUDA"
  timeout 560 python3 bench/run_grid.py --jobs "${GRID_JOBS:-8}" --out /tmp/grid \
    --time-limit "${GRID_TIME_LIMIT:-540}" --shard "${GRID_SHARD:-0/1}" \
    ${GRID_IDS:+--ids "$GRID_IDS"} 2>&1 \
    | tee "$OUT/vllm_full_grid.log" | tail -40
fi
if want sass; then
  echo "== SASS"
  CUOBJDUMP=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
  for f in .device/sass/*.cubin; do
    "$CUOBJDUMP" -sass "$f" > "$OUT/$(basename "$f" .cubin).sass" 2>&1
    echo "$f: $(grep -c HMMA "$OUT/$(basename "$f" .cubin).sass") HMMA"
  done
fi
