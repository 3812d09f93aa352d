"""attn.merge_states alone on a GPU, over the shapes it serves: split-KV
decode merges (f32 partials, max/sum form, 1-256 tokens x 32 heads, 4-32
segments) and context-parallel merges (bf16 partials, lse form, 2
segments, 16K-256K tokens x 32 heads). Prints microseconds (CUDA events,
median of 20) and GB/s of partials read plus output written, one JSON
line per shape; run it once per build (ATTN_MLIR_BUNDLES) to compare.

    python3 bench/probes/merge_shapes.py
    ATTN_MLIR_RECORD=f.jsonl ATTN_MLIR_DRY_RUN=1 python3 bench/probes/merge_shapes.py
"""
import json
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from attn_mlir import ops  # noqa: E402

H, D = 32, 128
SHAPES = [  # (tokens, segments, form)
    (1, 32, "max_sum"), (8, 16, "max_sum"), (64, 8, "max_sum"),
    (256, 4, "max_sum"), (16384, 2, "lse"), (65536, 2, "lse"),
    (262144, 2, "lse"), (65536, 4, "lse")]
DRY = bool(os.environ.get("ATTN_MLIR_DRY_RUN"))
if DRY:
    import ml_dtypes
    for t, s, form in SHAPES:
        t = min(t, 4)
        dt = np.float32 if form == "max_sum" else ml_dtypes.bfloat16
        # (The GPU run's layout: segments outermost in memory.)
        part = np.zeros((s, t, H, D), dt).transpose(1, 2, 0, 3)
        st = np.zeros((s, t, H), np.float32).transpose(1, 2, 0)
        out = np.zeros((t, H, D), ml_dtypes.bfloat16)
        kw = dict(segment_max=st, segment_sum=st) if form == "max_sum" \
            else dict(segment_lse=st)
        ops.merge_states(part, out, **kw)
    sys.exit(0)
import torch  # noqa: E402
for t, s, form in SHAPES:
    dt = torch.float32 if form == "max_sum" else torch.bfloat16
    # The context-parallel layout: segments outermost in memory.
    part = torch.randn((s, t, H, D), device="cuda").to(dt).permute(1, 2, 0, 3)
    st = torch.randn((s, t, H), device="cuda").permute(1, 2, 0)
    out = torch.empty((t, H, D), dtype=torch.bfloat16, device="cuda")
    kw = dict(segment_max=st, segment_sum=st.abs() + 1) if form == "max_sum" \
        else dict(segment_lse=st)
    fn = lambda: ops.merge_states(part, out, **kw)  # noqa: E731
    fn()
    times = []
    for _ in range(20):
        a, b = (torch.cuda.Event(enable_timing=True) for _ in range(2))
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1e3)
    us = float(np.median(times))
    moved = part.numel() * part.element_size() + out.numel() * 2
    print(json.dumps({"tokens": t, "heads": H, "segments": s, "form": form,
                      "us": round(us, 1), "GBps": round(moved / us / 1e3, 1)}),
          flush=True)
