"""Random feature combinations of vllm.unified_attention (the call vLLM
serves every batch through) against the float64 reference.

Each case draws, from its own seed, a batch of decodes, speculative rows,
chunked and whole prefills over a paged cache with a shuffled block table;
GQA of any ratio, a head dim and a page size; the query, cache and output
types (fp8 caches with per-tensor or per-(sequence, KV head) descales,
int8 and fp8 caches with per-token-head scales, fp8 queries, fp8 outputs);
and the features vLLM passes: a sliding window (or chunked local
attention), softcap, ALiBi, sinks, bidirectional or per-sequence causal
masks, and a split-KV plan. The grids of test_unified.py take features one
or two at a time; bugs of combinations (a window over fp8 pages of 32 with
GQA 6 and split-KV, say) are what this finds.

ATTN_MLIR_FUZZ_CASES cases (default 12) from ATTN_MLIR_FUZZ_SEED (default
2026). Under ATTN_MLIR_TEST_DEVICE=cuda they run on the GPU (conftest.py):
the kernels the host call specializes, launched on copies of its arrays.
ATTN_MLIR_FUZZ_TORCH=1 (with ATTN_MLIR_TEST_DEVICE=cuda) passes torch CUDA
tensors instead, as vLLM does, so the drop-in plans for the GPU it runs on
(its SM count, split-KV segments, streaming hints): kernels a host call
never specializes. A failing case names its configuration; `-k case_17`
runs it again.
"""

import os

import numpy as np
import pytest

from attn_mlir import vllm
from reference import DTYPES, F8, F8_MAX, RECORDING_ONLY, check, f64
from test_unified import make, reference, token_scaled_caches

CASES = int(os.environ.get("ATTN_MLIR_FUZZ_CASES", "12"))
SEED = int(os.environ.get("ATTN_MLIR_FUZZ_SEED", "2026"))
TORCH = os.environ.get("ATTN_MLIR_FUZZ_TORCH") == "1"
if TORCH and os.environ.get("ATTN_MLIR_TEST_DEVICE") != "cuda":
    raise RuntimeError("ATTN_MLIR_FUZZ_TORCH=1 runs on the GPU: set "
                       "ATTN_MLIR_TEST_DEVICE=cuda too (reference.TOL then "
                       "takes the GPU's tolerances)")

HEAD_DIMS = [16, 24, 32, 40, 64, 72, 80, 96, 112, 128, 160, 192, 256]
PAGE_SIZES = [1, 8, 16, 16, 16, 32, 48, 64, 128, 544]


def _batch(rng):
    """(query lengths, context lengths incl. the new tokens), 1-6 sequences
    of kinds drawn independently; a third of the batches are decode-only,
    which vLLM splits over the keys."""
    n = int(rng.integers(1, 7))
    decode_only = rng.random() < 0.33
    q_lens, k_lens = [], []
    for _ in range(n):
        kind = "decode" if decode_only else rng.choice(
            ["decode", "spec", "prefill", "chunk"], p=[0.35, 0.15, 0.25, 0.25])
        if kind == "decode":
            q, k = 1, int(rng.integers(1, 1500))
        elif kind == "spec":
            q = int(rng.integers(2, 7))
            k = q + int(rng.integers(0, 600))
        elif kind == "prefill":
            q = k = int(rng.integers(1, 300))
        else:
            q = int(rng.integers(1, 200))
            k = q + int(rng.integers(1, 500))
        q_lens.append(q)
        k_lens.append(k)
    return q_lens, k_lens


def heads(rng, ratios=(1, 2, 3, 4, 5, 6, 8, 16)):
    """(KV heads, query heads): 1-8 KV heads, GQA of a ratio drawn from
    `ratios`, at most 32 query heads."""
    hk = int(rng.choice([1, 2, 4, 8]))
    ratio = int(rng.choice(ratios))
    while hk * ratio > 32:
        hk //= 2
    return hk, hk * ratio


def poisoned_output(rng, shape, dtype, fp8):
    """(output poisoned with NaN, its scale): e4m3 with a random output
    scale when `fp8`, else `dtype` and no scale."""
    if not fp8:
        return np.full(shape, np.nan, DTYPES[dtype]), None
    return np.full(shape, np.nan, F8["f8E4M3FN"]), \
        float(rng.uniform(0.005, 0.05))


def check_fp8_output(o, ref, out_scale, what, tol=None, bound=None):
    """Section 6: o is ref / out_scale clamped to the e4m3 range (`tol`,
    `bound` as reference.check's)."""
    lim = F8_MAX["f8E4M3FN"] * out_scale
    return check(f64(o) * out_scale, np.clip(ref, -lim, lim), "f8E4M3FN",
                 what, tol=tol, bound=bound)


def call(fn, args, kw, out):
    """fn(*args, **kw), on torch CUDA tensors under ATTN_MLIR_FUZZ_TORCH
    (args[out], the output, then copied back); the output array."""
    if not TORCH:
        fn(*args, **kw)
        return args[out]
    from test_vllm_cuda import to_cuda, to_host
    dev = lambda a: to_cuda(a) if isinstance(a, np.ndarray) else a  # noqa: E731
    args = [dev(a) for a in args]
    fn(*args, **{key: dev(a) for key, a in kw.items()})
    return to_host(args[out])


def draw(case):
    """The configuration of one case: plain values, printed on failure."""
    rng = np.random.default_rng([SEED, case])
    q_lens, k_lens = _batch(rng)
    dtype = str(rng.choice(["bf16", "f16", "f32"], p=[0.5, 0.3, 0.2]))
    fp8 = rng.choice([None, "f8E4M3FN", "f8E5M2"], p=[0.55, 0.3, 0.15])
    hk, hq = heads(rng)
    c = dict(case=case, q_lens=q_lens, k_lens=k_lens, dtype=dtype,
             fp8=None if fp8 is None else str(fp8), hk=hk, hq=hq,
             d=int(rng.choice(HEAD_DIMS)),
             block_size=int(rng.choice(PAGE_SIZES)),
             scale_factor=float(rng.uniform(0.5, 1.5)))
    c["q_fp8"] = c["fp8"] == "f8E4M3FN" and rng.random() < 0.3
    c["descales"] = str(rng.choice(["tensor", "seq_head"])) if c["fp8"] else None
    # vLLM's kv_quant_mode 2 / 3: caches of per-token-head scales.
    c["token_scales"] = 0 if c["fp8"] or rng.random() >= 0.12 else \
        int(rng.choice([2, 3]))
    c["causal"] = str(rng.choice(["true", "false", "flags"], p=[0.8, 0.1, 0.1]))
    c["window"] = int(rng.integers(1, 400)) if rng.random() < 0.3 else None
    c["chunk_lookback"] = int(rng.integers(0, 4)) \
        if c["window"] and c["window"] >= 4 and rng.random() < 0.2 else None
    c["softcap"] = float(rng.uniform(2, 40)) if rng.random() < 0.25 else None
    c["alibi"] = rng.random() < 0.2
    c["sinks"] = rng.random() < 0.25
    c["out_fp8"] = rng.random() < 0.15
    decode_only = max(q_lens) == 1
    # Split-KV: vLLM's own plan for decode-only batches (its buffers), or
    # a forced segment count on any batch.
    c["split"] = str(rng.choice(["none", "vllm", "forced"], p=[0.5, 0.25, 0.25])
                     if decode_only else
                     rng.choice(["none", "forced"], p=[0.8, 0.2]))
    c["segments"] = int(rng.integers(1, 17))
    return c


def run(c):
    rng = np.random.default_rng([SEED, c["case"], 1])
    q, kc, vc, cu, su, table = make(
        rng, q_lens=c["q_lens"], k_lens=c["k_lens"], hq=c["hq"], hk=c["hk"],
        d=c["d"], block_size=c["block_size"], dtype=c["dtype"], fp8=c["fp8"],
        q_fp8=c["q_fp8"])
    n, hq, hk, d = len(c["q_lens"]), c["hq"], c["hk"], c["d"]
    scale = c["scale_factor"] * d ** -0.5
    kw, rkw = {}, {}
    qd = kd = vd = None
    if c["fp8"]:
        if c["descales"] == "tensor":
            kd, vd = (float(x) for x in rng.uniform(0.25, 2.0, 2))
        else:
            kd, vd = (rng.uniform(0.25, 2.0, (n, hk)).astype(np.float32)
                      for _ in range(2))
        rkw.update(k_scale=kd, v_scale=vd)
        if c["q_fp8"]:
            qd = float(rng.uniform(0.25, 2.0))
            rkw["q_scale"] = qd
    causal = {"true": True, "false": False,
              "flags": rng.random(n) < 0.5}[c["causal"]]
    if c["token_scales"]:
        kc, ks = token_scaled_caches(rng, kc.shape, c["token_scales"])
        vc, vs = token_scaled_caches(rng, kc.shape, c["token_scales"])
        # (vLLM passes its per-tensor descales too; they are ignored.)
        kd = vd = 7.0
        kw.update(kv_quant_mode=c["token_scales"], k_scale_cache=ks,
                  v_scale_cache=vs)
        rkw.update(k_token_scales=ks, v_token_scales=vs)
    window = (-1, -1)
    if c["window"]:
        w = c["window"]
        window = (w - 1, 0) if c["causal"] == "true" else (w - 1, w - 1)
        rkw["window"] = w
        if c["chunk_lookback"] is not None:
            window = (w - 1, -1)
            kw["chunk_lookback"] = rkw["chunk_lookback"] = c["chunk_lookback"]
    softcap = c["softcap"] or 0
    if c["softcap"]:
        rkw["softcap"] = c["softcap"]
    if c["alibi"]:
        kw["alibi_slopes"] = rkw["slopes"] = \
            (2.0 ** -rng.uniform(0.5, 8, hq)).astype(np.float32)
    if c["sinks"]:
        kw["sinks"] = rkw["sinks"] = rng.standard_normal(hq).astype(np.float32)
    out_type = "f32" if c["q_fp8"] and c["dtype"] == "f32" else c["dtype"]
    o, out_scale = poisoned_output(rng, q.shape, out_type, c["out_fp8"])
    if out_scale is not None:
        kw["output_scale"] = out_scale
    if c["split"] == "forced":
        kw["num_segments"] = c["segments"]
    elif c["split"] == "vllm":
        # vLLM's buffers: rows for a padded batch, the head dim padded to
        # a power of two.
        s, padded = c["segments"], 1 << (d - 1).bit_length()
        kw.update(seq_threshold_3D=n, num_par_softmax_segments=s,
                  softmax_segm_output=np.zeros((len(q) + 3, hq, s, padded),
                                               np.float32),
                  softmax_segm_max=np.zeros((len(q) + 3, hq, s), np.float32),
                  softmax_segm_expsum=np.zeros((len(q) + 3, hq, s),
                                               np.float32))
    args = [q, kc, vc, o, cu, max(c["q_lens"]), su, max(c["k_lens"]), scale,
            causal, window, table, softcap, qd, kd, vd]
    o = call(vllm.unified_attention, args, kw, out=3)
    if RECORDING_ONLY:  # nothing ran: the reference is not needed
        return 0.0
    ref = reference(q, kc, vc, cu, su, table, scale, causal=causal, **rkw)
    if out_scale is not None:
        return check_fp8_output(o, ref, out_scale, str(c))
    return check(o, ref, out_type, str(c))


@pytest.mark.parametrize("case", [f"case_{i}" for i in range(CASES)])
def test_unified_fuzz(case):
    run(draw(int(case[5:])))
