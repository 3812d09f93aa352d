"""Times sm_90a block-sparse schedules on the benchmark's Phi-3-small-like
case (S = 16384, H = 16, D = 128, bf16; per-head layouts of 16 local
blocks of 64 and a vertical stride of 8), or makes one call of one for
Nsight Compute (for reading, not a benchmark):

    python3 blocksparse_pairs.py time [ROUNDS]   # the plan beside the others
    python3 blocksparse_pairs.py once plan|one-row|mma

Schedules: `plan` (attn-plan's: on sm_90a two layout rows a program,
128 x 128 tiles over the union of their CSR rows), `one-row` (the
one-warpgroup TMA programs of one layout row it replaced), `mma` (mma.sync
programs of two warps)."""
import math
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attn_mlir import ops  # noqa: E402

SCHEDULES = {"plan": None, "one-row": (64, 64, 1, 4, 1, 4, 0),
             "mma": (64, 64, 1, 2)}
DRY = bool(os.environ.get("ATTN_MLIR_DRY_RUN"))


def case(S=16384, H=16, D=128, bs=64, local=16, vstride=8):
    import torch
    from bench_gpu import phi3_layout
    crow, col, _ = phi3_layout(S, H, bs, local, vstride)
    g = torch.Generator(device="cuda").manual_seed(0)
    q, k, v, o = (torch.randn(S, H, D, device="cuda", dtype=torch.bfloat16,
                              generator=g) for _ in range(4))
    cu = torch.tensor([0, S], dtype=torch.int32, device="cuda")
    args = (q, k, v, cu, cu, torch.tensor(crow, device="cuda"),
            torch.tensor(col, device="cuda"), o)
    return args, 1 / math.sqrt(D), bs


def call(args, scale, bs, name):
    ops.blocksparse(*args, scale=scale, block_size=bs,
                    schedule=SCHEDULES[name])


def main():
    if DRY:  # record the specializations (ATTN_MLIR_RECORD), CPU arrays
        import ml_dtypes
        x = np.zeros((128, 16, 128), ml_dtypes.bfloat16)
        cu = np.array([0, 128], np.int32)
        crow = np.zeros((16, 3), np.int32)
        col = np.zeros((16, 1), np.int32)
        for name in SCHEDULES:
            call((x, x, x, cu, cu, crow, col, x.copy()), 0.1, 64, name)
        return
    import torch
    from bench_gpu import rounds
    args, scale, bs = case()
    if sys.argv[1] == "once":
        call(args, scale, bs, sys.argv[2])
        torch.cuda.synchronize()
        return
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    fns = {name: (lambda name=name: call(args, scale, bs, name))
           for name in SCHEDULES}
    for name, us in rounds(fns, n).items():
        print(f"{name}: {us}", flush=True)


if __name__ == "__main__":
    main()
