"""fp8 flash (e4m3 q, k, v; bf16 out) at the plan's sm_90a schedule beside
SDPA cuDNN (bf16) in the same rounds, for comparing builds of one
specialization: run it once per build (ATTN_MLIR_BUNDLES pointing at each
build's bundles), alternating, and compare each run's ratios to cuDNN.
Written for the split of the softmax's exp2s between the MUFU and the FMA
pipe (bench/results/2026-11-28-h100-fp8-exp2-split.md). Prints TFLOP/s per
round and the medians.

    python bench/probes/fp8_exp2_split.py [LABEL]

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
LABEL = sys.argv[1] if len(sys.argv) > 1 else ""
CASES = [(128, False), (128, True), (256, False), (64, False)]
S_ = 8192
for D, causal in CASES:
    H, B = 2048 // D, 16384 // S_
    flops = 4 * B * H * S_ * S_ * D * (0.5 if causal else 1.0)
    qv, kv, vv = (G.randn(B * S_, H, D, dtype="fp8") for _ in range(3))
    cu = G.ints(np.arange(B + 1) * S_)
    o = G.randn(B * S_, H, D)
    runs = {"attn_mlir": [], "cudnn": []}
    if not G.DRY:
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
        q4, k4, v4 = (x.to(torch.bfloat16).view(B, S_, H, D).transpose(1, 2)
                      for x in (qv, kv, vv))
    for _ in range(1 if G.DRY else ROUNDS):
        fn = lambda: ops.flash(qv, kv, vv, cu, cu, o, scale=1 / math.sqrt(D),  # noqa: E731
                               causal=causal,
                               fp8_scales=(1.0, 1.0, 1.0, 1.0 / 448))
        runs["attn_mlir"].append(round(flops / G.timed(fn) / 1e9, 1))
        if not G.DRY:
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                fn = lambda: torch.nn.functional.scaled_dot_product_attention(  # noqa: E731
                    q4, k4, v4, is_causal=causal)
                runs["cudnn"].append(round(flops / G.timed(fn) / 1e9, 1))
    med = {k: statistics.median(v) for k, v in runs.items() if v}
    print(json.dumps(dict(build=LABEL, D=D, causal=causal, rounds=runs,
                          median=med,
                          ratio=round(med["attn_mlir"] / med["cudnn"], 3)
                          if "cudnn" in med else None)), flush=True)
