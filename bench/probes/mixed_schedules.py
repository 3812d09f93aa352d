"""The mixed batch of bench_gpu.py (4 prefills of 1k tokens and 60 decodes
of 2k keys, GQA 32/8, D=128, pages of 16, one unified launch) under pinned
schedules beside the plan's, in CUDA graphs: whether prefill rows want
programs of more query tokens (fewer K/V re-reads) or other K/V stages.

    python bench/probes/mixed_schedules.py
    MIXED_CACHE=fp8 python bench/probes/mixed_schedules.py   # e4m3 caches,
                                                # per-tensor descales 0.5
"""
import math
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_gpu as G  # noqa: E402
from attn_mlir import ops  # noqa: E402

# (block_q, block_n, heads_per_program, warps, tma, producer_warps,
#  pingpong, persistent, stages); None: the plan's.
SCHEDULES = {
    "plan": None,
    "16q 1x64": (16, 64, 4, 0, 0, 0, 0, 0, 1),
    "16q 3x64": (16, 64, 4, 0, 0, 0, 0, 0, 3),
    "32q 2x64": (32, 64, 4, 0, 0, 0, 0, 0, 2),
    "32q 1x64": (32, 64, 4, 0, 0, 0, 0, 0, 1),
    "32q 8w 2x64": (32, 64, 4, 8, 0, 0, 0, 0, 2),
    "32q 8w 1x64": (32, 64, 4, 8, 0, 0, 0, 0, 1),
    "16q 2x32": (16, 32, 4, 0, 0, 0, 0, 0, 2),
    "16q 4x64": (16, 64, 4, 0, 0, 0, 0, 0, 4),
}
FP8 = os.environ.get("MIXED_CACHE", "bf16") == "fp8"
if FP8:   # (the fp8 caches' programs: one stage, or the decode rows' form)
    SCHEDULES = {
        "plan": None,
        "16q 2x64": (16, 64, 4, 0, 0, 0, 0, 0, 2),
        "32q 1x64": (32, 64, 4, 0, 0, 0, 0, 0, 1),
        "32q 8w 1x64": (32, 64, 4, 8, 0, 0, 0, 0, 1),
        "8q 1x64": (8, 64, 4, 0, 0, 0, 0, 0, 1),
        "4q 4w key split": (4, 64, 4, 4),
        "16q 1x128": (16, 128, 4, 0, 0, 0, 0, 0, 1),
        "32q 8w 1x128": (32, 128, 4, 8, 0, 0, 0, 0, 1),
    }


def main():
    D, Hq, Hk, bs = 128, 32, 8, 16
    n_pre, pre_len, n_dec, ctx = 4, 1024, 60, 2048
    qlens = [pre_len] * n_pre + [1] * n_dec
    seqlens = [pre_len] * n_pre + [ctx] * n_dec
    B = len(qlens)
    maxblk = max((s + bs - 1) // bs for s in seqlens)
    nb = B * maxblk + 8
    cache = "fp8" if FP8 else "bf16"
    kc, vc = G.randn(nb, bs, Hk, D, dtype=cache), \
        G.randn(nb, bs, Hk, D, dtype=cache)
    descale = np.full(1, 0.5, np.float32) if G.DRY else \
        G.torch.full((1,), 0.5, dtype=G.torch.float32, device=G.dev)
    scales = dict(k_descale=descale, v_descale=descale) if FP8 else {}
    bt = G.ints(np.random.default_rng(2).permutation(nb)[: B * maxblk]
                .reshape(B, maxblk))
    q, o = G.randn(sum(qlens), Hq, D), G.randn(sum(qlens), Hq, D)
    cu = G.ints(np.concatenate([[0], np.cumsum(qlens)]))
    su = G.ints(seqlens)
    scale = 1 / math.sqrt(D)
    ref = None
    line = f"mixed 4x1k + 60x2k, {cache} cache (us):"
    for name, sched in SCHEDULES.items():
        def run():
            ops.unified(q, kc, vc, bt, cu, su, o, scale=scale,
                        schedule=sched, **scales)
        if G.DRY:   # record the specialization
            run()
            continue
        try:
            t = G.timed_graph(run)
        except Exception as err:  # a schedule that does not compile
            line += f" | {name} failed ({str(err)[:80]})"
            continue
        err = 0.0 if ref is None else G.relerr(o, ref)
        ref = o.clone() if ref is None else ref
        line += f" | {name} {t * 1e3:.1f}"
        if err > 1e-2:
            line += f" (err {err:.1e})"
    print(line, flush=True)


if __name__ == "__main__":
    main()
