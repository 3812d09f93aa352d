"""Pinned schedules of the fp8-cache split decode program (ops.unified's
split-KV form with the fused merge, attn.decode_rows' key-split programs)
at small batches, in CUDA graphs: GB/s at fp8 width for each schedule and
segment count beside the plan's own schedule, outputs checked against the
plan's. GQA 32/8, D=128, pages of 16, e4m3.

    PROBE_SHAPES=1x32768:32,8x8192:4 python bench/probes/fp8_decode_schedules.py

PROBE_SCHEDULES: ';'-separated block_q,block_n,heads,warps tuples.
ATTN_MLIR_DRY_RUN=1 only records the specializations.
"""
import json
import math
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_gpu as G  # noqa: E402
from bench_gpu import ops, np  # noqa: E402

D, HQ, HK, BS = 128, 32, 8, 16
env = os.environ.get
SHAPES = [tuple(int(x) for x in s.replace(":", "x").split("x"))
          for s in env("PROBE_SHAPES", "1x32768x32,8x8192x4").split(",")]
SCHEDULES = [None] + [tuple(int(x) for x in s.split(",")) for s in env(
    "PROBE_SCHEDULES", "4,64,4,8;4,128,4,8;4,128,4,4;4,32,4,2").split(";")
    if s]


def buffers(tokens, segments):
    shapes = [(tokens, HQ, segments, D), (tokens, HQ, segments),
              (tokens, HQ, segments)]
    if G.DRY:
        return [np.zeros(s, np.float32) for s in shapes] + [
            np.zeros((tokens, HQ), np.int32)]
    t = G.torch
    return [t.empty(s, dtype=t.float32, device=G.dev) for s in shapes] + [
        t.zeros((tokens, HQ), dtype=t.int32, device=G.dev)]


def main():
    for B, ctx, segments in SHAPES:
        q, o, kc, vc, bt, cu, su = G.paged_decode(B, ctx, cache="fp8")
        _, scales = G.cache_descales("fp8")
        nbytes = B * ctx * HK * D * 2 + 2 * B * HQ * D * 2 + \
            B * (ctx // BS) * 4
        part, mx, sm, counters = buffers(B, segments)
        ref = None
        for sched in SCHEDULES:
            out = G.randn(B, HQ, D)
            call = lambda: ops.unified(  # noqa: E731
                q, kc, vc, bt, cu, su, part, scale=1 / math.sqrt(D),
                segment_max=mx, segment_sum=sm, merged_out=out,
                merge_counters=counters, schedule=sched, **scales)
            row = dict(B=B, ctx=ctx, segments=segments,
                       schedule=sched or "plan")
            if G.DRY:
                call()
                print(json.dumps(row), flush=True)
                continue
            r = [round(nbytes / G.timed_graph(call) / 1e6, 1)
                 for _ in range(3)]
            row.update(gbps=r, median=statistics.median(r))
            if ref is None:
                ref = out.float().clone()
            else:
                row["err_vs_plan"] = round(G.relerr(out, ref), 5)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
