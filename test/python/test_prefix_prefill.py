"""attn.prefix_prefill through vllm.context_attention_fwd."""

import numpy as np
import pytest

from attn_mlir import vllm
from paged import block_table, cache_values
from reference import DTYPES, F8, RECORDING_ONLY, attend, check, f64, to_fp8_out


def run_case(rng, *, dtype="bf16", d=64, hq=8, hk=2, block_size=16,
             q_lens=(5, 1, 23), ctx_lens=(30, 17, 0), kv_dtype=None,
             window=None, alibi=False, sinks=False, fp8_out=False,
             skip_decode=False, out_scale=None, kv_scales=(0.5, 1.5)):
    """`out_scale`: an output scale with a plain (non-fp8) out;
    `kv_scales`: k_scale and v_scale of an fp8 cache."""
    q_lens, ctx_lens = np.array(q_lens), np.array(ctx_lens)
    tokens = int(q_lens.sum())
    starts = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    seq_lens = (q_lens + ctx_lens).astype(np.int32)
    q = rng.standard_normal((tokens, hq, d)).astype(DTYPES[dtype])
    k = rng.standard_normal((tokens, hk, d)).astype(DTYPES[dtype])
    v = rng.standard_normal((tokens, hk, d)).astype(DTYPES[dtype])
    table, nb = block_table(rng, ctx_lens, block_size)
    fp8 = {"fp8_e4m3": "f8E4M3FN", "fp8_e5m2": "f8E5M2"}.get(kv_dtype)
    x = 16 // (1 if fp8 else np.dtype(DTYPES[dtype]).itemsize)
    x = x if d % x == 0 else 1
    k_vals, k_cache = cache_values(rng, (nb, hk, d // x, block_size, x), dtype, fp8)
    v_vals, v_cache = cache_values(rng, (nb, hk, d, block_size), dtype, fp8)
    k_scale, v_scale = kv_scales if fp8 else (1.0, 1.0)
    slopes = (2.0 ** -np.arange(1, hq + 1)).astype(np.float32) if alibi else None
    sink = rng.standard_normal(hq).astype(np.float32) if sinks else None
    out_dtype = F8["f8E4M3FN"] if fp8_out else DTYPES[dtype]
    o = np.full(q.shape, np.nan, out_dtype)
    scale = d ** -0.5
    vllm.context_attention_fwd(
        q, k, v, o, kv_dtype or "auto", k_cache, v_cache, table, starts,
        seq_lens, int(seq_lens.max()), int(q_lens.max()),
        np.array([k_scale], np.float32), np.array([v_scale], np.float32),
        alibi_slopes=slopes, sliding_window=window, sm_scale=scale,
        skip_decode=skip_decode, fp8_out_scale=0.05 if fp8_out else out_scale,
        sinks=sink)
    if RECORDING_ONLY:  # nothing ran: no reference to compare with
        return o, np.zeros(q.shape)

    ref = np.full(q.shape, np.nan)
    kf, vf = f64(k_vals) * k_scale, f64(v_vals) * v_scale
    for b in range(len(q_lens)):
        L, C = int(q_lens[b]), int(ctx_lens[b])
        if skip_decode and L == 1:
            continue
        blocks = table[b, np.arange(C) // block_size] if C else np.zeros(0, int)
        slot = np.arange(C) % block_size
        rows = slice(starts[b], starts[b + 1])
        for h in range(hq):
            kvh = h // (hq // hk)
            kc = kf[blocks, kvh, :, slot, :].reshape(C, d) if C else np.zeros((0, d))
            vc = vf[blocks, kvh, :, slot] if C else np.zeros((0, d))
            K = np.concatenate([kc, f64(k[rows, kvh])])
            V = np.concatenate([vc, f64(v[rows, kvh])])
            qpos = C + np.arange(L)[:, None]
            kpos = np.arange(C + L)[None, :]
            vis = kpos <= qpos
            if window:
                vis &= (qpos - kpos) < window
            ab = slopes[h] * (kpos - qpos) if alibi else None
            ref[rows, h] = attend(f64(q[rows, h]), K, V, scale, vis, alibi=ab,
                                  sink=None if sink is None else float(sink[h]))
    return o, ref


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("d,hq,hk", [(24, 4, 4), (64, 8, 2), (80, 10, 2),
                                     (96, 8, 1), (128, 8, 8), (256, 4, 1),
                                     (256, 8, 1), (256, 10, 2), (192, 6, 1)])
def test_dtype_headdim_gqa(dtype, d, hq, hk):
    o, ref = run_case(np.random.default_rng(d + hq), dtype=dtype, d=d, hq=hq, hk=hk)
    check(o, ref, dtype, "prefix prefill")


@pytest.mark.parametrize("block_size", [1, 16, 32, 48, 64])
@pytest.mark.parametrize("kv_dtype", [None, "fp8_e4m3", "fp8_e5m2"])
def test_page_sizes_and_fp8_cache(block_size, kv_dtype):
    o, ref = run_case(np.random.default_rng(block_size), block_size=block_size,
                      kv_dtype=kv_dtype, ctx_lens=(70, 3, 129))
    check(o, ref, "bf16", f"block {block_size} {kv_dtype}")


@pytest.mark.parametrize("kv_dtype", ["fp8_e4m3", "fp8_e5m2"])
def test_mha_fp8_cache(kv_dtype):
    # 128-row programs of one head (sm_90a: the gathering producer's
    # registers).
    o, ref = run_case(np.random.default_rng(11), d=128, hq=8, hk=8,
                      kv_dtype=kv_dtype, q_lens=(150, 1, 23),
                      ctx_lens=(70, 3, 129))
    check(o, ref, "bf16", f"MHA {kv_dtype}")


@pytest.mark.parametrize("d,hq,hk,dtype,kv_dtype", [
    (32, 8, 2, "bf16", "fp8_e4m3"), (80, 8, 2, "bf16", "fp8_e4m3"),
    (96, 8, 2, "bf16", "fp8_e4m3"), (96, 8, 2, "f16", "fp8_e5m2"),
    (96, 4, 4, "bf16", "fp8_e4m3"), (112, 16, 2, "bf16", "fp8_e4m3"),
    (160, 8, 2, "bf16", "fp8_e4m3")])
def test_fp8_cache_heads_between_atoms(d, hq, hk, dtype, kv_dtype):
    # Heads that are no whole 64-column swizzle atoms decode fp8 caches in
    # registers; on sm_90a in 128-row programs (attn-plan): several
    # programs a sequence, ragged ends, scales of both signs.
    o, ref = run_case(np.random.default_rng(d + hq), dtype=dtype, d=d, hq=hq,
                      hk=hk, kv_dtype=kv_dtype, q_lens=(150, 1, 23),
                      ctx_lens=(300, 3, 129), kv_scales=(-0.75, 1.25))
    check(o, ref, dtype, f"heads of {d} {hq}/{hk} {kv_dtype}")


@pytest.mark.parametrize("window", [8, 24, 40, 200])
def test_fp8_cache_sliding_window(window):
    # sm_90a's producer copies V^T in runs of 16 keys of a page, its cache
    # walk starting at a multiple of 16 below the window's first key (the
    # keys in between masked).
    o, ref = run_case(np.random.default_rng(window), d=128, hq=8, hk=2,
                      kv_dtype="fp8_e4m3", window=window, q_lens=(150, 1, 23),
                      ctx_lens=(300, 3, 129), kv_scales=(-0.75, 1.25))
    check(o, ref, "bf16", f"fp8 cache window {window}")


@pytest.mark.parametrize("kv_scales", [(-0.5, 1.5), (0.5, -2.0),
                                       (3e-3, 300.0), (-7.0, -0.25)])
@pytest.mark.parametrize("dtype,kv_dtype", [("bf16", "fp8_e4m3"),
                                            ("f16", "fp8_e5m2")])
def test_fp8_cache_scale_signs(kv_scales, dtype, kv_dtype):
    # sm_90a's producer decodes K times the sign of k_scale and V as
    # stored; |k_scale| multiplies the cache walk's score factor and
    # v_scale its output (docs/semantics.md, section 6): every sign.
    o, ref = run_case(np.random.default_rng(12), dtype=dtype, d=128, hq=8,
                      hk=2, kv_dtype=kv_dtype, q_lens=(150, 1, 23),
                      ctx_lens=(300, 3, 129), kv_scales=kv_scales)
    check(o, ref, dtype, f"scales {kv_scales} {kv_dtype}")


@pytest.mark.parametrize("kv_dtype", ["fp8_e4m3", "fp8_e5m2"])
def test_fp8_cache_alibi_heads_128(kv_dtype):
    # Scores that are not linear (ALiBi): sm_90a's producer multiplies the
    # keys by k_scale as it decodes them, while V still goes into f16 tiles
    # with v_scale on O.
    o, ref = run_case(np.random.default_rng(13), d=128, hq=8, hk=2,
                      kv_dtype=kv_dtype, alibi=True, q_lens=(150, 1, 23),
                      ctx_lens=(300, 3, 129), kv_scales=(-0.75, 1.25))
    check(o, ref, "bf16", f"alibi {kv_dtype}")


@pytest.mark.parametrize("window", [1, 8, 40])
def test_sliding_window(window):
    o, ref = run_case(np.random.default_rng(window), dtype="f32", window=window,
                      ctx_lens=(60, 40, 5))
    check(o, ref, "f32", f"window {window}")


def test_alibi():
    o, ref = run_case(np.random.default_rng(7), dtype="f32", alibi=True)
    check(o, ref, "f32", "alibi")


def test_sinks_and_fp8_out():
    o, ref = run_case(np.random.default_rng(8), dtype="bf16", sinks=True,
                      fp8_out=True, kv_dtype="fp8_e4m3")
    check(f64(o) * 0.05, to_fp8_out(ref, 0.05, "f8E4M3FN") * 0.05, "f8E4M3FN",
          "sinks fp8 out")
    check(f64(o) * 0.05, ref, "f8E4M3FN", "sinks fp8 out vs exact")


def test_sinks_with_alibi_rejected():
    """vLLM's ALiBi kernel of prefix prefill takes no sinks (it drops
    them); the drop-in names the pair instead of ignoring either."""
    with pytest.raises(ValueError, match="^sinks: cannot be combined with "
                                         "alibi_slopes"):
        run_case(np.random.default_rng(10), alibi=True, sinks=True)


def test_skip_decode_leaves_decode_rows():
    o, ref = run_case(np.random.default_rng(9), dtype="f32", skip_decode=True)
    decode_row = 5  # sequence 1 has a single new token
    assert np.isnan(o[decode_row]).all()
    keep = np.ones(len(o), bool)
    keep[decode_row] = False
    check(o[keep], ref[keep], "f32", "skip_decode")
