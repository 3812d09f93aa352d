"""Interleaved A/B of pinned sm_90a schedules of fp8 flash (e4m3 q, k and
v, scales 1, p_scale 1/448, bf16 output; S=8192, 16K tokens), SDPA cuDNN
at bf16 timed in the same rounds. Prints TFLOP/s per round and the
median. ATTN_MLIR_DRY_RUN=1 only records the specializations.
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
# (D, causal): schedules (block_q, block_n, pack, warps, tma, producer,
# pingpong); None is the plan's.
CASES = {
    (128, False): [None, (128, 128, 1, 8, 1, 4, 0)],
    (128, True): [None, (128, 128, 1, 8, 1, 4, 0)],
    (256, False): [None, (128, 128, 1, 8, 1, 4, 0)],
}
S_ = 8192
SCALES = (1.0, 1.0, 1.0, 1.0 / 448)
for (D, causal), schedules in CASES.items():
    H, B = 2048 // D, 16384 // S_
    flops = 4 * B * H * S_ * S_ * D * (0.5 if causal else 1.0)
    q8, k8, v8 = (G.randn(B * S_, H, D, dtype="fp8") for _ in range(3))
    cu = G.ints(np.arange(B + 1) * S_)
    o = G.randn(B * S_, H, D)
    runs = {s: [] for s in schedules}
    if not G.DRY:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
        q4, k4, v4 = (x.to(torch.bfloat16).view(B, S_, H, D).transpose(1, 2)
                      for x in (q8, k8, v8))
        runs["cudnn"] = []
    for _ in range(1 if G.DRY else ROUNDS):
        for s in schedules:
            fn = lambda: ops.flash(q8, k8, v8, cu, cu, o,  # noqa: E731
                                   scale=1 / math.sqrt(D), causal=causal,
                                   schedule=s, fp8_scales=SCALES)
            runs[s].append(round(flops / G.timed(fn) / 1e9, 1))
        if not G.DRY:
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                fn = lambda: torch.nn.functional.scaled_dot_product_attention(  # noqa: E731
                    q4, k4, v4, is_causal=causal)
                runs["cudnn"].append(round(flops / G.timed(fn) / 1e9, 1))
    for s, r in runs.items():
        name = s if s in ("cudnn", None) else list(s)
        print(json.dumps(dict(D=D, causal=causal, schedule=name or "plan",
                              rounds=r, median=statistics.median(r))),
              flush=True)
