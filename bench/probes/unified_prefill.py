"""Unified attention over prefill rows (vLLM's one call for prefills, alone
or next to decodes): sm_90a TFLOP/s (causal work) of ops.unified for
several shapes and features, and the mixed batch of bench_gpu.py, beside
the seed's unified kernel where it has the feature (not sinks), each timed
`ROUNDS` times in one process, printing every round and the median, so
that two builds (bundle directories) run one after the other in one
device call compare:

    ATTN_MLIR_BUNDLES=old python bench/probes/unified_prefill.py
    ATTN_MLIR_BUNDLES=new python bench/probes/unified_prefill.py

ATTN_MLIR_DRY_RUN=1 only records the specializations. UNIFIED_CASES=a,b
runs only the cases whose names contain one of those strings.
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

ROUNDS = 5
BS = 16


def case(qlens, seqlens, Hq, Hk, D, **kw):
    B = len(qlens)
    maxblk = max((s + BS - 1) // BS for s in seqlens)
    nb = B * maxblk + 8
    cache = kw.pop("cache", "bf16")
    kc, vc = G.randn(nb, BS, Hk, D, dtype=cache), \
        G.randn(nb, BS, Hk, D, dtype=cache)
    descale = None
    if cache == "fp8":   # per-tensor descales, as vLLM's fp8 caches
        descale = np.full(1, 0.5, np.float32) if G.DRY else \
            G.torch.full((1,), 0.5, dtype=G.torch.float32, device=G.dev)
        kw.update(k_descale=descale, v_descale=descale)
    bt = G.ints(np.random.default_rng(3).permutation(nb)[: B * maxblk]
                .reshape(B, maxblk))
    q, o = G.randn(sum(qlens), Hq, D), G.randn(sum(qlens), Hq, D)
    cu = G.ints(np.concatenate([[0], np.cumsum(qlens)]))
    su = G.ints(seqlens)
    if kw.pop("sinks", False):
        s = np.linspace(-1, 1, Hq).astype(np.float32)
        kw["sinks"] = s if G.DRY else G.torch.tensor(s, device=G.dev)
    # Causal work: query i of a sequence of N keys and L queries sees
    # N - L + i + 1 keys.
    keys = sum(L * (N - L) + L * (L + 1) // 2 for L, N in zip(qlens, seqlens))
    flops = 4 * keys * Hq * D
    fn = lambda: ops.unified(q, kc, vc, bt, cu, su, o,  # noqa: E731
                             scale=1 / math.sqrt(D), **kw)
    seed = None
    if not G.DRY and "sinks" not in kw:
        one = G.torch.ones(1, dtype=G.torch.float32, device=G.dev)
        o2 = G.torch.empty_like(o)
        w = kw.get("sliding_window")
        seed = lambda: G.S.unified.unified_attention(  # noqa: E731
            q, kc, vc, o2, cu, max(qlens), su, max(seqlens), 1 / math.sqrt(D),
            True, (w - 1, 0) if w else (-1, -1), bt, kw.get("softcap") or 0.0,
            None, one if descale is None else descale,
            one if descale is None else descale)
    return fn, flops, seed


CASES = {
    "prefill 4x2048 GQA 32/8 D=128": lambda: case([2048] * 4, [2048] * 4,
                                                  32, 8, 128),
    "prefill 16x512 GQA 32/8 D=128": lambda: case([512] * 16, [512] * 16,
                                                  32, 8, 128),
    "prefill 8x512 after 1536 cached, GQA 32/8 D=128": lambda: case(
        [512] * 8, [2048] * 8, 32, 8, 128),
    "prefill 4x2048 GQA 32/8 D=64": lambda: case([2048] * 4, [2048] * 4,
                                                 32, 8, 64),
    "prefill 4x2048 MHA 16/16 D=128": lambda: case([2048] * 4, [2048] * 4,
                                                   16, 16, 128),
    "prefill 4x2048 window 1024": lambda: case([2048] * 4, [2048] * 4, 32, 8,
                                               128, sliding_window=1024),
    "prefill 4x2048 softcap 50": lambda: case([2048] * 4, [2048] * 4, 32, 8,
                                              128, softcap=50.0),
    "prefill 4x2048 sinks": lambda: case([2048] * 4, [2048] * 4, 32, 8, 128,
                                         sinks=True),
    "prefill 4x2048 GQA 32/8 D=128, fp8 cache": lambda: case(
        [2048] * 4, [2048] * 4, 32, 8, 128, cache="fp8"),
    "prefill 8x512 after 1536 cached, fp8 cache": lambda: case(
        [512] * 8, [2048] * 8, 32, 8, 128, cache="fp8"),
    "mixed 4x1024 + 60x2048 decodes": lambda: case(
        [1024] * 4 + [1] * 60, [1024] * 4 + [2048] * 60, 32, 8, 128),
}
wanted = [w for w in os.environ.get("UNIFIED_CASES", "").split(",") if w]
cases = {name: make() for name, make in CASES.items()
         if not wanted or any(w in name for w in wanted)}
fns, flops = {}, {}
for name, (fn, work, seed) in cases.items():
    fns[name], flops[name] = fn, work
    if seed:
        fns[f"{name} (seed)"], flops[f"{name} (seed)"] = seed, work
runs = G.rounds(fns, ROUNDS)
for name, r in runs.items():
    med = statistics.median(r)
    print(json.dumps(dict(case=name, us=r, median=med,
                          tflops=round(flops[name] / med / 1e6, 1))),
          flush=True)
