"""How the program shape moves fp8-cache decode: ops.unified, B=64 ctx=4096
GQA 32/8 D=128, page 16, e4m3 caches with per-tensor descales (issue 20's
fp8 row), one query token per sequence, under the plan's schedule and
pinned ones (128-key tiles; two K/V stages, dequantized through
registers). Prints
GB/s counted at fp8 width per schedule. ATTN_MLIR_DRY_RUN=1 only records
the specializations.
"""
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from attn_mlir import ops  # noqa: E402

D, HQ, HK, BS, B, CTX = 128, 32, 8, 16, 64, 4096
SCHEDULES = [None, (16, 128, 4), (16, 64, 4, 0, 0, 0, 0, 0, 2)]
nblk = CTX // BS
nb = B * nblk
table = np.random.default_rng(3).permutation(nb).reshape(B, nblk).astype(
    np.int32)
cu = np.arange(B + 1, dtype=np.int32)
su = np.full(B, CTX, np.int32)
scale = D ** -0.5
if os.environ.get("ATTN_MLIR_DRY_RUN"):
    import ml_dtypes
    q = np.empty((B, HQ, D), ml_dtypes.bfloat16)
    kc = np.empty((nb, BS, HK, D), ml_dtypes.float8_e4m3fn)
    one = np.ones(1, np.float32)
    for s in SCHEDULES:
        ops.unified(q, kc, kc, table, cu, su, np.empty_like(q), scale=scale,
                    k_descale=one, v_descale=one, schedule=s)
    sys.exit(0)
import torch  # noqa: E402
dev = "cuda"
q = torch.randn(B, HQ, D, dtype=torch.bfloat16, device=dev)
kc, vc = (torch.randn(nb, BS, HK, D, device=dev).to(torch.float8_e4m3fn)
          for _ in range(2))
o = torch.empty_like(q)
t = lambda a: torch.as_tensor(a, device=dev)  # noqa: E731
one = torch.full((1,), 0.5, dtype=torch.float32, device=dev)
nbytes = B * CTX * HK * D * 2 + 2 * B * HQ * D * 2 + B * nblk * 4
ref = None
# (On the device once: converting them in each call timed the copies.)
table, cu, su = t(table), t(cu), t(su)
for s in SCHEDULES:
    fn = lambda: ops.unified(q, kc, vc, table, cu, su, o,  # noqa: E731
                             scale=scale, k_descale=one, v_descale=one,
                             schedule=s)
    fn()
    torch.cuda.synchronize()
    ref = o.clone() if ref is None else ref
    err = (o.float() - ref.float()).abs().max().item()
    start, end = torch.cuda.Event(True), torch.cuda.Event(True)
    start.record()
    for _ in range(50):
        fn()
    end.record()
    torch.cuda.synchronize()
    us = start.elapsed_time(end) / 50 * 1e3
    print(f"schedule {s or 'plan'}: {us:.1f} us, {nbytes / us / 1e3:.0f} GB/s,"
          f" max|diff to plan| {err:.2e}", flush=True)
