"""Split-KV segment counts for paged decode through the drop-in
(attn_mlir.vllm.unified_attention, the fused split + merge kernel), in CUDA
graphs: GB/s at the cache's width for each forced count (num_segments)
beside the drop-in's own plan (plan_segments). GQA 32/8, D=128, pages of
16. fp8 cache programs have a compact footprint of three an SM (the
small_grid record), which the runtime takes where it needs fewer waves;
plan_segments' cost model counts both footprints (session 27). The "plan"
label is plan_segments with two an SM; the drop-in's own call runs.

    PROBE_CACHES=fp8,bf16 PROBE_SHAPES=64x4096,8x8192 \
        python bench/probes/decode_segments.py

PROBE_COUNTS= (empty) times the plan alone; PROBE_WAVES=0 chooses the fp8
programs' small-grid footprint by the manifest's programs_per_sm alone.
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
from bench_gpu import vllm  # noqa: E402

D, HQ, HK, BS = 128, 32, 8, 16
env = os.environ.get
CACHES = env("PROBE_CACHES", "fp8,bf16").split(",")
SHAPES = [tuple(int(x) for x in s.split("x")) for s in env(
    "PROBE_SHAPES", "64x4096,60x2048,32x4096,8x8192,1x32768").split(",")]
COUNTS = [int(x) for x in env("PROBE_COUNTS", "2,4,8,16,32,64").split(",")
          if x]
# PROBE_WAVES=0: small-grid footprints by the manifest's programs_per_sm
# alone, as before the rule by waves (attn_mlir._gpu.SMALL_GRID_BY_WAVES).
if env("PROBE_WAVES") == "0":
    from attn_mlir import _gpu
    _gpu.SMALL_GRID_BY_WAVES = False
ROUNDS = int(env("PROBE_ROUNDS", 3))


def case(B, ctx, cache):
    q, o, kc, vc, bt, cu, su = G.paged_decode(B, ctx, cache=cache)
    _, scales = G.cache_descales(cache)
    width = 1 if cache == "fp8" else 2
    nbytes = B * ctx * HK * D * width * 2 + 2 * B * HQ * D * 2 + \
        B * (ctx // BS) * 4

    def call(segments):
        return lambda: vllm.unified_attention(
            q, kc, vc, o, cu, 1, su, ctx, 1 / math.sqrt(D), True, (-1, -1),
            bt, 0.0, None, scales.get("k_descale"), scales.get("v_descale"),
            num_segments=segments)
    return nbytes, call, o


def main():
    for cache in CACHES:
        for B, ctx in SHAPES:
            nbytes, call, o = case(B, ctx, cache)
            counts = [None] + [s for s in COUNTS if ctx // s >= 128]
            planned = vllm.plan_segments(1, ctx, BS, B, HK, None if G.DRY else
                                         G.torch.cuda.get_device_properties(0)
                                         .multi_processor_count)
            results = {s: [] for s in counts}
            ref = None
            for _ in range(1 if G.DRY else ROUNDS):
                for s in counts:
                    t = G.timed_graph(call(s))
                    results[s].append(round(nbytes / t / 1e6, 1) if t == t
                                      else None)
                    if not G.DRY and ref is None:
                        ref = o.float().clone()
                    elif not G.DRY:
                        err = G.relerr(o, ref)
                        assert err < 2e-2, (cache, B, ctx, s, err)
                if G.DRY:
                    for s in counts:
                        call(s)()
            for s, r in results.items():
                print(json.dumps(dict(
                    cache=cache, B=B, ctx=ctx,
                    segments="plan (%s)" % planned if s is None else s,
                    programs=B * HK * (s or planned or 1), gbps=r,
                    median=statistics.median(r) if None not in r else None)),
                    flush=True)
            if not G.DRY:
                print(json.dumps(dict(cache=cache, B=B, ctx=ctx,
                                      copy=round(G.copy_ceiling(nbytes), 1))),
                      flush=True)


if __name__ == "__main__":
    main()
