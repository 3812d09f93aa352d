"""What the split-KV form of paged decode spends outside its walk: each
(cache, B, ctx) case's split kernel alone, attn.merge_states alone, both,
and the split kernel that merges its own segments (merged_out: "fused"),
each captured in a CUDA graph (triton do_bench median, L2 flushed).
GQA 32/8, D=128, pages of 16, one query a sequence, the segment count of
vllm.plan_segments. ATTN_MLIR_DRY_RUN=1 records the specializations.
"""
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attn_mlir import ops, vllm  # noqa: E402
import sweep_decode_segments as sweep  # noqa: E402

HQ, HK, D, PAGE = 32, 8, 128, 16
CASES = [(c, b, ctx) for c in ("bf16", "fp8")
         for b, ctx in ((1, 32768), (1, 8192), (1, 2048), (8, 8192))]
DRY = bool(os.environ.get("ATTN_MLIR_DRY_RUN"))


def main():
    if DRY:
        import ml_dtypes
        def tensor(shape, dtype):
            return np.zeros(shape, {"bf16": ml_dtypes.bfloat16,
                                    "fp8": ml_dtypes.float8_e4m3fn,
                                    "f32": np.float32}[dtype])
        ints = lambda a: np.asarray(a, np.int32)  # noqa: E731
    else:
        import torch
        dt = {"bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn,
              "f32": torch.float32}

        def tensor(shape, dtype):
            x = torch.randn(*shape, device="cuda")
            return x.to(dt[dtype])
        ints = lambda a: torch.as_tensor(np.asarray(a, np.int32),  # noqa
                                         device="cuda")
        print(torch.cuda.get_device_name(0), flush=True)

    def graph_time(fn):   # us
        return 1e3 * sweep.graph_time(fn)

    for cache, b, ctx in CASES:
        pages = ctx // PAGE
        kc = tensor((b * pages, PAGE, HK, D), cache)
        vc = tensor((b * pages, PAGE, HK, D), cache)
        extra = {}
        if cache == "fp8":
            half = tensor((1,), "f32") * 0 + 0.5   # a descale of 0.5
            extra = dict(k_descale=half, v_descale=half)
        s = vllm.plan_segments(1, ctx, PAGE, num_seqs=b, num_kv_heads=HK)
        table = ints(np.random.default_rng(0).permutation(
            b * pages).reshape(b, pages))
        q, o = tensor((b, HQ, D), "bf16"), tensor((b, HQ, D), "bf16")
        cu, used = ints(np.arange(b + 1)), ints(np.full(b, ctx))
        part = tensor((b, HQ, s, D), "f32")
        mx, sm = tensor((b, HQ, s), "f32"), tensor((b, HQ, s), "f32")

        def split():
            ops.unified(q, kc, vc, table, cu, used, part, scale=D ** -0.5,
                        segment_max=mx, segment_sum=sm, **extra)

        def merge():
            ops.merge_states(part, o, segment_max=mx, segment_sum=sm)

        def both():
            split()
            merge()
        counters = ints(np.zeros((b, HQ)))

        def fused():
            ops.unified(q, kc, vc, table, cu, used, part, scale=D ** -0.5,
                        segment_max=mx, segment_sum=sm, merged_out=o,
                        merge_counters=counters, **extra)
        times = {k: round(graph_time(f), 2) for k, f in
                 (("split", split), ("merge", merge), ("both", both),
                  ("fused", fused))}
        width = 1 if cache == "fp8" else 2
        nbytes = b * ctx * HK * D * 2 * width
        if not DRY:
            print(json.dumps(dict(cache=cache, B=b, ctx=ctx, segments=s,
                                  us=times, gbps_both=round(
                                      nbytes / times["both"] / 1e3, 1),
                                  gbps_fused=round(
                                      nbytes / times["fused"] / 1e3, 1),
                                  gbps_split=round(
                                      nbytes / times["split"] / 1e3, 1))),
                  flush=True)


if __name__ == "__main__":
    main()
