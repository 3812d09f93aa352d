"""Host cost of the torch.library layer (attn_mlir.torch_ops) per call, on
CPU tensors: each entry point called as users call it (torch tensors go
through torch.ops.attn_mlir) against its implementation called directly
(ops._flash, vllm._unified_attention, ...: what numpy calls run). The
difference is what the layer adds: the argument split into schema form, the
dispatcher, and the kernel's call back into Python. Issue 19's budget is
10 us per call.

Two modes:
  checks  ATTN_MLIR_DRY_RUN=1: every argument check and the MLIR text, no
          kernel (the host path alone, least noise);
  run     the compiled CPU kernels on the smallest shapes.
Both sides run in interleaved rounds of --calls calls; each row gives the
best round of each side (microseconds per call) and the growth as the median
of the rounds' differences, which load from other processes (a shared
machine) moves least.

    python bench/host_overhead_cpu.py [--calls 1000] [--rounds 21]
"""

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
from attn_mlir import ops, vllm  # noqa: E402


def i32(values):
    return torch.tensor(values, dtype=torch.int32)


def calls():
    """name -> (through the torch op, direct), on tiny CPU tensors."""
    g = torch.Generator().manual_seed(0)

    def randn(*shape):
        return torch.randn(*shape, generator=g)
    # flash / triton_attention: 2 sequences, 4 query heads, 2 KV heads.
    q, k, v = randn(8, 4, 32), randn(8, 2, 32), randn(8, 2, 32)
    cu = i32([0, 3, 8])
    o = torch.zeros(8, 4, 32)
    # unified: 3 tokens of 2 sequences on a paged cache of 16-token blocks.
    uq, kc, vc = randn(3, 4, 32), randn(6, 16, 2, 32), randn(6, 16, 2, 32)
    ucu, used, table = i32([0, 1, 3]), i32([20, 30]), i32([[0, 1], [2, 3]])
    uo = torch.zeros(3, 4, 32)
    part = torch.zeros(3, 4, 2, 32)
    smax, ssum = torch.zeros(3, 4, 2), torch.zeros(3, 4, 2)
    mmax, msum = randn(3, 4, 2), randn(3, 4, 2).abs() + 0.5
    # prefix prefill: vLLM's split key cache.
    pq, pk, pv = randn(4, 4, 32), randn(4, 2, 32), randn(4, 2, 32)
    pkc, pvc = randn(4, 2, 8, 16, 4), randn(4, 2, 32, 16)
    loc, start, lens = i32([[0, 1], [2, 3]]), i32([0, 1, 4]), i32([20, 10])
    po = torch.zeros(4, 4, 32)
    # block-sparse: one sequence of 32 tokens, 16-token blocks.
    sq = randn(32, 2, 32)
    scu, crow, col = i32([0, 32]), i32([[0, 1, 3]]), i32([[0, 0, 1]])
    so = torch.zeros(32, 2, 32)
    one = torch.ones(1)
    vllm_kw = dict(
        q=uq, k=kc, v=vc, out=uo, cu_seqlens_q=ucu, max_seqlen_q=2,
        seqused_k=used, max_seqlen_k=30, softmax_scale=0.2, causal=True,
        window_size=(-1, -1), block_table=table, softcap=0, q_descale=None,
        k_descale=one.expand(2, 2), v_descale=one.expand(2, 2),
        alibi_slopes=None, sinks=None, seq_threshold_3D=4,
        num_par_softmax_segments=2, softmax_segm_output=torch.empty(
            8, 4, 2, 32), softmax_segm_max=torch.empty(8, 4, 2),
        softmax_segm_expsum=torch.empty(8, 4, 2))
    return {
        "ops.flash": (
            lambda: ops.flash(q, k, v, cu, cu, o, scale=0.2, causal=True),
            lambda: ops._flash(q, k, v, cu, cu, o, scale=0.2, causal=True)),
        "ops.unified": (
            lambda: ops.unified(uq, kc, vc, table, ucu, used, uo, scale=0.2),
            lambda: ops._unified(uq, kc, vc, table, ucu, used, uo, scale=0.2)),
        "ops.unified split-KV": (
            lambda: ops.unified(uq, kc, vc, table, ucu, used, part, scale=0.2,
                                num_segments=2, segment_max=smax,
                                segment_sum=ssum),
            lambda: ops._unified(uq, kc, vc, table, ucu, used, part,
                                 scale=0.2, num_segments=2, segment_max=smax,
                                 segment_sum=ssum)),
        "ops.merge_states": (
            lambda: ops.merge_states(part, uo, segment_max=mmax,
                                     segment_sum=msum),
            lambda: ops._merge_states(part, uo, segment_max=mmax,
                                      segment_sum=msum)),
        "ops.prefix_prefill": (
            lambda: ops.prefix_prefill(pq, pk, pv, pkc, pvc, loc, start, lens,
                                       po, scale=0.2),
            lambda: ops._prefix_prefill(pq, pk, pv, pkc, pvc, loc, start,
                                        lens, po, scale=0.2)),
        "ops.blocksparse": (
            lambda: ops.blocksparse(sq, sq, sq, scu, scu, crow, col, so,
                                    scale=0.2, block_size=16),
            lambda: ops._blocksparse(sq, sq, sq, scu, scu, crow, col, so,
                                     scale=0.2, block_size=16)),
        "vllm.triton_attention": (
            lambda: vllm.triton_attention(q, k, v, o, cu, cu, 5, 5, True,
                                          0.2),
            lambda: vllm._triton_attention(q, k, v, o, cu, cu, 5, 5, True,
                                           0.2)),
        "vllm.unified_attention": (
            lambda: vllm.unified_attention(uq, kc, vc, uo, ucu, 2, used, 30,
                                           0.2, True, (-1, -1), table, 0,
                                           None, None, None),
            lambda: vllm._unified_attention(uq, kc, vc, uo, ucu, 2, used, 30,
                                            0.2, True, (-1, -1), table, 0,
                                            None, None, None)),
        # As vLLM's Triton backend calls it: by keyword, with the split-KV
        # plan's buffers and the KV scales (ignored for a bf16/f32 cache).
        "vllm.unified_attention, vLLM's keywords": (
            lambda: vllm.unified_attention(**vllm_kw),
            lambda: vllm._unified_attention(**vllm_kw)),
        "vllm.context_attention_fwd": (
            lambda: vllm.context_attention_fwd(pq, pk, pv, po, "auto", pkc,
                                               pvc, loc, start, lens, 20, 3,
                                               1.0, 1.0, sm_scale=0.2),
            lambda: vllm._context_attention_fwd(pq, pk, pv, po, "auto", pkc,
                                                pvc, loc, start, lens, 20, 3,
                                                1.0, 1.0, sm_scale=0.2)),
        "vllm.blocksparse_flash_attn_varlen_fwd": (
            lambda: vllm.blocksparse_flash_attn_varlen_fwd(
                sq, sq, sq, scu, scu, 0.2, (crow, col), block_size=16),
            lambda: vllm._blocksparse_flash_attn_varlen_fwd(
                sq, sq, sq, scu, scu, 0.2, (crow, col), block_size=16)),
    }


def per_call_us(fn, n):
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e6


def measure(through, direct, n, rounds):
    """Per-call times of both sides in interleaved rounds (the order
    alternating), so that load from elsewhere hits both alike. Returns the
    best time of each side and the median of the rounds' differences (a
    burst that hits one side of one round moves neither)."""
    for fn in (through, direct):   # warm: compile, load, memoize
        for _ in range(50):
            fn()
    ops_, directs, diffs = [], [], []
    for r in range(rounds):
        if r % 2:
            d, t = per_call_us(direct, n), per_call_us(through, n)
        else:
            t, d = per_call_us(through, n), per_call_us(direct, n)
        ops_.append(t)
        directs.append(d)
        diffs.append(t - d)
    return min(directs), min(ops_), statistics.median(diffs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=1000,
                    help="calls per round and side")
    ap.add_argument("--rounds", type=int, default=21)
    args = ap.parse_args()
    print(f"# {platform.node()}: {os.cpu_count()} CPUs "
          f"({platform.processor() or platform.machine()}), Python "
          f"{platform.python_version()}, torch {torch.__version__}")
    print(f"# {args.rounds} interleaved rounds x {args.calls} calls a side; "
          f"us per call: best round of each side, and the growth as the "
          f"median of the rounds' differences")
    worst = 0.0
    for mode in ("checks", "run"):
        if mode == "checks":
            os.environ["ATTN_MLIR_DRY_RUN"] = "1"
        else:
            os.environ.pop("ATTN_MLIR_DRY_RUN", None)
        print(f"\n## {mode}: "
              + ("argument checks and MLIR text, no kernel" if mode == "checks"
                 else "compiled CPU kernels"))
        print(f"{'entry point':44s} {'direct':>8s} {'torch op':>9s} "
              f"{'growth':>7s}")
        for name, (through, direct) in calls().items():
            best_direct, best_op, growth = measure(through, direct,
                                                   args.calls, args.rounds)
            worst = max(worst, growth)
            print(f"{name:44s} {best_direct:8.1f} {best_op:9.1f} "
                  f"{growth:+7.1f}")
    print(f"\nlargest growth: {worst:.1f} us per call (budget: 10 us)")


if __name__ == "__main__":
    main()
