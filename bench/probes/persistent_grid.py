"""The sm_90a persistent flash program against the plan's (one program a
block) on bench_gpu.py's dense D=128 shapes (16K tokens a batch, H=16,
bf16), three ways in one process: the plan's schedule; the persistent
schedule launched as the runtime does (one block per SM, each claiming
its next programs from a counter); and the same persistent kernel launched with one block per
program (a grid the hardware schedules, as the plan's). Prints TFLOP/s
and each one's ratio to the plan. ATTN_MLIR_DRY_RUN=1 only records the
specializations.

The same kernel is also launched with one block for every 2 or 4
programs (each block walks its own and claims more, blocks assigned to
SMs by the hardware).
"""
import math
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from attn_mlir import _replay, ops  # noqa: E402

D, H = 128, 16
PERSISTENT = (128, 128, 1, 8, 1, 4, 1, 1)
SHAPES = [(S, c) for S in (512, 1024, 2048, 4096, 8192, 16384)
          for c in (False, True)]
DRY = bool(os.environ.get("ATTN_MLIR_DRY_RUN"))


def main():
    if DRY:
        import ml_dtypes
        for S, causal in SHAPES[:4]:   # hinted (512) and not (1024)
            q = np.empty((16384, H, D), ml_dtypes.bfloat16)
            cu = (np.arange(16384 // S + 1) * S).astype(np.int32)
            for s in (None, PERSISTENT):
                ops.flash(q, q, q, cu, cu, np.empty_like(q), scale=0.1,
                          causal=causal, schedule=s)
        return
    import torch
    import triton
    for S, causal in SHAPES:
        B = 16384 // S
        q, k, v, o = (torch.randn(B * S, H, D, dtype=torch.bfloat16,
                                  device="cuda") for _ in range(4))
        cu = torch.as_tensor((np.arange(B + 1) * S).astype(np.int32),
                             device="cuda")
        flops = 4 * B * H * S * S * D * (0.5 if causal else 1.0)

        def run(schedule):
            fn = lambda: ops.flash(q, k, v, cu, cu, o,  # noqa: E731
                                   scale=1 / math.sqrt(D), causal=causal,
                                   schedule=schedule)
            fn()
            torch.cuda.synchronize()
            ms = triton.testing.do_bench(fn, warmup=25, rep=100,
                                         return_mode="median")
            return flops / ms / 1e9
        plan = run(None)
        persistent = run(PERSISTENT)
        kernels = [k for ks in ops._GPU_KERNELS.values() for k in ks
                   if k.record.get("persistent")]
        saved = [k._blocks for k in kernels]
        programs = (S // 128) * B * H
        grids = {}
        # Blocks of 2 and 4 programs each (rounds), the hardware assigning
        # blocks to SMs as they free up, and one block a program.
        for name, blocks in (("2 rounds", -(-programs // 2)),
                             ("4 rounds", -(-programs // 4)),
                             ("full grid", None)):
            for kernel in kernels:
                kernel._blocks = blocks
            _replay._PLANS.clear()
            grids[name] = run(PERSISTENT)
        for kernel, blocks in zip(kernels, saved):
            kernel._blocks = blocks
        _replay._PLANS.clear()
        print(f"S={S} causal={causal}: plan {plan:.0f}, persistent "
              f"{persistent:.0f} ({persistent / plan:.2f}), " + ", ".join(
                  f"{name} {t:.0f} ({t / plan:.2f})"
                  for name, t in grids.items()) + " TFLOP/s", flush=True)


if __name__ == "__main__":
    main()
