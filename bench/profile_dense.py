"""One dense flash call (D=128, S=8192, bf16) for Nsight Compute:

    ncu --section SpeedOfLight --section WarpStateStats --section SchedulerStats \\
        -k regex:kernel -c 1 python3 bench/profile_dense.py [D] [causal]
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
S, H = 8192, 2048 // D
q, k, v, o = (torch.randn(2 * S, H, D, dtype=torch.bfloat16, device="cuda")
              for _ in range(4))
cu = torch.as_tensor(np.arange(3, dtype=np.int32) * S, device="cuda")
ops.flash(q, k, v, cu, cu, o, scale=1 / math.sqrt(D), causal=causal)
torch.cuda.synchronize()
