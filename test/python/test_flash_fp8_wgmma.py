"""attn.flash over fp8 q, k and v with heads of 64, 128 and 256: on sm_90a
the program multiplies them as stored on fp8 wgmma (Q and K by TMA, V
transposed by the producer warpgroup with its keys permuted, P quantized in
registers, the scales applied to the dot products and the output; heads of
64 on three consumer warpgroups). Every case is checked against float64 on
the fp8 values the kernel saw, outputs poisoned first; on the CPU the same
cases check the reference lowering."""

import numpy as np
import pytest

from attn_mlir import ops
from reference import F8, check, f64
from test_flash import reference as flash_reference
from test_lse import flash_lse_reference

D = 128


def make(rng, lq, lk, hq, hk, fp8, d=D):
    cq = np.concatenate([[0], np.cumsum(lq)]).astype(np.int32)
    ck = np.concatenate([[0], np.cumsum(lk)]).astype(np.int32)
    # randn-scale values over the type's range (scales below undo it).
    q, k, v = (np.clip(rng.standard_normal((n, h, d)) * 16, -400, 400)
               .astype(F8[fp8]) for n, h in ((cq[-1], hq), (ck[-1], hk),
                                             (ck[-1], hk)))
    return q, k, v, cq, ck


def reference(q, k, v, cq, ck, scales, sm_scale, causal, dropout=None):
    """Outputs and log-sum-exps (float64) on the dequantized values."""
    q, k, v = (f64(x) * s for x, s in zip((q, k, v), scales[:3]))
    return (flash_reference(q, k, v, cq, ck, sm_scale, causal,
                            dropout=dropout),
            flash_lse_reference(q, k, cq, ck, sm_scale, causal))


# Sequences that end mid-tile, one token, one shorter than its keys
# (bottom-right causal) and one of several KV tiles.
LQ, LK = [130, 1, 64, 300], [200, 1, 64, 300]


@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("fp8", ["f8E4M3FN", "f8E5M2"])
def test_fp8_wgmma_scales_gqa_varlen(causal, fp8, d):
    rng = np.random.default_rng(11)
    q, k, v, cq, ck = make(rng, LQ, LK, 8, 2, fp8, d)
    p_scale = 1 / 448 if fp8 == "f8E4M3FN" else 1 / 4096
    scales = (0.05, 0.04, 0.06, p_scale)
    o = np.full(q.shape[:2] + (d,), np.nan, np.float32)
    ops.flash(q, k, v, cq, ck, o, scale=0.09, causal=causal,
              fp8_scales=scales)
    ref, _ = reference(q, k, v, cq, ck, scales, 0.09, causal)
    check(o, ref, "f8E4M3FN", f"fp8 wgmma flash {fp8} causal={causal} d={d}")


@pytest.mark.parametrize("d", [64, 256])
def test_fp8_wgmma_views(d):
    """K and V as views of one [tokens, 2, heads, d] tensor and Q as a view
    of a wider row: heads of 64, whose 128-byte boxes read zeros past each
    head's 64, not the neighbouring head or V; heads of 256, whose rows
    are two boxes (two atoms of raw V for the producer to transpose)."""
    rng = np.random.default_rng(16)
    _, _, _, cq, ck = make(rng, LQ, LK, 1, 1, "f8E4M3FN", d)
    kv = (np.clip(rng.standard_normal((ck[-1], 2, 2, d)) * 16, -400, 400)
          .astype(F8["f8E4M3FN"]))
    qrow = (np.clip(rng.standard_normal((cq[-1], 8, d + 32)) * 16, -400, 400)
            .astype(F8["f8E4M3FN"]))
    q, k, v = qrow[:, :, 16:16 + d], kv[:, 0], kv[:, 1]
    scales = (0.05, 0.04, 0.06, 1 / 448)
    o = np.full(q.shape, np.nan, np.float32)
    ops.flash(q, k, v, cq, ck, o, scale=0.09, causal=True, fp8_scales=scales)
    ref, _ = reference(q, k, v, cq, ck, scales, 0.09, True)
    check(o, ref, "f8E4M3FN", f"d{d} views")


@pytest.mark.parametrize("d", [64, 128, 256])
def test_fp8_wgmma_negative_scales(d):
    """A negative q scale (the folded score factor: Q negated in shared
    memory) and a negative p scale (P / p_scale rounds symmetrically: its
    sign cancels with the output's p_scale * v_scale)."""
    rng = np.random.default_rng(12)
    q, k, v, cq, ck = make(rng, LQ, LK, 4, 4, "f8E4M3FN", d)
    scales = (-0.05, 0.04, -0.06, -1 / 448)
    o = np.full(q.shape, np.nan, np.float32)
    ops.flash(q, k, v, cq, ck, o, scale=0.09, causal=True, fp8_scales=scales)
    ref, _ = reference(q, k, v, cq, ck, scales, 0.09, True)
    check(o, ref, "f8E4M3FN", "negative scales")


@pytest.mark.parametrize("d", [128, 256])
def test_fp8_wgmma_fp8_out_and_lse(d):
    rng = np.random.default_rng(13)
    q, k, v, cq, ck = make(rng, LQ, LK, 8, 1, "f8E4M3FN", d)
    scales = (0.05, 0.04, 0.06, 1 / 448)
    o8 = np.full(q.shape[:2] + (d,), np.nan, F8["f8E4M3FN"])
    lse = np.full(q.shape[:2], np.nan, np.float32)
    ops.flash(q, k, v, cq, ck, o8, scale=0.09, causal=True, fp8_scales=scales,
              out_scale=0.1, lse=lse)
    ref, ref_lse = reference(q, k, v, cq, ck, scales, 0.09, True)
    check(f64(o8) * 0.1, ref, "f8E4M3FN", "fp8 out")
    check(lse, ref_lse, "f32", "lse", tol=1e-3)


def test_fp8_wgmma_dropout():
    rng = np.random.default_rng(14)
    q, k, v, cq, ck = make(rng, LQ, LK, 8, 2, "f8E4M3FN")
    scales = (0.05, 0.04, 0.06, 1 / 448)
    drop = (0.2, 0x1234, 77)
    o = np.full(q.shape, np.nan, np.float32)
    ops.flash(q, k, v, cq, ck, o, scale=0.09, causal=False, dropout=drop,
              fp8_scales=scales)
    ref, _ = reference(q, k, v, cq, ck, scales, 0.09, False, dropout=drop)
    check(o, ref, "f8E4M3FN", "dropout")


@pytest.mark.parametrize("d", [64, 128, 256])
def test_fp8_wgmma_rows_without_keys(d):
    """Bottom-right causal with fewer keys than queries (the first rows see
    none: output 0, log-sum-exp -inf) and a sequence without keys (the
    producer then only loads Q)."""
    rng = np.random.default_rng(15)
    lq, lk = [200, 5, 129], [130, 0, 129]
    q, k, v, cq, ck = make(rng, lq, lk, 8, 2, "f8E4M3FN", d)
    scales = (0.05, 0.04, 0.06, 1 / 448)
    o = np.full(q.shape[:2] + (d,), np.nan, np.float32)
    lse = np.full(q.shape[:2], np.nan, np.float32)
    ops.flash(q, k, v, cq, ck, o, scale=0.09, causal=True, fp8_scales=scales,
              lse=lse)
    ref, ref_lse = reference(q, k, v, cq, ck, scales, 0.09, True)
    check(o, ref, "f8E4M3FN", "rows without keys")
    assert np.isneginf(lse[:70]).all() and np.isneginf(lse[200:205]).all()
    finite = np.isfinite(ref_lse)
    check(lse[finite], ref_lse[finite], "f32", "lse", tol=1e-3)


@pytest.mark.parametrize("block_n", [160, 192, 224])
@pytest.mark.parametrize("causal", [False, True])
def test_fp8_wgmma_key_tiles_past_one_atom(block_n, causal):
    """Pinned tiles of more than 128 keys (heads of 128): V^T in two atoms
    of 128 keys, the producer's warps taking a second 32-key step where the
    tile has one. Sequences end inside the first and the second atom, on a
    tile's end, and after several tiles."""
    rng = np.random.default_rng(17)
    lq, lk = [130, 1, 64, 300, 700], [200, 150, 64, 2 * block_n, 900]
    q, k, v, cq, ck = make(rng, lq, lk, 8, 2, "f8E4M3FN")
    scales = (0.05, 0.04, 0.06, 1 / 448)
    o = np.full(q.shape, np.nan, np.float32)
    lse = np.full(q.shape[:2], np.nan, np.float32)
    ops.flash(q, k, v, cq, ck, o, scale=0.09, causal=causal,
              fp8_scales=scales, lse=lse,
              schedule=(128, block_n, 1, 8, 1, 4, 1))
    ref, ref_lse = reference(q, k, v, cq, ck, scales, 0.09, causal)
    check(o, ref, "f8E4M3FN", f"{block_n} keys causal={causal}")
    finite = np.isfinite(ref_lse)
    check(lse[finite], ref_lse[finite], "f32", "lse", tol=1e-3)
