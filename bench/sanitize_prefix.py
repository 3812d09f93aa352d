"""One call per schedule of sm_90a prefix prefill, checked against a
float64 reference, for compute-sanitizer (memcheck, racecheck, synccheck):

    compute-sanitizer --tool synccheck python3 bench/sanitize_prefix.py

bf16 D=128 GQA 32/8 over vLLM's paged layouts (split-x K cache, [D, page]
V cache, shuffled block table), pages of 16 and 64: sequences with no
context, with a context that ends inside a KV tile and inside a page,
with one new token, and with several query tiles, so that the producer
warpgroup's ring runs from the cache walk into the new tokens' walk at
every phase, and an fp8 e4m3 cache with scales (whose producer copies
the bytes into its raw ring and dequantizes them in shared memory).
Schedules: the plan's (a producer warpgroup gathering, pingpong) and the
step back (every warp staging). Outputs are
NaN-poisoned first; exits non-zero when one differs from the reference.
"""
import math
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from attn_mlir import ops  # noqa: E402

DRY = bool(os.environ.get("ATTN_MLIR_DRY_RUN"))
D, HQ, HK, X = 128, 32, 8, 8
SCHEDULES = [None, (32, 128, 4, 8)]
# (page size, context lengths, new-token lengths, fp8 cache)
CASES = [(16, (0, 300, 1000, 37), (77, 130, 300, 1), False),
         (64, (129, 2048, 5), (512, 64, 200), False),
         (16, (0, 300, 1000, 37), (77, 130, 300, 1), True)]
K_SCALE, V_SCALE = 0.5, 1.5
# SANITIZE_NEGATIVE_SCALE=1: a negative softmax scale (the consumers then
# negate Q in shared memory; the same kernels).
SIGN = -1.0 if os.environ.get("SANITIZE_NEGATIVE_SCALE") == "1" else 1.0


def reference(q, k, v, kc, vc, table, starts, ctx, page, scale):
    out = np.zeros_like(q)
    group = HQ // HK
    for b in range(len(ctx)):
        L, C = starts[b + 1] - starts[b], ctx[b]
        blocks = table[b, np.arange(C) // page]
        slot = np.arange(C) % page
        rows = slice(starts[b], starts[b + 1])
        for h in range(HQ):
            kvh = h // group
            K = np.concatenate(
                [kc[blocks, kvh, :, slot, :].reshape(C, D), k[rows, kvh]])
            V = np.concatenate([vc[blocks, kvh, :, slot], v[rows, kvh]])
            s = q[rows, h] @ K.T * scale
            qpos = C + np.arange(L)[:, None]
            s = np.where(np.arange(C + L)[None, :] <= qpos, s, -np.inf)
            p = np.exp(s - s.max(-1, keepdims=True))
            out[rows, h] = p @ V / p.sum(-1, keepdims=True)
    return out


def check(page, ctx, lens, fp8):
    rng = np.random.default_rng(0)
    ctx, lens = np.array(ctx), np.array(lens)
    starts = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    seq_lens = (ctx + lens).astype(np.int32)
    need = [-(-int(c) // page) for c in ctx]
    nb = sum(need) + 3
    perm = rng.permutation(nb)
    table = np.zeros((len(ctx), max(need + [1])), np.int32)
    pos = 0
    for b, n in enumerate(need):
        table[b, :n] = perm[pos:pos + n]
        pos += n
    tokens = int(starts[-1])
    x = 16 if fp8 else X
    shapes = [(tokens, HQ, D), (tokens, HK, D), (tokens, HK, D),
              (nb, HK, D // x, page, x), (nb, HK, D, page)]
    host = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    scale = SIGN / math.sqrt(D)
    scales = {}
    if DRY:
        import ml_dtypes
        arrays = [a.astype(ml_dtypes.float8_e4m3fn if fp8 and i >= 3
                           else ml_dtypes.bfloat16)
                  for i, a in enumerate(host)]
        if fp8:
            scales = dict(k_scale=np.array([K_SCALE], np.float32),
                          v_scale=np.array([V_SCALE], np.float32))
        for sched in SCHEDULES:
            ops.prefix_prefill(*arrays, table, starts, seq_lens,
                               np.zeros_like(arrays[0]), scale=scale,
                               schedule=sched, **scales)
        return 0
    import torch
    dev = [torch.tensor(a, dtype=torch.bfloat16, device="cuda") for a in host]
    if fp8:
        dev[3:] = [a.float().to(torch.float8_e4m3fn) for a in dev[3:]]
        scales = {k: torch.tensor([s], device="cuda") for k, s in
                  (("k_scale", K_SCALE), ("v_scale", V_SCALE))}
    exact = [a.float().cpu().double().numpy() for a in dev]
    if fp8:
        exact[3] *= K_SCALE
        exact[4] *= V_SCALE
    ref = reference(*exact, table, starts, ctx, page, scale)
    ints = [torch.tensor(a, device="cuda") for a in (table, starts, seq_lens)]
    bad = 0
    for sched in SCHEDULES:
        o = torch.full_like(dev[0], float("nan"))
        ops.prefix_prefill(*dev, *ints, o, scale=scale, schedule=sched,
                           **scales)
        torch.cuda.synchronize()
        err = np.abs(o.float().cpu().double().numpy() - ref).max()
        ok = bool(np.isfinite(err) and err < (6e-2 if fp8 else 3e-2))
        bad += not ok
        print(f"page={page} ctx={tuple(ctx)} new={tuple(lens)} fp8={fp8} "
              f"schedule={sched or 'plan'}: max|err| {err:.3e} "
              f"{'ok' if ok else 'WRONG'}", flush=True)
    return bad


def main():
    bad = sum(check(*case) for case in CASES)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
