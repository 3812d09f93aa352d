"""Paged decode under pinned schedules (K/V stages and tile keys) beside
the plan's, in CUDA graphs, on bench_gpu.py's decode shapes (GQA 32/8,
D=128, pages of 16) and its 4-token row; split-KV shapes also time the
split kernel and the merge alone.

    python bench/probes/decode_stages.py
"""
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_gpu as G  # noqa: E402
from attn_mlir import ops, vllm  # noqa: E402

# (block_q, block_n, heads_per_program, warps, tma, producer_warps,
#  pingpong, persistent, stages); None: the plan's.
SCHEDULES = {
    "plan": None,
    "1x64": (16, 64, 4, 0, 0, 0, 0, 0, 1),
    "2x64": (16, 64, 4, 0, 0, 0, 0, 0, 2),
    "3x64": (16, 64, 4, 0, 0, 0, 0, 0, 3),
    "3x32": (16, 32, 4, 0, 0, 0, 0, 0, 3),
    "4x32": (16, 32, 4, 0, 0, 0, 0, 0, 4),
}


def main():
    D, Hq, Hk, bs = 128, 32, 8, 16
    for B, ctx, qlen in ((1, 32768, 1), (8, 8192, 1), (64, 2048, 1),
                         (256, 2048, 1), (64, 4096, 4)):
        q, o, kc, vc, bt, cu, su = G.paged_decode(B, ctx, qlen, Hq=Hq, Hk=Hk,
                                                  D=D, bs=bs)
        scale = 1 / math.sqrt(D)
        segs = vllm.plan_segments(qlen, ctx, bs, num_seqs=B, num_kv_heads=Hk,
                                  num_sms=132)
        nbytes = B * ctx * Hk * D * 2 * 2
        line = f"B={B} ctx={ctx} q={qlen} segments={segs}:"
        ref = None
        for name, sched in SCHEDULES.items():
            if segs:
                part = G.randn(B, Hq, segs, D, dtype="f32")
                smax = G.randn(B, Hq, segs, dtype="f32")
                ssum = G.randn(B, Hq, segs, dtype="f32")
                split = lambda: ops.unified(
                    q, kc, vc, bt, cu, su, part, scale=scale,
                    segment_max=smax, segment_sum=ssum, schedule=sched)
                merge = lambda: ops.merge_states(part, o, segment_max=smax,
                                                 segment_sum=ssum)

                def run():
                    split()
                    merge()
            else:
                run = lambda: ops.unified(q, kc, vc, bt, cu, su, o,
                                          scale=scale, schedule=sched)
            try:
                t = G.timed_graph(run)
            except Exception as err:  # a schedule that does not compile
                line += f" {name} failed ({str(err)[:80]})"
                continue
            if not G.DRY:
                err = 0.0 if ref is None else G.relerr(o, ref)
                ref = o.clone() if ref is None else ref
                line += f" {name} {nbytes / t / 1e6:.0f}"
                if err > 1e-2:
                    line += f" (err {err:.1e})"
                if segs and name == "plan":
                    ts, tm = G.timed_graph(split), G.timed_graph(merge)
                    line += (f" [split {ts * 1e3:.1f} us, merge"
                             f" {tm * 1e3:.1f} us, both {t * 1e3:.1f}]")
            else:
                run()
        print(line, flush=True)


if __name__ == "__main__":
    main()
