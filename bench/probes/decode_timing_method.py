"""How much of a short decode row's time is the benchmark's method: the
B=1 ctx=32k and B=8 ctx=8k split decode (bench_gpu.py's rows: GQA 32/8,
D=128, pages of 16, split kernel + merge) in one CUDA graph, timed by
do_bench (an L2 flush, a 256 MB write, before every replay) and by CUDA
events around 50 back-to-back replays without a flush; likewise the split kernel alone, and
a torch copy of the same bytes for the device's own ceiling at that size.

    python bench/probes/decode_timing_method.py
"""
import math
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_gpu as G  # noqa: E402
from attn_mlir import ops, vllm  # noqa: E402


def back_to_back(fn, n=50):
    """Mean time of one call among n replays in a row (no flush), ms."""
    fn()
    torch.cuda.synchronize()
    start, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    start.record()
    for _ in range(n):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / n


def graph(fn):
    fn()
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    g.replay()
    torch.cuda.synchronize()
    return g.replay


def main():
    for B, ctx in ((1, 32768), (8, 8192)):
        shape(B, ctx)


def shape(B, ctx):
    D, Hq, Hk, bs = 128, 32, 8, 16
    q, o, kc, vc, bt, cu, su = G.paged_decode(B, ctx, Hq=Hq, Hk=Hk, D=D,
                                              bs=bs)
    segs = vllm.plan_segments(1, ctx, bs, num_seqs=B, num_kv_heads=Hk,
                              num_sms=132)
    label = f"B={B} ctx={ctx // 1024}k ({segs} segments)"
    part = G.randn(B, Hq, segs, D, dtype="f32")
    smax = G.randn(B, Hq, segs, dtype="f32")
    ssum = G.randn(B, Hq, segs, dtype="f32")
    split = lambda: ops.unified(q, kc, vc, bt, cu, su, part,
                                scale=1 / math.sqrt(D), segment_max=smax,
                                segment_sum=ssum)
    merge = lambda: ops.merge_states(part, o, segment_max=smax,
                                     segment_sum=ssum)

    def both():
        split()
        merge()
    if G.DRY:
        both()
        return
    nbytes = B * ctx * Hk * D * 2 * 2
    x = torch.empty(nbytes // 2, dtype=torch.bfloat16, device="cuda")
    y = torch.empty_like(x)
    copy = lambda: y.copy_(x)
    for name, fn in (("split+merge", graph(both)), ("split", graph(split)),
                     ("merge", graph(merge)),
                     (f"copy {nbytes // 2**20} MiB", copy)):
        flushed = G.bench(fn)
        steady = back_to_back(fn)
        per = 2 if name.startswith("copy") else 1
        print(f"{label} {name}: do_bench {flushed * 1e3:.1f} us"
              f" ({per * nbytes / flushed / 1e6:.0f} GB/s), back to back"
              f" {steady * 1e3:.1f} us ({per * nbytes / steady / 1e6:.0f} GB/s)",
              flush=True)


if __name__ == "__main__":
    main()
