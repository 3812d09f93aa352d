"""fp8 e4m3 flash (S=8192, 16K tokens, full and causal) with heads of 64
and 128 on the plan's schedule (sm_90a: fp8 wgmma) beside the schedule
these heads had before it (heads of 64 until 2026-11-27: 128 x 64 tiles
of eight warps, dequantized while staged), same process.

    python bench/probes/fp8_heads.py
"""
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_gpu as G  # noqa: E402
from attn_mlir import ops  # noqa: E402

# (block_q, block_n, heads_per_program, warps); None: the plan's.
SCHEDULES = {"plan": None, "previous 128x64": (128, 64, 1, 8)}


def main():
    S = 8192
    for D in (64, 128):
        H, B = 2048 // D, 16384 // S
        q, k, v = (G.randn(B * S, H, D, dtype="fp8") for _ in range(3))
        o = G.randn(B * S, H, D)
        cu = G.ints(np.arange(B + 1) * S)
        for causal in (False, True):
            flops = 4 * B * H * S * S * D * (0.5 if causal else 1.0)
            line = f"D={D} S={S} causal={causal}:"
            for name, sched in SCHEDULES.items():
                run = lambda: ops.flash(q, k, v, cu, cu, o,
                                        scale=1 / math.sqrt(D), causal=causal,
                                        fp8_scales=(1.0, 1.0, 1.0, 1 / 448),
                                        schedule=sched)
                if G.DRY:
                    run()
                    continue
                line += f" {name} {flops / G.timed(run) / 1e9:.0f}"
            print(line + (" TFLOP/s" if not G.DRY else ""), flush=True)


if __name__ == "__main__":
    main()
