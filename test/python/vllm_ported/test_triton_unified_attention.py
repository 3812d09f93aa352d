"""Port of vLLM's tests/kernels/attention/test_triton_unified_attention.py
at vllm-project/vllm@003ee61625d33ae27df77f97748cb5867d0747b6 (plus
test_triton_mixed_causal of tests/kernels/attention/test_mixed_causal_attn.py
@14ad037f0b7ea87394e6650bee1cca8144e7a7ba), run on attn_mlir.vllm.unified_attention.

Each test builds its inputs as vLLM's does (randn query and caches, random
block tables over `num_blocks` blocks, fp8 tensors as `(x / scale)` cast to
e4m3fn, descales as `full((num_seqs, num_kv_heads), s)`, 16 softmax segments
with caller-owned float32 buffers of `seq_threshold_3D` rows), calls
unified_attention with vLLM's keywords, and compares with `ref_paged_attn`
reimplemented in numpy under vLLM's tolerances.

Adapted:
* numpy (ml_dtypes for bf16/fp8) on the host instead of torch on CUDA;
  numpy's generator instead of torch's seed 0 (other random values).
* The reference runs in float64 (vLLM's runs its einsums in the input dtype)
  and is rounded to the output dtype once, as comparing two bf16 tensors
  does; this only makes the reference more exact.
* Cache slots that no sequence uses (blocks outside the block tables, slots
  past a sequence's length) hold NaN instead of random values, and the
  output and segment buffers start as NaN instead of `torch.empty`: a kernel
  that reads a key past `seqused_k` or leaves a row unwritten fails.
* Grid: vLLM's full grid under ATTN_MLIR_FULL_GRID=1, else the covering
  subsets below (every value of every axis at least once).
* Not ported: the NVFP4 tests (test_triton_unified_attn_nvfp4_*,
  test_nvfp4_launch_config_*, test_triton_attn_nvfp4_*: NVFP4 caches,
  raw_k/raw_v and backend routing are not supported by attn_mlir), except
  the mask of ..._nvfp4_mm_prefix_raw_current_clamps_seq_len, ported with a
  bf16 cache (test_triton_unified_attn_mm_prefix_clamps_seq_len). ROCm's
  e4m3fnuz is ROCm-only. kv_quant_mode 2/3 and chunk_lookback are not
  supported by attn_mlir and vLLM's test does not use them either.
* Added (not in vLLM's test): the descales also as vLLM's backend passes
  them, `layer._k_scale.expand((num_seqs, num_kv_heads))` (a stride-0
  broadcast), and attention sinks through both the one-pass and the split
  (3D) path (test_triton_unified_attn_sinks); vLLM's test of this commit
  passes neither sinks, ALiBi nor qq_bias. Each 3D case also checks that
  the caller's softmax_segm_* buffers were used.

vLLM's test is weaker than it looks in one axis: its softcap of 50 never
bites (randn inputs give scores within ~+-6, where 50 tanh(s / 50) moves no
score by 0.02), so its softcap cases pass with the softcap ignored;
test_triton_unified_attn_softcap_real_values checks it with scores of
~+-100.
"""

import enum
import functools

import numpy as np
import pytest

from attn_mlir import vllm

from . import (_DRY_RUN, _TEST_DEVICE, BF16, FP8_E4M3, assert_close, assert_discriminates,
               cases, cast, f64, matmul, softmax_rows)

NUM_HEADS = [(4, 4), (8, 2), (5, 1)]
HEAD_SIZES = [128, 256]
BLOCK_SIZES = [16]
DTYPES = ["bf16"]
QDTYPES = [None, "fp8"]
# one value large enough to test overflow in index calculation, one small
NUM_BLOCKS = [32768, 2048]
# 0: 2D kernel for decode; 8: 3D (split softmax) kernel for decode
SEQ_THRESHOLD_3D_VALUES = [0, 8]
SLIDING_WINDOWS = [None, 64, 128, 256]
SOFT_CAPS = [None, 50.0]

MIXED = [(1, 1328), (5, 18), (129, 463)]
DECODE = [(1, 523), (1, 37), (1, 2011)]
ONES = [(1, 1)] * 533
PREFILLS = [(533, 533)] * 533
SEQ_LENS = [MIXED, DECODE]

NUMPY = {"bf16": BF16, "fp16": np.float16, "fp8": FP8_E4M3}


class KVQuantMode(enum.IntEnum):
    """vllm.v1.kv_cache_interface.KVQuantMode (values 0-3 are stable)."""
    NONE = 0
    FP8_PER_TENSOR = 1


def _ids(value):
    if isinstance(value, list):
        names = {id(MIXED): "mixed", id(DECODE): "decode"}
        if id(value) in names:
            return names[id(value)]
        if all(isinstance(v, bool) for v in value):   # per-sequence flags
            return "".join("C" if v else "B" for v in value)
        return f"{len(value)}x{value[0][0]}-{value[0][1]}"
    if isinstance(value, tuple):
        return f"{value[0]}q{value[1]}kv"
    return None


def next_power_of_2(n):
    return 1 << (int(n) - 1).bit_length()


def make_inputs(rng, seq_lens, num_heads, head_size, block_size, num_blocks,
                dtype, block_tables=None):
    """vLLM's randn query/caches and randint block tables; only the cache
    slots some sequence reads get values, the others are NaN."""
    query_lens = [x[0] for x in seq_lens]
    kv_lens = [x[1] for x in seq_lens]
    num_query_heads, num_kv_heads = num_heads
    # (Drawn as float32: the 533 x 533-token batches draw 5.8e8 values.)
    query = rng.standard_normal(
        (sum(query_lens), num_query_heads, head_size), np.float32).astype(dtype)
    if block_tables is None:
        max_num_blocks_per_seq = (max(kv_lens) + block_size - 1) // block_size
        block_tables = rng.integers(0, num_blocks,
                                    (len(seq_lens), max_num_blocks_per_seq),
                                    dtype=np.int32)
    used = np.zeros((num_blocks, block_size), bool)
    for i, n in enumerate(kv_lens):
        pos = np.arange(n)
        used[block_tables[i, pos // block_size], pos % block_size] = True
    shape = (num_blocks, block_size, num_kv_heads, head_size)
    key_cache = np.full(shape, np.nan, dtype)
    value_cache = np.full(shape, np.nan, dtype)
    n = int(used.sum())
    key_cache[used] = rng.standard_normal(
        (n, num_kv_heads, head_size), np.float32).astype(dtype)
    value_cache[used] = rng.standard_normal(
        (n, num_kv_heads, head_size), np.float32).astype(dtype)
    cu_query_lens = np.cumsum([0] + query_lens).astype(np.int32)
    return (query, key_cache, value_cache, used, cu_query_lens,
            np.array(kv_lens, np.int32), block_tables)


def quantize(x, scale, used=None):
    """`(x / scale).to(fp8)` of a bf16 tensor and a float32 0-d scale: the
    division rounds to bf16 (torch's type promotion), then to e4m3fn. With
    `used`, only those cache slots (the rest stays NaN)."""
    def q(v):
        return (v.astype(np.float32) / np.float32(scale)).astype(x.dtype).astype(FP8_E4M3)
    if used is None:
        return q(x)
    out = np.full(x.shape, np.nan, FP8_E4M3)
    out[used] = q(x[used])
    return out


def ref_paged_attn(query, key_cache, value_cache, query_lens, kv_lens,
                   block_tables, scale, sliding_window=None, soft_cap=None, *,
                   per_seq_causal=None, sinks=None, allowed=None,
                   out_dtype=np.float64):
    """vLLM's ref_paged_attn in float64: per sequence, gather the keys of its
    blocks, scores q.k * scale, softcap before the mask, causal mask aligned
    to the end of the sequence (`triu(diagonal=kv_len - query_len + 1)`), the
    window keeping `q_abs - k < sliding_window`, softmax, P.V. Extensions for
    the other ports: `per_seq_causal` (test_mixed_causal_attn), `sinks` (one
    logit per query head in the denominator), `allowed(qpos, kpos)` (an
    explicit mask replacing causal and window). `out_dtype`: the result
    rounded (once, from float64) to this dtype."""
    _, block_size, num_kv_heads, head_size = key_cache.shape
    num_query_heads = query.shape[1]
    group = num_query_heads // num_kv_heads
    if _DRY_RUN:   # nothing is compared (see matmul)
        return np.zeros(query.shape, out_dtype)
    mask = functools.partial(_visible, per_seq_causal=per_seq_causal,
                             sliding_window=sliding_window, allowed=allowed)
    if _TEST_DEVICE == "cuda" and _torch_dtype(key_cache.dtype) is not None:
        return _ref_paged_attn_torch(query, key_cache, value_cache, query_lens,
                                     kv_lens, block_tables, scale, soft_cap,
                                     sinks, mask, "cuda", out_dtype)
    out = np.empty(query.shape)
    start = 0
    for i, (query_len, kv_len) in enumerate(zip(query_lens, kv_lens)):
        query_len, kv_len = int(query_len), int(kv_len)
        q = f64(query[start:start + query_len]) * scale
        num_kv_blocks = (kv_len + block_size - 1) // block_size
        blocks = block_tables[i, :num_kv_blocks]
        k = f64(key_cache[blocks]).reshape(-1, num_kv_heads, head_size)[:kv_len]
        v = f64(value_cache[blocks]).reshape(-1, num_kv_heads, head_size)[:kv_len]
        k = np.repeat(k, group, axis=1)
        v = np.repeat(v, group, axis=1)
        attn = matmul(q.transpose(1, 0, 2), k.transpose(1, 2, 0))  # h q k
        visible = mask(i, query_len, kv_len)
        if soft_cap is not None and soft_cap > 0:
            attn = soft_cap * np.tanh(attn / soft_cap)
        attn = np.where(visible[None], attn, -np.inf)
        extra = None if sinks is None else f64(sinks)[:, None, None]
        p = softmax_rows(attn, extra)
        out[start:start + query_len] = matmul(p, v.transpose(1, 0, 2)).transpose(1, 0, 2)
        start += query_len
    return out.astype(out_dtype, copy=False)


def _visible(i, query_len, kv_len, *, per_seq_causal, sliding_window,
             allowed):
    """[query_len, kv_len] bool: which keys sequence i's queries see."""
    qpos = kv_len - query_len + np.arange(query_len)[:, None]
    kpos = np.arange(kv_len)[None, :]
    if allowed is not None:
        return np.broadcast_to(allowed(qpos, kpos), (query_len, kv_len))
    causal = True if per_seq_causal is None else per_seq_causal[i]
    visible = kpos <= qpos if causal else np.ones((query_len, kv_len), bool)
    if sliding_window is not None:
        visible = visible & ((qpos - kpos) < sliding_window)
    return visible


def _torch_dtype(dtype):
    """The torch dtype holding numpy `dtype`'s values bit for bit, or None."""
    import torch
    return {np.dtype(BF16): torch.bfloat16, np.dtype(np.float16): torch.float16,
            np.dtype(np.float32): torch.float32,
            np.dtype(np.float64): torch.float64,
            np.dtype(FP8_E4M3): torch.float8_e4m3fn}.get(np.dtype(dtype))


def _to_device(x, dev):
    """A numpy array (ml_dtypes included) on torch device `dev`, same dtype."""
    import torch
    ints = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}
    raw = np.ascontiguousarray(x).view(ints[x.dtype.itemsize])
    return torch.from_numpy(raw).to(dev).view(_torch_dtype(x.dtype))


def _ref_paged_attn_torch(query, key_cache, value_cache, query_lens, kv_lens,
                          block_tables, scale, soft_cap, sinks, mask, dev,
                          out_dtype=np.float64):
    """ref_paged_attn's float64 math on the GPU (ATTN_MLIR_TEST_DEVICE=cuda):
    the caches go over once and are gathered there. The numpy reference
    took minutes per case of vLLM's 533-sequence prefill batches, each
    sequence's scores and softmax on one host core."""
    import torch
    _, block_size, num_kv_heads, head_size = key_cache.shape
    group = query.shape[1] // num_kv_heads
    kc, vc = _to_device(key_cache, dev), _to_device(value_cache, dev)
    sk = None if sinks is None else \
        torch.from_numpy(f64(sinks)).to(dev)[:, None, None]
    # Queries go over and results come back a sequence at a time: a float64
    # copy of all (5.8e8 elements in the 533 x 533 batches) is 4.6 GB a
    # process on a GPU that run_grid.py's processes share.
    query = np.asarray(query)
    out = np.empty(query.shape, out_dtype)
    start = 0
    for i, (query_len, kv_len) in enumerate(zip(query_lens, kv_lens)):
        query_len, kv_len = int(query_len), int(kv_len)
        num_kv_blocks = (kv_len + block_size - 1) // block_size
        blocks = torch.from_numpy(
            np.ascontiguousarray(block_tables[i, :num_kv_blocks])).to(dev).long()
        k = kc[blocks].to(torch.float64).reshape(-1, num_kv_heads,
                                                 head_size)[:kv_len]
        v = vc[blocks].to(torch.float64).reshape(-1, num_kv_heads,
                                                 head_size)[:kv_len]
        k = k.repeat_interleave(group, dim=1)
        v = v.repeat_interleave(group, dim=1)
        q = _to_device(query[start:start + query_len], dev).to(
            torch.float64) * scale
        attn = torch.matmul(q.transpose(0, 1), k.permute(1, 2, 0))  # h q k
        if soft_cap is not None and soft_cap > 0:
            attn = soft_cap * torch.tanh(attn / soft_cap)
        visible = torch.from_numpy(
            np.array(mask(i, query_len, kv_len), dtype=bool)).to(dev)
        attn = attn.masked_fill(~visible[None], -torch.inf)
        m = attn.amax(-1, keepdim=True) if kv_len else \
            torch.full(attn.shape[:-1] + (1,), -torch.inf, device=dev,
                       dtype=torch.float64)
        if sk is not None:
            m = torch.maximum(m, sk.expand_as(m))
        m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
        p = torch.exp(attn - m)
        z = p.sum(-1, keepdim=True)
        if sk is not None:
            z = z + torch.exp(sk - m)
        p = torch.where(z > 0, p / torch.where(z > 0, z, torch.ones_like(z)),
                        torch.zeros_like(p))
        out[start:start + query_len] = torch.matmul(
            p, v.transpose(0, 1)).transpose(0, 1).cpu().numpy().astype(
                out_dtype, copy=False)
        start += query_len
    del kc, vc
    if dev == "cuda":
        torch.cuda.empty_cache()   # processes share the GPU (run_grid.py)
    return out


def segment_buffers(rows, num_query_heads, head_size, segments=16):
    """vLLM's softmax_segm_output/_max/_expsum (NaN instead of empty)."""
    hp = next_power_of_2(head_size)
    return (np.full((rows, num_query_heads, segments, hp), np.nan, np.float32),
            np.full((rows, num_query_heads, segments), np.nan, np.float32),
            np.full((rows, num_query_heads, segments), np.nan, np.float32))


def check_split_used(seq_lens, seq_threshold_3D, segm_max):
    """vLLM splits the softmax (3D) exactly for decode-only batches of at most
    seq_threshold_3D sequences; then the caller's buffers hold the partial
    results of every query row."""
    if _DRY_RUN:   # nothing ran
        return
    if max(q for q, _ in seq_lens) <= 1 and len(seq_lens) <= seq_threshold_3D:
        rows = sum(q for q, _ in seq_lens)
        assert not np.isnan(segm_max[:rows, :, 0]).any(), \
            "the 3D path did not use the caller's softmax_segm_* buffers"


# --- test_triton_unified_attn ------------------------------------------------

UNIFIED_NAMES = ("seq_lens, num_heads, head_size, block_size, sliding_window, "
                 "dtype, soft_cap, num_blocks, q_dtype, seq_threshold_3D")
# Covering subset: each value of each axis once at least; the 3D (decode,
# threshold 8) path meets a window, softcap, fp8 Q and 32768 blocks; the
# threshold 8 is also given to a prefill batch (which must stay 2D).
UNIFIED_CASES = cases(UNIFIED_NAMES, dict(
    seq_lens=SEQ_LENS, num_heads=NUM_HEADS, head_size=HEAD_SIZES,
    block_size=BLOCK_SIZES, sliding_window=SLIDING_WINDOWS, dtype=DTYPES,
    soft_cap=SOFT_CAPS, num_blocks=NUM_BLOCKS, q_dtype=QDTYPES,
    seq_threshold_3D=SEQ_THRESHOLD_3D_VALUES), [
    (MIXED, (4, 4), 128, 16, None, "bf16", 50.0, 2048, None, 0),
    (DECODE, (8, 2), 256, 16, 64, "bf16", None, 2048, None, 8),
    (DECODE, (5, 1), 128, 16, 128, "bf16", 50.0, 32768, "fp8", 8),
    (MIXED, (8, 2), 128, 16, 256, "bf16", None, 2048, "fp8", 0),
    (MIXED, (5, 1), 256, 16, None, "bf16", None, 2048, None, 8),
])


def fp8_inputs(query, key_cache, value_cache, used, num_seqs, num_kv_heads,
               q_dtype):
    """(q, k, v, q_descale, k_descale, v_descale, kv_quant_mode) as vLLM's
    tests pass them: the tensors as they are, or (with an fp8 q_dtype)
    quantized with non-1 scales, so that each descale is tested, and the
    descales as vLLM's full((num_seqs, num_kv_heads), s)."""
    if q_dtype is None:
        return (query, key_cache, value_cache, None, None, None,
                KVQuantMode.NONE)
    q_scale, k_scale, v_scale = 0.75, 0.5, 0.25
    return (quantize(query, q_scale), quantize(key_cache, k_scale, used),
            quantize(value_cache, v_scale, used),
            np.array(q_scale, np.float32),
            np.full((num_seqs, num_kv_heads), k_scale, np.float32),
            np.full((num_seqs, num_kv_heads), v_scale, np.float32),
            KVQuantMode.FP8_PER_TENSOR)


@pytest.mark.parametrize(UNIFIED_NAMES, UNIFIED_CASES, ids=_ids)
def test_triton_unified_attn(seq_lens, num_heads, head_size, block_size,
                             sliding_window, dtype, soft_cap, num_blocks,
                             q_dtype, seq_threshold_3D):
    rng = np.random.default_rng(0)
    num_seqs = len(seq_lens)
    query_lens = [x[0] for x in seq_lens]
    kv_lens = [x[1] for x in seq_lens]
    num_query_heads, num_kv_heads = num_heads
    max_query_len, max_kv_len = max(query_lens), max(kv_lens)
    window_size = (sliding_window - 1, 0) if sliding_window is not None else (-1, -1)
    scale = head_size ** -0.5

    query, key_cache, value_cache, used, cu_query_lens, kv_lens_t, block_tables = \
        make_inputs(rng, seq_lens, num_heads, head_size, block_size, num_blocks,
                    NUMPY[dtype])
    output = np.full(query.shape, np.nan, query.dtype)

    (q_in, k_in, v_in, q_descale, k_descale, v_descale,
     kv_quant_mode) = fp8_inputs(query, key_cache, value_cache, used,
                                 num_seqs, num_kv_heads, q_dtype)

    segm_output, segm_max, segm_expsum = segment_buffers(
        seq_threshold_3D, num_query_heads, head_size)
    vllm.unified_attention(
        q=q_in, k=k_in, v=v_in, out=output, cu_seqlens_q=cu_query_lens,
        seqused_k=kv_lens_t, max_seqlen_q=max_query_len,
        max_seqlen_k=max_kv_len, softmax_scale=scale, causal=True,
        window_size=window_size, block_table=block_tables,
        softcap=soft_cap if soft_cap is not None else 0,
        q_descale=q_descale, k_descale=k_descale, v_descale=v_descale,
        seq_threshold_3D=seq_threshold_3D, num_par_softmax_segments=16,
        softmax_segm_output=segm_output, softmax_segm_max=segm_max,
        softmax_segm_expsum=segm_expsum, kv_quant_mode=kv_quant_mode)

    # vLLM's reference runs on the unquantized tensors
    ref_output = ref_paged_attn(query, key_cache, value_cache, query_lens,
                                kv_lens, block_tables, scale, sliding_window,
                                soft_cap)
    atol, rtol = 1.5e-2, 1e-2
    if q_dtype is not None:
        atol, rtol = 1.5e-1, 1.5e-1
    assert_close(output, cast(ref_output, output.dtype), atol=atol, rtol=rtol,
                 what="unified_attention")
    check_split_used(seq_lens, seq_threshold_3D, segm_max)


# --- test_triton_unified_attn_bf16_query_fp8_kv -----------------------------

FP8_KV_NAMES = "seq_lens, num_heads, head_size, block_size, num_blocks, seq_threshold_3D, descales"
# `descales` is added by the port: vLLM's test builds the descales with
# torch.full; its backend passes layer._k_scale.expand(...) (stride 0).
FP8_KV_CASES = cases(FP8_KV_NAMES, dict(
    seq_lens=SEQ_LENS, num_heads=NUM_HEADS, head_size=HEAD_SIZES,
    block_size=BLOCK_SIZES, num_blocks=NUM_BLOCKS,
    seq_threshold_3D=SEQ_THRESHOLD_3D_VALUES, descales=["full", "expand"]), [
    (MIXED, (4, 4), 256, 16, 2048, 0, "full"),
    (DECODE, (5, 1), 128, 16, 32768, 8, "expand"),
    (MIXED, (8, 2), 128, 16, 2048, 8, "expand"),
])


@pytest.mark.parametrize(FP8_KV_NAMES, FP8_KV_CASES, ids=_ids)
def test_triton_unified_attn_bf16_query_fp8_kv(seq_lens, num_heads, head_size,
                                               block_size, num_blocks,
                                               seq_threshold_3D, descales):
    """bf16 Q with an FP8 per-tensor KV cache."""
    rng = np.random.default_rng(0)
    num_seqs = len(seq_lens)
    query_lens = [x[0] for x in seq_lens]
    kv_lens = [x[1] for x in seq_lens]
    num_query_heads, num_kv_heads = num_heads
    scale = head_size ** -0.5

    query, key_cache, value_cache, used, cu_query_lens, kv_lens_t, block_tables = \
        make_inputs(rng, seq_lens, num_heads, head_size, block_size, num_blocks, BF16)
    k_scale, v_scale = 0.5, 0.25
    fp8_key_cache = quantize(key_cache, k_scale, used)
    fp8_value_cache = quantize(value_cache, v_scale, used)
    scale_shape = (num_seqs, num_kv_heads)
    if descales == "full":
        k_descale = np.full(scale_shape, k_scale, np.float32)
        v_descale = np.full(scale_shape, v_scale, np.float32)
    else:
        k_descale = np.broadcast_to(np.array(k_scale, np.float32), scale_shape)
        v_descale = np.broadcast_to(np.array(v_scale, np.float32), scale_shape)
    output = np.full(query.shape, np.nan, BF16)
    segm_output, segm_max, segm_expsum = segment_buffers(
        seq_threshold_3D, num_query_heads, head_size)
    vllm.unified_attention(
        q=query, k=fp8_key_cache, v=fp8_value_cache, out=output,
        cu_seqlens_q=cu_query_lens, seqused_k=kv_lens_t,
        max_seqlen_q=max(query_lens), max_seqlen_k=max(kv_lens),
        softmax_scale=scale, causal=True, window_size=(-1, -1),
        block_table=block_tables, softcap=0, q_descale=None,
        k_descale=k_descale, v_descale=v_descale,
        seq_threshold_3D=seq_threshold_3D, num_par_softmax_segments=16,
        softmax_segm_output=segm_output, softmax_segm_max=segm_max,
        softmax_segm_expsum=segm_expsum,
        kv_quant_mode=KVQuantMode.FP8_PER_TENSOR)

    ref_output = ref_paged_attn(query, key_cache, value_cache, query_lens,
                                kv_lens, block_tables, scale)
    assert_close(output, cast(ref_output, BF16), atol=1.5e-1, rtol=1.5e-1,
                 what="bf16 query, fp8 kv")
    check_split_used(seq_lens, seq_threshold_3D, segm_max)


# --- test_triton_unified_attn_fp16_input_fp8_output -------------------------

FP8_OUT_NAMES = ("seq_lens, num_heads, head_size, block_size, sliding_window, "
                 "soft_cap, num_blocks, seq_threshold_3D")
# Full grid only: 533 prefills of 533 tokens (7.6e7 query-key pairs per head,
# minutes on the CPU); the 533 single-token sequences run.
FP8_OUT_CASES = cases(FP8_OUT_NAMES, dict(
    seq_lens=[MIXED, DECODE, ONES, PREFILLS], num_heads=NUM_HEADS,
    head_size=HEAD_SIZES, block_size=BLOCK_SIZES,
    sliding_window=SLIDING_WINDOWS, soft_cap=SOFT_CAPS,
    num_blocks=NUM_BLOCKS, seq_threshold_3D=SEQ_THRESHOLD_3D_VALUES), [
    (MIXED, (8, 2), 128, 16, 64, 50.0, 2048, 0),
    (DECODE, (4, 4), 256, 16, None, None, 2048, 8),
    (ONES, (5, 1), 128, 16, 256, 50.0, 32768, 8),
    (DECODE, (5, 1), 256, 16, 128, None, 2048, 0),
], full_only={"seq_lens": [PREFILLS]})


@pytest.mark.parametrize(FP8_OUT_NAMES, FP8_OUT_CASES, ids=_ids)
def test_triton_unified_attn_fp16_input_fp8_output(seq_lens, num_heads,
                                                   head_size, block_size,
                                                   sliding_window, soft_cap,
                                                   num_blocks, seq_threshold_3D):
    """fp16 input and fp8 output through output_scale."""
    rng = np.random.default_rng(0)
    query_lens = [x[0] for x in seq_lens]
    kv_lens = [x[1] for x in seq_lens]
    num_query_heads, _ = num_heads
    window_size = (sliding_window - 1, 0) if sliding_window is not None else (-1, -1)
    scale = head_size ** -0.5

    query, key_cache, value_cache, _, cu_query_lens, kv_lens_t, block_tables = \
        make_inputs(rng, seq_lens, num_heads, head_size, block_size, num_blocks,
                    np.float16)
    output = np.full(query.shape, np.nan, FP8_E4M3)
    output_scale = np.array(0.5, np.float32)
    segm_output, segm_max, segm_expsum = segment_buffers(
        seq_threshold_3D, num_query_heads, head_size)
    vllm.unified_attention(
        q=query, k=key_cache, v=value_cache, out=output,
        cu_seqlens_q=cu_query_lens, seqused_k=kv_lens_t,
        max_seqlen_q=max(query_lens), max_seqlen_k=max(kv_lens),
        softmax_scale=scale, causal=True, window_size=window_size,
        block_table=block_tables,
        softcap=soft_cap if soft_cap is not None else 0,
        q_descale=None, k_descale=None, v_descale=None,
        output_scale=output_scale, seq_threshold_3D=seq_threshold_3D,
        num_par_softmax_segments=16, softmax_segm_output=segm_output,
        softmax_segm_max=segm_max, softmax_segm_expsum=segm_expsum)

    ref_output = ref_paged_attn(query, key_cache, value_cache, query_lens,
                                kv_lens, block_tables, scale, sliding_window,
                                soft_cap, out_dtype=np.float16)
    # output.to(float32) * output_scale.item(), then .to(float16)
    # (fp16 arrays, compared in float64 a chunk at a time: the full grid's
    # 533 x 533-token batches have 5.8e8 elements.)
    output_fp16 = (output.astype(np.float32) * np.float32(0.5)).astype(np.float16)
    assert_close(output_fp16, ref_output, atol=2e-1,
                 rtol=2e-1, what="fp8 output")
    check_split_used(seq_lens, seq_threshold_3D, segm_max)


# --- test_triton_unified_attn_use_td / _use_td_tile_clamp --------------------
# use_td selects Intel tensor-descriptor loads in vLLM (same math); the port
# checks that the keyword is accepted and the result unchanged.

HEAD_SIZES_USE_TD = [128, 256, 96]


def run_use_td_case(rng, seq_lens, num_heads, head_size, block_size,
                    sliding_window, soft_cap, seq_threshold_3D,
                    dtype=BF16, num_blocks=2048):
    query_lens = [x[0] for x in seq_lens]
    kv_lens = [x[1] for x in seq_lens]
    num_query_heads, _ = num_heads
    window_size = (sliding_window - 1, 0) if sliding_window is not None else (-1, -1)
    scale = head_size ** -0.5
    query, key_cache, value_cache, _, cu_query_lens, kv_lens_t, block_tables = \
        make_inputs(rng, seq_lens, num_heads, head_size, block_size, num_blocks,
                    dtype)
    output = np.full(query.shape, np.nan, dtype)
    segm_output, segm_max, segm_expsum = segment_buffers(
        seq_threshold_3D, num_query_heads, head_size)
    vllm.unified_attention(
        q=query, k=key_cache, v=value_cache, out=output,
        cu_seqlens_q=cu_query_lens, seqused_k=kv_lens_t,
        max_seqlen_q=max(query_lens), max_seqlen_k=max(kv_lens),
        softmax_scale=scale, causal=True, window_size=window_size,
        block_table=block_tables,
        softcap=soft_cap if soft_cap is not None else 0,
        q_descale=None, k_descale=None, v_descale=None,
        seq_threshold_3D=seq_threshold_3D, num_par_softmax_segments=16,
        softmax_segm_output=segm_output, softmax_segm_max=segm_max,
        softmax_segm_expsum=segm_expsum, use_td=True)
    ref_output = ref_paged_attn(query, key_cache, value_cache, query_lens,
                                kv_lens, block_tables, scale, sliding_window,
                                soft_cap)
    assert_close(output, cast(ref_output, dtype), atol=1.5e-2, rtol=1e-2,
                 what="use_td")
    check_split_used(seq_lens, seq_threshold_3D, segm_max)


USE_TD_NAMES = ("seq_lens, num_heads, head_size, block_size, sliding_window, "
                "soft_cap, num_blocks, seq_threshold_3D")
# Covering subset; the non-pow2 head size 96 and the non-pow2 query/KV ratio
# 5 (vLLM's two routes to its pointer-path fallback) both run.
USE_TD_CASES = cases(USE_TD_NAMES, dict(
    seq_lens=SEQ_LENS, num_heads=NUM_HEADS, head_size=HEAD_SIZES_USE_TD,
    block_size=BLOCK_SIZES, sliding_window=[None, 128], soft_cap=SOFT_CAPS,
    num_blocks=NUM_BLOCKS, seq_threshold_3D=SEQ_THRESHOLD_3D_VALUES), [
    (MIXED, (4, 4), 96, 16, 128, 50.0, 2048, 0),
    (DECODE, (8, 2), 256, 16, None, None, 2048, 8),
    (DECODE, (5, 1), 128, 16, 128, None, 32768, 0),
])


@pytest.mark.parametrize(USE_TD_NAMES, USE_TD_CASES, ids=_ids)
def test_triton_unified_attn_use_td(seq_lens, num_heads, head_size, block_size,
                                    sliding_window, soft_cap, num_blocks,
                                    seq_threshold_3D):
    run_use_td_case(np.random.default_rng(0), seq_lens, num_heads, head_size,
                    block_size, sliding_window, soft_cap, seq_threshold_3D,
                    num_blocks=num_blocks)


@pytest.mark.parametrize("num_heads", [(4, 4), (5, 1)], ids=_ids)
def test_triton_unified_attn_use_td_tile_clamp(num_heads):
    """vLLM's regression guard for its prefill tile size with use_td (a
    Triton compile-time assert); here the prefill-heavy shape itself."""
    run_use_td_case(np.random.default_rng(0), [(256, 256), (128, 128)],
                    num_heads, 128, 16, None, None, 0)


# --- mm_prefix_range (from ..._nvfp4_mm_prefix_raw_current_clamps_seq_len) ----

def test_triton_unified_attn_mm_prefix_clamps_seq_len():
    """A bidirectional multimodal range must not extend the keys read past
    seq_len. vLLM's test places NaN right after its raw K/V tensors; here the
    cache slots past seq_len in the last block are NaN (the NVFP4 cache and
    raw_k/raw_v of vLLM's test are not supported). Same mask, tolerance and
    finiteness check."""
    rng = np.random.default_rng(0)
    seq_len = 276
    num_query_heads, num_kv_heads = 16, 8
    head_size, block_size, sliding_window = 256, 16, 1024
    scale = head_size ** -0.5
    num_blocks = (seq_len + block_size - 1) // block_size
    block_tables = np.arange(num_blocks, dtype=np.int32)[None, :]  # sequential
    query, key_cache, value_cache, _, cu_query_lens, kv_lens_t, _ = make_inputs(
        rng, [(seq_len, seq_len)], (num_query_heads, num_kv_heads), head_size,
        block_size, num_blocks, BF16, block_tables=block_tables)
    assert np.isnan(f64(key_cache[-1, seq_len % block_size:])).all()
    output = np.full(query.shape, np.nan, BF16)
    mm_prefix_range = np.array([[[5, 260]]], np.int32)
    segments = 16
    vllm.unified_attention(
        q=query, k=key_cache, v=value_cache, out=output,
        cu_seqlens_q=cu_query_lens, max_seqlen_q=seq_len, seqused_k=kv_lens_t,
        max_seqlen_k=seq_len, softmax_scale=scale, causal=True,
        window_size=(sliding_window - 1, 0), block_table=block_tables,
        softcap=0, q_descale=None, k_descale=None, v_descale=None,
        seq_threshold_3D=0, num_par_softmax_segments=segments,
        softmax_segm_output=np.full((1, num_query_heads, segments, head_size),
                                    np.nan, np.float32),
        softmax_segm_max=np.full((1, num_query_heads, segments), np.nan, np.float32),
        softmax_segm_expsum=np.full((1, num_query_heads, segments), np.nan,
                                    np.float32),
        kv_quant_mode=KVQuantMode.NONE, mm_prefix_range=mm_prefix_range)

    def allowed(qpos, kpos):
        visible = (kpos <= qpos) & ((qpos - kpos) < sliding_window)
        return visible | ((qpos >= 5) & (qpos <= 260) & (kpos >= 5) & (kpos <= 260))

    ref_output = ref_paged_attn(query, key_cache, value_cache, [seq_len],
                                [seq_len], block_tables, scale, allowed=allowed)
    assert _DRY_RUN or np.isfinite(f64(output)).all()
    assert_close(output, cast(ref_output, BF16), atol=2e-2, rtol=2e-2,
                 what="mm_prefix_range")


# --- test_triton_mixed_causal (test_mixed_causal_attn.py) --------------------

MIXED_CAUSAL_NAMES = "seq_lens, per_seq_causal, num_heads, head_size, block_size, dtype"
MIXED_CAUSAL_CASES = [c for c in cases(MIXED_CAUSAL_NAMES, dict(
    seq_lens=[[(1, 128), (5, 64), (1, 256)]],
    per_seq_causal=[[True, False, True], [False, True, False],
                    [True, True, False]],
    num_heads=[(4, 4), (8, 2)], head_size=[128], block_size=[16],
    dtype=["bf16"]), [
    ([(1, 128), (5, 64), (1, 256)], [True, False, True], (4, 4), 128, 16, "bf16"),
    ([(1, 128), (5, 64), (1, 256)], [False, True, False], (8, 2), 128, 16, "bf16"),
    ([(1, 128), (5, 64), (1, 256)], [True, True, False], (8, 2), 128, 16, "bf16"),
])]

if MIXED_CAUSAL_CASES:
    @pytest.mark.parametrize(MIXED_CAUSAL_NAMES, MIXED_CAUSAL_CASES, ids=_ids)
    def test_triton_mixed_causal(seq_lens, per_seq_causal, num_heads,
                                 head_size, block_size, dtype):
        """Per-request causal/non-causal masks (DiffusionGemma)."""
        rng = np.random.default_rng(42)
        num_query_heads, num_kv_heads = num_heads
        query_lens = [s[0] for s in seq_lens]
        kv_lens = [s[1] for s in seq_lens]
        num_seqs = len(seq_lens)
        max_num_blocks = (max(kv_lens) + block_size - 1) // block_size
        num_blocks = max_num_blocks * num_seqs + 10
        block_tables = np.zeros((num_seqs, max_num_blocks), np.int32)
        for i in range(num_seqs):
            n = (kv_lens[i] + block_size - 1) // block_size
            block_tables[i, :n] = np.arange(i * max_num_blocks, i * max_num_blocks + n)
        scale = head_size ** -0.5
        query, key_cache, value_cache, _, cu_seqlens_q, seqused_k, _ = make_inputs(
            rng, seq_lens, num_heads, head_size, block_size, num_blocks,
            NUMPY[dtype], block_tables=block_tables)
        output = np.full(query.shape, np.nan, query.dtype)
        vllm.unified_attention(
            q=query, k=key_cache, v=value_cache, out=output,
            cu_seqlens_q=cu_seqlens_q, max_seqlen_q=max(query_lens),
            seqused_k=seqused_k, max_seqlen_k=max(kv_lens),
            softmax_scale=scale, causal=np.array(per_seq_causal, bool),
            window_size=(-1, -1), block_table=block_tables, softcap=0.0,
            q_descale=None, k_descale=1.0, v_descale=1.0)
        ref_output = ref_paged_attn(query, key_cache, value_cache, query_lens,
                                    kv_lens, block_tables, scale,
                                    per_seq_causal=per_seq_causal)
        assert_close(output, cast(ref_output, query.dtype), atol=1e-2,
                     rtol=1e-2, what="mixed causal")


# --- sinks (added by the port) -----------------------------------------------

SINKS_NAMES = "seq_lens, sliding_window, q_dtype, seq_threshold_3D"
SINKS_CASES = cases(SINKS_NAMES, dict(
    seq_lens=SEQ_LENS, sliding_window=[None, 64], q_dtype=QDTYPES,
    seq_threshold_3D=SEQ_THRESHOLD_3D_VALUES), [
    (MIXED, None, None, 0),
    (DECODE, 64, "fp8", 8),
])


@pytest.mark.parametrize(SINKS_NAMES, SINKS_CASES, ids=_ids)
def test_triton_unified_attn_sinks(seq_lens, sliding_window, q_dtype,
                                   seq_threshold_3D):
    """Not in vLLM's test: `sinks` (one logit per query head in the softmax
    denominator, vLLM's gpt-oss path) on the one-pass and split paths, with
    sinks large enough to take a visible share of the probability mass.
    vLLM's tolerances of test_triton_unified_attn."""
    rng = np.random.default_rng(1)
    num_heads, head_size, block_size, num_blocks = (8, 2), 128, 16, 2048
    num_seqs = len(seq_lens)
    query_lens = [x[0] for x in seq_lens]
    kv_lens = [x[1] for x in seq_lens]
    window_size = (sliding_window - 1, 0) if sliding_window is not None else (-1, -1)
    scale = head_size ** -0.5
    query, key_cache, value_cache, used, cu_query_lens, kv_lens_t, block_tables = \
        make_inputs(rng, seq_lens, num_heads, head_size, block_size, num_blocks, BF16)
    sinks = rng.uniform(2.0, 8.0, num_heads[0]).astype(np.float32)
    (q_in, k_in, v_in, q_descale, k_descale, v_descale,
     kv_quant_mode) = fp8_inputs(query, key_cache, value_cache, used,
                                 num_seqs, num_heads[1], q_dtype)
    atol, rtol = (1.5e-2, 1e-2) if q_dtype is None else (1.5e-1, 1.5e-1)
    output = np.full(query.shape, np.nan, BF16)
    segm_output, segm_max, segm_expsum = segment_buffers(
        seq_threshold_3D, num_heads[0], head_size)
    vllm.unified_attention(
        q=q_in, k=k_in, v=v_in, out=output, cu_seqlens_q=cu_query_lens,
        seqused_k=kv_lens_t, max_seqlen_q=max(query_lens),
        max_seqlen_k=max(kv_lens), softmax_scale=scale, causal=True,
        window_size=window_size, block_table=block_tables, softcap=0,
        q_descale=q_descale, k_descale=k_descale, v_descale=v_descale,
        seq_threshold_3D=seq_threshold_3D, num_par_softmax_segments=16,
        softmax_segm_output=segm_output, softmax_segm_max=segm_max,
        softmax_segm_expsum=segm_expsum, sinks=sinks,
        kv_quant_mode=kv_quant_mode)
    ref_output = ref_paged_attn(query, key_cache, value_cache, query_lens,
                                kv_lens, block_tables, scale, sliding_window,
                                sinks=sinks)
    no_sinks = ref_paged_attn(query, key_cache, value_cache, query_lens,
                              kv_lens, block_tables, scale, sliding_window)
    assert_discriminates(cast(no_sinks, BF16), cast(ref_output, BF16),
                         atol=atol, rtol=rtol, what="attention without sinks")
    assert_close(output, cast(ref_output, BF16), atol=atol, rtol=rtol,
                 what="sinks")
    check_split_used(seq_lens, seq_threshold_3D, segm_max)


# --- softcap that bites (added by the port) ----------------------------------

SOFTCAP_NAMES = "seq_lens, num_heads, head_size, sliding_window, q_dtype, seq_threshold_3D"
SOFTCAP_CASES = cases(SOFTCAP_NAMES, dict(
    seq_lens=SEQ_LENS, num_heads=NUM_HEADS, head_size=HEAD_SIZES,
    sliding_window=[None, 64], q_dtype=QDTYPES,
    seq_threshold_3D=SEQ_THRESHOLD_3D_VALUES), [
    (MIXED, (8, 2), 128, None, None, 0),
    (DECODE, (4, 4), 256, 64, "fp8", 8),
    (DECODE, (5, 1), 128, None, None, 8),
])


@pytest.mark.parametrize(SOFTCAP_NAMES, SOFTCAP_CASES, ids=_ids)
def test_triton_unified_attn_softcap_real_values(seq_lens, num_heads,
                                                 head_size, sliding_window,
                                                 q_dtype, seq_threshold_3D):
    """vLLM's softcap cases are weaker than they look: with randn inputs and
    scale 1/sqrt(d) every score is within ~+-6, where 50 * tanh(s / 50)
    differs from s by < 0.02, so they pass with the softcap ignored. Here
    the query is scaled by 16 (scores up to ~+-100, well into tanh's
    saturation); vLLM's call, reference and tolerances otherwise (with fp8,
    the reference reads the dequantized tensors, see below)."""
    rng = np.random.default_rng(2)
    soft_cap, block_size, num_blocks = 50.0, 16, 2048
    num_seqs = len(seq_lens)
    query_lens = [x[0] for x in seq_lens]
    kv_lens = [x[1] for x in seq_lens]
    window_size = (sliding_window - 1, 0) if sliding_window is not None else (-1, -1)
    scale = head_size ** -0.5
    query, key_cache, value_cache, used, cu_query_lens, kv_lens_t, block_tables = \
        make_inputs(rng, seq_lens, num_heads, head_size, block_size, num_blocks, BF16)
    query = (query.astype(np.float32) * 16).astype(BF16)
    (q_in, k_in, v_in, q_descale, k_descale, v_descale,
     kv_quant_mode) = fp8_inputs(query, key_cache, value_cache, used,
                                 num_seqs, num_heads[1], q_dtype)
    atol, rtol = (1.5e-2, 1e-2) if q_dtype is None else (1.5e-1, 1.5e-1)
    output = np.full(query.shape, np.nan, BF16)
    segm_output, segm_max, segm_expsum = segment_buffers(
        seq_threshold_3D, num_heads[0], head_size)
    vllm.unified_attention(
        q=q_in, k=k_in, v=v_in, out=output, cu_seqlens_q=cu_query_lens,
        seqused_k=kv_lens_t, max_seqlen_q=max(query_lens),
        max_seqlen_k=max(kv_lens), softmax_scale=scale, causal=True,
        window_size=window_size, block_table=block_tables, softcap=soft_cap,
        q_descale=q_descale, k_descale=k_descale, v_descale=v_descale,
        seq_threshold_3D=seq_threshold_3D, num_par_softmax_segments=16,
        softmax_segm_output=segm_output, softmax_segm_max=segm_max,
        softmax_segm_expsum=segm_expsum, kv_quant_mode=kv_quant_mode)
    if q_dtype is not None:
        # Scores of +-100 magnify fp8's rounding (6%) beyond vLLM's fp8
        # tolerance, which is meant for a reference on the unquantized
        # tensors: here the reference reads the dequantized ones.
        query, key_cache, value_cache = (f64(q_in) * 0.75, f64(k_in) * 0.5,
                                         f64(v_in) * 0.25)
    ref_output = ref_paged_attn(query, key_cache, value_cache, query_lens,
                                kv_lens, block_tables, scale, sliding_window,
                                soft_cap)
    uncapped = ref_paged_attn(query, key_cache, value_cache, query_lens,
                              kv_lens, block_tables, scale, sliding_window)
    assert_discriminates(cast(uncapped, BF16), cast(ref_output, BF16),
                         atol=atol, rtol=rtol, what="attention without softcap")
    assert_close(output, cast(ref_output, BF16), atol=atol, rtol=rtol,
                 what="softcap")
    check_split_used(seq_lens, seq_threshold_3D, segm_max)
