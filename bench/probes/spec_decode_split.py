"""Speculative (multi-token) decode through the drop-in
(attn_mlir.vllm.unified_attention) at small and middle batches, in CUDA
graphs: GB/s at the cache's width with the planner's split-KV count
(plan_segments with num_query_heads: one op, partials by token, merged in
the launch) beside the same calls unsplit (SPEC_SPLIT=0 sets
vllm.SPLIT_MAX_QUERY_TOKENS to 1 and vllm.MIXED_DECODE_SPLIT off), the seed's unified kernel on the same
batch, and the copy ceiling of the bytes. GQA 32/8, D=128, pages of 16.

    SPEC_SPLIT=1 python bench/probes/spec_decode_split.py
    SPEC_SPLIT=0 python bench/probes/spec_decode_split.py

PROBE_CACHES=bf16,fp8, PROBE_SHAPES=BxCTX[,...], PROBE_QLEN=4. (One
setting a process: the drop-in's replay of a call is keyed by its
arguments, not by the setting.) ATTN_MLIR_DRY_RUN=1 only records the
specializations.
"""
import json
import math
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_gpu as G  # noqa: E402
from bench_gpu import vllm  # noqa: E402

D, HQ, HK, BS = 128, 32, 8, 16
env = os.environ.get
CACHES = env("PROBE_CACHES", "bf16,fp8").split(",")
SHAPES = [tuple(int(x) for x in s.split("x")) for s in env(
    "PROBE_SHAPES", "1x32768,2x16384,4x8192,8x8192,16x4096,64x4096"
).split(",")]
QLEN = int(env("PROBE_QLEN", 4))
SPLIT = env("SPEC_SPLIT", "1") != "0"
if not SPLIT:
    # (Past SPLIT_MAX_QUERY_TOKENS a batch of several sequences would go
    # to the mixed path's split decode op instead: off too.)
    vllm.SPLIT_MAX_QUERY_TOKENS = 1
    vllm.MIXED_DECODE_SPLIT = False


def main():
    form = "planned split" if SPLIT else "unsplit"
    for cache in CACHES:
        for B, ctx in SHAPES:
            q, o, kc, vc, bt, cu, su = G.paged_decode(B, ctx, qlen=QLEN,
                                                      cache=cache)
            descale, scales = G.cache_descales(cache)
            width = 1 if cache == "fp8" else 2
            nbytes = B * ctx * HK * D * width * 2 + \
                2 * B * QLEN * HQ * D * 2 + B * (ctx // BS) * 4
            scale = 1 / math.sqrt(D)
            drop = lambda: vllm.unified_attention(  # noqa: E731
                q, kc, vc, o, cu, QLEN, su, ctx, scale, True, (-1, -1), bt,
                0.0, None, scales.get("k_descale"), scales.get("v_descale"))
            planned = vllm.plan_segments(
                QLEN, ctx, BS, B, HK, None if G.DRY else
                G.torch.cuda.get_device_properties(0).multi_processor_count,
                num_query_heads=HQ) if SPLIT else None
            row = dict(cache=cache, B=B, ctx=ctx, qlen=QLEN, form=form,
                       segments=planned)
            if G.DRY:
                drop()
                print(json.dumps(row), flush=True)
                continue
            ours = [round(nbytes / G.timed_graph(drop) / 1e6, 1)
                    for _ in range(3)]
            row["gbps"], row["median"] = ours, statistics.median(ours)
            one = G.torch.ones(1, dtype=G.torch.float32, device=G.dev)
            o2 = G.torch.empty_like(o)
            seed = lambda: G.S.unified.unified_attention(  # noqa: E731
                q, kc, vc, o2, cu, QLEN, su, ctx, scale, True, (-1, -1), bt,
                0.0, None, descale if cache == "fp8" else one,
                descale if cache == "fp8" else one)
            row["seed"] = round(nbytes / G.timed_graph(seed) / 1e6, 1)
            row["err_vs_seed"] = round(G.relerr(o, o2), 5)
            row["copy"] = round(G.copy_ceiling(nbytes), 1)
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
