"""One call per schedule of the sm_90a block-sparse pipeline (a producer
warpgroup's TMA ring running on from CSR block to CSR block), checked
against a float64 reference, for compute-sanitizer (memcheck, racecheck,
synccheck) and as a quick correctness check of the GPU programs:

    compute-sanitizer --tool racecheck python3 bench/sanitize_blocksparse.py

Cases: per-head layouts (a Phi-3-small-like local + vertical-stride
pattern; `col` padded with -1 past each head's entries, as vLLM's
dense_to_crow_col returns it), varlen sequences whose ends fall inside a
block, one sequence shorter than a block, a head whose rows select
nothing (outputs zero), and GQA with one shared layout over query blocks
of 16 and 64 (four heads per program: one and two consumer warpgroups).
The schedules are the plan's (per-head layouts: programs over two layout
rows, the union of their CSR rows two blocks a tile), the one-warpgroup
TMA programs it replaced there, and the mma.sync programs. Exits non-zero when an output differs from
the reference.
"""
import math
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from attn_mlir import ops  # noqa: E402

DRY = bool(os.environ.get("ATTN_MLIR_DRY_RUN"))
BLOCK = 64
# (H, Hk, D, lens, q_block_size, per-head layout)
CASES = [(4, 4, 128, (300, 517, 40), None, True),
         (4, 4, 64, (1000, 129), None, True),
         (8, 2, 128, (700, 333), 16, False),
         (8, 2, 128, (700, 333), None, False)]
# The plan's schedule (per-head layouts: two layout rows a program, 128 x
# 128), the one-warpgroup TMA program it replaced there, and the mma.sync
# programs of two warps (block_q, block_n, heads_per_program, warps[, tma,
# producer_warps, pingpong]).
def schedules(H, Hk, per_head, qbs=None):
    pack = 1 if per_head else H // Hk
    one_row = [(64, 64, 1, 4, 1, 4, 0)] if per_head else []
    # (Shared layouts of query blocks of 64: two layout rows of one head
    # a program, pinned.)
    two_rows = [(128, 128, 1, 8, 1, 4, 1)] if not per_head and not qbs else []
    return [None] + one_row + two_rows + [(64 // pack, 64, pack, 2)]


def layout(heads, rows, cols):
    """Local (4 blocks) + vertical stride (3) causal block patterns, one per
    head (head 1's last rows select nothing), as CSR padded with -1."""
    i, j = np.arange(rows)[:, None], np.arange(cols)[None, :]
    dense = np.stack([(j <= i) & (((i - j) < 4) | (((j + h + 1) % 3) == 0))
                      for h in range(heads)])
    if heads > 1:
        dense[1, rows // 2:] = False
    crow = np.zeros((heads, rows + 1), np.int32)
    crow[:, 1:] = dense.sum(-1).cumsum(-1)
    col = np.full((heads, int(crow[:, -1].max())), -1, np.int32)
    for h in range(heads):
        c = dense[h].nonzero()[1]
        col[h, :c.size] = c
    return crow, col


def reference(q, k, v, cu, crow, col, scale, qbs):
    H, Hk = q.shape[1], k.shape[1]
    out = np.zeros_like(q)
    for b in range(len(cu) - 1):
        s, t = cu[b], cu[b + 1]
        n = t - s
        for h in range(H):
            lh = h if crow.shape[0] > 1 else 0
            sc = q[s:t, h] @ k[s:t, h // (H // Hk)].T * scale
            see = np.zeros((n, n), bool)
            for i in range(n):
                r = i // qbs
                if r + 1 >= crow.shape[1]:
                    continue
                for c in col[lh, crow[lh, r]:crow[lh, r + 1]]:
                    see[i, c * BLOCK:(c + 1) * BLOCK] = True
            see &= np.tril(np.ones((n, n), bool))
            sc = np.where(see, sc, -np.inf)
            m = sc.max(-1, keepdims=True)
            m = np.where(np.isfinite(m), m, 0)
            p = np.exp(sc - m)
            denom = p.sum(-1, keepdims=True)
            out[s:t, h] = np.where(denom > 0, p @ v[s:t, h // (H // Hk)] /
                                   np.maximum(denom, 1e-300), 0)
    return out


def check(H, Hk, D, lens, qbs, per_head):
    rng = np.random.default_rng(0)
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    total = int(cu[-1])
    blocks = (max(lens) + BLOCK - 1) // BLOCK
    crow, col = layout(H if per_head else 1, blocks, blocks)
    if qbs:  # query blocks of qbs rows, each its key block's columns
        crow, col = _rows_per_query_block(crow, col, qbs)
    host = [rng.standard_normal((total, h, D)).astype(np.float32)
            for h in (H, Hk, Hk)]
    scale = 1 / math.sqrt(D)
    bad = 0
    if DRY:
        import ml_dtypes
        q, k, v = (x.astype(ml_dtypes.bfloat16) for x in host)
        for sched in schedules(H, Hk, per_head, qbs):
            ops.blocksparse(q, k, v, cu, cu, crow, col, np.zeros_like(q),
                            scale=scale, block_size=BLOCK, q_block_size=qbs,
                            schedule=sched)
        return 0
    import torch
    dev = [torch.tensor(x, dtype=torch.bfloat16, device="cuda") for x in host]
    exact = [x.float().cpu().double().numpy() for x in dev]
    ref = reference(*exact, cu, crow, col, scale, qbs or BLOCK)
    t = lambda a: torch.tensor(a, device="cuda")  # noqa: E731
    for sched in schedules(H, Hk, per_head, qbs):
        o = torch.full_like(dev[0], float("nan"))
        ops.blocksparse(*dev, t(cu), t(cu), t(crow), t(col), o, scale=scale,
                        block_size=BLOCK, q_block_size=qbs, schedule=sched)
        torch.cuda.synchronize()
        err = np.abs(o.float().cpu().double().numpy() - ref).max()
        ok = bool(np.isfinite(err) and err < 3e-2)
        bad += not ok
        print(f"H={H}/{Hk} D={D} lens={lens} q_block={qbs} "
              f"per_head={per_head} schedule={sched or 'plan'}: "
              f"max|err| {err:.3e} {'ok' if ok else 'WRONG'}", flush=True)
    return bad


def _rows_per_query_block(crow, col, qbs):
    """A layout over query blocks of qbs rows from one over BLOCK rows."""
    per = BLOCK // qbs
    rows = (crow.shape[1] - 1) * per
    out_crow = np.zeros((1, rows + 1), np.int32)
    entries = []
    for r in range(rows):
        c = col[0, crow[0, r // per]:crow[0, r // per + 1]]
        entries.append(c)
        out_crow[0, r + 1] = out_crow[0, r] + c.size
    return out_crow, np.concatenate(entries)[None].astype(np.int32)


def main():
    bad = sum(check(*case) for case in CASES)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
