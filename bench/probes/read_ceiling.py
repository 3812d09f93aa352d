"""What an SM kernel that only reads reaches, timed as the decode rows are
(bench_gpu.timed_graph: CUDA graph replays under triton's do_bench, whose
L2 flush is a 256 MB zero fill before each replay), beside the device copy
of the same bytes (bench_gpu.copy_ceiling: issue 20's ceiling).

A Triton kernel sums PROBE_BYTES (the decode rows' K/V bytes: B=1 ctx 32k
and B=8 ctx 8k at 16 bits, their fp8 halves) in 16-byte loads, one block of
PROBE_BLOCK bytes a program, with the L2 eviction policy of the loads
"evict_normal" or "evict_first". GB/s = bytes read / time.

    python bench/probes/read_ceiling.py
"""
import json
import os
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_gpu as G  # noqa: E402

env = os.environ.get
SIZES = [int(x) for x in env(
    "PROBE_BYTES", "134217728,268435456,67108864").split(",")]
BLOCK = int(env("PROBE_BLOCK", 65536))


@triton.jit
def read_sum(x, out, n, BLOCK: tl.constexpr, EVICT_FIRST: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    if EVICT_FIRST:
        v = tl.load(x + offs, mask=offs < n, other=0,
                    eviction_policy="evict_first")
    else:
        v = tl.load(x + offs, mask=offs < n, other=0)
    tl.atomic_add(out, tl.sum(v.to(tl.int32), axis=0))


for nbytes in SIZES:
    words = nbytes // 4
    x = torch.ones(words, dtype=torch.int32, device="cuda")
    out = torch.zeros(1, dtype=torch.int32, device="cuda")
    grid = (triton.cdiv(words, BLOCK // 4),)
    row = dict(bytes=nbytes, copy_gbps=round(G.copy_ceiling(nbytes), 1))
    for name, evict in (("evict_normal", False), ("evict_first", True)):
        def call():
            read_sum[grid](x, out, words, BLOCK=BLOCK // 4, EVICT_FIRST=evict)
        us = G.timed_graph(call) * 1e3
        row[name + "_us"] = round(us, 1)
        row[name + "_gbps"] = round(nbytes / us / 1e3, 1)
    print(json.dumps(row), flush=True)
