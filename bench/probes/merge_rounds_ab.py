"""The drop-in's split-KV decode (fused merge) over bf16 and fp8 e4m3
caches at issue 20's small batches, in CUDA graphs, for comparing builds
of the same specializations: run it once per build (ATTN_MLIR_BUNDLES at
each build's bundles), alternating. Written for the fused merge's whole
rounds (bench/results/2026-12-01-h200-session30.md). Prints GB/s per
round (at the cache's width) and the median, and the output's relative
error against the unsplit ops.unified call of the same build.

    python bench/probes/merge_rounds_ab.py [LABEL]

ATTN_MLIR_DRY_RUN=1 only records the specializations.
"""
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_gpu as G  # noqa: E402
from bench_gpu import vllm  # noqa: E402

ROUNDS = 5
LABEL = sys.argv[1] if len(sys.argv) > 1 else ""
D, Hq, Hk, bs = 128, 32, 8, 16
for cache in ("bf16", "fp8"):
    for B, ctx in ((1, 32768), (2, 32768), (8, 8192), (1, 131072),
                   (64, 2048)):
        q, o, kc, vc, bt, cu, su = G.paged_decode(B, ctx, Hq=Hq, Hk=Hk, D=D,
                                                  bs=bs, cache=cache)
        _, scales = G.cache_descales(cache)
        scale = 1 / math.sqrt(D)
        width = 1 if cache == "fp8" else 2
        nbytes = B * ctx * Hk * D * width * 2 + 2 * B * Hq * D * 2 + \
            B * (ctx // bs) * 4
        ref = G.unified_call(q, kc, vc, bt, cu, su, o, scale, 0, None,
                             **scales)
        o3 = G.randn(B, Hq, D)
        drop = lambda: vllm.unified_attention(  # noqa: E731
            q, kc, vc, o3, cu, 1, su, ctx, scale, True, (-1, -1), bt, 0.0,
            None, scales.get("k_descale"), scales.get("v_descale"))
        runs = []
        for _ in range(1 if G.DRY else ROUNDS):
            runs.append(round(nbytes / G.timed_graph(drop) / 1e6, 1))
        ref()
        drop()
        err = None if G.DRY else G.relerr(o3, o)
        print(json.dumps(dict(build=LABEL, cache=cache, B=B, ctx=ctx,
                              rounds=runs, median=statistics.median(runs),
                              err=err)), flush=True)
