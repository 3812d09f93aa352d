"""The row log-sum-exp output (`lse`) of attn.flash and attn.unified, and
context parallelism built on it: attention over disjoint key shards, merged
exactly by attn.merge_states(segment_lse=...)."""

import os

import numpy as np
import pytest

from attn_mlir import ops
from paged import block_table, cache_values
from reference import DTYPES, RECORDING_ONLY, TOL, f64

# lse is f32 math on f32 statistics: the GPUs' lg2.approx and the tiled
# summation order leave a few ulps of the value (|lse| ~ 1-10).
LSE_TOL = 2e-5
if os.environ.get("ATTN_MLIR_TEST_DEVICE") == "cuda" and \
        os.environ.get("ATTN_MLIR_F32_PRECISION") != "3xtf32":
    # f32 q and k are rounded to TF32 (10 mantissa bits) for the products:
    # the scores, and so the lse, carry that rounding (worst seen on H100:
    # 4.3e-4 at |lse| ~ 3). 16-bit inputs multiply exactly.
    F32_LSE_TOL = 2e-3
else:
    F32_LSE_TOL = LSE_TOL


def scores(q, k, scale, visible):
    """float64 scores [Lq, Lk] of one head with -inf where hidden."""
    return np.where(visible, f64(q) @ f64(k).T * scale, -np.inf)


def logsumexp(s, extra=None):
    """Row log-sum-exp of float64 scores; -inf for a row with nothing."""
    if extra is not None:
        s = np.concatenate([s, np.full((s.shape[0], 1), extra)], axis=1)
    m = s.max(axis=1) if s.shape[1] else np.full(s.shape[0], -np.inf)
    safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return safe + np.log(np.exp(s - safe[:, None]).sum(axis=1))


def check_lse(lse, ref, dtype):
    tol = F32_LSE_TOL if dtype == "f32" else LSE_TOL
    ref = np.asarray(ref)
    empty = np.isneginf(ref)
    assert np.isneginf(lse[empty]).all(), "rows without a key must give -inf"
    np.testing.assert_allclose(lse[~empty], ref[~empty], rtol=tol, atol=tol)


def flash_case(rng, q_lens, k_lens, hq, hk, d, dtype):
    cq = np.cumsum([0] + q_lens).astype(np.int32)
    ck = np.cumsum([0] + k_lens).astype(np.int32)
    q = rng.standard_normal((cq[-1], hq, d)).astype(DTYPES[dtype])
    k = rng.standard_normal((ck[-1], hk, d)).astype(DTYPES[dtype])
    v = rng.standard_normal((ck[-1], hk, d)).astype(DTYPES[dtype])
    return q, k, v, cq, ck


def flash_lse_reference(q, k, cq, ck, scale, causal):
    hq, hk = q.shape[1], k.shape[1]
    ref = np.full(q.shape[:2], np.nan)
    for b in range(len(cq) - 1):
        qs, ks = q[cq[b]:cq[b + 1]], k[ck[b]:ck[b + 1]]
        lq, lk = len(qs), len(ks)
        i, j = np.arange(lq)[:, None], np.arange(lk)[None, :]
        visible = (j <= i + lk - lq) if causal else np.ones((lq, lk), bool)
        for h in range(hq):
            ref[cq[b]:cq[b + 1], h] = logsumexp(
                scores(qs[:, h], ks[:, h // (hq // hk)], scale, visible))
    return ref


@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16"])
@pytest.mark.parametrize("causal", [False, True])
def test_flash_lse(dtype, causal):
    rng = np.random.default_rng(3)
    # The last sequence has more queries than keys: with the bottom-right
    # causal mask its first rows see nothing (lse -inf, out 0).
    q, k, v, cq, ck = flash_case(rng, [5, 37, 70], [9, 100, 48], 8, 2, 64,
                                 dtype)
    out = np.full(q.shape, np.nan, q.dtype)
    lse = np.full(q.shape[:2], np.nan, np.float32)
    scale = 64 ** -0.5
    ops.flash(q, k, v, cq, ck, out, scale=scale, causal=causal, lse=lse)
    ref = flash_lse_reference(q, k, cq, ck, scale, causal)
    assert np.isneginf(ref).any() == causal
    check_lse(lse, ref, dtype)
    assert not np.isnan(f64(out)).any()


def test_unified_lse_with_sinks_and_window():
    rng = np.random.default_rng(4)
    hq, hk, d, bs = 8, 2, 64, 16
    q_lens, k_lens = np.array([1, 7, 33]), np.array([40, 7, 90])
    cu = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    table, nb = block_table(rng, k_lens, bs)
    q = rng.standard_normal((int(cu[-1]), hq, d)).astype(DTYPES["bf16"])
    _, kc = cache_values(rng, (nb, bs, hk, d), "bf16", None)
    _, vc = cache_values(rng, (nb, bs, hk, d), "bf16", None)
    sinks = rng.standard_normal(hq).astype(np.float32)
    out = np.full(q.shape, np.nan, q.dtype)
    lse = np.full(q.shape[:2], np.nan, np.float32)
    scale, window = 0.125, 24
    ops.unified(q, kc, vc, table, cu, k_lens.astype(np.int32), out,
                scale=scale, sinks=sinks, sliding_window=window, lse=lse)
    ref = np.full(q.shape[:2], np.nan)
    for b in range(len(k_lens)):
        L, N = int(q_lens[b]), int(k_lens[b])
        keys = kc[table[b, np.arange(N) // bs], np.arange(N) % bs]
        qpos = N - L + np.arange(L)[:, None]
        kpos = np.arange(N)[None, :]
        visible = (kpos <= qpos) & (qpos - kpos < window)
        for h in range(hq):
            ref[cu[b]:cu[b + 1], h] = logsumexp(
                scores(q[cu[b]:cu[b + 1], h], keys[:, h // (hq // hk)], scale,
                       visible), extra=float(sinks[h]))
    check_lse(lse, ref, "bf16")


def test_context_parallel_flash_merges_exactly():
    """Keys cut into two shards per sequence (as ranks of a context-parallel
    group hold them): per-shard outputs and LSEs, merged by merge_states,
    give the one-pass result."""
    rng = np.random.default_rng(5)
    hq, hk, d = 4, 4, 128
    q, k, v, cq, ck = flash_case(rng, [16, 50], [64, 130], hq, hk, d, "f32")
    scale = d ** -0.5
    full = np.full(q.shape, np.nan, np.float32)
    ops.flash(q, k, v, cq, ck, full, scale=scale)

    partial = np.full((q.shape[0], hq, 2, d), np.nan, np.float32)
    shard_lse = np.full((q.shape[0], hq, 2), np.nan, np.float32)
    for s in range(2):
        # Shard s holds keys [lo, hi) of every sequence.
        pieces, bounds = [], [0]
        for b in range(len(ck) - 1):
            n = ck[b + 1] - ck[b]
            lo, hi = (0, n // 3) if s == 0 else (n // 3, n)
            pieces.append(np.arange(ck[b] + lo, ck[b] + hi))
            bounds.append(bounds[-1] + hi - lo)
        idx = np.concatenate(pieces)
        o = np.full(q.shape, np.nan, np.float32)
        lse = np.full(q.shape[:2], np.nan, np.float32)
        ops.flash(q, np.ascontiguousarray(k[idx]), np.ascontiguousarray(v[idx]),
                  cq, np.array(bounds, np.int32), o, scale=scale, lse=lse)
        partial[:, :, s] = o
        shard_lse[:, :, s] = lse
    merged = np.full(q.shape, np.nan, np.float32)
    ops.merge_states(partial, merged, segment_lse=shard_lse)
    # Exact on the CPU (f32 rounding); on GPUs the shards round P and the
    # tf32 products at other tile boundaries than the one pass.
    np.testing.assert_allclose(merged, full, rtol=TOL["f32"] / 2,
                               atol=TOL["f32"] / 2)
    # ... and the shards alone are not the answer (the test can fail).
    assert not np.allclose(partial[:, :, 0], full, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("shape,dtype,match", [
    ((10, 4), np.float16, r"lse: expected float32 \[10, 4\]"),
    ((10, 3), np.float32, r"lse: expected float32 \[10, 4\]"),
    ((10,), np.float32, r"lse: expected float32 \[10, 4\]"),
])
def test_lse_of_the_wrong_shape_is_named(shape, dtype, match):
    rng = np.random.default_rng(6)
    q, k, v, cq, ck = flash_case(rng, [10], [10], 4, 4, 32, "f32")
    with pytest.raises(ValueError, match=match):
        ops.flash(q, k, v, cq, ck, np.zeros_like(q), scale=0.2,
                  lse=np.zeros(shape, dtype))


@pytest.mark.parametrize("sinks", [False, True])
@pytest.mark.parametrize("segments", [3, 40])
def test_unified_fused_merge_lse(sinks, segments):
    """The split-KV form with the fused merge stores each row's lse over
    every segment (docs/semantics.md 3.5): decode rows and a 4-token row,
    a sequence without keys (-inf, or the sink), segments past the keys
    (40 over 7 keys: empty), against float64."""
    rng = np.random.default_rng(segments + sinks)
    hq, hk, d, bs = 8, 2, 64, 16
    q_lens, k_lens = np.array([1, 4, 1, 1]), np.array([300, 7, 0, 90])
    cu = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    table, nb = block_table(rng, np.maximum(k_lens, 1), bs)
    q = rng.standard_normal((int(cu[-1]), hq, d)).astype(DTYPES["bf16"])
    _, kc = cache_values(rng, (nb, bs, hk, d), "bf16", None)
    _, vc = cache_values(rng, (nb, bs, hk, d), "bf16", None)
    sk = rng.standard_normal(hq).astype(np.float32) if sinks else None
    tokens = int(cu[-1])
    part = np.full((tokens, hq, segments, d), np.nan, np.float32)
    mx = np.full((tokens, hq, segments), np.nan, np.float32)
    out = np.full(q.shape, np.nan, q.dtype)
    lse = np.full(q.shape[:2], np.nan, np.float32)
    scale = 0.125
    # (The 4-token row sees keys up to its position: seqused >= its tokens.)
    used = np.maximum(k_lens, q_lens * (k_lens > 0)).astype(np.int32)
    ops.unified(q, kc, vc, table, cu, used, part, scale=scale,
                segment_max=mx, segment_sum=mx.copy(), merged_out=out,
                merge_counters=np.zeros(q.shape[:2], np.int32), sinks=sk,
                lse=lse)
    if RECORDING_ONLY:
        return
    ref = np.full(q.shape[:2], np.nan)
    for b in range(len(k_lens)):
        L, N = int(q_lens[b]), int(used[b])
        keys = kc[table[b, np.arange(N) // bs], np.arange(N) % bs]
        visible = np.arange(N)[None, :] <= N - L + np.arange(L)[:, None]
        for h in range(hq):
            ref[cu[b]:cu[b + 1], h] = logsumexp(
                scores(q[cu[b]:cu[b + 1], h], keys[:, h // (hq // hk)], scale,
                       visible), extra=None if sk is None else float(sk[h]))
    check_lse(lse, ref, "bf16")
    if sinks:   # the sequence without keys: the sink alone
        np.testing.assert_allclose(lse[cu[2]], sk, rtol=1e-6)


def test_lse_is_not_valid_with_split_kv():
    rng = np.random.default_rng(7)
    q = rng.standard_normal((2, 4, 32)).astype(np.float32)
    kc = rng.standard_normal((4, 16, 4, 32)).astype(np.float32)
    table = np.arange(4, dtype=np.int32).reshape(2, 2)
    with pytest.raises(ValueError, match="lse: not valid in the split-KV "
                       "form .* without merged_out"):
        ops.unified(q, kc, kc, table, np.array([0, 1, 2], np.int32),
                    np.array([20, 20], np.int32),
                    np.zeros((2, 4, 2, 32), np.float32), scale=0.2,
                    num_segments=2, segment_max=np.zeros((2, 4, 2), np.float32),
                    segment_sum=np.zeros((2, 4, 2), np.float32),
                    lse=np.zeros((2, 4), np.float32))
