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
