"""One block-sparse call of the benchmark's shape (S=16384, H=16, D=128,
bf16, a Phi-3-small-like pattern: 16 local blocks of 64 and a vertical
stride of 8, per head) for Nsight Compute:

    ncu --section SpeedOfLight --section WarpStateStats -k regex:kernel \\
        -c 1 python3 bench/profile_blocksparse.py

With ATTN_MLIR_DRY_RUN=1 (and ATTN_MLIR_RECORD) it only records the
specialization, on a machine without a GPU.
"""
import math
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from attn_mlir import ops  # noqa: E402
from bench_gpu import phi3_layout  # noqa: E402

S, H, D, BLOCK, LOCAL, VSTRIDE = 16384, 16, 128, 64, 16, 8
crow, col, _ = phi3_layout(S, H, BLOCK, LOCAL, VSTRIDE)
cu = np.array([0, S], np.int32)
if os.environ.get("ATTN_MLIR_DRY_RUN"):
    import ml_dtypes
    q = np.empty((S, H, D), ml_dtypes.bfloat16)
    ops.blocksparse(q, q, q, cu, cu, crow, col, np.empty_like(q),
                    scale=1 / math.sqrt(D),
                    block_size=BLOCK)
    sys.exit(0)
import torch  # noqa: E402
q, k, v, o = (torch.randn(S, H, D, dtype=torch.bfloat16, device="cuda")
              for _ in range(4))
t = lambda a: torch.as_tensor(a, device="cuda")  # noqa: E731
ops.blocksparse(q, k, v, t(cu), t(cu), t(crow), t(col), o,
                scale=1 / math.sqrt(D), block_size=BLOCK)
torch.cuda.synchronize()
