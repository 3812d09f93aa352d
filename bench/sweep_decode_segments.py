#!/usr/bin/env python3
"""Paged decode bandwidth against the split-KV segment count, for the
segment planner (attn_mlir.vllm.plan_segments).

GQA 32/8, D = 128, pages of 16, bf16 cache (SWEEP_CACHE=fp8: e4m3 with
per-tensor descales, bytes counted at fp8 width; SWEEP_BATCHES=1,8: the
batch sizes; SWEEP_SEGMENTS=0,24,32: the counts), one query per sequence. For
each batch size B and context length, every segment count S (0: no split;
else ops.unified's split form, one kernel for every count, merging its
own segments; SWEEP_MERGE=separate: then ops.merge_states) is captured in
a CUDA graph and timed (triton.testing.do_bench, median, L2 flushed
between calls). Prints one JSON line per (B, ctx): GB/s per S (cache bytes
read / time), the best S, and what plan_segments picks.

    python3 bench/sweep_decode_segments.py
    ATTN_MLIR_RECORD=f.jsonl ATTN_MLIR_DRY_RUN=1 python3 bench/sweep_decode_segments.py
"""

import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from attn_mlir import ops, vllm  # noqa: E402

DRY = bool(os.environ.get("ATTN_MLIR_DRY_RUN"))
HQ, HK, D, PAGE = 32, 8, 128, 16
BATCHES = tuple(int(b) for b in os.environ.get(
    "SWEEP_BATCHES", "1,2,4,8,16,32,64,128,256").split(","))
FP8 = os.environ.get("SWEEP_CACHE", "bf16") == "fp8"
# SWEEP_MERGE=separate: attn.merge_states after the split kernel (default:
# the split kernel merges its own segments, merged_out, as the drop-in does).
SEPARATE_MERGE = os.environ.get("SWEEP_MERGE", "fused") == "separate"
# SWEEP_SCHEDULE=16,64,4,0,0,0,0,0,3: a pinned schedule for every call.
SCHEDULE = tuple(int(x) for x in os.environ["SWEEP_SCHEDULE"].split(",")) \
    if os.environ.get("SWEEP_SCHEDULE") else None
CONTEXTS = (2048, 8192, 32768)
# SWEEP_SEGMENTS=0,24,32,48: the counts to time (any count: the kernel
# reads it from the workspace's shape).
SEGMENTS = tuple(int(x) for x in os.environ.get(
    "SWEEP_SEGMENTS", "0,2,4,8,16,32,64").split(","))
MAX_TOKENS = 1 << 21   # cached keys per case: 8.6 GB of K and V


def graph_time(fn):
    """fn() captured in a CUDA graph (after a warm-up on a side stream),
    its replay's median time in ms (do_bench, L2 flushed between calls);
    under ATTN_MLIR_DRY_RUN one call and NaN."""
    if DRY:
        fn()
        return float("nan")
    import torch
    import triton
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    graph.replay()
    torch.cuda.synchronize()
    return triton.testing.do_bench(graph.replay, warmup=10, rep=60,
                                   return_mode="median")


def main():
    if DRY:
        import ml_dtypes
        bf16 = ml_dtypes.bfloat16

        def randn(*shape, dtype=bf16):
            return np.zeros(shape, dtype)

        def cache(*shape):
            return np.zeros(shape, ml_dtypes.float8_e4m3fn if FP8 else bf16)

        descale = np.ones(1, np.float32)

        def ints(a):
            return np.asarray(a, np.int32)
        f32 = np.float32
    else:
        import torch

        def randn(*shape, dtype=torch.bfloat16):
            return torch.randn(*shape, device="cuda", dtype=dtype)

        def cache(*shape):
            x = randn(*shape)
            return x.to(torch.float8_e4m3fn) if FP8 else x

        descale = torch.full((1,), 0.5, dtype=torch.float32, device="cuda")

        def ints(a):
            return torch.as_tensor(np.asarray(a, np.int32), device="cuda")
        f32 = torch.float32
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        print(f"{torch.cuda.get_device_name(0)}, {sms} SMs", flush=True)

    for ctx in CONTEXTS:
        for b in BATCHES:
            if b * ctx > MAX_TOKENS or (DRY and (b, ctx) != (2, 2048)):
                continue
            pages = ctx // PAGE
            kc, vc = cache(b * pages, PAGE, HK, D), cache(b * pages, PAGE, HK, D)
            scales = dict(k_descale=descale, v_descale=descale) if FP8 else {}
            scales["schedule"] = SCHEDULE
            perm = np.random.default_rng(0).permutation(b * pages)
            table = ints(perm.reshape(b, pages))
            q, o = randn(b, HQ, D), randn(b, HQ, D)
            cu, used = ints(np.arange(b + 1)), ints(np.full(b, ctx))
            nbytes = b * ctx * HK * D * 2 * (1 if FP8 else 2)
            row = {"B": b, "ctx": ctx, "cache": "fp8" if FP8 else "bf16",
                   "schedule": SCHEDULE,
                   "merge": "separate" if SEPARATE_MERGE else "fused",
                   "gbps": {}}
            for s in SEGMENTS:
                if s and pages < s:
                    continue
                if s == 0:
                    def fn():
                        ops.unified(q, kc, vc, table, cu, used, o,
                                    scale=D ** -0.5, **scales)
                else:
                    part = randn(b, HQ, s, D, dtype=f32)
                    smax = randn(b, HQ, s, dtype=f32)
                    ssum = randn(b, HQ, s, dtype=f32)
                    merge = {} if SEPARATE_MERGE else dict(
                        merged_out=o, merge_counters=ints(np.zeros((b, HQ))))

                    def fn(part=part, smax=smax, ssum=ssum, merge=merge):
                        ops.unified(q, kc, vc, table, cu, used, part,
                                    scale=D ** -0.5, segment_max=smax,
                                    segment_sum=ssum, **merge, **scales)
                        if SEPARATE_MERGE:
                            ops.merge_states(part, o, segment_max=smax,
                                             segment_sum=ssum)
                ms = graph_time(fn)
                row["gbps"][s] = round(nbytes / ms / 1e6, 1)
            if not DRY:
                row["best"] = max(row["gbps"], key=row["gbps"].get)
                row["plan_segments"] = vllm.plan_segments(
                    1, ctx, PAGE, num_seqs=b, num_kv_heads=HK) or 0
                print(json.dumps(row), flush=True)
                del kc, vc
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
