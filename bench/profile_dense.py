"""One dense flash call (D=128, S=8192, bf16) for Nsight Compute:

    ncu --section SpeedOfLight --section WarpStateStats --section SchedulerStats \\
        -k regex:kernel -c 1 python3 bench/profile_dense.py [D] [causal|full] [S] [persistent|fp8]

(16K tokens: 16384 / S sequences of S; `persistent`: the persistent form of
the plan's sm_90a schedule; `fp8`: e4m3 q, k and v with scales 1 and
p_scale 1/448, bf16 output, as bench_gpu.py's fp8 rows.)
"""
import math
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from attn_mlir import ops  # noqa: E402

D = int(sys.argv[1]) if len(sys.argv) > 1 else 128
causal = len(sys.argv) > 2 and sys.argv[2] == "causal"
S = int(sys.argv[3]) if len(sys.argv) > 3 else 8192
schedule = None
if len(sys.argv) > 4 and sys.argv[4] == "persistent":
    schedule = (128, 128 if D <= 128 else 64, 1, 8, 1, 4, int(D <= 128), 1)
fp8 = len(sys.argv) > 4 and sys.argv[4] == "fp8"
H, B = 2048 // D, 16384 // S
q, k, v, o = (torch.randn(B * S, H, D, dtype=torch.bfloat16, device="cuda")
              for _ in range(4))
cu = torch.as_tensor(np.arange(B + 1, dtype=np.int32) * S, device="cuda")
if fp8:
    # The benchmark's call (the drop-in's triton_attention), so that its
    # kernel is the one profiled.
    from attn_mlir import vllm as drop_in
    q, k, v = (x.to(torch.float8_e4m3fn) for x in (q, k, v))
    drop_in.triton_attention(q, k, v, o, cu, cu, S, S, causal,
                             1 / math.sqrt(D), None,
                             fp8_scales=(1.0, 1.0, 1.0, 1.0 / 448))
else:
    ops.flash(q, k, v, cu, cu, o, scale=1 / math.sqrt(D), causal=causal,
              schedule=schedule)
torch.cuda.synchronize()
