"""Host time of one attn_mlir call on CUDA tensors (Python + driver launch),
against the seed Triton kernel's, on the split-KV decode shape of the
benchmark (B=8, ctx=8192): calls are enqueued back to back without
synchronization, so the GPU is never the bottleneck of the loop. Prints
microseconds per call and the top functions of a cProfile run.

    python bench/host_overhead.py
"""

import cProfile
import pstats
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / ".peers"))
from attn_mlir import ops  # noqa: E402
import vllm_seeds as S  # noqa: E402


def per_call_us(fn, n=300):
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    host = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    return host


def main():
    D, Hq, Hk, bs, B, ctx, segments = 128, 32, 8, 16, 8, 256, 8
    dev = "cuda"
    nblk = ctx // bs
    kc = torch.randn(B * nblk, bs, Hk, D, dtype=torch.bfloat16, device=dev)
    vc = torch.randn_like(kc)
    bt = torch.arange(B * nblk, dtype=torch.int32, device=dev).view(B, nblk)
    q = torch.randn(B, Hq, D, dtype=torch.bfloat16, device=dev)
    o = torch.empty_like(q)
    cu = torch.arange(B + 1, dtype=torch.int32, device=dev)
    su = torch.full((B,), ctx, dtype=torch.int32, device=dev)
    part = torch.empty(B, Hq, segments, D, dtype=torch.float32, device=dev)
    smax = torch.empty(B, Hq, segments, dtype=torch.float32, device=dev)
    ssum = torch.empty_like(smax)
    scale = D ** -0.5

    def split():
        ops.unified(q, kc, vc, bt, cu, su, part, scale=scale,
                    num_segments=segments, segment_max=smax, segment_sum=ssum)
        ops.merge_states(part, o, segment_max=smax, segment_sum=ssum)

    def single():
        ops.unified(q, kc, vc, bt, cu, su, o, scale=scale)

    # The same calls without the torch.library layer (torch.ops.attn_mlir):
    # what that layer adds on this machine.
    def split_direct():
        ops._unified(q, kc, vc, bt, cu, su, part, scale=scale,
                     num_segments=segments, segment_max=smax,
                     segment_sum=ssum)
        ops._merge_states(part, o, segment_max=smax, segment_sum=ssum)

    def single_direct():
        ops._unified(q, kc, vc, bt, cu, su, o, scale=scale)

    def merge_only():
        ops.merge_states(part, o, segment_max=smax, segment_sum=ssum)

    one = torch.ones(1, dtype=torch.float32, device=dev)
    o2 = torch.empty_like(o)

    def seed():
        S.unified.unified_attention(q, kc, vc, o2, cu, 1, su, ctx, scale, True,
                                    (-1, -1), bt, 0.0, None, one, one)

    for name, fn in (("attn_mlir split-KV (2 launches)", split),
                     ("attn_mlir unified (1 launch)", single),
                     ("attn_mlir merge_states alone", merge_only),
                     ("split-KV without torch.library", split_direct),
                     ("unified without torch.library", single_direct),
                     ("seed unified_attention", seed)):
        print(f"{name}: {per_call_us(fn):.1f} us host per call")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(300):
        split()
    prof.disable()
    torch.cuda.synchronize()
    pstats.Stats(prof).sort_stats("tottime").print_stats(22)


if __name__ == "__main__":
    main()
