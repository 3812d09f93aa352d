"""Host time of one attn_mlir call on CUDA tensors (Python + driver launch),
against the seed Triton kernel's, on a split-KV decode of B=8 sequences
of 256 keys (the vLLM drop-in as vLLM calls it, and the ops): calls are
enqueued back to back without synchronization, so the GPU is never the
bottleneck of the loop. Prints microseconds per call and the top functions
of a cProfile run.

    python bench/host_overhead.py

With ATTN_MLIR_DRY_RUN=1 (and ATTN_MLIR_RECORD) on a machine without a
GPU, each call runs once on CPU tensors and launches nothing: the
specializations to carry as AOT bundles.
"""

import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / ".peers"))
from attn_mlir import ops, vllm  # noqa: E402
DRY = bool(os.environ.get("ATTN_MLIR_DRY_RUN"))
if not DRY:
    import vllm_seeds as S  # noqa: E402


def per_call_us(fn, n=300, rounds=7):
    """Best of `rounds` rounds of n calls (the host is shared: a round that
    another process interrupts says nothing of the call)."""
    fn()
    if DRY:
        return float("nan")
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n * 1e6)
        torch.cuda.synchronize()
    return best


def main():
    D, Hq, Hk, bs, B, ctx, segments = 128, 32, 8, 16, 8, 256, 8
    dev = "cpu" if DRY else "cuda"
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

    counters = torch.zeros(B, Hq, dtype=torch.int32, device=dev)

    def split_fused():
        ops.unified(q, kc, vc, bt, cu, su, part, scale=scale,
                    num_segments=segments, segment_max=smax, segment_sum=ssum,
                    merged_out=o, merge_counters=counters)

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

    # The drop-in as vLLM calls it (every argument by keyword, its split-KV
    # plan's buffers given), and positionally with its own planner while
    # max_seqlen_k grows by one a call, as in a decode loop.
    ones = torch.ones(B, Hk, dtype=torch.float32, device=dev)
    vllm_kw = dict(
        q=q, k=kc, v=vc, out=o, cu_seqlens_q=cu, max_seqlen_q=1,
        seqused_k=su, max_seqlen_k=ctx, softmax_scale=scale, causal=True,
        window_size=(-1, -1), block_table=bt, softcap=0, q_descale=None,
        k_descale=ones, v_descale=ones, seq_threshold_3D=B,
        num_par_softmax_segments=segments, softmax_segm_output=part,
        softmax_segm_max=smax, softmax_segm_expsum=ssum)

    def drop_in_keywords():
        vllm.unified_attention(**vllm_kw)

    step = [0]

    def drop_in_growing():
        step[0] += 1
        vllm.unified_attention(q, kc, vc, o, cu, 1, su, 4096 + step[0] % 64,
                               scale, True, (-1, -1), bt, 0.0, None, None,
                               None)

    def seed():
        S.unified.unified_attention(q, kc, vc, o2, cu, 1, su, ctx, scale, True,
                                    (-1, -1), bt, 0.0, None, one, one)

    # The runtime's round trip alone on the drop-in's replay plan (pointers,
    # checks, one cuLaunchKernel): the driver's share of the call.
    # (Builds without the runtime's replay engine skip the row.)
    drop_in_keywords()
    from attn_mlir import _replay
    rows = []
    try:
        plan = next(p for key, matches in _replay._PLANS.items()
                    if getattr(key[0], "op", None) == "unified_attention"
                    for _, p in matches
                    if p is not None and p.engine.launches_here)
        rows.append(("runtime round trip of a replayed drop-in call (1 "
                     "launch)",
                     lambda: plan.engine.launch(plan.stream(), plan.backend)))
    except (AttributeError, StopIteration, TypeError):
        pass

    rows += [("drop-in decode, vLLM's keywords (1 launch: merged in the "
              "split kernel)", drop_in_keywords),
             ("drop-in decode, max_seqlen_k growing (1 launch)",
              drop_in_growing),
             ("attn_mlir split-KV + merge_states (2 launches)", split),
             ("attn_mlir split-KV merging its segments (1 launch)",
              split_fused),
             ("attn_mlir unified (1 launch)", single),
             ("attn_mlir merge_states alone", merge_only),
             ("split-KV without torch.library", split_direct),
             ("unified without torch.library", single_direct)]
    if DRY:
        for _, fn in rows:
            fn()
        return
    rows.append(("seed unified_attention", seed))
    for name, fn in rows:
        print(f"{name}: {per_call_us(fn):.1f} us host per call")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(300):
        drop_in_keywords()
    prof.disable()
    torch.cuda.synchronize()
    pstats.Stats(prof).sort_stats("tottime").print_stats(22)


if __name__ == "__main__":
    main()
