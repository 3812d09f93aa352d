"""The split-KV planner's cost model (attn_mlir.vllm.plan_segments, the
drop-in's count) against the rule before it (powers of two nearest below
2 x SMs / programs, no split past SMs programs), on decode batches through
the drop-in in CUDA graphs: GB/s at the cache's width, each count timed in
alternation, PROBE_ROUNDS rounds. GQA 32/8, D=128, pages of 16.

    PROBE_CACHES=fp8,bf16 PROBE_SHAPES=5x8192,10x4096 \\
        python bench/probes/decode_plan_ab.py

ATTN_MLIR_DRY_RUN=1 only records the specializations.
"""
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_gpu as G  # noqa: E402
from bench_gpu import vllm  # noqa: E402
from attn_mlir import _replay  # noqa: E402
from decode_segments import BS, D, HK, case  # noqa: E402

env = os.environ.get
CACHES = env("PROBE_CACHES", "fp8,bf16").split(",")
SHAPES = [tuple(int(x) for x in s.split("x")) for s in env(
    "PROBE_SHAPES", "5x8192,10x4096,14x2048,22x8192,40x4096,2x32768").split(",")]
ROUNDS = int(env("PROBE_ROUNDS", 3))


def power_of_two_rule(B, ctx, sms):
    """plan_segments before the cost model (2026-11-27 .. 11-30)."""
    programs = B * HK
    if programs > sms:
        return None
    cap = max(2, min(64, ctx // 128))
    want, s = 2 * sms / programs, 2
    while s * 2 <= min(want, cap):
        s *= 2
    return s


def unsplit(call):
    """call(None) with the planner stood in by "no split" (and no replay
    plan of the planned variant's signature kept: both variants have one)."""
    def run():
        planner = vllm.plan_segments
        vllm.plan_segments = lambda *a, **k: None
        _replay._PLANS.clear()
        try:
            call(None)()
        finally:
            _replay._PLANS.clear()
            vllm.plan_segments = planner
    return run


sms = 132 if G.DRY else G.torch.cuda.get_device_properties(0) \
    .multi_processor_count
for cache in CACHES:
    for B, ctx in SHAPES:
        nbytes, call, o = case(B, ctx, cache)
        dev = None if G.DRY else o.device
        new = vllm.plan_segments(
            1, ctx, BS, B, HK, sms,
            key_bytes=2 * D * (1 if cache == "fp8" else 2),
            programs_per_sm=vllm._decode_footprints(dev, cache == "fp8"))
        old = power_of_two_rule(B, ctx, sms)
        plans = {"cost model": call(None),
                 "powers of two": call(old) if old else unsplit(call)}
        results = {k: [] for k in plans}
        for _ in range(1 if G.DRY else ROUNDS):
            for k, fn in plans.items():
                if G.DRY:
                    fn()
                    continue
                t = G.timed_graph(fn)
                results[k].append(round(nbytes / t / 1e6, 1))
        row = dict(cache=cache, B=B, ctx=ctx, new=new, old=old)
        if not G.DRY:
            med = {k: statistics.median(v) for k, v in results.items()}
            row.update(gbps=results, ratio=round(
                med["cost model"] / med["powers of two"], 3),
                copy=round(G.copy_ceiling(nbytes), 1))
        print(json.dumps(row), flush=True)
