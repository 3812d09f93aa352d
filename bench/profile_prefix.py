"""One prefix-prefill call of the benchmark's first shape (B=8, ctx=2048,
512 new tokens, GQA 32/8, D=128, bf16 caches in vLLM's layouts, page 16)
for Nsight Compute:

    ncu --section WarpStateStats --section SourceCounters -k regex:^attn_ \\
        -c 1 python3 bench/profile_prefix.py [SCHEDULE] [fp8]

SCHEDULE (optional, comma-separated) pins one, e.g. 32,128,4,8 for the
step back from the plan's producer warpgroup; `fp8` makes the caches fp8
e4m3 with scales of 0.5 (the benchmark's fp8 row). With ATTN_MLIR_DRY_RUN=1
(and ATTN_MLIR_RECORD) it only records the specialization.
"""
import math
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from attn_mlir import ops  # noqa: E402

B, CTX, QL, D, HQ, HK, BS, X = 8, 2048, 512, 128, 32, 8, 16, 8
args = [a for a in sys.argv[1:] if a != "fp8"]
fp8 = "fp8" in sys.argv[1:]
schedule = tuple(int(x) for x in args[0].split(",")) if args else None
nblk = CTX // BS
nb = B * nblk + 4
table = np.random.default_rng(0).permutation(nb)[:B * nblk].reshape(
    B, nblk).astype(np.int32)
starts = (np.arange(B + 1) * QL).astype(np.int32)
seq_lens = np.full(B, CTX + QL, np.int32)
shapes = [(B * QL, HQ, D), (B * QL, HK, D), (B * QL, HK, D),
          (nb, HK, D // X, BS, X), (nb, HK, D, BS)]
if os.environ.get("ATTN_MLIR_DRY_RUN"):
    import ml_dtypes
    arrays = [np.empty(s, ml_dtypes.float8_e4m3fn if fp8 and i >= 3
                       else ml_dtypes.bfloat16) for i, s in enumerate(shapes)]
    kv = np.full(1, 0.5, np.float32) if fp8 else None
    ops.prefix_prefill(*arrays, table, starts, seq_lens,
                       np.empty_like(arrays[0]), scale=1 / math.sqrt(D),
                       k_scale=kv, v_scale=kv, schedule=schedule)
    sys.exit(0)
import torch  # noqa: E402
arrays = [torch.randn(s, dtype=torch.bfloat16, device="cuda") for s in shapes]
if fp8:
    arrays[3:] = [a.to(torch.float8_e4m3fn) for a in arrays[3:]]
kv = torch.full((1,), 0.5, device="cuda") if fp8 else None
ints = [torch.as_tensor(a, device="cuda") for a in (table, starts, seq_lens)]
ops.prefix_prefill(*arrays, *ints, torch.empty_like(arrays[0]),
                   scale=1 / math.sqrt(D), k_scale=kv, v_scale=kv,
                   schedule=schedule)
torch.cuda.synchronize()
