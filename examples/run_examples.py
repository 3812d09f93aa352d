#!/usr/bin/env python3
"""The main job: compile every examples/*.mlir with attn-opt's CPU pipeline,
run it on random inputs of the example's model shapes, and print each op's
max error against the float64 reference of docs/semantics.md."""

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))
sys.path.insert(0, str(ROOT / "test" / "python"))

from attn_mlir.run_mlir import run_function  # noqa: E402
from reference import DTYPES, F8, attend, f64  # noqa: E402

rng = np.random.default_rng(2026)
BF16 = DTYPES["bf16"]


def paged(keys_per_seq, block_size, extra=4):
    need = [-(-int(n) // block_size) for n in keys_per_seq]
    perm = rng.permutation(sum(need) + extra).astype(np.int32)
    table = np.zeros((len(need), max(need)), np.int32)
    pos = 0
    for b, n in enumerate(need):
        table[b, :n], pos = perm[pos:pos + n], pos + n
    return table, sum(need) + extra


def prefix_prefill():
    hq, hk, d, bs, x = 32, 8, 128, 16, 8
    q_lens, ctx = np.array([37, 1, 64]), np.array([100, 50, 0])
    starts = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    seq = (q_lens + ctx).astype(np.int32)
    T = int(starts[-1])
    q, k, v = [rng.standard_normal((T, h, d)).astype(BF16) for h in (hq, hk, hk)]
    table, nb = paged(ctx, bs)
    kc = rng.standard_normal((nb, hk, d // x, bs, x)).astype(F8["f8E4M3FN"])
    vc = rng.standard_normal((nb, hk, d, bs)).astype(F8["f8E4M3FN"])
    ks, vs = np.array([0.7], np.float32), np.array([1.3], np.float32)
    out = np.full((T, hq, d), np.nan, BF16)
    args = [q, k, v, kc, vc, table, starts, seq, d ** -0.5, ks, vs, out]
    ref = np.zeros((T, hq, d))
    for b in range(3):
        L, C = int(q_lens[b]), int(ctx[b])
        blk, slot = table[b, np.arange(C) // bs], np.arange(C) % bs
        rows = slice(starts[b], starts[b + 1])
        for h in range(hq):
            g = h // (hq // hk)
            K = np.concatenate([f64(kc[blk, g, :, slot, :]).reshape(C, d) * 0.7, f64(k[rows, g])])
            V = np.concatenate([f64(vc[blk, g, :, slot]) * 1.3, f64(v[rows, g])])
            vis = np.arange(C + L)[None, :] <= C + np.arange(L)[:, None]
            ref[rows, h] = attend(f64(q[rows, h]), K, V, d ** -0.5, vis)
    return args, out, ref


def unified_case(hq, hk, d, bs, q_lens, k_lens, window=None, softcap=None):
    q_lens, k_lens = np.array(q_lens), np.array(k_lens, np.int32)
    cu = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    T = int(cu[-1])
    table, nb = paged(k_lens, bs)
    q = rng.standard_normal((T, hq, d)).astype(BF16)
    kc, vc = [rng.standard_normal((nb, bs, hk, d)).astype(BF16) for _ in range(2)]
    ref = np.zeros((T, hq, d))
    for b in range(len(q_lens)):
        L, N = int(q_lens[b]), int(k_lens[b])
        blk, slot = table[b, np.arange(N) // bs], np.arange(N) % bs
        qpos, kpos = N - L + np.arange(L)[:, None], np.arange(N)[None, :]
        vis = kpos <= qpos
        if window:
            vis &= qpos - kpos < window
        for h in range(hq):
            g = h // (hq // hk)
            ref[cu[b]:cu[b + 1], h] = attend(f64(q[cu[b]:cu[b + 1], h]), f64(kc[blk, slot, g]),
                                             f64(vc[blk, slot, g]), d ** -0.5, vis,
                                             softcap=softcap)
    return q, kc, vc, table, cu, k_lens, ref


def unified():
    q, kc, vc, table, cu, su, ref = unified_case(16, 8, 256, 16, [1, 40, 1, 9],
                                                 [5000, 40, 300, 4100],
                                                 window=4096, softcap=50.0)
    out = np.full(q.shape, np.nan, BF16)
    return [q, kc, vc, table, cu, su, 256 ** -0.5, 50.0, out], out, ref


def unified_split_kv():
    q, kc, vc, table, cu, su, ref = unified_case(32, 8, 128, 16, [1] * 4,
                                                 [3000, 17, 900, 4096])
    T = q.shape[0]
    partial = np.zeros((T, 32, 16, 128), np.float32)
    m, l = np.zeros((T, 32, 16), np.float32), np.zeros((T, 32, 16), np.float32)
    out = np.full(q.shape, np.nan, BF16)
    return [q, kc, vc, table, cu, su, 128 ** -0.5, partial, m, l, out], out, ref


def unified_mixed_split():
    q_lens = [1, 300, 1, 3, 90, 1]
    q, kc, vc, table, cu, su, ref = unified_case(
        32, 8, 128, 16, q_lens, [3000, 300, 900, 2500, 1200, 17])
    rows, segments = 16 * len(q_lens), 6
    partial = np.zeros((rows, 32, segments, 128), np.float32)
    m = np.zeros((rows, 32, segments), np.float32)
    l = np.zeros((rows, 32, segments), np.float32)
    counters = np.zeros((rows, 32), np.int32)
    out = np.full(q.shape, np.nan, BF16)
    return [q, kc, vc, table, cu, su, 128 ** -0.5, out, partial, m, l,
            counters], out, ref


def flash():
    hq, d = 16, 128
    lens = [300, 77, 512]
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    q, k, v = [rng.standard_normal((int(cu[-1]), hq, d)).astype(BF16) for _ in range(3)]
    out = np.full(q.shape, np.nan, BF16)
    ref = np.zeros(q.shape)
    for b, L in enumerate(lens):
        vis = np.arange(L)[None, :] <= np.arange(L)[:, None]
        for h in range(hq):
            r = slice(cu[b], cu[b + 1])
            ref[r, h] = attend(f64(q[r, h]), f64(k[r, h]), f64(v[r, h]), d ** -0.5, vis)
    return [q, k, v, cu, cu, d ** -0.5, out], out, ref


def blocksparse():
    hq, hk, d, bs, rows = 32, 8, 128, 64, 128
    crow = np.zeros((hq, rows + 1), np.int32)
    cols = []
    for h in range(hq):
        c = []
        for r in range(rows):
            ids = sorted({j for j in range(r + 1) if r - j < 2 or (j + h + 1) % 8 == 0})
            c += ids
            crow[h, r + 1] = len(c)
        cols.append(c)
    col = np.zeros((hq, max(map(len, cols))), np.int32)
    for h, c in enumerate(cols):
        col[h, :len(c)] = c
    q_lens, k_lens = [700, 1], [700, 2000]
    cq = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    ck = np.concatenate([[0], np.cumsum(k_lens)]).astype(np.int32)
    q = rng.standard_normal((int(cq[-1]), hq, d)).astype(BF16)
    k, v = [rng.standard_normal((int(ck[-1]), hk, d)).astype(BF16) for _ in range(2)]
    out = np.full(q.shape, np.nan, BF16)
    ref = np.zeros(q.shape)
    for b in range(2):
        lq, lk = q_lens[b], k_lens[b]
        pos = lk - lq + np.arange(lq)
        for h in range(hq):
            vis = np.zeros((lq, lk), bool)
            for i, p in enumerate(pos):
                blocks = col[h, crow[h, p // bs]:crow[h, p // bs + 1]]
                vis[i] = np.isin(np.arange(lk) // bs, blocks) & (np.arange(lk) <= p)
            g = h // (hq // hk)
            ref[cq[b]:cq[b + 1], h] = attend(f64(q[cq[b]:cq[b + 1], h]),
                                             f64(k[ck[b]:ck[b + 1], g]),
                                             f64(v[ck[b]:ck[b + 1], g]), d ** -0.5, vis)
    return [q, k, v, cq, ck, crow, col, d ** -0.5, out], out, ref


def merge_states():
    T, H, S, D = 6, 64, 8, 64
    part = rng.standard_normal((T, H, S, D)).astype(np.float32)
    lse = rng.standard_normal((T, H, S)).astype(np.float32)
    lse[0, 0, :] = -np.inf
    sinks = rng.standard_normal(H).astype(np.float32)
    out = np.full((T, H, D), np.nan, F8["f8E4M3FN"])
    big = np.maximum(lse.max(axis=2), sinks[None, :])
    w = np.exp(f64(lse) - big[..., None])
    den = w.sum(axis=2) + np.exp(sinks[None, :] - big)
    ref = (w[..., None] * f64(part)).sum(axis=2) / den[..., None]
    # The example writes fp8 with out_scale 0.01: compare in real units.
    return [part, lse, sinks, np.array([0.01], np.float32), out], out, ref, 0.01


EXAMPLES = {
    "prefix_prefill.mlir": ("llama3_8b_prefix_prefill", prefix_prefill, "bf16"),
    "unified.mlir": ("gemma2_9b_unified", unified, "bf16"),
    "unified_split_kv.mlir": ("llama3_8b_split_kv_decode", unified_split_kv, "bf16"),
    "unified_mixed_split.mlir": ("llama3_8b_mixed_split_decodes",
                                 unified_mixed_split, "bf16"),
    "flash.mlir": ("varlen_causal_flash", flash, "bf16"),
    "blocksparse.mlir": ("phi3_small_blocksparse", blocksparse, "bf16"),
    "merge_states.mlir": ("merge_lse_with_sinks_fp8", merge_states, "f8E4M3FN"),
}
TOL = {"bf16": 2e-2, "f8E4M3FN": 0.13}


def main():
    worst_ok = True
    print(f"{'example':<26}{'function':<30}{'outputs':>10}{'max |err|':>12}"
          f"{'bound':>10}{'seconds':>9}")
    for fname, (func, build, dtype) in EXAMPLES.items():
        text = (ROOT / "examples" / fname).read_text()
        made = build()
        args, out, ref = made[:3]
        unit = made[3] if len(made) > 3 else 1.0
        t0 = time.time()
        run_function(text, func, args)
        secs = time.time() - t0
        got = f64(out) * unit
        err = float(np.abs(got - ref).max())
        bound = TOL[dtype] * max(1.0, float(np.abs(ref).max()))
        ok = err <= bound and not np.isnan(got).any()
        worst_ok &= ok
        print(f"{fname:<26}{func:<30}{out.size:>10}{err:>12.3e}{bound:>10.1e}"
              f"{secs:>9.2f}{'' if ok else '  FAIL'}")
    return 0 if worst_ok else 1


if __name__ == "__main__":
    sys.exit(main())
