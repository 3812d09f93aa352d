"""Softcap (Gemma-2's logit cap, c * tanh(s / c)) through ops.unified:
prefill rows, decode and a mixed batch, each with and without softcap and
beside the seed's unified kernel with the same softcap, `ROUNDS` rounds in
one process. Prints the microseconds of every round and their median, so
that two builds (bundle directories) run one after the other in one
device call compare:

    ATTN_MLIR_BUNDLES=old python bench/probes/softcap.py
    ATTN_MLIR_BUNDLES=new python bench/probes/softcap.py

ATTN_MLIR_DRY_RUN=1 only records the specializations.
"""
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_gpu as G  # noqa: E402
from bench_gpu import ops, np  # noqa: E402

ROUNDS = 5
CAP = 50.0  # Gemma-2's attention softcap
BS = 16


def unified_case(qlens, seqlens, Hq, Hk, D, softcap):
    B = len(qlens)
    maxblk = max((s + BS - 1) // BS for s in seqlens)
    nb = B * maxblk + 8
    kc, vc = G.randn(nb, BS, Hk, D), G.randn(nb, BS, Hk, D)
    bt = G.ints(np.random.default_rng(3).permutation(nb)[: B * maxblk]
                .reshape(B, maxblk))
    q, o = G.randn(sum(qlens), Hq, D), G.randn(sum(qlens), Hq, D)
    cu = G.ints(np.concatenate([[0], np.cumsum(qlens)]))
    su = G.ints(seqlens)
    scale = 1 / math.sqrt(D)
    ours = lambda: ops.unified(q, kc, vc, bt, cu, su, o, scale=scale,  # noqa: E731
                               softcap=softcap)
    seed = None
    if not G.DRY:
        one = G.torch.ones(1, dtype=G.torch.float32, device=G.dev)
        o2 = G.torch.empty_like(o)
        seed = lambda: G.S.unified.unified_attention(  # noqa: E731
            q, kc, vc, o2, cu, max(qlens), su, max(seqlens), scale, True,
            (-1, -1), bt, softcap or 0.0, None, one, one)
    return ours, seed


SHAPES = {
    # name: (query lengths, sequence lengths, Hq, Hk, D)
    "prefill 4x2048 GQA 16/8 D=256": ([2048] * 4, [2048] * 4, 16, 8, 256),
    "prefill 4x2048 GQA 32/16 D=128": ([2048] * 4, [2048] * 4, 32, 16, 128),
    "decode B=64 ctx=2048 GQA 16/8 D=256": ([1] * 64, [2048] * 64, 16, 8, 256),
    "mixed 4x1024 + 60x2048 GQA 32/16 D=128": ([1024] * 4 + [1] * 60,
                                               [1024] * 4 + [2048] * 60,
                                               32, 16, 128),
}
fns = {}
for name, (ql, sl, hq, hk, d) in SHAPES.items():
    for cap in (None, CAP):
        ours, seed = unified_case(ql, sl, hq, hk, d, cap)
        tag = f"{name}, softcap {cap:g}" if cap else f"{name}, no softcap"
        fns[tag] = ours
        if seed and cap:
            fns[f"{tag} (seed)"] = seed
runs = G.rounds(fns, ROUNDS)
for name, r in runs.items():
    print(json.dumps(dict(case=name, us=r, median=statistics.median(r))),
          flush=True)
