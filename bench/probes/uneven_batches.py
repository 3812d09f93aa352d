"""Dense flash over varlen batches of very unequal sequences (D=128, bf16,
16 heads), sm_90a: the plan (persistent under attn.short_sequences, which
the average length sets), the grid of one block a program and the
persistent form pinned, each timed in turn, ROUNDS times, in one process.
Prints TFLOP/s (causal work counted as computed: each query's visible keys).
ATTN_MLIR_DRY_RUN=1 only records the specializations.

    python bench/probes/uneven_batches.py
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
D, H = 128, 16
GRID, PERSISTENT = (128, 128, 1, 8, 1, 4, 1, 0), (128, 128, 1, 8, 1, 4, 1, 1)
rng = np.random.default_rng(0)
CASES = {
    "one 8192 and 56 of 128": [8192] + [128] * 56,
    "four 2048 and 64 of 64": [2048] * 4 + [64] * 64,
    "random 64-4096": [int(x) for x in rng.integers(64, 4097, 8)],
}
for name, lens in CASES.items():
    for causal in (False, True):
        tokens = sum(lens)
        flops = sum(4 * H * D * (L * (L + 1) / 2 if causal else L * L)
                    for L in lens)
        qv, kv, vv = (G.randn(tokens, H, D) for _ in range(3))
        cu = G.ints(np.concatenate([[0], np.cumsum(lens)]))
        o = G.randn(tokens, H, D)
        runs = {"plan": [], "grid": [], "persistent": []}
        for _ in range(1 if G.DRY else ROUNDS):
            for label, s in (("plan", None), ("grid", GRID),
                             ("persistent", PERSISTENT)):
                fn = lambda: ops.flash(qv, kv, vv, cu, cu, o,  # noqa: E731
                                       scale=1 / math.sqrt(D), causal=causal,
                                       schedule=s)
                runs[label].append(round(flops / G.timed(fn) / 1e9, 1))
        print(json.dumps(dict(case=name, causal=causal,
                              average=round(tokens / len(lens)),
                              **{k: statistics.median(v)
                                 for k, v in runs.items()})), flush=True)
