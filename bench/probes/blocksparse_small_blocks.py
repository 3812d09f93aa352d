"""Times block-sparse programs of small layout blocks (16 or 32 tokens, as
the fuzzer draws; one or two warps of mma.sync on every NVIDIA chip) over
key tiles of 16, 32 and 64, beside the plan's choice: ptxas spills up to
600 bytes at 64 keys for heads of 80-112 (bench/results/
2026-12-02-sm90a-spill-census.log), and fewer keys a tile mean more
iterations. Per-head Phi-3-like layouts (16 local blocks, every 8th
block), S = 8192, 16 heads, bf16. For reading, not a benchmark:

    python3 blocksparse_small_blocks.py [ROUNDS] [D:BLOCK ...]

Prints each schedule's microseconds a round and its largest difference
from the plan's output (relative to max |out|)."""
import math
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attn_mlir import ops  # noqa: E402

CASES = ["64:16", "80:16", "96:16", "112:16", "128:16", "160:16", "192:16",
         "256:16", "112:32", "160:32", "192:32"]
KEYS = (16, 32, 64)
S, H = 8192, 16
DRY = bool(os.environ.get("ATTN_MLIR_DRY_RUN"))


def schedules(bs):
    out = {"plan": None}
    out.update({f"keys-{n}": (bs, n, 1) for n in KEYS})
    return out


def layout(seq, bs):
    from bench_gpu import phi3_layout
    crow, col, _ = phi3_layout(seq, H, bs, 16, 8)
    return crow, col


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    cases = sys.argv[2:] or CASES
    if DRY:  # record the specializations (ATTN_MLIR_RECORD), CPU arrays
        import ml_dtypes
        for c in cases:
            d, bs = map(int, c.split(":"))
            x = np.zeros((4 * bs, H, d), ml_dtypes.bfloat16)
            cu = np.array([0, 4 * bs], np.int32)
            crow, col = layout(4 * bs, bs)
            for sched in schedules(bs).values():
                ops.blocksparse(x, x, x, cu, cu, crow, col, x.copy(), scale=0.1,
                                block_size=bs, schedule=sched)
        return
    import torch
    from bench_gpu import rounds
    for c in cases:
        d, bs = map(int, c.split(":"))
        crow, col = layout(S, bs)
        g = torch.Generator(device="cuda").manual_seed(0)
        q, k, v = (torch.randn(S, H, d, device="cuda", dtype=torch.bfloat16,
                               generator=g) for _ in range(3))
        cu = torch.tensor([0, S], dtype=torch.int32, device="cuda")
        crow, col = (torch.tensor(x, device="cuda") for x in (crow, col))
        outs = {s: torch.full_like(q, float("nan")) for s in schedules(bs)}

        def call(s):
            ops.blocksparse(q, k, v, cu, cu, crow, col, outs[s],
                            scale=1 / math.sqrt(d), block_size=bs,
                            schedule=schedules(bs)[s])
        fns = {s: (lambda s=s: call(s)) for s in schedules(bs)}
        times = rounds(fns, n)
        ref = outs["plan"].float()
        for s, us in times.items():
            diff = ((outs[s].float() - ref).abs().max() /
                    ref.abs().max()).item()
            print(f"d={d} block={bs} {s}: {us} us, vs plan {diff:.2g}",
                  flush=True)


if __name__ == "__main__":
    main()
