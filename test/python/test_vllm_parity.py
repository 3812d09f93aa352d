"""Drop-in parity (issue 15): inputs vLLM's kernels accept that an earlier
attn_mlir.vllm rejected. Each runs the compiled kernel against the float64
reference; under ATTN_MLIR_TEST_DEVICE=cuda the same tests run on the GPU."""

import numpy as np
import pytest

from attn_mlir import vllm
from reference import DTYPES, check
from test_blocksparse import layout, reference as blocksparse_reference
from test_prefix_prefill import run_case


@pytest.mark.parametrize("kv_cache_dtype,dtype", [
    ("auto", "bf16"), ("bfloat16", "bf16"), ("float16", "f16"),
    ("half", "f16"), ("float", "f32"), ("float32", "f32")])
def test_unquantized_kv_cache_dtype_strings(kv_cache_dtype, dtype):
    """vLLM treats every cache dtype string without "fp8" as an unquantized
    cache of the stored dtype."""
    o, ref = run_case(np.random.default_rng(11), dtype=dtype,
                      kv_dtype=kv_cache_dtype)
    check(o, ref, dtype, f"kv_cache_dtype={kv_cache_dtype}")


def test_unknown_fp8_cache_dtype_is_named():
    with pytest.raises(ValueError, match="^kv_cache_dtype: unsupported fp8 format 'fp8_inc'"):
        run_case(np.random.default_rng(12), kv_dtype="fp8_inc")


def _padded_layout(heads, rows):
    """A per-head layout whose heads list different numbers of blocks, with
    the column arrays padded by -1 past each head's last row, as vLLM's
    dense_to_crow_col returns it."""
    crow, col = layout(heads, rows, 2, 3, True)
    for h in range(heads):
        col[h, crow[h, -1]:] = -1
    assert (col == -1).any(), "the heads must differ in block count"
    return crow, col


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_blocksparse_layout_padded_with_minus_one(dtype):
    rng = np.random.default_rng(13)
    hq, hk, d, bs = 4, 2, 64, 16
    q_lens, k_lens = [70, 1], [70, 90]
    cq = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    ck = np.concatenate([[0], np.cumsum(k_lens)]).astype(np.int32)
    q = rng.standard_normal((cq[-1], hq, d)).astype(DTYPES[dtype])
    k = rng.standard_normal((ck[-1], hk, d)).astype(DTYPES[dtype])
    v = rng.standard_normal((ck[-1], hk, d)).astype(DTYPES[dtype])
    crow, col = _padded_layout(hq, 6)
    out = vllm.blocksparse_flash_attn_varlen_fwd(
        q, k, v, ck, cq, 0.125, (crow, col), block_size=bs, max_seqlen=96)
    check(out, blocksparse_reference(q, k, v, cq, ck, 0.125, crow, col, bs, bs),
          dtype, "blocksparse -1 padding")


def test_blocksparse_negative_id_inside_a_row_is_named():
    crow, col = _padded_layout(4, 6)
    col[1, crow[1, 2]] = -1
    q = np.zeros((16, 4, 32), np.float32)
    k = np.zeros((16, 2, 32), np.float32)
    cu = np.array([0, 16], np.int32)
    with pytest.raises(ValueError, match=r"^sparse_layout\[1\] \(col\): head 1 row 2 lists block id -1"):
        vllm.blocksparse_flash_attn_varlen_fwd(q, k, k, cu, cu, 0.2, (crow, col),
                                               block_size=16)


# --- output_scale with a 16/32-bit out -------------------------------------

def _quantized(ref, scale, dtype):
    """vLLM's output scale with a non-fp8 out: clamp(o / scale) to the e4m3
    range, stored in out's type (compared in output units)."""
    return np.clip(ref / scale, -448.0, 448.0)


# A scale small enough that some outputs clamp at 448.
OUT_SCALE = 0.002


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("num_segments", [None, 3])
def test_unified_output_scale_with_plain_out(dtype, num_segments):
    from test_unified import MIXED, make, reference
    rng = np.random.default_rng(21)
    q, kc, vc, cu, su, table = make(rng, hq=8, hk=2, d=64, block_size=16,
                                    dtype=dtype, **MIXED)
    o = np.full(q.shape, np.nan, DTYPES[dtype])
    vllm.unified_attention(q, kc, vc, o, cu, 37, su, 300, 0.125, True, (-1, -1),
                           table, 0, None, None, None,
                           output_scale=np.array([OUT_SCALE], np.float32),
                           num_segments=num_segments)
    want = _quantized(reference(q, kc, vc, cu, su, table, 0.125), OUT_SCALE, dtype)
    assert (np.abs(want) >= 448).any(), "no output reaches the clamp"
    check(np.asarray(o, np.float64) * OUT_SCALE, want * OUT_SCALE, dtype,
          "unified output_scale")


def test_prefix_prefill_output_scale_with_plain_out():
    o, ref = run_case(np.random.default_rng(22), dtype="bf16",
                      out_scale=OUT_SCALE)
    want = _quantized(ref, OUT_SCALE, "bf16")
    assert (np.abs(want) >= 448).any()
    check(np.asarray(o, np.float64) * OUT_SCALE, want * OUT_SCALE, "bf16",
          "prefix output scale")


@pytest.mark.parametrize("dtype", ["f32", "f16"])
def test_flash_output_scale_with_plain_out(dtype):
    from test_flash import make, reference
    rng = np.random.default_rng(23)
    q, k, v, cq, ck = make(rng, [7, 30], [7, 30], 4, 2, 64, dtype)
    o = np.full(q.shape, np.nan, DTYPES[dtype])
    vllm.triton_attention(q, k, v, o, cq, ck, 30, 30, causal=True,
                          sm_scale=0.125, fp8_out_scale=OUT_SCALE)
    want = _quantized(reference(q, k, v, cq, ck, 0.125, True), OUT_SCALE, dtype)
    assert (np.abs(want) >= 448).any()
    check(np.asarray(o, np.float64) * OUT_SCALE, want * OUT_SCALE, dtype,
          "flash output scale")


def test_merge_states_output_scale_with_plain_out():
    from attn_mlir import ops
    from test_merge_states import make, reference
    rng = np.random.default_rng(24)
    acc, m, l = make(rng)
    o = np.full((acc.shape[0], acc.shape[1], acc.shape[3]), np.nan, np.float32)
    ops.merge_states(acc, o, segment_max=m, segment_sum=l, out_scale=OUT_SCALE)
    want = _quantized(reference(acc, m, l), OUT_SCALE, "f32")
    check(np.asarray(o, np.float64) * OUT_SCALE, want * OUT_SCALE, "f32",
          "merge output scale")


# --- per-(sequence, KV head) descales ---------------------------------------

@pytest.mark.parametrize("fp8", ["f8E4M3FN", "f8E5M2"])
@pytest.mark.parametrize("num_segments", [None, 2])
def test_unified_per_sequence_head_descales(fp8, num_segments):
    """FlashAttention-3-style descales: one value per (sequence, KV head),
    given with arbitrary strides (here a transposed array)."""
    from test_unified import MIXED, make, reference
    rng = np.random.default_rng(25)
    hq, hk = 8, 2
    q, kc, vc, cu, su, table = make(rng, hq=hq, hk=hk, d=64, block_size=16,
                                    dtype="bf16", fp8=fp8, **MIXED)
    batch = len(su)
    ks = np.ascontiguousarray(rng.uniform(0.3, 2.0, (hk, batch)).astype(np.float32)).T
    vs = rng.uniform(0.3, 2.0, (batch, hk)).astype(np.float32)
    o = np.full(q.shape, np.nan, DTYPES["bf16"])
    vllm.unified_attention(q, kc, vc, o, cu, 37, su, 300, 0.125, True, (-1, -1),
                           table, 0, None, ks, vs, num_segments=num_segments)
    want = np.full(q.shape, np.nan)
    for b in range(batch):
        for h in range(hk):
            part = reference(q, kc, vc, cu, su, table, 0.125,
                             k_scale=float(ks[b, h]), v_scale=float(vs[b, h]))
            rows = slice(cu[b], cu[b + 1])
            heads = slice(h * (hq // hk), (h + 1) * (hq // hk))
            want[rows, heads] = part[rows, heads]
    check(o, want, fp8, "per-(sequence, head) descales")


def test_unified_expanded_scalar_descale_equals_scalar():
    """vLLM passes layer._k_scale.expand((num_seqs, num_kv_heads)): a
    stride-0 view of one value."""
    from test_unified import MIXED, make
    rng = np.random.default_rng(26)
    q, kc, vc, cu, su, table = make(rng, hq=8, hk=2, d=64, block_size=16,
                                    dtype="bf16", fp8="f8E4M3FN", **MIXED)
    expanded = [np.broadcast_to(np.float32(s), (len(su), 2)) for s in (0.5, 1.5)]
    outs = []
    for ks, vs in [(0.5, 1.5), tuple(expanded)]:
        o = np.full(q.shape, np.nan, DTYPES["bf16"])
        vllm.unified_attention(q, kc, vc, o, cu, 37, su, 300, 0.125, True,
                               (-1, -1), table, 0, None, ks, vs)
        outs.append(np.asarray(o, np.float64))
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize("shape,match", [
    ((5, 3), r"^k_descale: expected one value or \[num_seqs, num_kv_heads\] = \[5, 2\], got shape \(5, 3\)"),
    ((4, 2), r"^k_descale: expected one value or \[num_seqs, num_kv_heads\] = \[5, 2\], got shape \(4, 2\)"),
])
def test_unified_descale_of_the_wrong_shape_is_named(shape, match):
    from test_unified import MIXED, make
    rng = np.random.default_rng(27)
    q, kc, vc, cu, su, table = make(rng, hq=8, hk=2, d=64, block_size=16,
                                    dtype="bf16", fp8="f8E4M3FN", **MIXED)
    o = np.zeros(q.shape, DTYPES["bf16"])
    with pytest.raises(ValueError, match=match):
        vllm.unified_attention(q, kc, vc, o, cu, 37, su, 300, 0.125, True,
                               (-1, -1), table, 0, None,
                               np.ones(shape, np.float32), 1.0)


# --- today's vLLM unified_attention keywords --------------------------------

def _unified_reference(q, kc, vc, cu, su, table, scale, *, window=None,
                       qq_bias=None, mm_ranges=None, mm_clamp=False,
                       rswa=None, slopes=None, sqrt_alibi=False):
    """docs/semantics.md 2 and 3.2, written from the text: causal visibility,
    the window, R-SWA (prompt lengths, window), bidirectional ranges, the
    tree bias and the sqrt ALiBi form."""
    from reference import attend, f64
    hq, bs, hk = q.shape[1], kc.shape[1], kc.shape[2]
    ref = np.full(q.shape, np.nan)
    for b in range(len(su)):
        L, N = int(cu[b + 1] - cu[b]), int(su[b])
        C = N - L
        blocks, slot = table[b, np.arange(N) // bs], np.arange(N) % bs
        qpos = C + np.arange(L)[:, None]
        kpos = np.arange(N)[None, :]
        vis = kpos <= qpos
        if window:
            vis &= (qpos - kpos) < window
        if rswa is not None:
            lens, w = rswa
            vis &= (kpos < lens[b]) | ((qpos - kpos) < w)
        if mm_ranges is not None:
            for lo, hi in mm_ranges[b]:
                if lo < hi:
                    pair = ((qpos >= lo) & (qpos <= hi) & (kpos >= lo) &
                            (kpos <= hi))
                    if mm_clamp and window:
                        pair &= (qpos - kpos) < window
                    vis |= pair
        bias = np.zeros((L, N))
        if qq_bias is not None:
            r, c = qq_bias.shape
            for i in range(min(L, r)):
                cols = np.arange(C, min(N, C + c))
                bias[i, cols] = qq_bias[i, cols - C]
        for h in range(hq):
            kvh = h // (hq // hk)
            extra = bias.copy()
            if slopes is not None and sqrt_alibi:
                back = np.maximum(qpos - kpos, 0)
                extra += np.where(kpos <= qpos, -slopes[h] * np.sqrt(back), 0.0)
            ref[cu[b]:cu[b + 1], h] = attend(
                f64(q[cu[b]:cu[b + 1], h]), f64(kc)[blocks, slot, kvh],
                f64(vc)[blocks, slot, kvh], scale, vis, alibi=extra)
    return ref


def _spec_batch(rng, dtype="bf16"):
    from test_unified import make
    # Decodes, a 4-token speculative tree step, and a long prefill.
    return make(rng, q_lens=[1, 4, 1, 33], k_lens=[50, 70, 9, 120], hq=8,
                hk=2, d=64, block_size=16, dtype=dtype)


def _call(q, kc, vc, cu, su, table, **kw):
    o = np.full(q.shape, np.nan, q.dtype)
    vllm.unified_attention(q, kc, vc, o, cu, int(np.diff(cu).max()), su,
                           int(su.max()), 0.125, True, kw.pop("window_size", (-1, -1)),
                           table, 0, None, None, None, **kw)
    return o


@pytest.mark.parametrize("num_segments", [None, 3])
def test_unified_qq_bias(num_segments):
    """Tree speculative decoding: a [4, 4] bias over the query section,
    -inf hiding non-ancestors, shared by every sequence."""
    rng = np.random.default_rng(31)
    q, kc, vc, cu, su, table = _spec_batch(rng)
    tree = np.full((4, 4), -np.inf, np.float32)
    tree[:, 0] = 0
    np.fill_diagonal(tree, 0)
    tree[3, 1] = 0
    tree += rng.standard_normal((4, 4)).astype(np.float32) * (tree == 0)
    o = _call(q, kc, vc, cu, su, table, qq_bias=tree, num_segments=num_segments)
    check(o, _unified_reference(q, kc, vc, cu, su, table, 0.125, qq_bias=tree),
          "bf16", "qq_bias")


@pytest.mark.parametrize("clamp", [False, True])
def test_unified_mm_prefix_range(clamp):
    """Bidirectional multimodal ranges (both ends included; (0, 0) and
    (-1, -1) are padding); future keys inside a range become visible."""
    rng = np.random.default_rng(32)
    q, kc, vc, cu, su, table = _spec_batch(rng)
    ranges = np.array([[[3, 20], [0, 0]], [[60, 69], [-1, -1]],
                       [[0, 0], [0, 0]], [[90, 110], [5, 40]]], np.int32)
    window = 30
    o = _call(q, kc, vc, cu, su, table, mm_prefix_range=ranges,
              window_size=(window - 1, 0), mm_prefix_clamp_sliding_window=clamp)
    check(o, _unified_reference(q, kc, vc, cu, su, table, 0.125, window=window,
                                mm_ranges=ranges, mm_clamp=clamp),
          "bf16", f"mm_prefix_range clamp={clamp}")


@pytest.mark.parametrize("num_segments", [None, 2])
def test_unified_rswa(num_segments):
    rng = np.random.default_rng(33)
    q, kc, vc, cu, su, table = _spec_batch(rng)
    lens = np.array([20, 66, 9, 80], np.int32)
    o = _call(q, kc, vc, cu, su, table, rswa_prefix_lens=lens, rswa_window=7,
              num_segments=num_segments)
    check(o, _unified_reference(q, kc, vc, cu, su, table, 0.125,
                                rswa=(lens, 7)), "bf16", "R-SWA")


def test_unified_alibi_sqrt():
    rng = np.random.default_rng(34)
    q, kc, vc, cu, su, table = _spec_batch(rng, "f32")
    slopes = (2.0 ** -np.arange(1, 9)).astype(np.float32)
    o = _call(q, kc, vc, cu, su, table, alibi_slopes=slopes, use_alibi_sqrt=True)
    check(o, _unified_reference(q, kc, vc, cu, su, table, 0.125, slopes=slopes,
                                sqrt_alibi=True), "f32", "sqrt ALiBi")


def test_unified_caller_owned_segment_buffers():
    """vLLM's 3D plan: a decode-only batch under seq_threshold_3D runs in
    num_par_softmax_segments segments through the caller's buffers (head
    dim padded to a power of two, more rows than tokens)."""
    from test_unified import make, reference
    rng = np.random.default_rng(35)
    q, kc, vc, cu, su, table = make(rng, q_lens=[1, 1, 1], k_lens=[300, 17, 90],
                                    hq=8, hk=2, d=80, block_size=16, dtype="bf16")
    out_buf = np.full((8, 8, 16, 128), np.nan, np.float32)
    max_buf = np.full((8, 8, 16), np.nan, np.float32)
    sum_buf = np.full((8, 8, 16), np.nan, np.float32)
    o = _call(q, kc, vc, cu, su, table, seq_threshold_3D=8,
              num_par_softmax_segments=16, softmax_segm_output=out_buf,
              softmax_segm_max=max_buf, softmax_segm_expsum=sum_buf)
    check(o, reference(q, kc, vc, cu, su, table, 0.125), "bf16", "3D buffers")
    assert np.isfinite(max_buf[:3]).any(), "the caller's buffers were not used"
    assert np.isnan(out_buf[3:]).all() and np.isnan(out_buf[:3, :, :, 80:]).all()


def test_unified_segment_buffers_too_small_are_named():
    from test_unified import make
    rng = np.random.default_rng(36)
    q, kc, vc, cu, su, table = make(rng, q_lens=[1, 1], k_lens=[40, 17], hq=8,
                                    hk=2, d=64, block_size=16, dtype="bf16")
    with pytest.raises(ValueError, match=r"^softmax_segm_output: shape .* cannot hold"):
        _call(q, kc, vc, cu, su, table, seq_threshold_3D=8,
              num_par_softmax_segments=16,
              softmax_segm_output=np.zeros((8, 8, 16, 32), np.float32),
              softmax_segm_max=np.zeros((8, 8, 16), np.float32),
              softmax_segm_expsum=np.zeros((8, 8, 16), np.float32))


@pytest.mark.parametrize("kw,match", [
    (dict(kv_quant_mode=2), r"^k_scale_cache/v_scale_cache: required with "
                            r"kv_quant_mode 2"),
    (dict(kv_quant_mode=4), r"^kv_quant_mode: 4 is not supported"),
    (dict(k_scale_cache=np.ones((1, 1, 1), np.float32)),
     r"^k_scale_cache/v_scale_cache: only valid with kv_quant_mode 2 or 3"),
    (dict(rswa_window=4), r"^rswa_window: R-SWA needs both"),
    (dict(use_alibi_sqrt=True), r"^use_alibi_sqrt: requires alibi_slopes"),
])
def test_unified_unsupported_or_incomplete_keywords_are_named(kw, match):
    rng = np.random.default_rng(37)
    q, kc, vc, cu, su, table = _spec_batch(rng)
    with pytest.raises(ValueError, match=match):
        _call(q, kc, vc, cu, su, table, **kw)


@pytest.mark.parametrize("feature", ["qq_bias", "mm_prefix_range", "rswa",
                                     "alibi_sqrt"])
def test_unified_speculative_split_features(feature):
    """Speculative decode over long keys takes the planner's split
    (vllm.SPLIT_MAX_QUERY_TOKENS) with today's vLLM keywords too: the
    tree bias, bidirectional ranges, R-SWA and sqrt ALiBi match the
    reference written from the text (out poisoned first)."""
    from test_unified import make
    from attn_mlir import ops
    rng = np.random.default_rng(35)
    dtype = "f32" if feature == "alibi_sqrt" else "bf16"
    q, kc, vc, cu, su, table = make(rng, q_lens=[1, 4, 1, 4],
                                    k_lens=[700, 900, 300, 1100], hq=8, hk=2,
                                    d=64, block_size=16, dtype=dtype)
    kw, rkw = {}, {}
    if feature == "qq_bias":
        tree = np.full((4, 4), -np.inf, np.float32)
        tree[:, 0] = 0
        np.fill_diagonal(tree, 0)
        tree[3, 1] = 0
        kw["qq_bias"] = rkw["qq_bias"] = tree
    elif feature == "mm_prefix_range":
        ranges = np.array([[[3, 20], [0, 0]], [[600, 899], [-1, -1]],
                           [[0, 0], [0, 0]], [[1090, 1099], [5, 40]]],
                          np.int32)
        kw["mm_prefix_range"] = rkw["mm_ranges"] = ranges
    elif feature == "rswa":
        lens = np.array([20, 660, 9, 800], np.int32)
        kw.update(rswa_prefix_lens=lens, rswa_window=70)
        rkw["rswa"] = (lens, 70)
    else:
        slopes = (2.0 ** -np.arange(1, 9)).astype(np.float32)
        kw.update(alibi_slopes=slopes, use_alibi_sqrt=True)
        rkw.update(slopes=slopes, sqrt_alibi=True)
    with ops.collect_specializations() as texts:
        _call(q, kc, vc, cu, su, table, **dict(kw))
    assert "segment_max" in texts[0] and "merged_out" in texts[0]
    o = _call(q, kc, vc, cu, su, table, **kw)
    check(o, _unified_reference(q, kc, vc, cu, su, table, 0.125, **rkw),
          dtype, f"speculative split, {feature}")
