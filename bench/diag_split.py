"""Times the split-KV decode's two kernels separately (diagnosis helper)."""
import sys
import time
from pathlib import Path
import numpy as np
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
from attn_mlir import ops
import torch, triton
bench = lambda fn: triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median")
D, Hq, Hk, bs = 128, 32, 8, 16
for B, ctx, seg in ((8, 8192, 8), (64, 2048, 0)):
    nblk = ctx // bs; nb = B * nblk + 8
    kc = torch.randn(nb, bs, Hk, D, dtype=torch.bfloat16, device="cuda"); vc = torch.randn_like(kc)
    bt = torch.as_tensor(np.random.default_rng(1).permutation(nb - 8)[: B * nblk].reshape(B, nblk).astype(np.int32), device="cuda")
    q = torch.randn(B, Hq, D, dtype=torch.bfloat16, device="cuda"); o = torch.empty_like(q)
    cu = torch.arange(B + 1, dtype=torch.int32, device="cuda"); su = torch.full((B,), ctx, dtype=torch.int32, device="cuda")
    if seg:
        part = torch.empty(B, Hq, seg, D, device="cuda"); sm = torch.empty(B, Hq, seg, device="cuda"); ss = torch.empty_like(sm)
        f1 = lambda: ops.unified(q, kc, vc, bt, cu, su, part, scale=0.1, num_segments=seg, segment_max=sm, segment_sum=ss)
        f2 = lambda: ops.merge_states(part, o, segment_max=sm, segment_sum=ss)
        f1(); f2(); torch.cuda.synchronize()
        print("split", B, ctx, "unified us", bench(f1) * 1e3, "merge us", bench(f2) * 1e3)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            f1(); f2()
        print("  graph replay us", bench(lambda: g.replay()) * 1e3)
    else:
        f1 = lambda: ops.unified(q, kc, vc, bt, cu, su, o, scale=0.1)
        f1(); torch.cuda.synchronize()
        print("nosplit", B, ctx, "us", bench(f1) * 1e3)
    t = time.perf_counter()
    for _ in range(100): f1()
    print("  host us per call", (time.perf_counter() - t) * 1e4)
