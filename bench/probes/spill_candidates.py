"""Times schedules of the kernel classes that spilled on sm_90a (bench/
results/2026-12-02-h200-session33.md; found by compiling the fuzzers'
kernels here) beside the ones ptxas compiles without spills: `plan` is
attn-plan's, the others pinned (results: bench/results/2026-12-02-h200-
session34.md; the plan keeps the faster of each pair). For reading, not a
benchmark:

    python3 spill_candidates.py [ROUNDS] [CASE ...]

Cases (bf16, S = 8192 tokens in one sequence):
  flash-dropout-128   flash, causal, heads of 128, GQA 32/8, dropout 0.1:
                      the Hopper pipeline at the plan's 64 keys against
                      128 (spills 172-196 B)
  flash-nodrop-128    the same call without dropout (the Hopper pipeline's
                      plan for it)
  flash-dropout-256   flash-dropout-128 with heads of 256: the pipeline at
                      the plan's 32 keys against 64 (spilled 16-28 B)
  flash-dropout-32    flash, heads of 32, GQA 16/1, dropout 0.1: mma.sync
                      programs of 8 tokens x 16 heads at the plan's 32
                      keys against 64 (spilled 16-156 B)
  prefix-d256-gqa5    prefix prefill, heads of 256, 40 query heads over 8
                      KV heads (programs of 125 rows), 8 sequences of 512
                      new tokens over 1536 cached in pages of 16: the
                      plan's 32 keys (spills 100 B; 156 with ALiBi) against
                      16
  prefix-d112-gqa8    prefix prefill as above, heads of 112, 64 query heads
                      over 8 KV heads: 4 warps of 32 rows at 32 keys
                      (spilled 24 B, 72 with ALiBi) against 8 warps of 16,
                      and 4 warps at 16 keys
  prefix-d256-gqa8    prefix prefill as above, heads of 256, 64 query heads
                      over 8 KV heads: sm_90a's warpgroup programs of 32
                      tokens x 4 heads at the plan's 64 keys (spilled
                      24-172 B with ALiBi or a window) against 32
  sparse-d192-b128    block-sparse, heads of 192, blocks of 128, per-head
                      layouts: 8 warps at 64 keys (spilled 260-284 B)
                      against 32
  sparse-d112-q128    block-sparse, heads of 112, query blocks of 128 and key
                      blocks of 64: 4 warps of 32 rows at 32 keys (spilled
                      56 B) against 8 warps of 16, and 4 warps at 16 keys
  sparse-d112-q16-b64 block-sparse, heads of 112, query blocks of 16 over key
                      blocks of 64: the plan's 32 keys (no spill) against
                      the 64 it gave before (spilled 548 B)
  sparse-d192-q16-b64 as sparse-d112-q16-b64 with heads of 192: the plan's
                      16 keys against 32 (spilled 172-456 B)
Prints microseconds a round and each variant's largest difference from the
plan's output relative to max |out|."""
import math
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from attn_mlir import ops  # noqa: E402

S = 8192
DRY = bool(os.environ.get("ATTN_MLIR_DRY_RUN"))
WS = dict(tma=1, producer_warps=4, pingpong=1)
# case: (op, head dim, query heads, KV heads, extra, {variant: schedule})
CASES = {
    "flash-dropout-128": ("flash", 128, 32, 8, dict(causal=True), {
        "plan": None,
        "keys-128": dict(block_q=32, block_n=128, heads_per_program=4,
                         warps=8, **WS),
        "keys-64": dict(block_q=32, block_n=64, heads_per_program=4,
                        warps=8, **WS)}),
    "flash-nodrop-128": ("flash", 128, 32, 8,
                         dict(causal=True, dropout=False), {"plan": None}),
    "flash-dropout-256": ("flash", 256, 32, 8, dict(causal=True), {
        "plan": None,
        "keys-64": dict(block_q=32, block_n=64, heads_per_program=4,
                        warps=8, tma=1, producer_warps=4)}),
    "flash-dropout-32": ("flash", 32, 16, 1, dict(causal=False), {
        "plan": None,
        "keys-64": dict(block_q=8, block_n=64, heads_per_program=16,
                        warps=4),
        "keys-32": dict(block_q=8, block_n=32, heads_per_program=16,
                        warps=4)}),
    "prefix-d256-gqa5": ("prefix", 256, 40, 8, dict(), {
        "plan": None,
        "keys-16": dict(block_q=25, block_n=16, heads_per_program=5)}),
    "prefix-d112-gqa8": ("prefix", 112, 64, 8, dict(), {
        "plan": None,
        "warps-8": dict(block_q=16, block_n=32, heads_per_program=8,
                        warps=8),
        "keys-16": dict(block_q=16, block_n=16, heads_per_program=8,
                        warps=4)}),
    "prefix-d256-gqa8": ("prefix", 256, 64, 8, dict(), {
        "plan": None,
        "keys-32": dict(block_q=32, block_n=32, heads_per_program=4,
                        warps=8)}),
    "sparse-d192-b128": ("sparse", 192, 8, 8, dict(block=128, q_block=128), {
        "plan": None,
        "keys-32": dict(block_q=128, block_n=32, heads_per_program=1,
                        warps=8)}),
    "sparse-d112-q128": ("sparse", 112, 8, 8, dict(block=64, q_block=128), {
        "plan": None,
        "warps-8": dict(block_q=128, block_n=32, heads_per_program=1,
                        warps=8),
        "keys-16": dict(block_q=128, block_n=16, heads_per_program=1,
                        warps=4)}),
    "sparse-d192-q16-b64": ("sparse", 192, 8, 8,
                            dict(block=64, q_block=16), {
        "plan": None,
        "keys-32": dict(block_q=16, block_n=32, heads_per_program=1)}),
    "sparse-d112-q16-b64": ("sparse", 112, 8, 8, dict(block=64, q_block=16), {
        "plan": None,
        "keys-64": dict(block_q=16, block_n=64, heads_per_program=1)}),
}


def layout(seq, heads, block, q_block):
    """Per-head causal layouts: 8 local key blocks and every 8th one."""
    rows, nb = -(-seq // q_block), -(-seq // block)
    crow = np.zeros((heads, rows + 1), np.int32)
    cols = []
    for h in range(heads):
        per = []
        for r in range(rows):
            last = ((r + 1) * q_block - 1) // block
            sel = [j for j in range(min(last + 1, nb))
                   if last - j < 8 or (j + h + 1) % 8 == 0]
            per.append(sel)
            crow[h, r + 1] = crow[h, r] + len(sel)
        cols.append(sum(per, []))
    col = np.zeros((heads, max(len(c) for c in cols)), np.int32)
    for h, c in enumerate(cols):
        col[h, :len(c)] = c
    return crow, col


def make(name, seq, array):
    """The case's call as a function of (out, schedule)."""
    op, d, hq, hk, extra, _ = CASES[name]
    q, k, v = array((seq, hq, d)), array((seq, hk, d)), array((seq, hk, d))
    cu = array(np.array([0, seq], np.int32))
    scale = 1 / math.sqrt(d)
    if op == "flash":
        drop = (0.1, 1234, 0) if extra.get("dropout", True) else None
        return q, lambda o, sched: ops.flash(
            q, k, v, cu, cu, o, scale=scale, causal=extra["causal"],
            dropout=drop, schedule=sched)
    if op == "prefix":
        # 8 sequences of seq / 16 new tokens over 3x as many cached ones.
        b, new = 8, seq // 16
        ctx, page = 3 * new, 16
        pages = b * ctx // page
        q, k, v = (array((b * new, h, d)) for h in (hq, hk, hk))
        kc, vc = array((pages, hk, d // 8, page, 8)), array((pages, hk, d, page))
        table = array(np.arange(pages, dtype=np.int32).reshape(b, -1))
        starts = array(np.arange(0, b * new + 1, new, dtype=np.int32))
        lens = array(np.full(b, ctx + new, np.int32))
        return q, lambda o, sched: ops.prefix_prefill(
            q, k, v, kc, vc, table, starts, lens, o, scale=scale,
            schedule=sched)
    crow, col = (array(x) for x in layout(seq, hq, extra["block"],
                                          extra["q_block"]))
    return q, lambda o, sched: ops.blocksparse(
        q, k, v, cu, cu, crow, col, o, scale=scale,
        block_size=extra["block"], q_block_size=extra["q_block"],
        schedule=sched)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    names = sys.argv[2:] or list(CASES)
    # Dry runs (ATTN_MLIR_RECORD) record the timed shapes: plan hints such as
    # the short-sequence one depend on them.
    if DRY:  # record the specializations (ATTN_MLIR_RECORD), CPU arrays
        import ml_dtypes

        def array(x):
            return x if isinstance(x, np.ndarray) else \
                np.zeros(x, ml_dtypes.bfloat16)
        for name in names:
            q, call = make(name, S, array)
            for sched in CASES[name][5].values():
                call(q.copy(), sched)
        return
    import torch
    from bench_gpu import rounds
    g = torch.Generator(device="cuda").manual_seed(0)

    def array(x):
        if isinstance(x, np.ndarray):
            return torch.tensor(x, device="cuda")
        return torch.randn(x, device="cuda", dtype=torch.bfloat16, generator=g)
    for name in names:
        q, call = make(name, S, array)
        variants = CASES[name][5]
        outs = {s: torch.full_like(q, float("nan")) for s in variants}
        fns = {s: (lambda s=s: call(outs[s], variants[s])) for s in variants}
        times = rounds(fns, n)
        ref = outs["plan"].float()
        for s, us in times.items():
            diff = ((outs[s].float() - ref).abs().max() /
                    ref.abs().max()).item()
            print(f"{name} {s}: {us} us, vs plan {diff:.2g}", flush=True)


if __name__ == "__main__":
    main()
