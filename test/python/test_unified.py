"""attn.unified (one pass and split-KV + merge) through vllm.unified_attention."""

import os

import numpy as np
import pytest

from attn_mlir import ops, vllm
from paged import block_table, cache_values
from reference import (DTYPES, F8, RECORDING_ONLY, attend, check, f64,
                       to_fp8_out)


def make(rng, *, q_lens, k_lens, hq, hk, d, block_size, dtype, fp8=None,
         q_fp8=False):
    q_lens, k_lens = np.array(q_lens), np.array(k_lens)
    cu = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    table, nb = block_table(rng, k_lens, block_size)
    qv = rng.standard_normal((int(cu[-1]), hq, d))
    q = qv.astype(F8["f8E4M3FN"] if q_fp8 else DTYPES[dtype])
    kv, kc = cache_values(rng, (nb, block_size, hk, d), dtype, fp8)
    vv, vc = cache_values(rng, (nb, block_size, hk, d), dtype, fp8)
    if fp8:  # unified takes caches already viewed as their fp8 type
        kc, vc = kv, vv
    return q, kc, vc, cu, k_lens.astype(np.int32), table


def reference(q, kc, vc, cu, seqused, table, scale, *, q_scale=1.0, k_scale=1.0,
              v_scale=1.0, window=None, softcap=None, slopes=None,
              alibi_form="context", sinks=None, causal=True,
              chunk_lookback=None, k_token_scales=None, v_token_scales=None):
    """causal: a bool or per-sequence flags; chunk_lookback (with window):
    chunked attention; *_token_scales [blocks, block_size, kv_heads]; the
    q/k/v scales one value or [num_seqs, kv_heads] (vLLM's descales)."""
    hq, bs, hk = q.shape[1], kc.shape[1], kc.shape[2]
    kf, vf, qf = f64(kc), f64(vc), f64(q)

    def scale_at(s, b, kvh):
        return float(s if np.ndim(s) == 0 else s[b, kvh])

    if k_token_scales is not None:
        kf = kf * np.asarray(k_token_scales, np.float64)[..., None]
        vf = vf * np.asarray(v_token_scales, np.float64)[..., None]
    ref = np.full(q.shape, np.nan)
    for b in range(len(seqused)):
        L, N = cu[b + 1] - cu[b], int(seqused[b])
        C = N - L
        blocks, slot = table[b, np.arange(N) // bs], np.arange(N) % bs
        qpos = C + np.arange(L)[:, None]
        kpos = np.arange(N)[None, :]
        seq_causal = bool(causal if np.ndim(causal) == 0 else causal[b])
        vis = kpos <= qpos if seq_causal else np.ones((L, N), bool)
        if chunk_lookback is not None:
            c = window // (chunk_lookback + 1)
            vis &= (qpos // c - kpos // c) <= chunk_lookback
        elif window:
            vis &= (qpos - kpos) < window
            if not seq_causal:
                vis &= (kpos - qpos) < window
        for h in range(hq):
            kvh = h // (hq // hk)
            ab = None
            if slopes is not None:
                dist = {"context": kpos - C, "relative": kpos - qpos,
                        "absolute": kpos + 0 * qpos}[alibi_form]
                ab = slopes[h] * dist
            ref[cu[b]:cu[b + 1], h] = attend(
                qf[cu[b]:cu[b + 1], h] * scale_at(q_scale, b, kvh),
                kf[blocks, slot, kvh] * scale_at(k_scale, b, kvh),
                vf[blocks, slot, kvh] * scale_at(v_scale, b, kvh),
                scale, vis, softcap=softcap, alibi=ab,
                sink=None if sinks is None else float(sinks[h]))
    return ref


MIXED = dict(q_lens=[1, 37, 1, 1, 12], k_lens=[300, 37, 1, 77, 140])


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("d,hq,hk", [(24, 2, 2), (64, 8, 2), (80, 5, 1),
                                     (96, 8, 1), (128, 16, 2), (256, 4, 4)])
def test_mixed_batch(dtype, d, hq, hk):
    rng = np.random.default_rng(d * hq)
    q, kc, vc, cu, su, table = make(rng, hq=hq, hk=hk, d=d, block_size=16,
                                    dtype=dtype, **MIXED)
    o = np.full(q.shape, np.nan, DTYPES[dtype])
    vllm.unified_attention(q, kc, vc, o, cu, 37, su, 300, d ** -0.5, True,
                           (-1, -1), table, 0, None, None, None)
    check(o, reference(q, kc, vc, cu, su, table, d ** -0.5), dtype, "unified")


@pytest.mark.parametrize("block_size", [1, 16, 32, 48, 64])
@pytest.mark.parametrize("fp8", [None, "f8E4M3FN", "f8E5M2"])
def test_pages_and_fp8_cache(block_size, fp8):
    rng = np.random.default_rng(block_size)
    q, kc, vc, cu, su, table = make(rng, hq=8, hk=2, d=64, block_size=block_size,
                                    dtype="bf16", fp8=fp8, **MIXED)
    o = np.full(q.shape, np.nan, DTYPES["bf16"])
    ks, vs = (0.5, 2.0) if fp8 else (None, None)
    vllm.unified_attention(q, kc, vc, o, cu, 37, su, 300, 0.125, True, (-1, -1),
                           table, 0, None, ks, vs)
    ref = reference(q, kc, vc, cu, su, table, 0.125, k_scale=ks or 1.0,
                    v_scale=vs or 1.0)
    check(o, ref, "bf16", f"block {block_size} {fp8}")


@pytest.mark.parametrize("d,hq,hk", [(64, 8, 2), (128, 16, 4), (256, 4, 1)])
@pytest.mark.parametrize("fp8", ["f8E4M3FN", "f8E5M2"])
def test_fp8_cache_decode_heads(d, hq, hk, fp8):
    """Decode over fp8 caches for heads whose raw K rows are padded (64) or
    whole 128-byte lines swizzled by the row (128: QK reads K raw; 256:
    K decoded from the swizzled rows), contexts ending inside a page and
    a KV tile, against the float64 reference."""
    rng = np.random.default_rng(d + len(fp8))
    q, kc, vc, cu, su, table = make(rng, hq=hq, hk=hk, d=d, block_size=16,
                                    dtype="bf16", fp8=fp8,
                                    q_lens=[1, 1, 1, 1, 1],
                                    k_lens=[300, 1, 77, 140, 1000])
    o = np.full(q.shape, np.nan, DTYPES["bf16"])
    vllm.unified_attention(q, kc, vc, o, cu, 1, su, 1000, d ** -0.5, True,
                           (-1, -1), table, 0, None, 0.5, 2.0)
    ref = reference(q, kc, vc, cu, su, table, d ** -0.5, k_scale=0.5,
                    v_scale=2.0)
    check(o, ref, "bf16", f"d {d} {fp8}")


@pytest.mark.parametrize("feature", ["softcap", "window1", "window50", "alibi",
                                     "sinks", "fp8_out", "fp8_q",
                                     "fp8_q_softcap"])
def test_features(feature):
    rng = np.random.default_rng(11)
    q, kc, vc, cu, su, table = make(rng, hq=8, hk=2, d=64, block_size=16,
                                    dtype="f32",
                                    fp8="f8E4M3FN" if feature.startswith("fp8_q") else None,
                                    q_fp8=feature.startswith("fp8_q"), **MIXED)
    kw, rkw = {}, {}
    window = (-1, -1)
    softcap = 0
    if feature.endswith("softcap"):
        softcap = rkw["softcap"] = 3.0
    if feature.startswith("window"):
        w = int(feature[6:])
        window, rkw["window"] = (w - 1, 0), w
    if feature == "alibi":
        kw["alibi_slopes"] = rkw["slopes"] = (2.0 ** -np.arange(1, 9)).astype(np.float32)
    if feature == "sinks":
        kw["sinks"] = rkw["sinks"] = rng.standard_normal(8).astype(np.float32)
    qd = kd = vd = None
    if feature.startswith("fp8_q"):
        qd, kd, vd = 0.5, 0.25, 2.0
        rkw.update(q_scale=qd, k_scale=kd, v_scale=vd)
    out_dtype = np.float32
    if feature == "fp8_out":
        out_dtype, kw["output_scale"] = F8["f8E4M3FN"], 0.02
    o = np.full(q.shape, np.nan, out_dtype)
    vllm.unified_attention(q, kc, vc, o, cu, 37, su, 300, 0.125, True, window,
                           table, softcap, qd, kd, vd, **kw)
    ref = reference(q, kc, vc, cu, su, table, 0.125, **rkw)
    if feature == "fp8_out":
        check(f64(o) * 0.02, ref, "f8E4M3FN", feature)
    else:
        check(o, ref, "f32", feature)


@pytest.mark.parametrize("form", ["relative", "context", "absolute"])
def test_alibi_forms(form):
    """All three forms give the same output; each matches its reference."""
    rng = np.random.default_rng(12)
    q, kc, vc, cu, su, table = make(rng, hq=4, hk=4, d=32, block_size=16,
                                    dtype="f32", **MIXED)
    slopes = (2.0 ** -np.arange(1, 5)).astype(np.float32)
    o = np.full(q.shape, np.nan, np.float32)
    ops.unified(q, kc, vc, table, cu, su, o, scale=0.2, alibi_slopes=slopes,
                alibi_form=form)
    check(o, reference(q, kc, vc, cu, su, table, 0.2, slopes=slopes,
                       alibi_form=form), "f32", form)


@pytest.mark.parametrize("segments", [1, 2, 3, 7, 16])
@pytest.mark.parametrize("extras", [False, True])
def test_split_kv(segments, extras):
    """Split-KV + merge_states equals the one-pass result, sinks and fp8
    output applied once by the merge."""
    rng = np.random.default_rng(segments)
    q, kc, vc, cu, su, table = make(rng, hq=8, hk=2, d=64, block_size=16,
                                    dtype="bf16", q_lens=[1, 1, 1, 5],
                                    k_lens=[1000, 1, 33, 260])
    kw = {}
    sinks = rng.standard_normal(8).astype(np.float32) if extras else None
    if extras:
        kw = dict(sinks=sinks, output_scale=0.02, alibi_slopes=np.full(8, 0.01, np.float32))
    o = np.full(q.shape, np.nan, F8["f8E4M3FN"] if extras else DTYPES["bf16"])
    vllm.unified_attention(q, kc, vc, o, cu, 5, su, 1000, 0.125, True, (-1, -1),
                           table, 0, None, None, None, num_segments=segments, **kw)
    ref = reference(q, kc, vc, cu, su, table, 0.125, sinks=sinks,
                    slopes=kw.get("alibi_slopes"))
    if extras:
        check(f64(o) * 0.02, ref, "f8E4M3FN", f"split {segments}")
    else:
        check(o, ref, "bf16", f"split {segments}")


@pytest.mark.parametrize("stages,block_n", [(1, 64), (2, 64), (3, 64),
                                             (3, 32), (4, 32)])
@pytest.mark.parametrize("split", [False, True])
def test_pinned_kv_stages(stages, block_n, split):
    """Schedules that hold 1 to 4 K/V tiles in flight (NVVM; the plan's is
    2 on sm_90a, one wgmma warpgroup) give the one-pass result: sequences
    that end inside a tile and a page, shorter than one tile, and longer
    than the ring, in one pass or split."""
    rng = np.random.default_rng(40 + stages * block_n)
    q, kc, vc, cu, su, table = make(rng, hq=16, hk=4, d=128, block_size=16,
                                    dtype="bf16", q_lens=[1, 9, 1, 3, 1],
                                    k_lens=[700, 9, 1, 190, 64])
    o = np.full(q.shape, np.nan, DTYPES["bf16"])
    schedule = (16, block_n, 4, 0, 0, 0, 0, 0, stages)
    if split:
        part = np.full(q.shape[:2] + (3, 128), np.nan, np.float32)
        mx = np.full(q.shape[:2] + (3,), np.nan, np.float32)
        sm = mx.copy()
        ops.unified(q, kc, vc, table, cu, su, part, scale=0.09,
                    segment_max=mx, segment_sum=sm, schedule=schedule)
        ops.merge_states(part, o, segment_max=mx, segment_sum=sm)
    else:
        ops.unified(q, kc, vc, table, cu, su, o, scale=0.09,
                    schedule=schedule)
    check(o, reference(q, kc, vc, cu, su, table, 0.09), "bf16",
          f"stages {stages} x {block_n}")


def specialization(seed, q_lens, k_extra, *, hq=8, d=128, dtype="bf16",
                   fp8=None, **kw):
    """The one kernel text ops.unified specializes (and launches nothing)
    for a batch of `q_lens` queries over contexts k_extra(n) long."""
    rng = np.random.default_rng(seed)
    q, kc, vc, cu, su, table = make(
        rng, hq=hq, hk=2, d=d, block_size=16, dtype=dtype, fp8=fp8,
        q_lens=q_lens, k_lens=[k_extra(n) for n in q_lens])
    scales = dict(k_descale=1.0, v_descale=1.0) if fp8 else {}
    with ops.collect_specializations() as texts:
        ops.unified(q, kc, vc, table, cu, su, np.zeros_like(q), scale=0.1,
                    **{**scales, **kw})
    assert len(texts) == 1
    return texts[0]


def test_long_queries_hint():
    """Calls whose queries average more than 16 a sequence carry the
    planning hint attn.long_queries (sm_90a: three K/V stages), unless a
    schedule is pinned or the caches or Q are not the same 16-bit type, or
    the head is not 64 or 128 (the plan ignores the hint there)."""
    def attrs(q_lens, d=64, **kw):
        return specialization(3, q_lens, lambda n: max(n, 20), d=d, **kw)
    assert "attn.long_queries" in attrs([17])
    # (Several sequences: a mixed batch, split where that is on.)
    assert "attn.long_queries" in attrs([1, 40], d=128, dtype="f16",
                                        lse=np.zeros((41, 8), np.float32))
    assert "attn.long_queries" not in attrs([16])
    assert "attn.long_queries" not in attrs([1, 31])
    assert "attn.long_queries" not in attrs(
        [40], schedule=(16, 64, 4, 0, 0, 0, 0, 0, 2))
    assert "attn.long_queries" not in attrs([40], dtype="f32")
    assert "attn.long_queries" not in attrs([40], d=96)
    assert "attn.long_queries" not in attrs([40], fp8="f8E4M3FN")


def test_prefill_rows_hint(monkeypatch):
    """Calls whose queries average at least 128 a sequence, over heads of
    64 or 128 and caches of Q's 16-bit type or fp8 caches with one descale
    each, carry attn.prefill_rows (sm_90a: the gathering producer
    warpgroup), unless a schedule is pinned or a feature the plan keeps off
    that pipeline is there."""
    def attrs(q_lens, **kw):
        return specialization(4, q_lens, lambda n: n + 5, **kw)
    hint = "attn.prefill_rows"
    assert hint in attrs([128])
    assert hint in attrs([1, 255], dtype="f16")
    assert hint in attrs([200], sliding_window=64, softcap=5.0,
                         sinks=np.zeros(8, np.float32))
    assert hint in attrs([200], causal=False)
    assert hint not in attrs([127])
    # (Several sequences averaging fewer: a mixed batch, whose prefill op
    # carries the hint where the split is on.)
    monkeypatch.setattr(ops, "MIXED_SPLIT_CACHES", ())
    assert hint not in attrs([1, 254])
    monkeypatch.setattr(ops, "MIXED_SPLIT_CACHES", ("16-bit",))
    assert f"{hint}, min_query_len" in attrs([1, 254])
    assert hint in attrs([200], d=64)
    assert hint not in attrs([200], d=96)
    assert hint not in attrs([200], schedule=(16, 64, 4, 0, 0, 0, 0, 0, 2))
    assert hint in attrs([200], fp8="f8E4M3FN")
    assert hint in attrs([200], fp8="f8E5M2", dtype="f16")
    # (Per-(sequence, KV head) descales: the producer takes one value.)
    assert hint not in attrs([200], fp8="f8E4M3FN",
                             k_descale=np.ones((1, 2), np.float32),
                             v_descale=np.ones((1, 2), np.float32))
    assert hint not in attrs([200], alibi_slopes=np.ones(8, np.float32),
                             alibi_form="sqrt")
    assert hint not in attrs([200], lse=np.zeros((200, 8), np.float32))


@pytest.mark.parametrize("features", [
    {}, dict(window=100, softcap=20.0, sinks=True), dict(causal=False),
    dict(slopes=True)], ids=["plain", "window_softcap_sinks",
                             "bidirectional", "alibi"])
def test_prefill_rows_same_result(features):
    """A batch with the prefill-rows hint (sm_90a: the gathering producer
    warpgroup, 128-key tiles) matches the float64 reference: a context
    that ends inside a page and a tile, a sequence of one query, pages
    behind a shuffled table, GQA 4."""
    rng = np.random.default_rng(60)
    q, kc, vc, cu, su, table = make(rng, hq=16, hk=4, d=128, block_size=16,
                                    dtype="bf16", q_lens=[300, 1, 150],
                                    k_lens=[300, 77, 333])
    kw, ref_kw = {}, {}
    if "window" in features:
        kw["sliding_window"] = ref_kw["window"] = features["window"]
    if "softcap" in features:
        kw["softcap"] = ref_kw["softcap"] = features["softcap"]
    if features.get("sinks"):
        kw["sinks"] = ref_kw["sinks"] = rng.standard_normal(16).astype(
            np.float32)
    if features.get("slopes"):
        kw["alibi_slopes"] = ref_kw["slopes"] = (
            2.0 ** (-8.0 * np.arange(1, 17) / 16)).astype(np.float32)
    if "causal" in features:
        kw["causal"] = ref_kw["causal"] = features["causal"]
    o = np.full(q.shape, np.nan, DTYPES["bf16"])
    with ops.collect_specializations() as texts:
        ops.unified(q, kc, vc, table, cu, su, o, scale=0.09, **kw)
    assert "attn.prefill_rows" in texts[0]
    ops.unified(q, kc, vc, table, cu, su, o, scale=0.09, **kw)
    check(o, reference(q, kc, vc, cu, su, table, 0.09, **ref_kw), "bf16",
          "prefill rows")


@pytest.mark.parametrize("case", ["e4m3", "e5m2_f16", "window_softcap_sinks",
                                  "bidirectional", "d64"])
def test_prefill_rows_fp8_cache_same_result(case):
    """Prefill rows over fp8 caches with one descale each (the prefill-rows
    hint: on sm_90a the gathering producer copies the NHD pages' bytes and
    dequantizes K and V rows for the consumers) match the float64
    reference: contexts ending inside a page and a tile, a sequence of one
    query, pages behind a shuffled table, GQA 4, negative and fractional
    descales."""
    rng = np.random.default_rng(61 + len(case))
    fp8 = "f8E5M2" if case.startswith("e5m2") else "f8E4M3FN"
    dtype = "f16" if case.endswith("f16") else "bf16"
    d = 64 if case == "d64" else 128
    q, kc, vc, cu, su, table = make(rng, hq=16, hk=4, d=d, block_size=16,
                                    dtype=dtype, fp8=fp8, q_lens=[300, 1, 150],
                                    k_lens=[300, 77, 333])
    # (A negative v_descale too: the f16 V tiles' PV leaves v_descale,
    # sign included, to the output.)
    kd, vd = {"e4m3": (-0.75, 1.5), "d64": (0.5, -0.25)}.get(case,
                                                             (0.5, 0.25))
    kw, ref_kw = dict(k_descale=kd, v_descale=vd), dict(k_scale=kd,
                                                        v_scale=vd)
    if case == "window_softcap_sinks":
        kw["sliding_window"] = ref_kw["window"] = 100
        kw["softcap"] = ref_kw["softcap"] = 20.0
        kw["sinks"] = ref_kw["sinks"] = rng.standard_normal(16).astype(
            np.float32)
    if case == "bidirectional":
        kw["causal"] = ref_kw["causal"] = False
    o = np.full(q.shape, np.nan, DTYPES[dtype])
    with ops.collect_specializations() as texts:
        ops.unified(q, kc, vc, table, cu, su, o, scale=0.09, **kw)
    assert "attn.prefill_rows" in texts[0]
    ops.unified(q, kc, vc, table, cu, su, o, scale=0.09, **kw)
    check(o, reference(q, kc, vc, cu, su, table, 0.09, **ref_kw), dtype,
          f"prefill rows, {case}")


def test_decode_rows_hint():
    """Calls whose queries times the query heads of a KV head average at
    most 16 rows a sequence, over fp8 caches and 16-bit queries with heads
    of whole 16-dim steps up to 128, carry attn.decode_rows (sm_90a: one
    16-row slab, four warps splitting the keys), unless a schedule is
    pinned."""
    def attrs(q_lens, fp8="f8E4M3FN", **kw):
        return specialization(5, q_lens, lambda n: n + 40, fp8=fp8, **kw)
    hint = "attn.decode_rows"
    assert hint in attrs([1, 1, 1])
    assert hint in attrs([4, 4], fp8="f8E5M2", dtype="f16", d=80)
    assert hint in attrs([1, 7])  # 16 rows a sequence on average (GQA 4)
    assert hint not in attrs([1, 8])
    assert hint in attrs([2, 2], hq=16)  # GQA 8
    assert hint not in attrs([1], hq=64)  # GQA 32: rows beyond one slab
    assert hint not in attrs([1, 1], fp8=None)
    assert hint not in attrs([1, 1], d=256)
    assert hint not in attrs([1, 1], d=72)
    assert hint not in attrs([1, 1], dtype="f32")
    assert hint not in attrs([1, 1], schedule=(16, 64, 4))


@pytest.mark.parametrize("case", [
    "plain", "spec4", "window_softcap_sinks", "alibi", "split", "gqa8", "mha",
    "e5m2_f16_d80", "token_scales"])
def test_decode_rows_same_result(case):
    """Decode rows over fp8 caches (the decode-rows hint: sm_90a programs of
    one 16-row slab whose four warps split each KV tile's keys and merge
    after the walk) match the float64 reference: contexts shorter than a
    warp's 16 keys, ending inside a page and a tile, longer than the raw
    ring; speculative decode's 4 causal tokens; the features a warp's
    state carries (window, softcap, a sink counted once, ALiBi on the
    register staging); split-KV segments; GQA 8, MHA; e5m2 under f16
    queries, heads of 80; per-token scales."""
    rng = np.random.default_rng(70 + len(case))
    hq, hk, d, dtype, fp8 = 8, 2, 128, "bf16", "f8E4M3FN"
    if case == "gqa8":
        hq = 16
    if case == "mha":
        hq = hk = 4
    if case == "e5m2_f16_d80":
        d, dtype, fp8 = 80, "f16", "f8E5M2"
    q_lens = [4, 4, 4, 4] if case == "spec4" else [1, 1, 1, 1, 1]
    k_lens = [300, 7, 77, 1000, 64][:len(q_lens)]
    q, kc, vc, cu, su, table = make(rng, hq=hq, hk=hk, d=d, block_size=16,
                                    dtype=dtype, fp8=fp8, q_lens=q_lens,
                                    k_lens=k_lens)
    kw, rkw = dict(k_descale=0.5, v_descale=2.0), dict(k_scale=0.5,
                                                      v_scale=2.0)
    if case == "window_softcap_sinks":
        kw.update(sliding_window=50, softcap=4.0)
        rkw.update(window=50, softcap=4.0)
        kw["sinks"] = rkw["sinks"] = rng.standard_normal(hq).astype(
            np.float32)
    if case == "alibi":
        kw["alibi_slopes"] = rkw["slopes"] = (
            2.0 ** -np.arange(1, hq + 1)).astype(np.float32)
    if case == "token_scales":
        kc, ks = token_scaled_caches(rng, kc.shape, 3)
        vc, vs = token_scaled_caches(rng, kc.shape, 3)
        kw = dict(k_scale_cache=ks, v_scale_cache=vs)
        rkw = dict(k_token_scales=ks, v_token_scales=vs)
    o = np.full(q.shape, np.nan, DTYPES[dtype])
    with ops.collect_specializations() as texts:
        ops.unified(q, kc, vc, table, cu, su, o, scale=0.09, **kw)
    assert "attn.decode_rows" in texts[0]
    if case == "split":
        part = np.full(q.shape[:2] + (3, d), np.nan, np.float32)
        mx = np.full(q.shape[:2] + (3,), np.nan, np.float32)
        sm = mx.copy()
        ops.unified(q, kc, vc, table, cu, su, part, scale=0.09,
                    segment_max=mx, segment_sum=sm, **kw)
        ops.merge_states(part, o, segment_max=mx, segment_sum=sm)
    else:
        ops.unified(q, kc, vc, table, cu, su, o, scale=0.09, **kw)
    check(o, reference(q, kc, vc, cu, su, table, 0.09, **rkw), dtype,
          f"decode rows {case}")


def test_mixed_split_hint(monkeypatch):
    """Several sequences whose queries average more than 16 and fewer than
    128 (a mixed batch) run as two attn.unified ops over the same operands:
    sequences of at most a decode program's tokens (max(4, its rows / GQA
    ratio): 16-bit caches 64 rows, fp8 caches 16) with max_query_len, the
    others with min_query_len and the prefill-rows hint; fp8 caches' decode
    op carries the decode-rows hint. Not for one sequence, other averages,
    a pinned schedule, features the prefill-rows pipeline keeps off, or
    cache kinds MIXED_SPLIT_CACHES leaves out."""
    def text(q_lens, **kw):
        return specialization(6, q_lens, lambda n: n + 30, **kw)
    monkeypatch.setattr(ops, "MIXED_SPLIT_CACHES", ("fp8", "16-bit"))
    t = text([1, 1, 70])   # GQA 4, bf16: decode programs of 16 tokens
    assert t.count("attn.unified") == 2
    assert "max_query_len = 16 : i64" in t and "min_query_len = 17 : i64" in t
    assert "attn.prefill_rows" in t and "attn.long_queries" not in t
    assert "attn.decode_rows" not in t
    t = text([1, 1, 70], fp8="f8E4M3FN")   # 16-row slabs: 4 tokens
    assert "max_query_len = 4 : i64" in t and "min_query_len = 5 : i64" in t
    assert "attn.decode_rows" in t and "attn.prefill_rows" in t
    t = text([1, 1, 70], hq=2)   # MHA: a 64-row program holds 64 tokens
    assert "max_query_len = 64 : i64" in t
    for q_lens, kw in (([40], {}), ([1, 1, 1, 20], {}), ([1, 300], {}),
                       ([1, 1, 70], dict(d=96)),
                       ([1, 1, 70], dict(schedule=(16, 64, 4))),
                       ([1, 1, 70], dict(lse=np.zeros((72, 8), np.float32)))):
        assert "min_query_len" not in text(q_lens, **kw), (q_lens, kw)
    monkeypatch.setattr(ops, "MIXED_SPLIT_CACHES", ("fp8",))
    assert "min_query_len" not in text([1, 1, 70])
    assert "min_query_len" in text([1, 1, 70], fp8="f8E4M3FN")


@pytest.mark.parametrize("case", ["bf16", "f16_d64", "e4m3", "e5m2_f16",
                                  "window_softcap_sinks", "decodes_last"])
def test_mixed_split_same_result(case, monkeypatch):
    """A mixed batch run as a decode op and a prefill-rows op matches the
    float64 reference on every row (the output is poisoned first, so a row
    neither op writes fails): decodes before and after the prefills,
    speculative rows of 4 and 5 tokens on either side of the fp8 decode
    programs' bound, contexts ending inside a page and a tile, GQA 4."""
    monkeypatch.setattr(ops, "MIXED_SPLIT_CACHES", ("fp8", "16-bit"))
    rng = np.random.default_rng(80 + len(case))
    dtype = "f16" if "f16" in case else "bf16"
    d = 64 if case == "f16_d64" else 128
    fp8 = {"e4m3": "f8E4M3FN", "e5m2_f16": "f8E5M2"}.get(case)
    q_lens, k_lens = [1, 70, 4, 1, 5, 40, 1, 17], [300, 70, 90, 9, 64, 231,
                                                   1, 17]
    if case == "decodes_last":
        q_lens, k_lens = q_lens[1:] + q_lens[:1], k_lens[1:] + k_lens[:1]
    q, kc, vc, cu, su, table = make(rng, hq=16, hk=4, d=d, block_size=16,
                                    dtype=dtype, fp8=fp8, q_lens=q_lens,
                                    k_lens=k_lens)
    kw, rkw = {}, {}
    if fp8:
        kw, rkw = dict(k_descale=0.5, v_descale=-1.5), dict(k_scale=0.5,
                                                           v_scale=-1.5)
    if case == "window_softcap_sinks":
        kw.update(sliding_window=40, softcap=8.0)
        rkw.update(window=40, softcap=8.0)
        kw["sinks"] = rkw["sinks"] = rng.standard_normal(16).astype(
            np.float32)
    o = np.full(q.shape, np.nan, DTYPES[dtype])
    with ops.collect_specializations() as texts:
        ops.unified(q, kc, vc, table, cu, su, o, scale=0.09, **kw)
    assert "min_query_len" in texts[0] and "max_query_len" in texts[0]
    ops.unified(q, kc, vc, table, cu, su, o, scale=0.09, **kw)
    check(o, reference(q, kc, vc, cu, su, table, 0.09, **rkw), dtype,
          f"mixed split {case}")


@pytest.mark.parametrize("case", ["bf16", "e4m3", "window_softcap_sinks",
                                  "speculative", "decodes_last",
                                  "prefill_average", "decode_average",
                                  "decode_average_e4m3"])
def test_mixed_split_decodes_split_kv(case, monkeypatch):
    """A mixed batch with few long decodes through the drop-in: its decode
    op splits the keys (plan_segments' count for the batch's sequences)
    into partials indexed by sequence (sequence_partials) and merges them
    in the launch into out; the prefill op writes the other rows. Every row
    matches the float64 reference (out poisoned first): decodes before and
    after the prefills, speculative rows up to the decode programs' bound
    (16 tokens at GQA 4 over 16 bits, 4 over fp8), a decode of one key;
    and a batch whose queries average PREFILL_ROW_TOKENS or more, which
    runs as two ops only because the decodes split, and batches of mostly
    decodes (queries averaging LONG_QUERY_TOKENS or fewer) likewise."""
    rng = np.random.default_rng(120 + len(case))
    fp8 = "f8E4M3FN" if "e4m3" in case else None
    q_lens, k_lens = [1, 70, 1, 40, 1, 1], [1500, 70, 900, 300, 1, 1200]
    if case == "speculative":
        q_lens, k_lens = [16, 70, 3, 17, 1], [1500, 80, 900, 1100, 1]
    if case == "decodes_last":
        q_lens, k_lens = q_lens[1:] + q_lens[:1], k_lens[1:] + k_lens[:1]
    if case == "prefill_average":
        q_lens, k_lens = [300, 1, 250, 1], [1500, 1300, 250, 900]
    if case.startswith("decode_average"):
        q_lens, k_lens = [1, 40, 1, 1, 3, 1], [1500, 300, 900, 1200, 1000, 7]
    q, kc, vc, cu, su, table = make(rng, hq=16, hk=4, d=128, block_size=16,
                                    dtype="bf16", fp8=fp8, q_lens=q_lens,
                                    k_lens=k_lens)
    kw, rkw = {}, {}
    window, softcap, sinks = (-1, -1), 0, None
    if fp8:
        kw = dict(k_descale=np.float32(0.5), v_descale=np.float32(-1.5))
        rkw = dict(k_scale=0.5, v_scale=-1.5)
    if case == "window_softcap_sinks":
        window, softcap = (399, 0), 8.0
        sinks = rng.standard_normal(16).astype(np.float32)
        rkw.update(window=400, softcap=8.0, sinks=sinks)
    o = np.full(q.shape, np.nan, DTYPES["bf16"])
    args = (q, kc, vc, o, cu, max(q_lens), su, max(k_lens), 0.09, True,
            window, table, softcap, None, kw.get("k_descale"),
            kw.get("v_descale"))
    with ops.collect_specializations() as texts:
        vllm.unified_attention(*args, sinks=sinks)
    decode_op = [line for line in texts[0].splitlines()
                 if "max_query_len" in line]
    assert len(decode_op) == 1 and "sequence_partials" in decode_op[0]
    assert "merged_out(%out" in decode_op[0]
    vllm.unified_attention(*args, sinks=sinks)
    check(o, reference(q, kc, vc, cu, su, table, 0.09, **rkw), "bf16",
          f"mixed split-KV decodes {case}")
    if case in ("prefill_average", "decode_average"):
        # Without the drop-in's split, one op.
        with ops.collect_specializations() as texts:
            ops.unified(q, kc, vc, table, cu, su, o, scale=0.09)
        assert texts[0].count("attn.unified") == 1
        monkeypatch.setattr(vllm, "MIXED_DECODE_SPLIT", False)
        with ops.collect_specializations() as texts:
            vllm.unified_attention(*args, sinks=sinks)
        assert texts[0].count("attn.unified") == 1


@pytest.mark.parametrize("fp8", [None, "f8E4M3FN"])
def test_speculative_decode_split(fp8):
    """Speculative decode (up to SPLIT_MAX_QUERY_TOKENS queries a sequence)
    over long keys: the drop-in splits the one op's keys (partials by
    token, merged in the launch); every row matches the float64 reference
    (out poisoned first): rows of 4, 3 and 1 tokens, contexts ending
    inside pages."""
    rng = np.random.default_rng(140 + bool(fp8))
    q_lens, k_lens = [4, 3, 1, 4], [1500, 901, 1200, 37]
    q, kc, vc, cu, su, table = make(rng, hq=16, hk=4, d=128, block_size=16,
                                    dtype="bf16", fp8=fp8, q_lens=q_lens,
                                    k_lens=k_lens)
    descale = np.float32(0.5) if fp8 else None
    o = np.full(q.shape, np.nan, DTYPES["bf16"])
    args = (q, kc, vc, o, cu, 4, su, 1500, 0.09, True, (-1, -1), table, 0,
            None, descale, descale)
    with ops.collect_specializations() as texts:
        vllm.unified_attention(*args)
    assert "segment_max" in texts[0] and "merged_out" in texts[0]
    vllm.unified_attention(*args)
    scales = dict(k_scale=0.5, v_scale=0.5) if fp8 else {}
    check(o, reference(q, kc, vc, cu, su, table, 0.09, **scales), "bf16",
          f"speculative decode split, {fp8 or 'bf16'}")


@pytest.mark.skipif(os.environ.get("ATTN_MLIR_TEST_DEVICE", "cpu") != "cpu",
                    reason="runs on the CPU (host buffers)")
def test_sequence_partials_rows():
    """ops.unified's decode_split: the decode op's partials and statistics
    live at rows b * R + i (R: its max_query_len), not at tokens; rows of
    prefill sequences stay as they were; the counters end zero; out's
    decode rows are the merge of the partials."""
    rng = np.random.default_rng(131)
    q_lens, k_lens = [1, 70, 2, 40], [700, 70, 600, 300]
    q, kc, vc, cu, su, table = make(rng, hq=16, hk=4, d=128, block_size=16,
                                    dtype="bf16", q_lens=q_lens,
                                    k_lens=k_lens)
    rows, segments = 4 * 16, 3
    part = np.full((rows, 16, segments, 128), np.nan, np.float32)
    mx = np.full((rows, 16, segments), np.nan, np.float32)
    sm = np.full((rows, 16, segments), np.nan, np.float32)
    counters = np.zeros((rows, 16), np.int32)
    asked = []

    def decode_split(n):
        asked.append(n)
        return part, mx, sm, counters
    o = np.full(q.shape, np.nan, DTYPES["bf16"])
    ops._unified(q, kc, vc, table, cu, su, o, scale=0.1,
                 decode_split=decode_split)
    assert asked == [rows]
    assert not counters.any()
    ref = reference(q, kc, vc, cu, su, table, 0.1)
    check(o, ref, "bf16", "sequence partials")
    for b, n in enumerate(q_lens):
        block = slice(16 * b, 16 * (b + 1))
        written = ~np.isnan(sm[block, 0, 0])
        assert list(written) == [i < n and n <= 16 for i in range(16)], b
    # The decode rows' partials merge to the reference.
    merged = np.empty((rows, 16, 128), np.float32)
    ops.merge_states(part, merged, segment_max=mx, segment_sum=sm)
    for b, n in enumerate(q_lens):
        if n <= 16:
            check(merged[16 * b:16 * b + n], ref[cu[b]:cu[b + 1]], "f32",
                  f"merged partials of sequence {b}", tol=2e-2)


@pytest.mark.parametrize("bad,match", [
    ("partial_dtype", r"^partial: expected float32 \[64, 16, segments, 128\]"),
    ("partial_rows", r"^partial: expected float32 \[64, 16, segments, 128\], "
                     r"got f32 \[60, 16, 3, 128\]"),
    ("stats_segments", r"^segment_sum: expected float32 \[64, 16, 3\], got "
                       r"f32 \[64, 16, 2\]"),
    ("counters_dtype", r"^merge_counters: expected int32 \[64, 16\]"),
    ("counters_nonzero", r"^merge_counters: must hold zeros"),
])
def test_decode_split_buffer_errors(bad, match):
    """decode_split's workspace of the wrong type or shape, or counters
    that are not zero, are named before any kernel runs."""
    rng = np.random.default_rng(132)
    q, kc, vc, cu, su, table = make(rng, hq=16, hk=4, d=128, block_size=16,
                                    dtype="bf16", q_lens=[1, 70, 2, 40],
                                    k_lens=[700, 70, 600, 300])
    rows = 64
    part = np.zeros((60 if bad == "partial_rows" else rows, 16, 3, 128),
                    np.float16 if bad == "partial_dtype" else np.float32)
    mx = np.zeros((rows, 16, 3), np.float32)
    sm = np.zeros((rows, 16, 2 if bad == "stats_segments" else 3),
                  np.float32)
    counters = np.zeros((rows, 16), np.int64 if bad == "counters_dtype"
                        else np.int32)
    if bad == "counters_nonzero":
        counters[5, 3] = 1
    o = np.zeros_like(q)
    with pytest.raises(ValueError, match=match):
        ops._unified(q, kc, vc, table, cu, su, o, scale=0.1,
                     decode_split=lambda n: (part, mx, sm, counters))


@pytest.mark.skipif(os.environ.get("ATTN_MLIR_TEST_DEVICE", "cpu") != "cpu",
                    reason="runs MLIR text on the CPU")
@pytest.mark.parametrize("half", ["max_query_len", "min_query_len"])
def test_query_len_range_leaves_other_rows(half, monkeypatch):
    """One op of a mixed batch's pair alone (docs/semantics.md): the rows
    of the sequences it computes match the float64 reference, and every
    other row of the output is left as it was (NaN)."""
    from attn_mlir.run_mlir import run_function
    monkeypatch.setattr(ops, "MIXED_SPLIT_CACHES", ("fp8", "16-bit"))
    rng = np.random.default_rng(90)
    q_lens, k_lens = [1, 70, 16, 17, 40, 1], [300, 70, 90, 40, 231, 5]
    q, kc, vc, cu, su, table = make(rng, hq=8, hk=2, d=64, block_size=16,
                                    dtype="bf16", q_lens=q_lens,
                                    k_lens=k_lens)
    with ops.collect_specializations() as texts:
        ops.unified(q, kc, vc, table, cu, su, np.zeros_like(q), scale=0.1)
    lines = texts[0].splitlines()
    text = "\n".join(line for line in lines if "attn.unified" not in line or
                     half in line)
    assert text.count("attn.unified") == 1
    name = text.split("@", 1)[1].split("(", 1)[0]
    o = np.full(q.shape, np.nan, DTYPES["bf16"])
    run_function(text, name, [q, kc, vc, table, cu, su, 0.1, o])
    ref = reference(q, kc, vc, cu, su, table, 0.1)
    mine = [n <= 16 if half == "max_query_len" else n > 16 for n in q_lens]
    for b, ours in enumerate(mine):
        rows = slice(cu[b], cu[b + 1])
        if ours:
            check(o[rows], ref[rows], "bf16", f"sequence {b}")
        else:
            assert np.isnan(f64(o[rows])).all(), f"sequence {b} was written"


@pytest.mark.parametrize("dtype,d", [("bf16", 128), ("f16", 64)])
def test_long_queries_same_result(dtype, d, monkeypatch):
    """A hinted batch (prefill rows beside decodes; three K/V stages on
    sm_90a) matches the float64 reference: rows that end inside a tile and
    a page, a prefill longer than the ring, and decodes. (A mixed batch
    that is not split: MIXED_SPLIT_CACHES off.)"""
    monkeypatch.setattr(ops, "MIXED_SPLIT_CACHES", ())
    rng = np.random.default_rng(50 + d)
    q, kc, vc, cu, su, table = make(rng, hq=16, hk=4, d=d, block_size=16,
                                    dtype=dtype, q_lens=[1, 70, 1, 40, 3],
                                    k_lens=[300, 70, 9, 231, 64])
    o = np.full(q.shape, np.nan, DTYPES[dtype])
    with ops.collect_specializations() as texts:
        ops.unified(q, kc, vc, table, cu, su, o, scale=d ** -0.5)
    assert "attn.long_queries" in texts[0]
    ops.unified(q, kc, vc, table, cu, su, o, scale=d ** -0.5)
    check(o, reference(q, kc, vc, cu, su, table, d ** -0.5), dtype,
          "long queries")


@pytest.mark.parametrize("case", [
    "decode", "spec4", "sinks_fp8_out", "f32_d80", "fp8_cache", "static",
    "many_segments", "mha_d64", "gqa8_window_softcap"])
def test_fused_merge_same_result(case):
    """The split-KV form with merged_out merges its own segments in the
    same launch (the last segment program of each tile; docs/semantics.md
    3.5): merged_out matches the float64 reference (sinks and the fp8
    output scale applied once, at the merge), the partials are still
    written, and merge_counters are left zero, so that the next call (here
    with another segment count: segments past a short sequence are empty)
    reuses them. (GQA 8 with a window: segments wholly outside it.)"""
    rng = np.random.default_rng(80 + len(case))
    hq, hk, d, dtype, fp8 = 8, 2, 128, "bf16", None
    if case == "f32_d80":
        d, dtype = 80, "f32"
    if case == "mha_d64":
        hq, hk, d = 4, 4, 64
    if case == "gqa8_window_softcap":
        hq = 16
    if case == "fp8_cache":
        fp8 = "f8E4M3FN"
    q_lens = [4, 4, 4] if case == "spec4" else [1, 1, 1, 1]
    k_lens = [300, 7, 1000, 64][:len(q_lens)]
    q, kc, vc, cu, su, table = make(rng, hq=hq, hk=hk, d=d, block_size=16,
                                    dtype=dtype, fp8=fp8, q_lens=q_lens,
                                    k_lens=k_lens)
    kw, rkw = {}, {}
    if fp8:
        kw, rkw = dict(k_descale=0.5, v_descale=2.0), dict(k_scale=0.5,
                                                          v_scale=2.0)
    out_dtype = dtype
    if case == "gqa8_window_softcap":
        kw.update(sliding_window=100, softcap=5.0)
        rkw.update(window=100, softcap=5.0)
    if case == "sinks_fp8_out":
        kw["sinks"] = rkw["sinks"] = rng.standard_normal(hq).astype(
            np.float32)
        kw["out_scale"] = 0.05
        out_dtype = "f8E4M3FN"
    counters = np.zeros(q.shape[:2], np.int32)
    for segments in ((40, 70) if case == "many_segments" else (3, 9)):
        part = np.full(q.shape[:2] + (segments, d), np.nan, np.float32)
        mx = np.full(q.shape[:2] + (segments,), np.nan, np.float32)
        sm = mx.copy()
        o = np.full(q.shape, np.nan, DTYPES[out_dtype])
        if case == "static":
            kw["num_segments"] = segments
        ops.unified(q, kc, vc, table, cu, su, part, scale=0.09,
                    segment_max=mx, segment_sum=sm, merged_out=o,
                    merge_counters=counters, **kw)
        ref = reference(q, kc, vc, cu, su, table, 0.09, **rkw)
        if case == "sinks_fp8_out":
            check(f64(o) * 0.05, to_fp8_out(ref, 0.05, out_dtype) * 0.05,
                  out_dtype, "fused merge fp8 out")
        else:
            check(o, ref, out_dtype, f"fused merge {case} S={segments}")
        if not RECORDING_ONLY:
            assert not np.isnan(part).any() and not np.isnan(mx).any()
            assert not counters.any(), "the fused merge left counters non-zero"


def test_fused_merge_operands():
    """merged_out and merge_counters come together, in the split-KV form,
    shaped like q and [tokens, q_heads] int32."""
    rng = np.random.default_rng(5)
    q, kc, vc, cu, su, table = make(rng, hq=4, hk=2, d=32, block_size=16,
                                    dtype="f32", q_lens=[1], k_lens=[40])
    part = np.zeros((1, 4, 2, 32), np.float32)
    mx = np.zeros((1, 4, 2), np.float32)
    split = dict(segment_max=mx, segment_sum=mx.copy())
    o = np.zeros_like(q)
    ok = np.zeros((1, 4), np.int32)

    def call(out, **kw):
        ops.unified(q, kc, vc, table, cu, su, out, scale=0.1, **kw)
    with pytest.raises(ValueError, match="merge_counters: the fused merge"):
        call(part, merged_out=o, **split)
    with pytest.raises(ValueError, match="merged_out: the fused merge"):
        call(part, merge_counters=ok, **split)
    with pytest.raises(ValueError, match="merged_out: only valid in the "
                       "split-KV form"):
        call(o, merged_out=np.zeros_like(q), merge_counters=ok)
    with pytest.raises(ValueError, match="merge_counters: expected int32"):
        call(part, merged_out=o, merge_counters=np.zeros((1, 4), np.int64),
             **split)
    with pytest.raises(ValueError, match="merge_counters: expected int32"):
        call(part, merged_out=o, merge_counters=np.zeros((1, 2), np.int32),
             **split)
    with pytest.raises(ValueError, match="merged_out: expected shape"):
        call(part, merged_out=np.zeros((2, 4, 32), np.float32),
             merge_counters=ok, **split)
    with pytest.raises(ValueError, match="merge_counters: must hold zeros"):
        call(part, merged_out=o, merge_counters=np.ones((1, 4), np.int32),
             **split)
    with pytest.raises(ValueError, match="sinks: not valid in the split-KV "
                       "form .* without merged_out"):
        call(part, sinks=np.zeros(4, np.float32), **split)


def test_split_partials_have_empty_segments():
    """Segments past a short sequence write (0, -inf, 0)."""
    rng = np.random.default_rng(13)
    q, kc, vc, cu, su, table = make(rng, hq=2, hk=2, d=32, block_size=16,
                                    dtype="f32", q_lens=[1], k_lens=[20])
    acc = np.full((1, 2, 8, 32), np.nan, np.float32)
    mx = np.full((1, 2, 8), np.nan, np.float32)
    sm = np.full((1, 2, 8), np.nan, np.float32)
    ops.unified(q, kc, vc, table, cu, su, acc, scale=0.2, num_segments=8,
                segment_max=mx, segment_sum=sm)
    # 20 keys, 8 segments of ceil(20 / 128) = 1 page: segments 0 and 1 hold keys.
    assert np.isfinite(mx[0, :, :2]).all() and (sm[0, :, :2] > 0).all()
    assert (mx[0, :, 2:] == -np.inf).all() and (sm[0, :, 2:] == 0).all()
    assert (acc[0, :, 2:] == 0).all()


@pytest.mark.parametrize("segments", [1, 3, 8])
def test_runtime_segment_count_matches_static(segments):
    """Without num_segments the count is out's dim 2, read at run time: the
    same partials as the kernel compiled for that count, and one
    specialization for every count."""
    rng = np.random.default_rng(20 + segments)
    q, kc, vc, cu, su, table = make(rng, hq=4, hk=2, d=32, block_size=16,
                                    dtype="f32", q_lens=[1, 1, 3],
                                    k_lens=[300, 20, 130])
    outs = []
    for static in (True, False):
        acc = np.full((5, 4, segments, 32), np.nan, np.float32)
        mx = np.full((5, 4, segments), np.nan, np.float32)
        sm = np.full((5, 4, segments), np.nan, np.float32)
        ops.unified(q, kc, vc, table, cu, su, acc, scale=0.2,
                    num_segments=segments if static else None,
                    segment_max=mx, segment_sum=sm)
        if RECORDING_ONLY:   # both kernels recorded; nothing ran
            continue
        assert np.isfinite(acc).all() and not np.isnan(mx).any()
        outs.append((acc, mx, sm))
    for a, b in zip(*outs):
        np.testing.assert_array_equal(a, b)


def test_runtime_segments_one_specialization():
    from attn_mlir import ops as o
    rng = np.random.default_rng(5)
    q, kc, vc, cu, su, table = make(rng, hq=4, hk=2, d=32, block_size=16,
                                    dtype="f32", q_lens=[1], k_lens=[40])
    with o.collect_specializations() as texts:
        for segments in (2, 5, 16):
            acc = np.zeros((1, 4, segments, 32), np.float32)
            st = np.zeros((1, 4, segments), np.float32)
            ops.unified(q, kc, vc, table, cu, su, acc, scale=0.2,
                        segment_max=st, segment_sum=st.copy())
    assert len(texts) == 1 and "num_segments" not in texts[0]


def test_runtime_segment_count_errors():
    rng = np.random.default_rng(6)
    q, kc, vc, cu, su, table = make(rng, hq=4, hk=2, d=32, block_size=16,
                                    dtype="f32", q_lens=[1], k_lens=[40])
    st = np.zeros((1, 4, 2), np.float32)
    with pytest.raises(ValueError, match="out: the split-KV form"):
        ops.unified(q, kc, vc, table, cu, su, np.zeros((1, 4, 32), np.float32),
                    scale=0.2, segment_max=st, segment_sum=st.copy())
    with pytest.raises(ValueError, match=r"out: the segment count \(dim 2\) = "
                       r"5000 is outside the supported range \[1, 4096\]"):
        z = np.zeros((1, 4, 5000), np.float32)
        ops.unified(q, kc, vc, table, cu, su,
                    np.zeros((1, 4, 5000, 32), np.float32), scale=0.2,
                    segment_max=z, segment_sum=z.copy())


def test_planned_split_for_long_decode():
    assert vllm.plan_segments(1, 4096, 16) == 16
    assert vllm.plan_segments(8, 4096, 16) is None
    # With the batch: the count of least modeled time, one wave of programs
    # (bench/results/2026-11-30-h200-session27.md has the measurements
    # behind each case), none shorter than SEGMENT_MIN_KEYS keys.
    plan = vllm.plan_segments
    assert plan(1, 2048, 16, num_seqs=256, num_kv_heads=8, num_sms=132) \
        is None
    # Two programs an SM: a grid already over the SMs runs unsplit (B=32 at
    # 8 KV heads: 256), B=16 (128) in two.
    assert plan(1, 2048, 16, num_seqs=32, num_kv_heads=8, num_sms=132) \
        is None
    assert plan(1, 2048, 16, num_seqs=16, num_kv_heads=8, num_sms=132) == 2
    few = plan(1, 32768, 16, num_seqs=1, num_kv_heads=8, num_sms=132)
    more = plan(1, 32768, 16, num_seqs=8, num_kv_heads=8, num_sms=132)
    assert (few, more) == (32, 4)
    # Counts off the powers of two where they fill the SMs better: B=6 and
    # B=3 at 8k keys (measured 1.03x and 1.04x over 4 and 8).
    assert plan(1, 8192, 16, num_seqs=6, num_kv_heads=8, num_sms=132) == 5
    assert plan(1, 8192, 16, num_seqs=3, num_kv_heads=8, num_sms=132) == 10
    # fp8 caches' compact footprint (three an SM on sm_90): grids of up to
    # 3 x SMs (less SEGMENT_SPARE_SLOTS) in one wave. B=20 at 4k keys
    # splits in two (1.25x measured), B=12 in four (1.15x), B=32 not.
    fp8 = dict(num_kv_heads=8, num_sms=132, key_bytes=256,
               programs_per_sm=(2, 3))
    assert plan(1, 4096, 16, num_seqs=20, **fp8) == 2
    assert plan(1, 4096, 16, num_seqs=12, **fp8) == 4
    assert plan(1, 4096, 16, num_seqs=32, **fp8) is None
    assert plan(1, 32768, 16, num_seqs=1, **fp8) == 32
    # The context reaches the model through max_seqlen_k_bucket: steps of
    # SEGMENT_MIN_KEYS up to MAX_SEGMENTS of them, then doublings.
    bucket = vllm.max_seqlen_k_bucket
    assert [bucket(k) for k in (127, 128, 8191, 8192, 16383, 16384, 40000,
                                1 << 20)] == [0, 1, 63, 64, 64, 65, 66, 71]
    assert plan(1, 40000, 16, num_seqs=1, num_kv_heads=8, num_sms=132) == \
        plan(1, 32768, 16, num_seqs=1, num_kv_heads=8, num_sms=132)
    for b in range(1, 80):
        for footprints in ((2,), (2, 3)):
            s = plan(1, 8192, 16, num_seqs=b, num_kv_heads=8, num_sms=132,
                     programs_per_sm=footprints)
            if s is not None:
                assert 2 <= s <= vllm.MAX_SEGMENTS
                assert 8192 // s >= vllm.SEGMENT_MIN_KEYS
                # One wave at the footprint the runtime takes.
                assert b * 8 * s <= max(footprints) * 132
    assert plan(1, 1024, 16, num_seqs=1, num_kv_heads=1, num_sms=132) \
        <= 1024 // vllm.SEGMENT_MIN_KEYS
    assert plan(1, 200, 16, num_seqs=1, num_kv_heads=1) is None
    assert plan(2, 32768, 16, num_seqs=1, num_kv_heads=8) is None
    # A mixed batch's decode op: at most the sequences of `short` queries
    # or fewer that its tokens allow (2x512 + 6 decodes: 6; 1x64 + 6
    # decodes of 16-token rows: no bound below 7).
    bound = vllm._decode_count_bound
    assert bound(8, 1030, 512, 16) == 6
    assert bound(16, 4104, 512, 16) == 8
    assert bound(7, 70, 64, 16) == 7
    assert bound(4, 4 * 512, 512, 16) == 1   # all long: at least one
    assert bound(5, 40, 8, 16) == 5          # max_seqlen_q within short
    # _mixed_decode_split plans for that bound: 2x512 + 6 decodes of 32k
    # (16 rows a sequence) get the count of 6 decodes alone, not of 8.
    split = vllm._mixed_decode_split(None, 32768, 16, 8, 8, 32, 128, "bf16",
                                     False, 1030, 512, 8 * 16)
    assert split[0].shape == (128, 32, plan(1, 32768, 16, num_seqs=6,
                                            num_kv_heads=8), 128)
    assert split[3].shape == (128, 32) and not split[3].any()
    assert plan(1, 32768, 16, num_seqs=6, num_kv_heads=8) != \
        plan(1, 32768, 16, num_seqs=8, num_kv_heads=8)
    assert vllm._mixed_decode_split(None, 200, 16, 8, 8, 32, 128, "bf16",
                                    False, 1030, 512, 128) is None
    # Speculative decode (with the query heads): a program holds tile_rows
    # rows, query tokens times the group; up to SPLIT_MAX_QUERY_TOKENS.
    spec = dict(num_kv_heads=8, num_sms=132, num_query_heads=32)
    assert plan(4, 32768, 16, num_seqs=1, **spec) == \
        plan(1, 32768, 16, num_seqs=1, num_kv_heads=8, num_sms=132)
    assert plan(16, 8192, 16, num_seqs=3, tile_rows=16, **spec) == \
        plan(1, 8192, 16, num_seqs=12, num_kv_heads=8, num_sms=132)
    assert plan(vllm.SPLIT_MAX_QUERY_TOKENS + 1, 32768, 16, num_seqs=1,
                **spec) is None
    rng = np.random.default_rng(14)
    q, kc, vc, cu, su, table = make(rng, hq=4, hk=1, d=64, block_size=16,
                                    dtype="f32", q_lens=[1, 1], k_lens=[700, 2000])
    o = np.full(q.shape, np.nan, np.float32)
    vllm.unified_attention(q, kc, vc, o, cu, 1, su, 2000, 0.125, True, (-1, -1),
                           table, 0, None, None, None)
    check(o, reference(q, kc, vc, cu, su, table, 0.125), "f32", "planned split")


# --- vLLM's newer masks: bidirectional, per-sequence causal, chunked -------


@pytest.mark.parametrize("window", [None, 1, 40])
@pytest.mark.parametrize("causal", ["false", "flags"])
def test_bidirectional_and_per_sequence_causal(causal, window):
    """causal=False sees every key < seqused_k (a window then bounds both
    sides); a bool tensor picks causal or bidirectional per sequence."""
    rng = np.random.default_rng(7 + (window or 0))
    q, kc, vc, cu, su, table = make(rng, hq=8, hk=2, d=64, block_size=16,
                                    dtype="bf16", **MIXED)
    flags = False if causal == "false" else \
        np.array([True, False, False, True, False])
    o = np.full(q.shape, np.nan, DTYPES["bf16"])
    ws = (-1, -1) if window is None else (window - 1, window - 1)
    vllm.unified_attention(q, kc, vc, o, cu, 37, su, 300, 0.125, flags, ws,
                           table, 0, None, None, None)
    ref = reference(q, kc, vc, cu, su, table, 0.125, window=window,
                    causal=flags)
    check(o, ref, "bf16", f"causal={causal} window={window}")
    # Not the causal answer: the mask changed something (a window of 1 is
    # the row itself either way).
    causal_ref = reference(q, kc, vc, cu, su, table, 0.125, window=window)
    assert (np.abs(ref - causal_ref).max() > 0.05) == (window != 1)


@pytest.mark.parametrize("window,lookback", [(64, 0), (64, 1), (96, 2),
                                             (33, 10)])
@pytest.mark.parametrize("causal", [True, False])
def test_chunked_attention(window, lookback, causal):
    """chunk_lookback L with window W: chunks of W // (L + 1) keys; a query
    sees its own chunk and the L before it (vLLM's chunked local
    attention)."""
    rng = np.random.default_rng(window + lookback)
    q, kc, vc, cu, su, table = make(rng, hq=4, hk=4, d=32, block_size=16,
                                    dtype="f32", **MIXED)
    o = np.full(q.shape, np.nan, np.float32)
    vllm.unified_attention(q, kc, vc, o, cu, 37, su, 300, 0.2, causal,
                           (window - 1, -1), table, 0, None, None, None,
                           chunk_lookback=lookback)
    ref = reference(q, kc, vc, cu, su, table, 0.2, window=window,
                    causal=causal, chunk_lookback=lookback)
    check(o, ref, "f32", f"chunks W={window} L={lookback}")
    windowed = reference(q, kc, vc, cu, su, table, 0.2, window=window,
                         causal=causal)
    assert np.abs(ref - windowed).max() > 0.05


def test_chunk_lookback_without_window_is_ignored():
    """vLLM sets chunk_lookback = -1 when there is no window."""
    rng = np.random.default_rng(3)
    q, kc, vc, cu, su, table = make(rng, hq=2, hk=1, d=32, block_size=16,
                                    dtype="f32", **MIXED)
    o = np.full(q.shape, np.nan, np.float32)
    vllm.unified_attention(q, kc, vc, o, cu, 37, su, 300, 0.2, True,
                           (-1, -1), table, 0, None, None, None,
                           chunk_lookback=2)
    check(o, reference(q, kc, vc, cu, su, table, 0.2), "f32", "no window")


# --- kv_quant_mode 2 / 3: per-token-head scale caches -----------------------


def token_scaled_caches(rng, kc_shape, mode):
    """An int8 (mode 2) or fp8 e4m3 (mode 3) cache and its per-token-head
    f32 scales, from randn values (scale = amax / 127 or amax / 448)."""
    vals = rng.standard_normal(kc_shape) * rng.uniform(0.5, 3.0,
                                                       kc_shape[:3])[..., None]
    amax = np.abs(vals).max(-1)
    if mode == 2:
        scales = (amax / 127.0).astype(np.float32)
        data = np.clip(np.rint(vals / scales[..., None]), -127, 127)
        return data.astype(np.int8), scales
    scales = (amax / 448.0).astype(np.float32)
    return (vals / scales[..., None]).astype(F8["f8E4M3FN"]), scales


@pytest.mark.parametrize("mode", [2, 3])
@pytest.mark.parametrize("dtype", ["f16", "bf16", "f32"])
@pytest.mark.parametrize("split", [False, True])
def test_per_token_head_scale_caches(mode, dtype, split):
    """vLLM's kv_quant_mode 2 (int8) and 3 (fp8): key j of KV head g is
    cache[blk, off, g] * scale_cache[blk, off, g]; k/v_descale are ignored."""
    rng = np.random.default_rng(mode * 10 + len(dtype))
    lens = dict(q_lens=[1, 1, 1], k_lens=[700, 33, 520]) if split else MIXED
    q, kc, _, cu, su, table = make(rng, hq=8, hk=2, d=64, block_size=16,
                                   dtype=dtype, **lens)
    kq, ks = token_scaled_caches(rng, kc.shape, mode)
    vq, vs = token_scaled_caches(rng, kc.shape, mode)
    o = np.full(q.shape, np.nan, DTYPES[dtype])
    max_q = int(np.diff(cu).max())
    vllm.unified_attention(q, kq, vq, o, cu, max_q, su, int(su.max()), 0.125,
                           True, (-1, -1), table, 0, None, 7.0, 7.0,
                           kv_quant_mode=mode, k_scale_cache=ks,
                           v_scale_cache=vs,
                           num_segments=4 if split else None)
    ref = reference(q, kq, vq, cu, su, table, 0.125, k_token_scales=ks,
                    v_token_scales=vs)
    check(o, ref, dtype, f"kv_quant_mode {mode}")


def test_per_token_head_scale_cache_errors():
    rng = np.random.default_rng(0)
    q, kc, vc, cu, su, table = make(rng, hq=2, hk=1, d=32, block_size=16,
                                    dtype="bf16", **MIXED)
    kq, ks = token_scaled_caches(rng, kc.shape, 2)
    o = np.zeros(q.shape, DTYPES["bf16"])
    args = (q, kq, kq, o, cu, 37, su, 300, 0.1, True, (-1, -1), table, 0,
            None, None, None)
    with pytest.raises(ValueError, match="k_scale_cache/v_scale_cache"):
        vllm.unified_attention(*args, kv_quant_mode=2)
    with pytest.raises(ValueError, match="v_scale_cache"):
        ops.unified(q, kq, kq, table, cu, su, o, scale=0.1,
                    k_scale_cache=ks)
    with pytest.raises(ValueError, match="k_scale_cache: expected"):
        vllm.unified_attention(*args, kv_quant_mode=2,
                               k_scale_cache=ks[:, :8], v_scale_cache=ks)
    with pytest.raises(ValueError, match="kv_quant_mode 3 .* fp8 cache"):
        vllm.unified_attention(*args, kv_quant_mode=3, k_scale_cache=ks,
                               v_scale_cache=ks)
    with pytest.raises(ValueError, match="kv_quant_mode: 5"):
        vllm.unified_attention(*args, kv_quant_mode=5)
    with pytest.raises(ValueError, match="int8 cache needs k_scale_cache"):
        ops.unified(q, kq, kq, table, cu, su, o, scale=0.1)
    with pytest.raises(ValueError, match="chunk_lookback: must be in"):
        vllm.unified_attention(q, kc, vc, o, cu, 37, su, 300, 0.1, True,
                               (7, -1), table, 0, None, None, None,
                               chunk_lookback=8)
    with pytest.raises(ValueError, match="causal: expected"):
        vllm.unified_attention(q, kc, vc, o, cu, 37, su, 300, 0.1,
                               np.array([True, False]), (-1, -1), table, 0,
                               None, None, None)


@pytest.mark.parametrize("magnitude", [1e-5, 1.0, 3e4, 2e6, 1e15])
@pytest.mark.parametrize("split", [False, True])
def test_fp8_cache_query_magnitudes(magnitude, split):
    """bf16 queries over an fp8 cache with per-(sequence, KV head)
    descales, at magnitudes from far below to far above f16's range, the
    key descales compensating so that the scores stay those of randn
    inputs. (The sm_90a decode program multiplies these on f16 tiles: Q is
    staged times a power of two that its largest magnitude decides, and the
    descales apply to the dot products and the output. A Q past 65504 must
    not overflow there, nor a tiny one flush to zero.)"""
    rng = np.random.default_rng(int(np.log10(magnitude)) + 20)
    q, kc, vc, cu, su, table = make(rng, hq=16, hk=4, d=128, block_size=16,
                                    dtype="bf16", fp8="f8E4M3FN",
                                    q_lens=[1, 1, 4, 1],
                                    k_lens=[700, 33, 190, 1])
    q = (f64(q) * magnitude).astype(DTYPES["bf16"])
    ks = (rng.uniform(0.01, 4.0, (4, 4)) / magnitude).astype(np.float32)
    vs = rng.uniform(0.01, 4.0, (4, 4)).astype(np.float32)
    o = np.full(q.shape, np.nan, DTYPES["bf16"])
    scale = 128 ** -0.5
    if split:
        part = np.full(q.shape[:2] + (3, 128), np.nan, np.float32)
        mx = np.full(q.shape[:2] + (3,), np.nan, np.float32)
        sm = mx.copy()
        ops.unified(q, kc, vc, table, cu, su, part, scale=scale,
                    k_descale=ks, v_descale=vs, segment_max=mx,
                    segment_sum=sm)
        ops.merge_states(part, o, segment_max=mx, segment_sum=sm)
    else:
        ops.unified(q, kc, vc, table, cu, su, o, scale=scale, k_descale=ks,
                    v_descale=vs)
    ref = reference(q, kc, vc, cu, su, table, scale, k_scale=ks, v_scale=vs)
    check(o, ref, "bf16", f"|q| ~ {magnitude:g}")


def test_stream_pages_hint():
    """The drop-in's split-KV launches whose segments (counted from the
    context's bucket) hold at most vllm.STREAM_SEGMENT_KEYS keys carry the
    attn.stream_pages hint (sm_90a: their copies take an L2 evict-first
    policy); longer segments, unsplit batches and the one-pass form do not.
    The hint never changes the result: the hinted launch matches the
    float64 reference."""
    assert vllm.streams_pages(32768, 32) and vllm.streams_pages(8192, 4)
    assert vllm.streams_pages(4096, 2) and vllm.streams_pages(60000, 32)
    assert not vllm.streams_pages(32768, 8)
    assert not vllm.streams_pages(131072, 32)
    assert not vllm.streams_pages(16384, 2)
    assert not vllm.streams_pages(32768, None)
    # Within a bucket (doublings past 8k keys) the hint is constant, as the
    # plan is: a CUDA graph replays one kernel a bucket.
    assert {vllm.streams_pages(k, 32) for k in range(32768, 65536, 997)} \
        == {True}
    rng = np.random.default_rng(77)
    q, kc, vc, cu, su, table = make(rng, hq=8, hk=2, d=64, block_size=16,
                                    dtype="bf16", q_lens=[1, 1],
                                    k_lens=[1000, 37])

    def text(segments, max_k=1000):
        o = np.full(q.shape, np.nan, DTYPES["bf16"])
        with ops.collect_specializations() as texts:
            vllm.unified_attention(q, kc, vc, o, cu, 1, su, max_k, 0.125,
                                   True, (-1, -1), table, 0, None, None,
                                   None, num_segments=segments)
        assert len(texts) == 1
        return texts[0], o

    hinted, _ = text(4)
    assert "attn.stream_pages" in hinted and "_stream" in hinted
    assert "attn.stream_pages" not in text(2, max_k=16384)[0]
    saved = vllm.STREAM_SEGMENT_KEYS
    try:
        vllm.STREAM_SEGMENT_KEYS = 0
        assert "attn.stream_pages" not in text(4)[0]
    finally:
        vllm.STREAM_SEGMENT_KEYS = saved
    o = np.full(q.shape, np.nan, DTYPES["bf16"])
    vllm.unified_attention(q, kc, vc, o, cu, 1, su, 1000, 0.125, True,
                           (-1, -1), table, 0, None, None, None,
                           num_segments=4)
    check(o, reference(q, kc, vc, cu, su, table, 0.125), "bf16",
          "stream_pages")
