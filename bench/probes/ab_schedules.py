"""Interleaved A/B of pinned sm_90a flash schedules (dense, S=8192, 16K
tokens): each schedule of a case timed in turn, `ROUNDS` times, in one
process, so that clock drift between schedules averages out (single
`bench_gpu.py variants` samples of one schedule moved by up to 7% with
their place in the run), SDPA cuDNN (bf16) timed in the same rounds.
Prints TFLOP/s per round and the median.

    python bench/probes/ab_schedules.py        # bf16
    python bench/probes/ab_schedules.py fp8    # e4m3 q, k and v (scales 1,
                                               # p_scale 1/448), bf16 out
    python bench/probes/ab_schedules.py short  # bf16 D=128 at S = 512 ..
                                               # 4096: the plan's schedule,
                                               # then its persistent form
    python bench/probes/ab_schedules.py long   # the same at S = 8192 and
                                               # 16384 (causal), and heads
                                               # of 64 (three warpgroups
                                               # against the persistent two)
    python bench/probes/ab_schedules.py order  # bf16 D=128 at S = 512 ..
                                               # 8192: the grid and the
                                               # persistent form (the order
                                               # of its claimed programs)
    python bench/probes/ab_schedules.py order64  # the same for heads of 64
                                               # (three warpgroups against
                                               # the persistent two), S =
                                               # 1024 .. 8192 without mask
    python bench/probes/ab_schedules.py keys   # bf16 D=128 full at S = 1024
                                               # .. 8192: 128- or 176-key
                                               # tiles, grid or persistent
    python bench/probes/ab_schedules.py fp8 keys  # e4m3 D=128 at S = 2048
                                               # and 8192: the plan's
                                               # 128-key tiles against 160,
                                               # 192 and 224 (FA3's fp8 tile)

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
FP8 = "fp8" in sys.argv[1:]
# (D, causal): schedules (block_q, block_n, pack, warps, tma, producer,
# pingpong); None is the plan's.
CASES = {
    (256, False): [(128, 80, 1, 8, 1, 4, 0), (128, 80, 1, 8, 1, 4, 1)],
    (256, True): [(128, 80, 1, 8, 1, 4, 0), (128, 80, 1, 8, 1, 4, 1)],
    (128, False): [(128, 128, 1, 8, 1, 4, 1), (128, 176, 1, 8, 1, 4, 1)],
}
FP8_CASES = {
    (128, False): [None, (128, 128, 1, 8, 1, 4, 0)],
    (128, True): [None, (128, 128, 1, 8, 1, 4, 0)],
    (256, False): [None, (128, 128, 1, 8, 1, 4, 0)],
}
# (S, causal): the non-persistent and the persistent form of the plan's
# schedule for heads of 128 (which one the plan takes depends on
# attn.short_sequences, set from the tokens a sequence).
SHORT_CASES = {(S, c): [(128, 128, 1, 8, 1, 4, 1, 0), (128, 128, 1, 8, 1, 4, 1, 1)]
               for S in (512, 1024, 2048, 4096) for c in (False, True)}
SHORT = "short" in sys.argv[1:]
PLAN64, PERSISTENT = (192, 128, 1, 12, 1, 4, 1, 0), (128, 128, 1, 8, 1, 4, 1, 1)
LONG_CASES = {
    (128, 8192, True): SHORT_CASES[(512, True)],
    (128, 16384, True): SHORT_CASES[(512, True)],
    **{(64, S, c): [PLAN64, PERSISTENT]
       for S, c in ((1024, False), (1024, True), (4096, True), (8192, True))}}
# FlashAttention-3's non-causal tile for heads of 128 is 128 x 176.
KEY_CASES = {(128, S, False): [(128, n, 1, 8, 1, 4, 1, p)
                               for p in (0, 1) for n in (128, 176)]
             for S in (1024, 2048, 4096, 8192)}
ORDER_CASES = {(128, S, c): SHORT_CASES[(512, c)]
               for S in (512, 1024, 2048, 4096, 8192) for c in (False, True)}
ORDER64_CASES = {(64, S, False): [PLAN64, PERSISTENT]
                 for S in (1024, 2048, 4096, 8192)}
# fp8 heads of 128 on tiles of more than 128 keys (V^T in two atoms):
# FlashAttention-3 takes 224 keys for them.
FP8_KEY_CASES = {(128, S, c): [None] + [(128, n, 1, 8, 1, 4, 1)
                                        for n in (160, 192, 224)]
                 for S in (2048, 8192) for c in (False, True)}
FP8_SCALES = dict(fp8_scales=(1.0, 1.0, 1.0, 1.0 / 448))
cases = ({(128, S, c): v for (S, c), v in SHORT_CASES.items()} if SHORT else
         LONG_CASES if "long" in sys.argv[1:] else
         FP8_KEY_CASES if FP8 and "keys" in sys.argv[1:] else
         KEY_CASES if "keys" in sys.argv[1:] else
         ORDER64_CASES if "order64" in sys.argv[1:] else
         ORDER_CASES if "order" in sys.argv[1:] else
         {(D, 8192, c): v for (D, c), v in (FP8_CASES if FP8 else CASES).items()})
for (D, S_, causal), schedules in cases.items():
    H, B = 2048 // D, 16384 // S_
    flops = 4 * B * H * S_ * S_ * D * (0.5 if causal else 1.0)
    qv, kv, vv = (G.randn(B * S_, H, D, dtype="fp8" if FP8 else "bf16")
                  for _ in range(3))
    cu = G.ints(np.arange(B + 1) * S_)
    o = G.randn(B * S_, H, D)
    extra = FP8_SCALES if FP8 else {}
    runs = {s: [] for s in schedules}
    if not G.DRY:   # SDPA cuDNN in the same rounds
        import torch
        from torch.nn.attention import SDPBackend, sdpa_kernel
        q4, k4, v4 = (x.to(torch.bfloat16).view(B, S_, H, D).transpose(1, 2)
                      for x in (qv, kv, vv))
        runs["cudnn"] = []
    for _ in range(1 if G.DRY else ROUNDS):
        for s in schedules:
            fn = lambda: ops.flash(qv, kv, vv, cu, cu, o, scale=1 / math.sqrt(D),  # noqa: E731
                                   causal=causal, schedule=s, **extra)
            runs[s].append(round(flops / G.timed(fn) / 1e9, 1))
        if not G.DRY:
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                fn = lambda: torch.nn.functional.scaled_dot_product_attention(  # noqa: E731
                    q4, k4, v4, is_causal=causal)
                runs["cudnn"].append(round(flops / G.timed(fn) / 1e9, 1))
    for s, r in runs.items():
        name = "plan" if s is None else s if s == "cudnn" else list(s)
        print(json.dumps(dict(D=D, S=S_, causal=causal, schedule=name, rounds=r,
                              median=statistics.median(r))), flush=True)
