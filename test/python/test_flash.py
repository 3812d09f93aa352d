"""attn.flash through attn_mlir.vllm.triton_attention, against reference.py."""

import os

import numpy as np
import pytest

from attn_mlir import ops, vllm
from reference import DTYPES, F8, attend, check, f64, philox_uniform


def make(rng, lq, lk, hq, hk, d, dtype):
    cq = np.concatenate([[0], np.cumsum(lq)]).astype(np.int32)
    ck = np.concatenate([[0], np.cumsum(lk)]).astype(np.int32)
    q = rng.standard_normal((cq[-1], hq, d)).astype(DTYPES[dtype])
    k = rng.standard_normal((ck[-1], hk, d)).astype(DTYPES[dtype])
    v = rng.standard_normal((ck[-1], hk, d)).astype(DTYPES[dtype])
    return q, k, v, cq, ck


def reference(q, k, v, cq, ck, scale, causal, bias=None, dropout=None,
              p_error=None):
    """Section 3.3 in float64; `p_error` as reference.attend's."""
    q, k, v = f64(q), f64(k), f64(v)
    hq, hk = q.shape[1], k.shape[1]
    ref = np.zeros(q.shape[:2] + v.shape[2:])
    for b in range(len(cq) - 1):
        lq, lk = cq[b + 1] - cq[b], ck[b + 1] - ck[b]
        i, j = np.arange(lq)[:, None], np.arange(lk)[None, :]
        vis = (j <= i + lk - lq) if causal else np.ones((lq, lk), bool)
        for h in range(hq):
            kv = h // (hq // hk)
            bb = None
            if bias is not None:
                bb = f64(bias[0 if bias.shape[0] == 1 else b, h, :lq, :lk])
            keep = None
            if dropout is not None:
                p, seed, off = dropout
                ctr = off + ((b * hq + h) * lq + i) * lk + j
                keep = philox_uniform(seed, ctr) > np.float32(p)
            ref[cq[b]:cq[b + 1], h] = attend(
                q[cq[b]:cq[b + 1], h], k[ck[b]:ck[b + 1], kv],
                v[ck[b]:ck[b + 1], kv], scale, vis, bias=bb, keep=keep,
                dropout_p=dropout[0] if dropout else 0.0, p_error=p_error)
    return ref


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("d", [24, 64, 80, 96, 128, 256])
@pytest.mark.parametrize("gqa", [1, 4, 5, 8])
def test_dtype_headdim_gqa(dtype, d, gqa):
    rng = np.random.default_rng(d * 10 + gqa)
    hk = 1 if gqa == 8 else 2
    q, k, v, cq, ck = make(rng, [7, 19], [7, 19], hk * gqa, hk, d, dtype)
    o = np.full(q.shape, np.nan, DTYPES[dtype])
    vllm.triton_attention(q, k, v, o, cq, ck, 19, 19, causal=True, sm_scale=d ** -0.5)
    check(o, reference(q, k, v, cq, ck, d ** -0.5, True), dtype, "flash")


@pytest.mark.parametrize("scale", [-0.3, 0.0])
def test_negative_and_zero_scale(scale):
    """The GPU kernels fold the scale into exp2 after taking maxima of the raw
    dot products; a negative or zero scale must still give the softmax of
    scale * q.k (masked keys stay masked)."""
    rng = np.random.default_rng(11)
    q, k, v, cq, ck = make(rng, [150, 40], [150, 70], 4, 2, 64, "bf16")
    o = np.full(q.shape, np.nan, DTYPES["bf16"])
    vllm.triton_attention(q, k, v, o, cq, ck, 150, 150, causal=True,
                          sm_scale=scale)
    check(o, reference(q, k, v, cq, ck, scale, True), "bf16", "scale")


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("lens", [([5, 40, 1], [33, 12, 9]),   # Lq < Lk and Lq > Lk
                                  ([64, 3], [64, 70])])
def test_varlen_bottom_right_causal(causal, lens):
    rng = np.random.default_rng(1)
    q, k, v, cq, ck = make(rng, lens[0], lens[1], 4, 2, 64, "f32")
    o = np.full(q.shape, np.nan, np.float32)
    out, none = vllm.triton_attention(q, k, v, o, cq, ck, 64, 70, causal=causal,
                                      sm_scale=0.125)
    assert out is o and none is None
    ref = reference(q, k, v, cq, ck, 0.125, causal)
    check(o, ref, "f32", "flash varlen")
    if causal:  # queries before the diagonal see no key and output exactly 0
        for b, (lq, lk) in enumerate(zip(*lens)):
            if lq > lk:
                assert np.all(o[cq[b]:cq[b] + lq - lk] == 0)


@pytest.mark.parametrize("batch_rows", [1, 3])
def test_bias(batch_rows):
    rng = np.random.default_rng(2)
    q, k, v, cq, ck = make(rng, [9, 30, 4], [9, 30, 17], 4, 4, 32, "bf16")
    bias = rng.standard_normal((batch_rows, 4, 30, 30)).astype(np.float32)
    o = np.full(q.shape, np.nan, DTYPES["bf16"])
    vllm.triton_attention(q, k, v, o, cq, ck, 30, 30, causal=True, sm_scale=0.2,
                          bias=bias)
    check(o, reference(q, k, v, cq, ck, 0.2, True, bias=bias), "bf16", "bias")


def test_dropout_matches_philox():
    rng = np.random.default_rng(3)
    q, k, v, cq, ck = make(rng, [12, 31], [20, 31], 4, 2, 32, "f32")
    drop = (0.3, 0x1BF52, 0x1D4B42)
    o = np.full(q.shape, np.nan, np.float32)
    vllm.triton_attention(q, k, v, o, cq, ck, 31, 31, causal=False, sm_scale=0.3,
                          dropout_p=drop[0], philox_seed=drop[1],
                          philox_offset=drop[2])
    check(o, reference(q, k, v, cq, ck, 0.3, False, dropout=drop), "f32", "dropout")
    # A different seed gives a different mask.
    o2 = np.full(q.shape, np.nan, np.float32)
    vllm.triton_attention(q, k, v, o2, cq, ck, 31, 31, sm_scale=0.3,
                          dropout_p=0.3, philox_seed=7, philox_offset=0)
    assert np.abs(o2 - o).max() > 1e-3


def test_fp8_qkv_and_fp8_out():
    rng = np.random.default_rng(4)
    q, k, v, cq, ck = make(rng, [16, 40], [16, 40], 8, 2, 64, "f32")
    scales = (0.02, 0.02, 0.02, 1.0 / 448)
    o = np.full(q.shape, np.nan, np.float32)
    vllm.triton_attention(q, k, v, o, cq, ck, 40, 40, causal=True, sm_scale=0.125,
                          fp8_scales=scales)
    # Reference on the quantized values the kernel saw.
    qq, kq, vq = [f64(np.clip(x / s, -448, 448).astype(F8["f8E4M3FN"])) * s
                  for x, s in zip((q, k, v), scales[:3])]
    ref = reference(qq, kq, vq, cq, ck, 0.125, True)
    check(o, ref, "f8E4M3FN", "fp8 flash")
    o8 = np.full(q.shape, np.nan, F8["f8E4M3FN"])
    vllm.triton_attention(q, k, v, o8, cq, ck, 40, 40, causal=True,
                          sm_scale=0.125, fp8_scales=scales, fp8_out_scale=0.01)
    check(f64(o8) * 0.01, ref, "f8E4M3FN", "fp8 out")


@pytest.mark.parametrize("d", [64, 96, 80])
def test_fp8_products_under_other_schedules(d):
    """fp8 q and k under schedules that run on mma.sync (not warpgroups) on a
    GPU: on sm_89 and up their stored values multiply on the fp8 MMA shape
    (heads of a multiple of 32; 80 converts to f16), the scales applied to
    the dot products. A negative q scale flips the staged signs."""
    rng = np.random.default_rng(12)
    q, k, v, cq, ck = make(rng, [16, 45], [30, 45], 8, 2, d, "f32")
    scales = (-0.02, 0.03, 0.02, 1.0 / 448)
    f8 = F8["f8E4M3FN"]
    q8, k8, v8 = [np.clip(x / s, -448, 448).astype(f8)
                  for x, s in zip((q, k, v), scales[:3])]
    ref = reference(*[f64(x8) * s for x8, s in zip((q8, k8, v8), scales)],
                    cq, ck, 0.125, True)
    for sched in [None, (32, 32, 4, 4), (16, 64, 4)]:
        o = np.full(q.shape, np.nan, np.float32)
        ops.flash(q8, k8, v8, cq, ck, o, scale=0.125, causal=True,
                  fp8_scales=scales, schedule=sched)
        check(o, ref, "f8E4M3FN", f"fp8 flash, schedule {sched}")


def test_strided_query_view():
    """q sliced out of a fused QKV buffer: a non-unit token stride."""
    rng = np.random.default_rng(5)
    qkv = rng.standard_normal((30, 3, 4, 32)).astype(np.float32)
    q, k, v = qkv[:, 0], qkv[:, 1], qkv[:, 2]
    cq = ck = np.array([0, 30], np.int32)
    o = np.full((30, 4, 32), np.nan, np.float32)
    vllm.triton_attention(q, k, v, o, cq, ck, 30, 30, causal=True, sm_scale=0.2)
    check(o, reference(q, k, v, cq, ck, 0.2, True), "f32", "strided")


def test_schedule_override_same_result():
    """Other tile sizes (as other targets' plans pick) give the same result."""
    rng = np.random.default_rng(6)
    q, k, v, cq, ck = make(rng, [13, 50], [20, 50], 8, 2, 64, "f32")
    ref = reference(q, k, v, cq, ck, 0.125, True)
    for sched in [(1, 1, 1), (3, 7, 2), (16, 64, 4), (64, 64, 4)]:
        o = np.full(q.shape, np.nan, np.float32)
        ops.flash(q, k, v, cq, ck, o, scale=0.125, causal=True, schedule=sched)
        check(o, ref, "f32", f"schedule {sched}")


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("lq,lk", [
    ([1000, 300, 700], [1000, 420, 700]),
    ([520, 130, 1000, 64, 333], [520, 200, 1000, 64, 400])])
def test_persistent_schedule_same_result(causal, lq, lk):
    """The sm_90a persistent form of the Hopper schedule (one block per SM,
    each block's programs after its first claimed from a counter) against
    the reference: varlen sequences of unequal lengths, GQA 4, more
    programs (query tiles of the batch x 8 heads: 18 x 8 and 20 x 8) than
    an H100 has SMs, so each block claims several, of unequal lengths.
    (Elsewhere the schedule's tile sizes give the same programs as any
    other.)"""
    rng = np.random.default_rng(11)
    q, k, v, cq, ck = make(rng, lq, lk, 8, 2, 128, "bf16")
    o = np.full(q.shape, np.nan, q.dtype)
    ops.flash(q, k, v, cq, ck, o, scale=0.09, causal=causal,
              schedule=(128, 128, 1, 8, 1, 4, 1, 1))
    check(o, reference(q, k, v, cq, ck, 0.09, causal), "bf16",
          f"persistent, causal={causal}")


@pytest.mark.parametrize("lengths,hq,hk", [
    ([700, 650, 690], 7, 7), ([2100, 1500, 2600], 6, 3)])
def test_persistent_sections_of_head_groups(lengths, hq, hk):
    """Persistent programs without the causal mask are claimed in sections
    of the head groups whose K and V of an average sequence fill 1 MB
    (WarpPersistent.cpp), spread evenly over the sections. 7 heads of
    about 680 keys (340 KB each) take sections of 3, 3 and 1 heads;
    6 heads over 3 KV heads of about 2070 keys (1 MB each) one head a
    section. Every program is walked once: NaN rows of the poisoned
    output, or wrong heads, would fail the reference."""
    rng = np.random.default_rng(23)
    q, k, v, cq, ck = make(rng, lengths, lengths, hq, hk, 128, "bf16")
    o = np.full(q.shape, np.nan, q.dtype)
    ops.flash(q, k, v, cq, ck, o, scale=0.09, causal=False,
              schedule=(128, 128, 1, 8, 1, 4, 1, 1))
    check(o, reference(q, k, v, cq, ck, 0.09, False), "bf16",
          f"persistent sections, {hq} heads")


def test_persistent_programs_claimed_at_every_launch():
    """The persistent kernel's claim counter lives in its module and each
    launch's last claim resets it: launches one after the other of the same
    kernel, with fewer programs than an H100 has SMs (2 x 4 heads), with
    many more (12 x 16 heads), and again, each walk every program (a
    counter left over would make a later launch skip programs: NaN rows of
    the poisoned output)."""
    rng = np.random.default_rng(15)
    for lengths, hq in [([200, 50], 4), ([1000, 513, 8, 640, 1100], 16),
                        ([200, 50], 4), ([1000, 513, 8, 640, 1100], 16),
                        ([1], 4)]:
        q, k, v, cq, ck = make(rng, lengths, lengths, hq, 4, 128, "bf16")
        ref = reference(q, k, v, cq, ck, 0.09, True)
        for launch in range(2):
            o = np.full(q.shape, np.nan, q.dtype)
            ops.flash(q, k, v, cq, ck, o, scale=0.09, causal=True,
                      schedule=(128, 128, 1, 8, 1, 4, 1, 1))
            check(o, ref, "bf16",
                  f"persistent, {len(lengths)} sequences, launch {launch}")


@pytest.mark.parametrize("pingpong", [0, 1])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("hq,hk,dtype", [(8, 2, "bf16"), (3, 3, "f16")])
def test_three_warpgroups_same_result(pingpong, causal, hq, hk, dtype):
    """sm_90a flash of heads of 64 on three consumer warpgroups (192-row
    programs: 48 tokens x 4 heads under GQA 4, 192 tokens of one head),
    with and without the three-way pingpong, against the reference: varlen
    sequences ending inside, at and past a 192-row tile, one shorter than a
    K/V tile, keys longer than queries. (Elsewhere the schedule's tile
    sizes give the same programs as any other.)"""
    rng = np.random.default_rng(12)
    lq, lk = [1, 191, 192, 193, 400, 17], [1, 300, 192, 193, 530, 17]
    q, k, v, cq, ck = make(rng, lq, lk, hq, hk, 64, dtype)
    o = np.full(q.shape, np.nan, q.dtype)
    pack = hq // hk
    ops.flash(q, k, v, cq, ck, o, scale=0.11, causal=causal,
              schedule=(192 // pack, 128, pack, 12, 1, 4, pingpong))
    check(o, reference(q, k, v, cq, ck, 0.11, causal), dtype,
          f"three warpgroups, causal={causal}")


@pytest.mark.parametrize("pingpong", [0, 1])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("hq,hk,dtype", [(4, 2, "bf16"), (2, 2, "f16")])
@pytest.mark.parametrize("d,keys", [(256, 80), (128, 176)])
def test_key_tiles_of_partial_atoms_same_result(d, keys, pingpong, causal,
                                                hq, hk, dtype):
    """sm_90a flash on K/V tiles whose keys are not whole 64-key atoms
    (heads of 256 on 80-key tiles, 128 on 176: K and V by TMA into [keys,
    D] tiles, m64n80 / m64n176 QK, 16-key steps of PV), with and without
    pingpong, against the reference: varlen keys ending inside, at and past
    a tile, one shorter than a tile, keys longer than queries. (Elsewhere
    the schedule's tile sizes give the same programs as any other.)"""
    rng = np.random.default_rng(13)
    lq = [1, keys - 1, keys, keys + 1, 200, 17]
    lk = [1, 2 * keys, keys, keys + 1, 333, 17]
    q, k, v, cq, ck = make(rng, lq, lk, hq, hk, d, dtype)
    o = np.full(q.shape, np.nan, q.dtype)
    ops.flash(q, k, v, cq, ck, o, scale=0.07, causal=causal,
              schedule=(128, keys, 1, 8, 1, 4, pingpong))
    check(o, reference(q, k, v, cq, ck, 0.07, causal), dtype,
          f"{keys}-key tiles, causal={causal}")


@pytest.mark.parametrize("pattern", ["rising", "spikes"])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("lq,lk", [([300, 700, 5], [1000, 700, 400]),
                                   ([1000, 700, 300], [1000, 900, 400])])
def test_moving_max_rescales_same_result(d, causal, pattern, lq, lk):
    """Scores whose row max moves by far more than the lazy rescaling's
    slack (2^8) from KV tile to KV tile, so that O and l are rescaled on
    later tiles too (randn scores set the reference on the first tile and
    rarely move it): keys whose magnitude rises along the sequence (about
    10 log2 units a 128-key tile), or isolated key rows 30 times larger.
    Under the plan's schedule (sm_90a: the specialized consumers, which
    rescale O at the next step's start; the first lengths average under
    512 queries a sequence, so heads up to 128 take the persistent form),
    against the reference."""
    rng = np.random.default_rng(14)
    q, k, v, cq, ck = make(rng, lq, lk, 4, 2, d, "bf16")
    kf = k.astype(np.float32)
    for b in range(len(lk)):
        n = np.arange(lk[b], dtype=np.float32)
        if pattern == "rising":
            gain = 1 + n / 40
        else:
            gain = np.where(n % 97 == 50, 30.0, 1.0).astype(np.float32)
        kf[ck[b]:ck[b + 1]] *= gain[:, None, None]
    k = kf.astype(k.dtype)
    scale = 1 / np.sqrt(d)
    o = np.full(q.shape, np.nan, q.dtype)
    ops.flash(q, k, v, cq, ck, o, scale=scale, causal=causal)
    check(o, reference(q, k, v, cq, ck, scale, causal), "bf16",
          f"{pattern} scores, causal={causal}")


def test_short_sequences_hint():
    """Calls whose queries average at most 1024 a sequence (4096 causal)
    carry the planning hint attn.short_sequences (sm_90a: the persistent
    schedule), unless a schedule is pinned or the call has bias, dropout,
    lse, fp8 or f32 (the plan ignores the hint there: no second
    specialization)."""
    import ml_dtypes
    bf = ml_dtypes.bfloat16

    def attrs(tokens, seqs, dtype=bf, **kw):
        q = np.zeros((tokens, 4, 64), dtype)
        cu = np.linspace(0, tokens, seqs + 1).astype(np.int32)
        with ops.collect_specializations() as texts:
            ops.flash(q, q, q, cu, cu, np.zeros_like(q), scale=0.1, **kw)
        assert len(texts) == 1
        return texts[0]
    assert "attn.short_sequences" in attrs(2048, 2)
    assert "attn.short_sequences" in attrs(1536, 4, causal=True)
    assert "attn.short_sequences" not in attrs(2050, 2)
    assert "attn.short_sequences" in attrs(8192, 2, causal=True)
    assert "attn.short_sequences" not in attrs(8194, 2, causal=True)
    assert "attn.short_sequences" not in attrs(512, 1, schedule=(16, 16, 1))
    assert "attn.short_sequences" not in attrs(512, 1, dtype=np.float32)
    assert "attn.short_sequences" not in attrs(
        512, 1, lse=np.zeros((512, 4), np.float32))
    assert "attn.short_sequences" not in attrs(
        512, 1, dropout=(0.1, 1, 0))


def quantize_like_vllm(x, scale, dtype):
    """vLLM's check_and_convert: (x * (1 / scale)) in x's dtype, clamped,
    cast to fp8 e4m3 (round to nearest even)."""
    y = (f64(x).astype(np.float32) * np.float32(1.0 / scale)).astype(
        DTYPES[dtype])
    return np.clip(y.astype(np.float32), -448, 448).astype(F8["f8E4M3FN"])


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("which", ["qkv", "q"])
def test_fp8_scales_quantize_on_load(dtype, which):
    """fp8_scales with 16/32-bit inputs: each non-fp8 input is quantized as
    the kernel loads it. The result equals attention on the tensors vLLM's
    wrapper would have quantized first (bit for bit: after the load both
    programs see the same values). `which="q"`: k and v arrive in fp8, and
    only q is quantized."""
    rng = np.random.default_rng(len(dtype))
    q, k, v, cq, ck = make(rng, [16, 40, 5], [16, 40, 70], 8, 2, 64, dtype)
    # Scales that make some values saturate and round on both sides.
    scales = (0.004, 0.003, 0.005, 1.0 / 448)
    qq, kq, vq = [quantize_like_vllm(x, s, dtype)
                  for x, s in zip((q, k, v), scales[:3])]
    if which == "q":
        k, v = kq, vq
    o = np.full(q.shape, np.nan, DTYPES[dtype])
    out, _ = vllm.triton_attention(q, k, v, o, cq, ck, 40, 70, causal=True,
                                   sm_scale=0.125, fp8_scales=scales)
    assert out is o
    want = np.full(q.shape, np.nan, DTYPES[dtype])
    vllm.triton_attention(qq, kq, vq, want, cq, ck, 40, 70, causal=True,
                          sm_scale=0.125, fp8_scales=scales)
    if (os.environ.get("ATTN_MLIR_TEST_DEVICE", "cpu") == "cpu" and
            not os.environ.get("ATTN_MLIR_CPU_PLAN")):
        np.testing.assert_array_equal(f64(o), f64(want))
    else:
        # On a GPU the fp8 inputs multiply on the fp8 MMA, the quantized
        # 16/32-bit ones on the 16-bit/tf32 one; under the GPU plans' tile
        # schedules (which size tiles by element type) the two calls sum in
        # another order. The same values in other arithmetic: P's fp8
        # rounding may differ by a step.
        check(o, f64(want), "f8E4M3FN", "quantized on load vs fp8 inputs")
    ref = reference(f64(qq) * scales[0], f64(kq) * scales[1],
                    f64(vq) * scales[2], cq, ck, 0.125, True)
    check(o, ref, "f8E4M3FN", "quantized on load")
    # Saturation happened: the clamp is part of what is checked.
    assert (np.abs(f64(qq)) == 448).any()


def test_fp8_scales_output_dtype_like_vllm():
    """o=None with fp8_scales: vLLM allocates empty_like(q, dtype=v.dtype)
    after quantizing v, so the output is fp8 (cast at scale 1 without
    fp8_out_scale); without fp8_scales, v's dtype."""
    rng = np.random.default_rng(9)
    q, k, v, cq, ck = make(rng, [8, 20], [8, 20], 4, 4, 32, "bf16")
    scales = (0.01, 0.01, 0.01, 1.0 / 448)
    out, _ = vllm.triton_attention(q, k, v, None, cq, ck, 20, 20, False, 0.2,
                                   None, scales, None)
    assert out.dtype == F8["f8E4M3FN"]
    kept = np.full(q.shape, np.nan, np.float32)
    vllm.triton_attention(q, k, v, kept, cq, ck, 20, 20, False, 0.2, None,
                          scales, None)
    np.testing.assert_array_equal(
        f64(out), f64(np.clip(kept, -448, 448).astype(F8["f8E4M3FN"])))
    plain, _ = vllm.triton_attention(q, k, v, None, cq, ck, 20, 20, False,
                                     0.2, None, None, None)
    assert plain.dtype == DTYPES["bf16"]
