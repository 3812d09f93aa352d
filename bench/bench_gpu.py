"""attn_mlir GPU kernels side by side with the peers (PyTorch SDPA and the
seed Triton kernels) on the shapes of ../shared/peers/bench_peers.py.

    python bench/bench_gpu.py [dense fp8 prefix decode mixed blocksparse]

Needs a CUDA GPU with torch and triton, the peers in .peers/ (a copy of
../shared/peers), and attn_mlir kernels (compiled here, or AOT bundles in
$ATTN_MLIR_BUNDLES). With ATTN_MLIR_DRY_RUN=1 (and ATTN_MLIR_RECORD) it runs
on a machine without a GPU and only records the specializations it needs.
Prints one JSON line per shape and a table at the end.
"""

import json
import math
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
from attn_mlir import ops, vllm  # noqa: E402

DRY = bool(os.environ.get("ATTN_MLIR_DRY_RUN"))
if not DRY:
    import torch
    import torch.nn.functional as F
    import triton
    from torch.nn.attention import SDPBackend, sdpa_kernel
    sys.path.insert(0, str(ROOT / ".peers"))
    import vllm_seeds as S
    dev = "cuda"
    bench = lambda fn: triton.testing.do_bench(fn, warmup=25, rep=100,
                                               return_mode="median")


def randn(*shape, dtype="bf16"):
    if DRY:
        import ml_dtypes
        return np.empty(shape, {"bf16": ml_dtypes.bfloat16, "f32": np.float32,
                                "fp8": ml_dtypes.float8_e4m3fn}[dtype])
    if dtype == "fp8":
        return torch.randn(*shape, device=dev).to(torch.float8_e4m3fn)
    return torch.randn(*shape, dtype={"bf16": torch.bfloat16,
                                      "f32": torch.float32}[dtype], device=dev)


def ints(values):
    if DRY:
        return np.asarray(values, np.int32)
    return torch.as_tensor(np.asarray(values, np.int32), device=dev)


def paged_decode(B, ctx, qlen=1, Hq=32, Hk=8, D=128, bs=16, cache="bf16"):
    """A decode batch of B sequences of ctx cached keys (qlen queries
    each) over pages of bs keys in a shuffled block table (8 spare
    blocks): q, o [B * qlen, Hq, D], the caches, the table, cu_seqlens_q
    and seqused_k."""
    nblk = ctx // bs
    nb = B * nblk + 8
    kc, vc = randn(nb, bs, Hk, D, dtype=cache), randn(nb, bs, Hk, D,
                                                      dtype=cache)
    perm = np.random.default_rng(1).permutation(nb - 8)[: B * nblk]
    bt = ints(perm.reshape(B, nblk))
    q, o = randn(B * qlen, Hq, D), randn(B * qlen, Hq, D)
    cu, su = ints(np.arange(B + 1) * qlen), ints(np.full(B, ctx))
    return q, o, kc, vc, bt, cu, su


def relerr(a, b):
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def timed(fn):
    if DRY:
        fn()
        return float("nan")
    fn()
    torch.cuda.synchronize()
    return bench(fn)


def rounds(fns, n=5):
    """Times every callable of `fns` ({name: fn}) once a round, `n` rounds
    (one in a dry run), so that clock drift spreads over all of them;
    returns {name: [microseconds of each round]}."""
    runs = {name: [] for name in fns}
    for _ in range(1 if DRY else n):
        for name, fn in fns.items():
            runs[name].append(round(timed(fn) * 1e3, 1))
    return runs


def timed_graph(fn):
    """fn captured in a CUDA graph and replayed, as vLLM runs decode: the
    time of the kernels without the Python host time of each call."""
    if DRY:
        return float("nan")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()  # warm: kernels loaded and compiled outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    graph.replay()
    torch.cuda.synchronize()
    return bench(graph.replay)


def cache_descales(cache):
    """(descale, keyword arguments) of a cache type: fp8 caches take one
    descale of 0.5 for K and V (per tensor, as vLLM's), 16-bit ones none;
    the descale also goes to the seed."""
    descale = np.full(1, 0.5, np.float32) if DRY else \
        torch.full((1,), 0.5, dtype=torch.float32, device=dev)
    return descale, (dict(k_descale=descale, v_descale=descale)
                     if cache == "fp8" else {})


def copy_ceiling(nbytes):
    """GB/s of a device copy that moves `nbytes` (half read, half written),
    timed as the kernels are: the copy ceiling that issue 20's decode rows
    are measured against (90% of it)."""
    src = torch.empty(nbytes // 2, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    return nbytes / timed(lambda: dst.copy_(src)) / 1e6


ROWS = []


def emit(row):
    ROWS.append(row)
    print(json.dumps(row), flush=True)


def dense():
    # The issue's shapes, then FA3's sequence sweep at D=128 (16K tokens).
    shapes = [(64, 8192, False), (128, 8192, False), (128, 8192, True),
              (256, 8192, False), (128, 2048, False), (128, 2048, True)]
    shapes += [(128, S_, c) for S_ in (512, 1024, 4096, 16384)
               for c in (False, True)]
    for D, S_, causal in shapes:
        H = 2048 // D
        B = 16384 // S_
        flops = 4 * B * H * S_ * S_ * D * (0.5 if causal else 1.0)
        qv, kv, vv = (randn(B * S_, H, D) for _ in range(3))
        o = randn(B * S_, H, D)
        cu = ints(np.arange(B + 1) * S_)
        scale = 1 / math.sqrt(D)
        ours = lambda: ops.flash(qv, kv, vv, cu, cu, o, scale=scale, causal=causal)
        row = dict(kind="dense", D=D, S=S_, B=B, H=H, causal=causal)
        # On sm_90a also the persistent form of the plan's Hopper schedule.
        if DRY or torch.cuda.get_device_capability() == (9, 0):
            po = randn(B * S_, H, D)
            pers = lambda: ops.flash(qv, kv, vv, cu, cu, po, scale=scale,
                                     causal=causal,
                                     schedule=hopper_schedule(D, True))
            row["persistent"] = flops / timed(pers) / 1e9
        row["attn_mlir"] = flops / timed(ours) / 1e9
        if DRY:
            continue
        q = qv.view(B, S_, H, D).transpose(1, 2)
        k = kv.view(B, S_, H, D).transpose(1, 2)
        v = vv.view(B, S_, H, D).transpose(1, 2)
        ref = F.scaled_dot_product_attention(q[:1].float(), k[:1].float(),
                                             v[:1].float(), is_causal=causal)
        row["err"] = relerr(o[:S_].view(S_, H, D).transpose(0, 1)[None], ref)
        for name, be in (("sdpa_flash", SDPBackend.FLASH_ATTENTION),
                         ("sdpa_cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                with sdpa_kernel(be):
                    f = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    row[name] = flops / timed(f) / 1e9
            except Exception as e:
                row[name] = None
        o2 = torch.empty_like(qv)
        seed = lambda: S.flash.triton_attention(qv, kv, vv, o2, cu, cu, S_, S_,
                                                causal, scale, None)
        row["seed"] = flops / timed(seed) / 1e9
        emit(row)


def hopper_schedule(D, persistent=False):
    """attn-plan's sm_90a schedule of dense bf16 flash (Plan.cpp) before
    heads of 256 took 80-key tiles, and its persistent form (the `persistent`
    column: for heads of 256 it keeps 64-key tiles, whose persistent form
    has run on the GPU; that of 80-key tiles has not)."""
    return (128, 128 if D <= 128 else 64, 1, 8, 1, 4, int(D <= 128),
            int(persistent))


# Schedules tried side by side by `variants` (block_q, block_n, pack, warps,
# tma, producer_warps, pingpong): the plan's default first. On sm_90a the
# plan gives dense bf16 flash the Hopper pipeline (TMA, a producer
# warpgroup, pingpong); the others take it apart step by step.
VARIANTS = {
    (64, False): [None, (128, 64, 1, 8, 1, 4, 0), (128, 64, 1, 8, 1, 0, 0),
                  (128, 64, 1, 8), (128, 128, 1, 8, 1, 4, 1),
                  (128, 192, 1, 8, 1, 4, 1), (192, 128, 1, 12, 1, 4, 1),
                  (192, 64, 1, 12, 1, 4, 0)],
    (64, True): [None, (128, 128, 1, 8, 1, 4, 1), (192, 128, 1, 12, 1, 4, 1)],
    (128, False): [None, (128, 128, 1, 8, 1, 4, 0), (128, 128, 1, 8, 1, 0, 0),
                   (128, 128, 1, 8), (128, 64, 1, 8, 1, 4, 1),
                   (192, 64, 1, 12, 1, 4, 0), (128, 176, 1, 8, 1, 4, 1)],
    (128, True): [None, (128, 128, 1, 8, 1, 4, 0), (128, 128, 1, 8, 1, 0, 0),
                  (128, 64, 1, 8, 1, 4, 1)],
    (256, False): [None, (128, 64, 1, 8, 1, 4, 0), (128, 64, 1, 8, 1, 0, 0),
                   (128, 64, 1, 8, 1, 4, 1), (128, 80, 1, 8, 1, 4, 0),
                   (128, 80, 1, 8, 1, 4, 1)],
    (256, True): [None, (128, 80, 1, 8, 1, 4, 0), (128, 80, 1, 8, 1, 4, 1)],
}


def variants():
    """Dense flash under several schedules (tile-size exploration)."""
    for (D, causal), schedules in VARIANTS.items():
        S_ = 8192
        H, B = 2048 // D, 16384 // S_
        flops = 4 * B * H * S_ * S_ * D * (0.5 if causal else 1.0)
        qv, kv, vv = (randn(B * S_, H, D) for _ in range(3))
        cu = ints(np.arange(B + 1) * S_)
        scale = 1 / math.sqrt(D)
        ref = None
        if not DRY:
            q1, k1, v1 = (t[:S_].view(S_, H, D).transpose(0, 1)[None].float()
                          for t in (qv, kv, vv))
            ref = F.scaled_dot_product_attention(q1, k1, v1, is_causal=causal)
        for sched in schedules:
            o = randn(B * S_, H, D)
            fn = lambda: ops.flash(qv, kv, vv, cu, cu, o, scale=scale,
                                   causal=causal, schedule=sched)
            row = dict(kind="variant", D=D, causal=causal,
                       schedule=list(sched) if sched else "plan")
            row["attn_mlir"] = flops / timed(fn) / 1e9
            if DRY:
                continue
            row["err"] = relerr(o[:S_].view(S_, H, D).transpose(0, 1)[None], ref)
            emit(row)


def prefix():
    D, bs = 128, 16
    # GQA 32/8, and one row of MHA (128-row programs of one head). The
    # split-x K cache has x = 8 elements, as the rows were measured
    # with; the last row is vLLM's own fp8 layout, x = 16 (16 bytes).
    for B, ctx, ql, cache, Hq, Hk, x in (
            (8, 2048, 512, "bf16", 32, 8, 8), (16, 1024, 256, "bf16", 32, 8, 8),
            (8, 2048, 512, "fp8", 32, 8, 8), (8, 2048, 512, "bf16", 32, 32, 8),
            (8, 2048, 512, "fp8", 32, 8, 16)):
        nblk = (ctx + bs - 1) // bs
        nb = B * nblk + 4
        k_cache = randn(nb, Hk, D // x, bs, x, dtype=cache)
        v_cache = randn(nb, Hk, D, bs, dtype=cache)
        # fp8 caches dequantize with per-tensor scales (1-element tensors).
        kv_scale = None
        if cache == "fp8":
            kv_scale = (np.full(1, 0.5, np.float32) if DRY else
                        torch.full((1,), 0.5, dtype=torch.float32, device=dev))
        perm = np.random.default_rng(0).permutation(nb)[: B * nblk].reshape(B, nblk)
        b_loc = ints(perm)
        q = randn(B * ql, Hq, D)
        k, v = randn(B * ql, Hk, D), randn(B * ql, Hk, D)
        o = randn(B * ql, Hq, D)
        b_start = ints(np.arange(B + 1) * ql)
        b_seq = ints(np.full(B, ctx + ql))
        scale = 1 / math.sqrt(D)
        ours = lambda: ops.prefix_prefill(q, k, v, k_cache, v_cache, b_loc,
                                          b_start, b_seq, o, scale=scale,
                                          k_scale=kv_scale, v_scale=kv_scale)
        flops = 4 * B * Hq * ql * (ctx + ql / 2) * D
        row = dict(kind="prefix", B=B, ctx=ctx, qlen=ql, cache=cache,
                   Hq=Hq, Hk=Hk, x=x)
        row["attn_mlir"] = flops / timed(ours) / 1e9
        if cache == "fp8":
            # The schedule fp8 caches had before sm_90a took them onto
            # wgmma: 64-row mma.sync programs.
            old = lambda: ops.prefix_prefill(
                q, k, v, k_cache, v_cache, b_loc, b_start, b_seq, o,
                scale=scale, k_scale=kv_scale, v_scale=kv_scale,
                schedule=(16, 64, 4, 0))
            row["attn_mlir_mma_sync"] = flops / timed(old) / 1e9
            # sm_90a's previous fp8 schedule: warpgroups, every warp
            # dequantizing through registers (no producer warpgroup).
            prev = lambda: ops.prefix_prefill(
                q, k, v, k_cache, v_cache, b_loc, b_start, b_seq, o,
                scale=scale, k_scale=kv_scale, v_scale=kv_scale,
                schedule=(128 // (Hq // Hk), 128, Hq // Hk, 8))
            row["attn_mlir_no_producer"] = flops / timed(prev) / 1e9
        else:
            # The step back from the plan's producer warpgroup (which
            # gathers the pages with cp.async): every warp staging.
            old = lambda: ops.prefix_prefill(
                q, k, v, k_cache, v_cache, b_loc, b_start, b_seq, o,
                scale=scale, schedule=(128 // (Hq // Hk), 128, Hq // Hk, 8))
            row["attn_mlir_no_producer"] = flops / timed(old) / 1e9
        if DRY:
            continue
        one = torch.ones(1, dtype=torch.float32, device=dev)
        o2 = torch.empty_like(o)
        seed = lambda: S.prefix_prefill.context_attention_fwd(
            q, k, v, o2, "fp8" if cache == "fp8" else "auto", k_cache,
            v_cache, b_loc, b_start, b_seq, ctx + ql, ql,
            kv_scale if cache == "fp8" else one,
            kv_scale if cache == "fp8" else one)
        row["seed"] = flops / timed(seed) / 1e9
        row["err_vs_seed"] = relerr(o, o2)
        emit(row)


def fp8():
    """Dense fp8 e4m3 q/k/v (scales 1, P quantized with p_scale 1/448),
    bf16 output, through the drop-in's triton_attention beside the seed's;
    cuDNN and FA2 at bf16 on the same shape for reference. The issue's
    shape (S=8192, full) first, then causal and shorter/longer sequences
    (16K tokens); heads of 64 (on fp8 wgmma too since 2026-11-27) and of
    256 (on fp8 wgmma since 2026-11-28)."""
    for S_, causal in ((8192, False), (8192, True), (2048, False),
                       (16384, True)):
        fp8_row(128, S_, causal)
    for D, causal in ((64, False), (64, True), (256, False), (256, True)):
        fp8_row(D, 8192, causal)


def fp8_row(D, S_, causal):
    from attn_mlir import vllm as drop_in
    H, B = 2048 // D, 16384 // S_
    flops = 4 * B * H * S_ * S_ * D * (0.5 if causal else 1.0)
    q8, k8, v8 = (randn(B * S_, H, D, dtype="fp8") for _ in range(3))
    o = randn(B * S_, H, D)
    cu = ints(np.arange(B + 1) * S_)
    scale = 1 / math.sqrt(D)
    scales = (1.0, 1.0, 1.0, 1.0 / 448)
    ours = lambda: drop_in.triton_attention(q8, k8, v8, o, cu, cu, S_, S_,
                                            causal, scale, None,
                                            fp8_scales=scales)
    row = dict(kind="fp8", D=D, S=S_, B=B, H=H, causal=causal)
    row["attn_mlir"] = flops / timed(ours) / 1e9
    if DRY:
        return
    o2 = torch.empty_like(o)
    seed = lambda: S.flash.triton_attention(q8, k8, v8, o2, cu, cu, S_, S_,
                                            causal, scale, None, scales)
    row["seed"] = flops / timed(seed) / 1e9
    row["err_vs_seed"] = relerr(o, o2)
    q, k, v = (x.to(torch.bfloat16).view(B, S_, H, D).transpose(1, 2)
               for x in (q8, k8, v8))
    for name, be in (("sdpa_flash_bf16", SDPBackend.FLASH_ATTENTION),
                     ("sdpa_cudnn_bf16", SDPBackend.CUDNN_ATTENTION)):
        with sdpa_kernel(be):
            f = lambda: F.scaled_dot_product_attention(q, k, v,
                                                       is_causal=causal)
            row[name] = flops / timed(f) / 1e9
    emit(row)


def unified_call(q, kc, vc, bt, cu, su, o, scale, segments, ws, **scales):
    if not segments:
        return lambda: ops.unified(q, kc, vc, bt, cu, su, o, scale=scale,
                                   **scales)
    part, smax, ssum, counters = ws

    def run():
        # The count is the workspace's dim 2, read at run time (one kernel
        # for every count, as the drop-in runs it), and the segments are
        # merged in the same launch (merged_out).
        ops.unified(q, kc, vc, bt, cu, su, part, scale=scale,
                    segment_max=smax, segment_sum=ssum, merged_out=o,
                    merge_counters=counters, **scales)
    return run


def decode():
    """Issue 20's decode rows (GQA 32/8 D=128 pages of 16), over bf16
    caches and over fp8 e4m3 caches with per-tensor descales (GB/s counted
    at the cache's width)."""
    D, Hq, Hk, bs = 128, 32, 8, 16
    shapes = ((1, 32768), (8, 8192), (64, 2048), (256, 2048))
    for cache, (B, ctx) in [(c, s) for c in ("bf16", "fp8") for s in shapes]:
        q, o, kc, vc, bt, cu, su = paged_decode(B, ctx, Hq=Hq, Hk=Hk, D=D,
                                                bs=bs, cache=cache)
        fp8 = cache == "fp8"
        descale, scales = cache_descales(cache)
        scale = 1 / math.sqrt(D)
        # The library's split-KV planner (attn_mlir.vllm.plan_segments).
        segments = vllm.plan_segments(
            1, ctx, bs, num_seqs=B, num_kv_heads=Hk, num_sms=132,
            key_bytes=2 * D * (1 if fp8 else 2),
            programs_per_sm=vllm._decode_footprints(None if DRY else dev,
                                                    fp8)) or 0
        ws = None
        if segments:
            ws = (randn(B, Hq, segments, D, dtype="f32"),
                  randn(B, Hq, segments, dtype="f32"),
                  randn(B, Hq, segments, dtype="f32"),
                  ints(np.zeros((B, Hq))))
        ours = unified_call(q, kc, vc, bt, cu, su, o, scale, segments, ws,
                            **scales)
        width = 1 if fp8 else 2
        nbytes = B * ctx * Hk * D * width * 2 + 2 * B * Hq * D * 2 + \
            B * (ctx // bs) * 4
        row = dict(kind="decode", B=B, ctx=ctx, segments=segments,
                   cache=cache)
        row["attn_mlir"] = nbytes / timed(ours) / 1e6
        # The drop-in (attn_mlir.vllm.unified_attention): its own plan and
        # workspace, vLLM's arguments.
        o3 = randn(B, Hq, D)
        drop = lambda: vllm.unified_attention(
            q, kc, vc, o3, cu, 1, su, ctx, scale, True, (-1, -1), bt, 0.0,
            None, scales.get("k_descale"), scales.get("v_descale"))
        row["drop_in"] = nbytes / timed(drop) / 1e6
        if DRY:
            continue
        one = torch.ones(1, dtype=torch.float32, device=dev)
        o2 = torch.empty_like(o)
        seed = lambda: S.unified.unified_attention(
            q, kc, vc, o2, cu, 1, su, ctx, scale, True, (-1, -1), bt, 0.0,
            None, descale if fp8 else one, descale if fp8 else one)
        row["seed"] = nbytes / timed(seed) / 1e6
        row["err_vs_seed"] = relerr(o, o2)
        row["attn_mlir_graph"] = nbytes / timed_graph(ours) / 1e6
        row["seed_graph"] = nbytes / timed_graph(seed) / 1e6
        row["drop_in_graph"] = nbytes / timed_graph(drop) / 1e6
        row["err_drop_in"] = relerr(o3, o)
        row["copy"] = copy_ceiling(nbytes)
        emit(row)


def serving():
    """Issue 20's two new decode rows, B=64 ctx=4096 GQA 32/8 D=128 pages
    of 16: 4 query tokens per sequence (speculative / multi-token decode,
    causal within the sequence), and one token over an fp8 e4m3 cache (GB/s
    counted at fp8 width). Through the drop-in and ops.unified, beside the
    seed, eager and in CUDA graphs."""
    D, Hq, Hk, bs, B, ctx = 128, 32, 8, 16, 64, 4096
    nblk = ctx // bs
    nb = B * nblk + 8
    bt = ints(np.random.default_rng(3).permutation(nb - 8)[: B * nblk]
              .reshape(B, nblk))
    su = ints(np.full(B, ctx))
    scale = 1 / math.sqrt(D)
    for name, qlen, cache in (("4 query tokens", 4, "bf16"),
                              ("fp8 cache", 1, "fp8")):
        kc, vc = randn(nb, bs, Hk, D, dtype=cache), \
            randn(nb, bs, Hk, D, dtype=cache)
        q, o = randn(B * qlen, Hq, D), randn(B * qlen, Hq, D)
        cu = ints(np.arange(B + 1) * qlen)
        fp8 = cache == "fp8"
        descale, scales = cache_descales(cache)
        width = 1 if fp8 else 2
        nbytes = B * ctx * Hk * D * width * 2 + 2 * B * qlen * Hq * D * 2 + \
            B * nblk * 4
        drop = lambda: vllm.unified_attention(
            q, kc, vc, o, cu, qlen, su, ctx, scale, True, (-1, -1), bt, 0.0,
            None, scales.get("k_descale"), scales.get("v_descale"))
        o4 = randn(B * qlen, Hq, D)
        ours = lambda: ops.unified(q, kc, vc, bt, cu, su, o4, scale=scale,
                                   **scales)
        row = dict(kind="serving", case=name, B=B, ctx=ctx, qlen=qlen,
                   cache=cache)
        row["attn_mlir"] = nbytes / timed(drop) / 1e6
        row["ops_unified"] = nbytes / timed(ours) / 1e6
        if DRY:
            continue
        one = torch.ones(1, dtype=torch.float32, device=dev)
        o2 = torch.empty_like(o)
        seed = lambda: S.unified.unified_attention(
            q, kc, vc, o2, cu, qlen, su, ctx, scale, True, (-1, -1), bt, 0.0,
            None, descale if fp8 else one, descale if fp8 else one)
        row["seed"] = nbytes / timed(seed) / 1e6
        row["err_vs_seed"] = relerr(o, o2)
        row["err_ops_unified"] = relerr(o4, o)
        row["attn_mlir_graph"] = nbytes / timed_graph(drop) / 1e6
        row["seed_graph"] = nbytes / timed_graph(seed) / 1e6
        row["copy"] = copy_ceiling(nbytes)
        emit(row)


def mixed():
    """Issue 20's mixed batch (4 prefills of 1k tokens, 60 decodes of 2k
    keys) through ops.unified, over a bf16 cache and over an fp8 e4m3 cache
    with per-tensor descales."""
    D, Hq, Hk, bs = 128, 32, 8, 16
    for cache, (n_pre, pre_len, n_dec, ctx) in (
            ("bf16", (4, 1024, 60, 2048)), ("fp8", (4, 1024, 60, 2048))):
        qlens = [pre_len] * n_pre + [1] * n_dec
        seqlens = [pre_len] * n_pre + [ctx] * n_dec
        B = len(qlens)
        maxblk = max((s + bs - 1) // bs for s in seqlens)
        nb = B * maxblk + 8
        kc, vc = randn(nb, bs, Hk, D, dtype=cache), \
            randn(nb, bs, Hk, D, dtype=cache)
        fp8 = cache == "fp8"
        descale, scales = cache_descales(cache)
        bt = ints(np.random.default_rng(2).permutation(nb)[: B * maxblk].reshape(B, maxblk))
        q, o = randn(sum(qlens), Hq, D), randn(sum(qlens), Hq, D)
        cu = ints(np.concatenate([[0], np.cumsum(qlens)]))
        su = ints(seqlens)
        scale = 1 / math.sqrt(D)
        ours = lambda: ops.unified(q, kc, vc, bt, cu, su, o, scale=scale,
                                   **scales)
        row = dict(kind="mixed", prefills=n_pre, decodes=n_dec, ctx=ctx,
                   cache=cache)
        row["attn_mlir_us"] = timed(ours) * 1e3
        if DRY:
            continue
        one = torch.ones(1, dtype=torch.float32, device=dev)
        o2 = torch.empty_like(o)
        seed = lambda: S.unified.unified_attention(
            q, kc, vc, o2, cu, max(qlens), su, max(seqlens), scale, True,
            (-1, -1), bt, 0.0, None, descale if fp8 else one,
            descale if fp8 else one)
        row["seed_us"] = timed(seed) * 1e3
        row["err_vs_seed"] = relerr(o, o2)
        emit(row)


def phi3_layout(S, H, bsz, local, vstride):
    """Phi-3-small-like per-head causal layouts: `local` diagonal blocks
    and every `vstride`-th block (offset by the head), as CSR; and the
    share of the causal work they select."""
    nb = S // bsz
    i, j = np.arange(nb)[:, None], np.arange(nb)[None, :]
    dense = np.stack([(j <= i) & (((i - j) < local) | (((j + h + 1) % vstride) == 0))
                      for h in range(H)])
    crow = np.zeros((H, nb + 1), np.int32)
    crow[:, 1:] = dense.sum(-1).cumsum(-1)
    col = np.zeros((H, int(dense.sum(-1).sum(-1).max())), np.int32)
    for h in range(H):
        c = dense[h].nonzero()[1]
        col[h, :c.size] = c
    return crow, col, dense.mean() * 2


def blocksparse():
    D, H, bsz = 128, 16, 64
    for S_, local, vstride in ((16384, 16, 8),):
        crow, col, density = phi3_layout(S_, H, bsz, local, vstride)
        q, k, v, o = (randn(S_, H, D) for _ in range(4))
        cu = ints([0, S_])
        crow_d, col_d = ints(crow), ints(col)
        scale = 1 / math.sqrt(D)
        ours = lambda: ops.blocksparse(q, k, v, cu, cu, crow_d, col_d, o,
                                       scale=scale, block_size=bsz)
        row = dict(kind="blocksparse", S=S_, H=H, density_vs_causal=float(density))
        row["attn_mlir_us"] = timed(ours) * 1e3
        if DRY:
            for sched in BLOCKSPARSE_VARIANTS:
                ops.blocksparse(q, k, v, cu, cu, crow_d, col_d, o, scale=scale,
                                block_size=bsz, schedule=sched)
            continue
        seed = lambda: S.blocksparse.blocksparse_flash_attn_varlen_fwd(
            q, k, v, cu, cu, scale, (crow_d, col_d), block_size=bsz)
        row["seed_us"] = timed(seed) * 1e3
        row["err_vs_seed"] = relerr(o, seed())
        for sched in BLOCKSPARSE_VARIANTS:
            o2 = randn(S_, H, D)
            fn = lambda: ops.blocksparse(q, k, v, cu, cu, crow_d, col_d, o2,
                                         scale=scale, block_size=bsz,
                                         schedule=sched)
            row[f"variant {list(sched)} us"] = timed(fn) * 1e3
        emit(row)


# Schedules tried beside the plan's in `blocksparse` (block_q, block_n, pack,
# warps[, tma, producer_warps, pingpong]): the one-warpgroup TMA programs
# of one layout row (the plan before 2026-11-28) and mma.sync.
BLOCKSPARSE_VARIANTS = [(64, 64, 1, 4, 1, 4, 0), (64, 64, 1, 2)]


def table():
    print("\n| case | attn_mlir | seed Triton | SDPA FA2 | SDPA cuDNN | ours/seed "
          "| ours/FA2 | ours/cuDNN |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in ROWS:
        k = r["kind"]
        if k == "variant":
            print(f"| dense D={r['D']} {'causal' if r['causal'] else 'full'} "
                  f"schedule {r['schedule']} (TFLOP/s) | {r['attn_mlir']:.0f} "
                  f"| - | - | - | - | - | - |")
            continue
        if k == "dense":
            name = f"dense D={r['D']} S={r['S']} {'causal' if r['causal'] else 'full'} (TFLOP/s)"
            ours, seed, fa2, cud = r["attn_mlir"], r["seed"], r.get("sdpa_flash"), r.get("sdpa_cudnn")
        elif k == "prefix":
            fp8 = " fp8 cache" if r.get("cache") == "fp8" else ""
            if r.get("x", 8) != 8:
                fp8 += f" x={r['x']}"
            mha = " MHA" if r.get("Hq", 32) == r.get("Hk", 8) else ""
            name = (f"prefix B={r['B']} ctx={r['ctx']} q={r['qlen']}{fp8}"
                    f"{mha} (TFLOP/s)")
            ours, seed, fa2, cud = r["attn_mlir"], r["seed"], None, None
        elif k == "fp8":
            mode = "causal" if r["causal"] else "full"
            name = (f"dense fp8 e4m3 D={r['D']} S={r['S']} {mode} (TFLOP/s; "
                    "SDPA columns at bf16)")
            ours, seed = r["attn_mlir"], r["seed"]
            fa2, cud = r.get("sdpa_flash_bf16"), r.get("sdpa_cudnn_bf16")
        elif k == "decode":
            fp8 = " fp8 cache" if r.get("cache") == "fp8" else ""
            name = f"decode B={r['B']} ctx={r['ctx']}{fp8} (GB/s)"
            ours, seed, fa2, cud = r["attn_mlir"], r["seed"], None, None
        elif k == "serving":
            name = (f"decode B={r['B']} ctx={r['ctx']} {r['case']}, drop-in "
                    "(GB/s)")
            ours, seed, fa2, cud = r["attn_mlir"], r["seed"], None, None
        else:
            fp8 = " fp8 cache" if r.get("cache") == "fp8" else ""
            name = f"{k}{fp8} (us, lower is better)"
            ours, seed, fa2, cud = r["attn_mlir_us"], r["seed_us"], None, None
        lower = k in ("mixed", "blocksparse")
        ratio = (seed / ours) if lower else (ours / seed)
        f = lambda x: "-" if x is None else f"{x:.0f}"
        over = lambda peer: "-" if peer is None else f"{ours / peer:.2f}"
        print(f"| {name} | {f(ours)} | {f(seed)} | {f(fa2)} | {f(cud)} | "
              f"{ratio:.2f} | {over(fa2)} | {over(cud)} |")
        if k == "dense" and r.get("persistent") and cud:
            p = r["persistent"]
            print(f"| {name[:-10]} persistent (TFLOP/s) | {p:.0f} | - | - | "
                  f"{cud:.0f} | - | - | {p / cud:.2f} |")
        if k == "prefix" and r.get("attn_mlir_no_producer"):
            p = r["attn_mlir_no_producer"]
            print(f"| {name[:-10]} no producer warpgroup (TFLOP/s) | {p:.0f}"
                  f" | {seed:.0f} | - | - | {p / seed:.2f} | - | - |")
        if k == "serving":
            g, sg = r["attn_mlir_graph"], r["seed_graph"]
            print(f"| {name[:-7]} CUDA graph (GB/s) | {g:.0f} | {sg:.0f} | - | "
                  f"- | {g / sg:.2f} | - | - |")
            print(f"| {name[:-16]} ops.unified (GB/s) | {r['ops_unified']:.0f}"
                  f" | {seed:.0f} | - | - | {r['ops_unified'] / seed:.2f} | - "
                  f"| - |")
        if k == "decode" and r.get("attn_mlir_graph"):
            g, sg = r["attn_mlir_graph"], r["seed_graph"]
            print(f"| {name[:-7]} CUDA graph (GB/s) | {g:.0f} | {sg:.0f} | - | - | "
                  f"{g / sg:.2f} | - | - |")
        if k == "decode" and r.get("drop_in"):
            for label, d, sd in (("", r["drop_in"], seed),
                                 (" CUDA graph", r["drop_in_graph"],
                                  r["seed_graph"])):
                print(f"| {name[:-7]} drop-in{label} (GB/s) | {d:.0f} | "
                      f"{sd:.0f} | - | - | {d / sd:.2f} | - | - |")
        if k in ("decode", "serving") and r.get("copy"):
            c = r["copy"]
            g = r["drop_in_graph" if k == "decode" else "attn_mlir_graph"]
            base = name[:-16] if k == "serving" else name[:-7]
            print(f"| {base} copy of the same bytes (GB/s; drop-in graph "
                  f"at {g / c:.0%} of it) | {c:.0f} | - | - | - | - | - | - |")


if __name__ == "__main__":
    which = sys.argv[1:] or ["dense", "fp8", "prefix", "decode", "serving",
                             "mixed", "blocksparse"]
    if not DRY:
        print(torch.cuda.get_device_name(), torch.__version__, triton.__version__)
    for name in which:
        try:
            globals()[{"prefix": "prefix"}.get(name, name)]()
        except Exception:
            import traceback
            traceback.print_exc()
    if not DRY:
        table()
