"""Dense flash (D=128, bf16, 16K tokens) at short sequences under several
sm_90a schedules beside SDPA's cuDNN kernel in the same process, to see
which program shape the short-sequence regime (S = 512 .. 2048) wants.
Prints one JSON line per (S, causal, schedule) in TFLOP/s.
ATTN_MLIR_DRY_RUN=1 only records the specializations.

    python3 bench/probes/short_sequences.py [S ...]
"""
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_gpu as G  # noqa: E402
from bench_gpu import ops, np  # noqa: E402

# (block_q, block_n, pack, warps, tma, producer_warps, pingpong, persistent)
SCHEDULES = [None, (128, 128, 1, 8, 1, 4, 1, 0), (128, 128, 1, 8, 1, 4, 1, 1),
             (128, 128, 1, 8, 1, 4, 0, 1), (128, 64, 1, 8, 1, 4, 1, 1),
             (128, 64, 1, 8, 1, 4, 1, 0)]
D = 128
for S_ in [int(a) for a in sys.argv[1:]] or [512, 1024, 2048]:
    for causal in (False, True):
        H, B = 2048 // D, 16384 // S_
        flops = 4 * B * H * S_ * S_ * D * (0.5 if causal else 1.0)
        qv, kv, vv = (G.randn(B * S_, H, D) for _ in range(3))
        cu = G.ints(np.arange(B + 1) * S_)
        row = dict(S=S_, causal=causal)
        for sched in SCHEDULES:
            o = G.randn(B * S_, H, D)
            fn = lambda: ops.flash(qv, kv, vv, cu, cu, o, scale=1 / math.sqrt(D),  # noqa: E731
                                   causal=causal, schedule=sched)
            row[str(list(sched)) if sched else "plan"] = round(
                flops / G.timed(fn) / 1e9, 1)
        if not G.DRY:
            q, k, v = (t.view(B, S_, H, D).transpose(1, 2) for t in (qv, kv, vv))
            with G.sdpa_kernel(G.SDPBackend.CUDNN_ATTENTION):
                f = lambda: G.F.scaled_dot_product_attention(q, k, v, is_causal=causal)  # noqa: E731
                row["cudnn"] = round(flops / G.timed(f) / 1e9, 1)
        print(json.dumps(row), flush=True)
