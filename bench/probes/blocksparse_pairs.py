"""Times sm_90a block-sparse schedules on Phi-3-small-like cases (S =
16384, D = 128, bf16; layouts of 16 local blocks of 64 and a vertical
stride of 8), or makes one call of one for Nsight Compute (for reading,
not a benchmark):

    python3 blocksparse_pairs.py time [ROUNDS] [CASE]  # each case's schedules
    python3 blocksparse_pairs.py once SCHEDULE [CASE]

Cases: `mha` (the benchmark's: 16 heads, per-head layouts), `gqa`
(Phi-3-small's heads: 32 query heads over 8 KV heads, per-head layouts),
`shared` (32 / 8 under one layout: the plan's 32 tokens x 4 heads pair
the row's blocks into 128-key tiles), `b128` (16 heads, per-head layouts
of blocks of 128: 8 local, the same stride), `d64` (`mha` with heads of
64). Schedules: `plan` (attn-plan's; on
sm_90a per-head layouts take two layout rows a program, 128 x 128 tiles
over the union of their CSR rows), `one-row` (the one-warpgroup TMA
programs of one layout row it replaced), `mma` (mma.sync programs of two
warps), for `shared`, `keys-64` (the same programs on 64-key tiles, one
block each: the plan before) and `two-rows` (programs of two layout rows
of one head, pinned), for `b128`, `keys-128`
(128-key tiles, one block each) beside the plan's."""
import math
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attn_mlir import ops  # noqa: E402

# (query heads, KV heads, per-head layouts, block size, local blocks, D)
CASES = {"mha": (16, 16, True, 64, 16, 128), "gqa": (32, 8, True, 64, 16, 128),
         "shared": (32, 8, False, 64, 16, 128),
         "b128": (16, 16, True, 128, 8, 128), "d64": (16, 16, True, 64, 16, 64)}
SCHEDULES = {
    "mha": {"plan": None, "one-row": (64, 64, 1, 4, 1, 4, 0),
            "mma": (64, 64, 1, 2)},
    "gqa": {"plan": None, "one-row": (64, 64, 1, 4, 1, 4, 0)},
    "shared": {"plan": None, "keys-64": (32, 64, 4, 8, 1, 4, 1),
               "two-rows": (128, 128, 1, 8, 1, 4, 1)},
    "b128": {"plan": None, "keys-128": (128, 128, 1, 8, 1, 4, 1)},
    "d64": {"plan": None, "one-row": (64, 64, 1, 4, 1, 4, 0)},
}
DRY = bool(os.environ.get("ATTN_MLIR_DRY_RUN"))


def case(name, S=16384, vstride=8):
    import torch
    from bench_gpu import phi3_layout
    H, Hk, per_head, bs, local, D = CASES[name]
    crow, col, _ = phi3_layout(S, H if per_head else 1, bs, local, vstride)
    g = torch.Generator(device="cuda").manual_seed(0)
    q, o = (torch.randn(S, H, D, device="cuda", dtype=torch.bfloat16,
                        generator=g) for _ in range(2))
    k, v = (torch.randn(S, Hk, D, device="cuda", dtype=torch.bfloat16,
                        generator=g) for _ in range(2))
    cu = torch.tensor([0, S], dtype=torch.int32, device="cuda")
    args = (q, k, v, cu, cu, torch.tensor(crow, device="cuda"),
            torch.tensor(col, device="cuda"), o)
    return args, 1 / math.sqrt(D), bs


def call(args, scale, bs, sched):
    ops.blocksparse(*args, scale=scale, block_size=bs, schedule=sched)


def main():
    if DRY:  # record the specializations (ATTN_MLIR_RECORD), CPU arrays
        import ml_dtypes
        for name, (H, Hk, per_head, bs, _, D) in CASES.items():
            x = np.zeros((128, H, D), ml_dtypes.bfloat16)
            kv = np.zeros((128, Hk, D), ml_dtypes.bfloat16)
            cu = np.array([0, 128], np.int32)
            crow = np.zeros((H if per_head else 1, 3), np.int32)
            col = np.zeros((H if per_head else 1, 1), np.int32)
            for sched in SCHEDULES[name].values():
                call((x, kv, kv, cu, cu, crow, col, x.copy()), 0.1, bs, sched)
        return
    import torch
    from bench_gpu import rounds
    if sys.argv[1] == "once":
        name = sys.argv[3] if len(sys.argv) > 3 else "mha"
        args, scale, bs = case(name)
        call(args, scale, bs, SCHEDULES[name][sys.argv[2]])
        torch.cuda.synchronize()
        return
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    for name in sys.argv[3:] or ["mha"]:
        args, scale, bs = case(name)
        fns = {s: (lambda s=s: call(args, scale, bs, SCHEDULES[name][s]))
               for s in SCHEDULES[name]}
        for s, us in rounds(fns, n).items():
            print(f"{name} {s}: {us}", flush=True)


if __name__ == "__main__":
    main()
