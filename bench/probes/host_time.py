"""Host time of eager ops.unified calls (the replay path): B=8 ctx 8192
GQA 32/8 D=128 pages of 16, bf16 caches and fp8 e4m3 caches given one
descale tensor for both k_descale and v_descale. Prints the host time a
call (200 calls before one synchronize) and the time with the kernels, and
a cProfile of the host side (PROBE_PROFILE=1)."""
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from attn_mlir import ops  # noqa: E402

D, Hq, Hk, bs, B, ctx = 128, 32, 8, 16, 8, 8192
dev = "cuda"
nblk = ctx // bs
nb = B * nblk + 8
bt = torch.as_tensor(np.random.default_rng(1).permutation(nb - 8)[: B * nblk]
                     .reshape(B, nblk).astype(np.int32), device=dev)
cu = torch.arange(B + 1, dtype=torch.int32, device=dev)
su = torch.full((B,), ctx, dtype=torch.int32, device=dev)
q = torch.randn(B, Hq, D, dtype=torch.bfloat16, device=dev)
o = torch.empty_like(q)
for cache in ("bf16", "fp8"):
    kc = torch.randn(nb, bs, Hk, D, device=dev).to(
        torch.float8_e4m3fn if cache == "fp8" else torch.bfloat16)
    vc = kc.clone()
    d = torch.full((1,), 0.5, dtype=torch.float32, device=dev)
    kw = dict(k_descale=d, v_descale=d) if cache == "fp8" else {}

    def fn():
        ops.unified(q, kc, vc, bt, cu, su, o, scale=0.08, **kw)
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(200):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    t2 = time.perf_counter()
    print(f"{cache}: host {1e6 * (t1 - t) / 200:.1f} us/call, total "
          f"{1e6 * (t2 - t) / 200:.1f} us/call")
    if os.environ.get("PROBE_PROFILE"):
        pr = cProfile.Profile()
        pr.enable()
        for _ in range(200):
            fn()
        pr.disable()
        torch.cuda.synchronize()
        pstats.Stats(pr).sort_stats("tottime").print_stats(12)
