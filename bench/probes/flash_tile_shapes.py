"""How the sm_90a pipeline's program shape alone moves dense throughput:
causal flash at S=16384, H=16, D=128 (bf16) under the plan's schedule
(128 x 128 tiles, two consumer warpgroups in pingpong), 128 x 64 tiles,
and the block-sparse programs' shape (one consumer warpgroup of 64 rows,
64-key tiles, two blocks per SM). Prints TFLOP/s per schedule.
ATTN_MLIR_DRY_RUN=1 only records the specializations.
"""
import math
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from attn_mlir import ops  # noqa: E402

S, H, D = 16384, 16, 128
SCHEDULES = [None, (128, 64, 1, 8, 1, 4, 1), (64, 64, 1, 4, 1, 4, 0),
             (64, 128, 1, 4, 1, 4, 0)]
cu = np.array([0, S], np.int32)
if os.environ.get("ATTN_MLIR_DRY_RUN"):
    import ml_dtypes
    q = np.empty((S, H, D), ml_dtypes.bfloat16)
    for s in SCHEDULES:
        ops.flash(q, q, q, cu, cu, np.empty_like(q), scale=0.1, causal=True,
                  schedule=s)
    sys.exit(0)
import torch  # noqa: E402
q, k, v, o = (torch.randn(S, H, D, dtype=torch.bfloat16, device="cuda")
              for _ in range(4))
cu_d = torch.as_tensor(cu, device="cuda")
flops = 4 * S * S * D * H / 2
for s in SCHEDULES:
    fn = lambda: ops.flash(q, k, v, cu_d, cu_d, o, scale=1 / math.sqrt(D),  # noqa: E731
                           causal=True, schedule=s)
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(True), torch.cuda.Event(True)
    start.record()
    for _ in range(20):
        fn()
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / 20
    print(f"schedule {s or 'plan'}: {ms * 1e3:.0f} us, "
          f"{flops / ms / 1e9:.0f} TFLOP/s", flush=True)
