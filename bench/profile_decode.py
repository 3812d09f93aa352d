"""One paged decode step (GQA 32/8, D=128, pages of 16, bf16 cache) for
Nsight Compute: the split-KV unified kernel and its merge, or the
one-pass kernel with segments 0.

    ncu --section SpeedOfLight --section MemoryWorkloadAnalysis \\
        --section WarpStateStats --section Occupancy \\
        -k regex:attn_ -c 2 python3 bench/profile_decode.py [B] [ctx] [segments] [stages]

(defaults 1 32768 32: the benchmark's B=1 row; stages pins the K/V
stages of 64-key tiles, the plan's schedule otherwise)
"""
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from attn_mlir import ops  # noqa: E402

B = int(sys.argv[1]) if len(sys.argv) > 1 else 1
CTX = int(sys.argv[2]) if len(sys.argv) > 2 else 32768
SEGMENTS = int(sys.argv[3]) if len(sys.argv) > 3 else 32
STAGES = int(sys.argv[4]) if len(sys.argv) > 4 else 0
SCHEDULE = (16, 64, 4, 0, 0, 0, 0, 0, STAGES) if STAGES else None
HQ, HK, D, PAGE = 32, 8, 128, 16
pages = CTX // PAGE
kc, vc = (torch.randn(B * pages, PAGE, HK, D, dtype=torch.bfloat16,
                      device="cuda") for _ in range(2))
perm = np.random.default_rng(0).permutation(B * pages).reshape(B, pages)
table = torch.as_tensor(perm.astype(np.int32), device="cuda")
q, o = (torch.randn(B, HQ, D, dtype=torch.bfloat16, device="cuda")
        for _ in range(2))
cu = torch.arange(B + 1, dtype=torch.int32, device="cuda")
used = torch.full((B,), CTX, dtype=torch.int32, device="cuda")
if SEGMENTS:
    part = torch.empty(B, HQ, SEGMENTS, D, device="cuda")
    smax = torch.empty(B, HQ, SEGMENTS, device="cuda")
    ssum = torch.empty_like(smax)
    ops.unified(q, kc, vc, table, cu, used, part, scale=D ** -0.5,
                segment_max=smax, segment_sum=ssum, schedule=SCHEDULE)
    ops.merge_states(part, o, segment_max=smax, segment_sum=ssum)
else:
    ops.unified(q, kc, vc, table, cu, used, o, scale=D ** -0.5,
                schedule=SCHEDULE)
torch.cuda.synchronize()
