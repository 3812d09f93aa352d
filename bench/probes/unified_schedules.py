"""Pinned sm_90a schedules of unified prefill rows (4 x 2048 queries, GQA
32/8, page 16, causal), each timed `ROUNDS` times in one process: the
plan's and the gathering producer's variants (heads of 64 and 128, 64- and
128-key tiles). Prints microseconds per round and the median.

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
BS, HQ, HK, L, B = 16, 32, 8, 2048, 4
# (block_q, block_n, heads_per_program, warps, tma, producer_warps,
# pingpong, persistent, stages); None: the plan's.
GATHER = lambda keys: (32, keys, 4, 8, 0, 4, 1, 0, 0)  # noqa: E731
SCHEDULES = {64: [None, GATHER(64), GATHER(128)],
             128: [None, GATHER(64), GATHER(128)]}
fns = {}
for D, schedules in SCHEDULES.items():
    pages = L // BS
    nb = B * pages + 8
    kc, vc = G.randn(nb, BS, HK, D), G.randn(nb, BS, HK, D)
    bt = G.ints(np.random.default_rng(3).permutation(nb)[: B * pages]
                .reshape(B, pages))
    q, o = G.randn(B * L, HQ, D), G.randn(B * L, HQ, D)
    cu = G.ints(np.arange(B + 1) * L)
    su = G.ints([L] * B)
    for s in schedules:
        fns[(D, s)] = (lambda q=q, kc=kc, vc=vc, bt=bt, cu=cu, su=su, o=o,
                       s=s, D=D: ops.unified(q, kc, vc, bt, cu, su, o,
                                             scale=1 / math.sqrt(D),
                                             schedule=s))
runs = G.rounds(fns, ROUNDS)
flops = lambda D: 4 * B * (L * (L + 1) // 2) * HQ * D  # noqa: E731
for (D, s), r in runs.items():
    med = statistics.median(r)
    print(json.dumps(dict(D=D, schedule=s or "plan", us=r, median=med,
                          tflops=round(flops(D) / med / 1e6, 1))), flush=True)
