"""Probe: does split-KV fill the waves of fp8-cache decode? ops.unified,
B=64 ctx=4096 GQA 32/8 D=128 page 16, e4m3 caches with per-tensor
descales (issue 20's fp8 row), with 0, 2 and 4 segments (the split runs
ops.unified into an f32 workspace, then ops.merge_states). Prints GB/s at
fp8 width per count (for reading, not a benchmark). ATTN_MLIR_DRY_RUN=1
(with ATTN_MLIR_RECORD) records only.
"""
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from attn_mlir import ops  # noqa: E402

D, HQ, HK, BS, B, CTX = 128, 32, 8, 16, 64, 4096
COUNTS = (0, 2, 4)
nblk = CTX // BS
nb = B * nblk
table = np.random.default_rng(3).permutation(nb).reshape(B, nblk).astype(
    np.int32)
cu = np.arange(B + 1, dtype=np.int32)
su = np.full(B, CTX, np.int32)
scale = D ** -0.5
nbytes = B * CTX * HK * D * 2 + 2 * B * HQ * D * 2 + B * nblk * 4


def call(q, kc, vc, t, o, one, segments, empty):
    if not segments:
        return lambda: ops.unified(q, kc, vc, *t, o, scale=scale,
                                   k_descale=one, v_descale=one)
    part = empty((B, HQ, segments, D))
    smax, ssum = empty((B, HQ, segments)), empty((B, HQ, segments))

    def run():
        ops.unified(q, kc, vc, *t, part, scale=scale, k_descale=one,
                    v_descale=one, segment_max=smax, segment_sum=ssum)
        ops.merge_states(part, o, segment_max=smax, segment_sum=ssum)
    return run


if os.environ.get("ATTN_MLIR_DRY_RUN"):
    import ml_dtypes
    q = np.empty((B, HQ, D), ml_dtypes.bfloat16)
    kc = np.empty((nb, BS, HK, D), ml_dtypes.float8_e4m3fn)
    one = np.ones(1, np.float32)
    for s in COUNTS:
        call(q, kc, kc, (table, cu, su), np.empty_like(q), one, s,
             lambda shape: np.empty(shape, np.float32))()
    sys.exit(0)
import torch  # noqa: E402
import triton  # noqa: E402
dev = "cuda"
q = torch.randn(B, HQ, D, dtype=torch.bfloat16, device=dev)
kc, vc = (torch.randn(nb, BS, HK, D, device=dev).to(torch.float8_e4m3fn)
          for _ in range(2))
t = tuple(torch.as_tensor(a, device=dev) for a in (table, cu, su))
one = torch.full((1,), 0.5, dtype=torch.float32, device=dev)
ref = None
for s in COUNTS:
    o = torch.empty_like(q)
    fn = call(q, kc, vc, t, o, one, s,
              lambda shape: torch.empty(shape, device=dev))
    fn()
    torch.cuda.synchronize()
    ref = o.clone() if ref is None else ref
    err = (o.float() - ref.float()).abs().max().item()
    ms = triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
    print(f"segments {s}: {ms * 1e3:.1f} us, {nbytes / ms / 1e6:.0f} GB/s, "
          f"max|diff to 0| {err:.2e}")
