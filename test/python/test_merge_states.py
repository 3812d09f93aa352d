"""attn.merge_states in both forms, with sinks and fp8 output."""

import numpy as np
import pytest

from attn_mlir import ops
from reference import F8, RECORDING_ONLY, check, f64, to_fp8_out


def make(rng, t=5, h=4, s=6, d=32):
    m = rng.standard_normal((t, h, s)).astype(np.float32)
    m[0, 0, :] = -np.inf          # a row whose segments are all empty
    m[1, :, min(2, s - 1)] = -np.inf   # empty segments among full ones
    l = np.where(np.isfinite(m), rng.uniform(0.5, 3, (t, h, s)), 0).astype(np.float32)
    acc = np.where(np.isfinite(m)[..., None], rng.standard_normal((t, h, s, d)),
                   0).astype(np.float32)
    return acc, m, l


def reference(acc, m, l, sinks=None, lse=False):
    acc, m, l = f64(acc), f64(m), f64(l)
    big = m.max(axis=2, keepdims=True)
    if sinks is not None:
        big = np.maximum(big, f64(sinks)[None, :, None])
    big = np.where(np.isfinite(big), big, 0.0)
    w = np.exp(m - big)
    den = (w if lse else w * l).sum(axis=2)
    if sinks is not None:
        den = den + np.exp(f64(sinks)[None, :] - big[..., 0])
    num = (w[..., None] * acc).sum(axis=2)
    return np.where(den[..., None] > 0, num / np.where(den > 0, den, 1)[..., None], 0)


@pytest.mark.parametrize("sinks", [False, True])
@pytest.mark.parametrize("out_dtype", ["f32", "bf16", "f8E4M3FN"])
def test_max_sum(sinks, out_dtype):
    rng = np.random.default_rng(1)
    acc, m, l = make(rng)
    sk = rng.standard_normal(4).astype(np.float32) if sinks else None
    from reference import DTYPES
    o = np.full(acc.shape[:2] + acc.shape[3:], np.nan, DTYPES[out_dtype])
    ops.merge_states(acc, o, segment_max=m, segment_sum=l, sinks=sk,
                     out_scale=0.05 if out_dtype in F8 else None)
    ref = reference(acc, m, l, sk)
    if out_dtype in F8:
        check(f64(o) * 0.05, ref, out_dtype, "merge fp8")
    else:
        check(o, ref, out_dtype, "merge")
    if not sinks:
        assert np.all(f64(o)[0, 0] == 0)


@pytest.mark.parametrize("segments", [1, 2, 4, 5, 15, 16, 17, 33, 70])
@pytest.mark.parametrize("lse", [False, True])
def test_segment_groups(segments, lse):
    """Segments are read four at a time up to four, sixteen at a time past
    that (LowerMergeStates.cpp): counts below, at and past a group, the
    last group partial, an empty last segment, and a large value in the
    last one (whose clamped copies past the end must count once)."""
    rng = np.random.default_rng(segments)
    acc, m, l = make(rng, t=3, h=2, s=segments, d=16)
    m[2, 1, -1] = 9.0
    m[2, 0, -1] = -np.inf
    l[2, 0, -1] = 0
    acc[2, 0, -1] = 0
    o = np.full((3, 2, 16), np.nan, np.float32)
    kw = dict(segment_lse=m) if lse else dict(segment_max=m, segment_sum=l)
    ops.merge_states(acc, o, **kw)
    check(o, reference(acc, m, None if lse else l, lse=lse), "f32",
          f"merge {segments}")


@pytest.mark.parametrize("tokens", [0, 1, 3, 4, 9])
@pytest.mark.parametrize("d", [16, 40, 128])
def test_rows_per_program(tokens, d):
    """Programs merge four tokens of a head, each row by 32 lanes of
    ceil(d / 32) dims (LowerMergeStates.cpp): token counts short of, at and
    past a program's four (and none), head dims below, past and at whole
    lanes. Every row is written, nothing past the rows."""
    rng = np.random.default_rng(tokens * 1000 + d)
    acc, m, _ = make(rng, t=max(tokens, 2), h=3, s=2, d=d)
    acc, m = acc[:tokens], m[:tokens]
    o = np.full((tokens + 1, 3, d), np.nan, np.float32)
    ops.merge_states(acc, o[:tokens], segment_lse=m)
    check(o[:tokens], reference(acc, m, None, lse=True), "f32",
          f"merge {tokens} x {d}")
    assert np.all(np.isnan(o[tokens]))


def test_lse():
    rng = np.random.default_rng(2)
    acc, m, _ = make(rng)
    o = np.full((5, 4, 32), np.nan, np.float32)
    ops.merge_states(acc, o, segment_lse=m)
    check(o, reference(acc, m, None, lse=True), "f32", "merge lse")


@pytest.mark.parametrize("partial_dtype", ["bf16", "f16"])
@pytest.mark.parametrize("sinks", [False, True])
@pytest.mark.parametrize("out_dtype", ["f32", "bf16"])
def test_lse_16bit_partials(partial_dtype, sinks, out_dtype):
    """Normalized 16-bit partials (as flash writes them) merge as their
    exact f32 widening: the result is that of the f32 partials holding the
    same values, and it differs from the unrounded ones' (the comparison
    can fail). (A bf16 out once made x86 code call __truncsfbf2, which
    GCC 12's libgcc lacks: the kernel linked and failed to load.)"""
    from reference import DTYPES
    rng = np.random.default_rng(3)
    acc, m, _ = make(rng, d=128)   # (the x86 case above needed D = 128)
    acc16 = acc.astype(DTYPES[partial_dtype])
    sk = rng.standard_normal(4).astype(np.float32) if sinks else None
    o = np.full((5, 4, 128), np.nan, DTYPES[out_dtype])
    ops.merge_states(acc16, o, segment_lse=m, sinks=sk)
    o32 = np.full_like(o, np.nan)
    ops.merge_states(acc16.astype(np.float32), o32, segment_lse=m, sinks=sk)
    if RECORDING_ONLY:   # both kernels recorded; nothing ran
        return
    ref = reference(f64(acc16), m, None, sinks=sk, lse=True)
    tol = 2e-6 if out_dtype == "f32" else 8e-3
    np.testing.assert_allclose(f64(o), ref, rtol=tol, atol=tol)
    np.testing.assert_array_equal(o, o32)
    if out_dtype == "f32":
        assert not np.allclose(o, reference(acc, m, None, sinks=sk,
                                            lse=True), rtol=0, atol=1e-4)


def test_16bit_partials_need_the_lse_form():
    from reference import DTYPES
    acc, m, l = make(np.random.default_rng(4))
    o = np.zeros((5, 4, 32), np.float32)
    with pytest.raises(ValueError, match=r"partial: expected f32 in the "
                                         r"max/sum form \(16-bit partials "
                                         r"need segment_lse\), got bf16"):
        ops.merge_states(acc.astype(DTYPES["bf16"]), o, segment_max=m,
                         segment_sum=l)
    with pytest.raises(ValueError, match=r"partial: expected f32, f16, bf16 "
                                         r"in the lse form, got f8E4M3FN"):
        ops.merge_states(acc.astype(DTYPES["f8E4M3FN"]), o, segment_lse=m)
