"""Port of vLLM's tests/kernels/attention/test_prefix_prefill.py at
vllm-project/vllm@0420dfc4327cbdb71790b094a182ab24d05819ed, run on
attn_mlir.vllm.context_attention_fwd.

As in vLLM: a batch of BS sequences with random query and context lengths
(the last query forced to 1 token, a decode, except in the ALiBi test),
context K/V scattered into a randomly permuted paged cache through the block
table and permuted to vLLM's layouts (K [blocks, kv_heads, head/8, block, 8],
V [blocks, kv_heads, head, block]), fp8 caches as uint8 storage with the
kv_cache_dtype strings "fp8" / "fp8_e5m2" ("float16" is an unquantized
cache of the model dtype), k_scale = v_scale = tensor(1.0), the positional
call of vLLM's test, and SDPA's reference (block-diagonal causal mask, the
window keeping k >= q - sw + 1; ALiBi as slope * (k - q) with -inf for
future keys) under vLLM's tolerances (atol 1e-3 with an fp8 cache, else
1e-4, 1e-6 for ALiBi; rtol 0).

vLLM's test is weaker than it looks, and each port also checks the real
semantics:
* Its inputs are uniform in +-1e-3, so every score q.k/sqrt(d) is ~1e-6:
  the softmax is uniform and nothing but the mask is tested (a kernel that
  ignored the scores would pass). And its fp8 caches are uint8 tensors
  filled by `.copy_()` of those values, which truncates them to 0: the
  kernel reads an all-zero context while the reference uses the real values,
  within an atol (1e-3) above the largest output. So:
* The port stores real fp8 codes (`(x / scale).to(fp8)` viewed as uint8),
  and after vLLM's check runs the same case again with "real values":
  q and k uniform in +-1 (scores of order 1), v in +-1e-3 as vLLM's (so the
  outputs stay in vLLM's atol range), fp8 scales 0.25 (K) and 2^-14 (V)
  that keep the codes well inside the fp8 formats, against the reference on
  the values the kernel reads (dequantized context, new tokens as given),
  with vLLM's unquantized atol (1e-4; 1e-6 for ALiBi): vLLM's fp8 atol
  only covers the quantization error of a reference on unquantized values.
* Cache slots no sequence uses hold NaN (vLLM's hold zeros) and the output
  starts as NaN: reading past a context or leaving a row unwritten fails.

Adapted:
* numpy on the host instead of torch on CUDA; Python's random.Random(0)
  draws the lengths as vLLM's seeded `random` does (the same lengths in the
  full grid), numpy draws the values.
* OPS: vLLM runs each case through chunked_prefill_paged_decode and
  context_attention_fwd; only the latter is an entry point of
  attn_mlir.vllm. CUDA_DEVICES: the device is ATTN_MLIR_TEST_DEVICE's.
  vLLM calls the op twice (warm-up and timing); the port calls it once.
* The reference runs in float64 and is rounded to the output dtype.
* Grids: vLLM's full grids (and sizes: BS=10, lengths up to 1024, 640-block
  cache) under ATTN_MLIR_FULL_GRID=1; else the covering subsets below with
  BS=4, lengths in [16, 96] and a cache of just the blocks needed plus 4
  (one MHA case with 64 KV heads, head 128 and 1024-token lengths takes
  minutes on the CPU).
* test_contexted_kv_attention_f32 / _alibi_f32 (vLLM's @pytest.mark.optional)
  run like the others. test_qwen3_nonstandard_block_size (block size 544) is
  skipped by vLLM except on ROCm; attn_mlir takes any block size, so the
  port runs it everywhere.
"""

import math
import random

import numpy as np
import pytest

from attn_mlir import vllm

from . import (_DRY_RUN, FP8_E4M3, FP8_E5M2, FULL_GRID, assert_close, cases, cast, f64,
               matmul, softmax_rows)

NUM_HEADS = [64]
NUM_QUERIES_PER_KV = [1, 64]
HEAD_SIZES = [24, 128]
DTYPES = ["fp16"]
SLIDING_WINDOW = [0, 16, 2048]
KV_CACHE_DTYPES = ["float16", "fp8", "fp8_e5m2"]

NUMPY = {"fp16": np.float16, "fp32": np.float32}
FP8 = {"fp8": FP8_E4M3, "fp8_e5m2": FP8_E5M2}

if FULL_GRID:
    SIZES = dict(BS=10, MAX_SEQ_LEN=1024, MAX_CTX_LEN=1024, cache_size=640,
                 max_block_per_request=64)
else:
    SIZES = dict(BS=4, MAX_SEQ_LEN=96, MAX_CTX_LEN=96, cache_size=None,
                 max_block_per_request=None)

# real-values run: fp8 scales (see the module docstring)
REAL_K_SCALE, REAL_V_SCALE = 0.25, 2.0 ** -14


def get_alibi_slopes(total_num_heads):
    """Bloom's ALiBi slopes (vllm/model_executor/models/bloom.py)."""
    closest_power_of_2 = 2 ** math.floor(math.log2(total_num_heads))
    base = np.float32(2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))))
    slopes = base.astype(np.float64) ** np.arange(1, 1 + closest_power_of_2)
    if closest_power_of_2 != total_num_heads:
        extra_base = np.float32(2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))))
        num_remaining_heads = min(closest_power_of_2,
                                  total_num_heads - closest_power_of_2)
        extra = extra_base.astype(np.float64) ** np.arange(
            1, 1 + 2 * num_remaining_heads, 2)
        slopes = np.concatenate([slopes, extra])
    return slopes.astype(np.float32)


def run_case(num_heads, num_queries_per_kv, head_size, dtype, kv_cache_dtype,
             sliding_window=0, *, alibi=False, real_values=False,
             block_size=32):
    """Builds vLLM's inputs, calls context_attention_fwd as vLLM's test does
    and returns (output, reference) as float64."""
    pyrng = random.Random(0)  # vLLM: set_random_seed(0), then random.randint
    rng = np.random.default_rng(0)
    dtype = NUMPY[dtype]
    BS, MAX_SEQ_LEN, MAX_CTX_LEN = SIZES["BS"], SIZES["MAX_SEQ_LEN"], SIZES["MAX_CTX_LEN"]
    query_lens = [pyrng.randint(16, MAX_SEQ_LEN) for _ in range(BS)]
    if not alibi:
        query_lens[-1] = 1  # one sequence of the batch is a decode
    ctx_lens = [pyrng.randint(16, MAX_CTX_LEN) for _ in range(BS)]
    seq_lens = [a + b for a, b in zip(query_lens, ctx_lens)]
    max_block_per_request = SIZES["max_block_per_request"] or \
        -(-MAX_CTX_LEN // block_size)
    cache_size = SIZES["cache_size"] or BS * max_block_per_request + 4
    num_kv_heads = num_heads // num_queries_per_kv
    num_tokens = sum(query_lens)

    if real_values:
        qk_range, v_range = 1.0, 1e-3
    else:
        qk_range = v_range = 1e-3
    query = rng.uniform(-qk_range, qk_range, (num_tokens, num_heads, head_size)).astype(dtype)
    key = rng.uniform(-qk_range, qk_range, (sum(seq_lens), num_kv_heads, head_size)).astype(dtype)
    value = rng.uniform(-v_range, v_range, (sum(seq_lens), num_kv_heads, head_size)).astype(dtype)
    output = np.full(query.shape, np.nan, dtype)

    fp8 = FP8.get(kv_cache_dtype)
    k_scale = v_scale = 1.0
    if fp8 is not None and real_values:
        k_scale, v_scale = REAL_K_SCALE, REAL_V_SCALE
    cache_dtype = fp8 if fp8 is not None else dtype
    shape = (cache_size, block_size, num_kv_heads, head_size)
    k_cache = np.full(shape, np.nan, cache_dtype)
    v_cache = np.full(shape, np.nan, cache_dtype)
    values = np.arange(cache_size, dtype=np.int32)[rng.permutation(cache_size)]
    block_table = values[:BS * max_block_per_request].reshape(BS, max_block_per_request)
    b_seq_len = np.array(seq_lens, np.int32)
    b_start_loc = np.cumsum([0] + query_lens).astype(np.int32)
    b_seq_start_loc = np.cumsum([0] + seq_lens[:-1]).astype(np.int32)
    k = np.zeros((num_tokens, num_kv_heads, head_size), dtype)
    v = np.zeros((num_tokens, num_kv_heads, head_size), dtype)
    # What the kernel must read at each key position (dequantized context,
    # new tokens as given), for the real-values reference.
    key_seen, value_seen = f64(key), f64(value)
    for i in range(BS):
        new = b_seq_start_loc[i] + ctx_lens[i] + np.arange(query_lens[i])
        k[b_start_loc[i]:b_start_loc[i + 1]] = key[new]
        v[b_start_loc[i]:b_start_loc[i + 1]] = value[new]
        pos = np.arange(ctx_lens[i])
        src = b_seq_start_loc[i] + pos
        blocks, slots = block_table[i, pos // block_size], pos % block_size
        if fp8 is not None:
            kq = (key[src].astype(np.float32) / np.float32(k_scale)).astype(fp8)
            vq = (value[src].astype(np.float32) / np.float32(v_scale)).astype(fp8)
            k_cache[blocks, slots], v_cache[blocks, slots] = kq, vq
            key_seen[src] = f64(kq) * k_scale
            value_seen[src] = f64(vq) * v_scale
        else:
            k_cache[blocks, slots] = key[src]
            v_cache[blocks, slots] = value[src]
    # [blocks, block, kv_heads, head] -> K [blocks, kv_heads, head/8, block, 8]
    # and V [blocks, kv_heads, head, block]
    k_cache = np.ascontiguousarray(k_cache.reshape(
        -1, block_size, num_kv_heads, head_size // 8, 8).transpose(0, 2, 3, 1, 4))
    v_cache = np.ascontiguousarray(v_cache.transpose(0, 2, 3, 1))
    if fp8 is not None:  # STR_DTYPE_TO_TORCH_DTYPE["fp8"...] is uint8
        k_cache, v_cache = k_cache.view(np.uint8), v_cache.view(np.uint8)
    k_scale_t = np.array(k_scale, np.float32)
    v_scale_t = np.array(v_scale, np.float32)

    alibi_slopes = get_alibi_slopes(num_heads) if alibi else None
    kwargs = dict(alibi_slopes=alibi_slopes) if alibi else \
        dict(sliding_window=sliding_window)
    vllm.context_attention_fwd(query, k, v, output, kv_cache_dtype, k_cache,
                               v_cache, block_table, b_start_loc, b_seq_len,
                               MAX_CTX_LEN, MAX_SEQ_LEN, k_scale_t, v_scale_t,
                               **kwargs)

    scale = float(1.0 / (head_size ** 0.5))
    keys, vals = (key_seen, value_seen) if real_values else (f64(key), f64(value))
    ref = np.zeros(query.shape)
    for i in range(BS if not _DRY_RUN else 0):   # a dry run compares nothing
        rows = slice(b_start_loc[i], b_start_loc[i + 1])
        seq = slice(b_seq_start_loc[i], b_seq_start_loc[i] + seq_lens[i])
        q = f64(query[rows])                                     # [q, h, d]
        kk = np.repeat(keys[seq], num_queries_per_kv, axis=1)    # [k, h, d]
        vv = np.repeat(vals[seq], num_queries_per_kv, axis=1)
        s = matmul(q.transpose(1, 0, 2), kk.transpose(1, 2, 0)) * scale
        q_pos = seq_lens[i] - query_lens[i] + np.arange(query_lens[i])[:, None]
        k_pos = np.arange(seq_lens[i])[None, :]
        visible = k_pos <= q_pos
        if alibi:
            s = s + f64(alibi_slopes)[:, None, None] * (k_pos - q_pos)[None]
        elif sliding_window > 0:
            visible &= k_pos >= q_pos - sliding_window + 1
        p = softmax_rows(np.where(visible[None], s, -np.inf))
        ref[rows] = matmul(p, vv.transpose(1, 0, 2)).transpose(1, 0, 2)
    return output, cast(ref, dtype)


def check(num_heads, num_queries_per_kv, head_size, dtype, kv_cache_dtype,
          sliding_window=0, *, alibi=False, block_size=32):
    """vLLM's check, then the same case with real values (module docstring)."""
    fp8 = "fp8" in kv_cache_dtype
    base_atol = 1e-6 if alibi else 1e-4
    out, ref = run_case(num_heads, num_queries_per_kv, head_size, dtype,
                        kv_cache_dtype, sliding_window, alibi=alibi,
                        block_size=block_size)
    assert_close(out, ref, atol=1e-3 if fp8 else base_atol, rtol=0,
                 what="vLLM's inputs")
    out, ref = run_case(num_heads, num_queries_per_kv, head_size, dtype,
                        kv_cache_dtype, sliding_window, alibi=alibi,
                        block_size=block_size, real_values=True)
    assert_close(out, ref, atol=base_atol, rtol=0, what="real values")


# --- test_contexted_kv_attention (and _f32) ---------------------------------

NAMES = "num_heads, num_queries_per_kv, head_size, dtype, kv_cache_dtype, sliding_window"
# Covering subsets: each query/KV ratio, head size, cache dtype and window.
CASES = cases(NAMES, dict(
    num_heads=NUM_HEADS, num_queries_per_kv=NUM_QUERIES_PER_KV,
    head_size=HEAD_SIZES, dtype=DTYPES, kv_cache_dtype=KV_CACHE_DTYPES,
    sliding_window=SLIDING_WINDOW), [
    (64, 1, 128, "fp16", "float16", 0),
    (64, 64, 24, "fp16", "fp8", 16),
    (64, 64, 128, "fp16", "fp8_e5m2", 2048),
])
CASES_F32 = cases(NAMES, dict(
    num_heads=NUM_HEADS, num_queries_per_kv=NUM_QUERIES_PER_KV,
    head_size=HEAD_SIZES, dtype=["fp32"], kv_cache_dtype=KV_CACHE_DTYPES,
    sliding_window=SLIDING_WINDOW), [
    (64, 64, 24, "fp32", "float16", 16),
    (64, 1, 24, "fp32", "fp8_e5m2", 0),
    (64, 64, 128, "fp32", "fp8", 2048),
])


@pytest.mark.parametrize(NAMES, CASES)
def test_contexted_kv_attention(num_heads, num_queries_per_kv, head_size,
                                dtype, kv_cache_dtype, sliding_window):
    check(num_heads, num_queries_per_kv, head_size, dtype, kv_cache_dtype,
          sliding_window)


@pytest.mark.parametrize(NAMES, CASES_F32)
def test_contexted_kv_attention_f32(num_heads, num_queries_per_kv, head_size,
                                    dtype, kv_cache_dtype, sliding_window):
    check(num_heads, num_queries_per_kv, head_size, dtype, kv_cache_dtype,
          sliding_window)


# --- test_contexted_kv_attention_alibi (and _f32) ---------------------------

ALIBI_NAMES = "num_heads, num_queries_per_kv, head_size, dtype, kv_cache_dtype"
ALIBI_CASES = cases(ALIBI_NAMES, dict(
    num_heads=NUM_HEADS, num_queries_per_kv=NUM_QUERIES_PER_KV,
    head_size=HEAD_SIZES, dtype=DTYPES, kv_cache_dtype=KV_CACHE_DTYPES), [
    (64, 1, 24, "fp16", "fp8"),
    (64, 64, 128, "fp16", "float16"),
    (64, 64, 24, "fp16", "fp8_e5m2"),
])
ALIBI_CASES_F32 = cases(ALIBI_NAMES, dict(
    num_heads=NUM_HEADS, num_queries_per_kv=NUM_QUERIES_PER_KV,
    head_size=HEAD_SIZES, dtype=["fp32"], kv_cache_dtype=KV_CACHE_DTYPES), [
    (64, 64, 128, "fp32", "fp8"),
    (64, 1, 24, "fp32", "float16"),
    (64, 64, 24, "fp32", "fp8_e5m2"),
])


@pytest.mark.parametrize(ALIBI_NAMES, ALIBI_CASES)
def test_contexted_kv_attention_alibi(num_heads, num_queries_per_kv,
                                      head_size, dtype, kv_cache_dtype):
    check(num_heads, num_queries_per_kv, head_size, dtype, kv_cache_dtype,
          alibi=True)


@pytest.mark.parametrize(ALIBI_NAMES, ALIBI_CASES_F32)
def test_contexted_kv_attention_alibi_f32(num_heads, num_queries_per_kv,
                                          head_size, dtype, kv_cache_dtype):
    check(num_heads, num_queries_per_kv, head_size, dtype, kv_cache_dtype,
          alibi=True)


# --- test_qwen3_nonstandard_block_size --------------------------------------

@pytest.mark.parametrize("head_size", [128])
@pytest.mark.parametrize("dtype", DTYPES)
def test_qwen3_nonstandard_block_size(head_size, dtype):
    """Block size 544 (Qwen3-Next-80B)."""
    check(64, 1, head_size, dtype, "float16", 0, block_size=544)
