"""Masked sm_90a programs: windowed and ALiBi prefix prefill, causal
flash. Times each case `ROUNDS` times in one process and prints the
microseconds of every round and their median, so that two builds (bundle
directories) run one after the other in one device call compare:

    ATTN_MLIR_BUNDLES=old python bench/probes/mask_intervals.py
    ATTN_MLIR_BUNDLES=new python bench/probes/mask_intervals.py

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
D, BS, X = 128, 16, 8


def prefix_case(B, ctx, ql, Hq, Hk, window=None, alibi=False):
    nblk = (ctx + ql + BS - 1) // BS
    nb = B * nblk + 4
    k_cache = G.randn(nb, Hk, D // X, BS, X)
    v_cache = G.randn(nb, Hk, D, BS)
    perm = np.random.default_rng(0).permutation(nb)[: B * nblk]
    b_loc = G.ints(perm.reshape(B, nblk))
    q, o = G.randn(B * ql, Hq, D), G.randn(B * ql, Hq, D)
    k, v = G.randn(B * ql, Hk, D), G.randn(B * ql, Hk, D)
    b_start = G.ints(np.arange(B + 1) * ql)
    b_seq = G.ints(np.full(B, ctx + ql))
    slopes = None
    if alibi:
        s = 2.0 ** (-8.0 * np.arange(1, Hq + 1) / Hq)
        slopes = (s.astype(np.float32) if G.DRY else
                  G.torch.tensor(s, dtype=G.torch.float32, device=G.dev))
    return lambda: ops.prefix_prefill(
        q, k, v, k_cache, v_cache, b_loc, b_start, b_seq, o,
        scale=1 / math.sqrt(D), sliding_window=window, alibi_slopes=slopes)


def flash_case(S_, causal=True):
    H, B = 16, 16384 // S_
    q, k, v, o = (G.randn(B * S_, H, D) for _ in range(4))
    cu = G.ints(np.arange(B + 1) * S_)
    return lambda: ops.flash(q, k, v, cu, cu, o, scale=1 / math.sqrt(D),
                             causal=causal)


CASES = {
    "prefix B=8 ctx=2048 q=512 GQA 32/8": lambda: prefix_case(8, 2048, 512, 32, 8),
    "prefix same, window 1024": lambda: prefix_case(8, 2048, 512, 32, 8, 1024),
    "prefix same, window 256": lambda: prefix_case(8, 2048, 512, 32, 8, 256),
    "prefix same, ALiBi": lambda: prefix_case(8, 2048, 512, 32, 8, alibi=True),
    "prefix MHA 32/32, window 1024": lambda: prefix_case(8, 2048, 512, 32, 32,
                                                         1024),
    "flash causal S=512": lambda: flash_case(512),
    "flash causal S=2048": lambda: flash_case(2048),
    "flash causal S=8192": lambda: flash_case(8192),
}
fns = {name: make() for name, make in CASES.items()}
runs = G.rounds(fns, ROUNDS)
for name, r in runs.items():
    print(json.dumps(dict(case=name, us=r, median=statistics.median(r))),
          flush=True)
