"""Run-time preconditions of attn_mlir.ops (docs/semantics.md, section 8;
attn_mlir._preconditions): sizes that name the same quantity must agree, and
index arrays on the host must lie in the ranges the kernels address. Before
2026-11-28 the ops checked neither, and calls such as a block-table entry of
10**6 or an `out` with fewer rows than `q` ended in a segfault or heap
corruption of the CPU kernel (or read out of bounds silently). Each case
must now raise a ValueError naming the argument before any kernel runs.

Calls run with ATTN_MLIR_DRY_RUN=1 (every check, no kernel);
test_bad_indices_raise_before_running runs the CPU kernels for real."""

import numpy as np
import pytest

from attn_mlir import ops
from attn_mlir._abi import View

F = np.float32


def i32(values):
    return np.array(values, np.int32)


def randn(*shape):
    return np.random.default_rng(0).standard_normal(shape).astype(F)


@pytest.fixture(autouse=True)
def dry_run(monkeypatch):
    monkeypatch.setenv("ATTN_MLIR_DRY_RUN", "1")
    monkeypatch.delenv("ATTN_MLIR_VALIDATE", raising=False)


def flash(q=None, k=None, v=None, cu_q=(0, 3, 8), cu_k=(0, 3, 8), out=None,
          **kw):
    q = randn(8, 4, 32) if q is None else q
    k = randn(8, 2, 32) if k is None else k
    v = randn(*k.shape) if v is None else v
    out = np.zeros_like(q) if out is None else out
    ops.flash(q, k, v, i32(cu_q), i32(cu_k), out, scale=0.1, **kw)


def unified(q=None, k_cache=None, v_cache=None, table=((0, 1), (2, 3)),
            cu=(0, 1, 3), used=(20, 30), out=None, **kw):
    q = randn(3, 4, 32) if q is None else q
    k_cache = randn(6, 16, 2, 32) if k_cache is None else k_cache
    v_cache = randn(*k_cache.shape) if v_cache is None else v_cache
    out = np.zeros_like(q) if out is None else out
    ops.unified(q, k_cache, v_cache, i32(table), i32(cu), i32(used), out,
                scale=0.1, **kw)


def prefix(k=None, table=((0, 1), (2, 3)), start=(0, 1, 4), lens=(20, 10),
           v_cache=None, out=None):
    q = randn(4, 4, 32)
    k = randn(4, 2, 32) if k is None else k
    v_cache = randn(4, 2, 32, 16) if v_cache is None else v_cache
    out = np.zeros_like(q) if out is None else out
    ops.prefix_prefill(q, k, k, randn(4, 2, 8, 16, 4), v_cache, i32(table),
                       i32(start), i32(lens), out, scale=0.1)


def sparse(crow=((0, 1, 3),), col=((0, 0, 1),), cu_q=(0, 128),
           cu_k=(0, 128), out=None, v=None):
    q, k = randn(128, 4, 64), randn(128, 2, 64)
    out = np.zeros_like(q) if out is None else out
    ops.blocksparse(q, k, k if v is None else v, i32(cu_q), i32(cu_k),
                    i32(crow), i32(col), out, scale=0.1, block_size=64)


def merge(out_rows=3, stat_rows=3, segments=2):
    partial = randn(3, 4, 2, 32)
    ops.merge_states(partial, np.zeros((out_rows, 4, 32), F),
                     segment_max=randn(stat_rows, 4, segments),
                     segment_sum=np.abs(randn(stat_rows, 4, segments)) + 1)


VALID = {"flash": flash, "unified": unified, "prefix": prefix,
         "sparse": sparse, "merge": merge}

# (call, match): index contents out of range.
BAD_INDICES = {
    "unified-table-entry-huge": (
        lambda: unified(table=((0, 10 ** 6), (2, 3))), "block_table.*1000000"),
    "unified-table-entry-negative": (
        lambda: unified(table=((0, -5), (2, 3))), "block_table.*-5"),
    "unified-seqused-beyond-table": (
        lambda: unified(used=(20, 300)), "block_table.*19 blocks.*2 columns"),
    "unified-offsets-decreasing": (
        lambda: unified(cu=(0, 3, 1)), "cu_seqlens_q.*non-decreasing"),
    "unified-offsets-beyond-tokens": (
        lambda: unified(cu=(0, 1, 30)), "cu_seqlens_q.*30 exceeds"),
    "prefix-table-entry-huge": (
        lambda: prefix(table=((0, 10 ** 6), (2, 3))), "block_table.*1000000"),
    "prefix-context-beyond-table": (
        lambda: prefix(lens=(20, 10 ** 5)), "block_table.*columns"),
    "prefix-offsets-beyond-tokens": (
        lambda: prefix(start=(0, 1, 40)), "query_start.*40 exceeds"),
    "prefix-offsets-decreasing": (
        lambda: prefix(start=(0, 3, 2)), "query_start.*non-decreasing"),
    "flash-q-offsets-beyond-tokens": (
        lambda: flash(cu_q=(0, 3, 800)), "cu_seqlens_q.*800 exceeds"),
    "flash-k-offsets-beyond-tokens": (
        lambda: flash(cu_k=(0, 3, 800)), "cu_seqlens_k.*800 exceeds"),
    "flash-offsets-decreasing": (
        lambda: flash(cu_q=(0, 5, 3)), "cu_seqlens_q.*non-decreasing"),
    "flash-offsets-negative": (
        lambda: flash(cu_k=(-100, 3, 8)), "cu_seqlens_k.*non-negative"),
    "flash-bias-smaller-than-sequences": (
        lambda: flash(bias=randn(1, 4, 2, 2)), "bias.*longest sequences"),
    "sparse-row-pointer-beyond-columns": (
        lambda: sparse(crow=((0, 1, 30),)), "crow.*non-decreasing within"),
    "sparse-row-pointers-decreasing": (
        lambda: sparse(crow=((0, 3, 1),)), "crow.*non-decreasing within"),
    "sparse-negative-block-id": (
        lambda: sparse(col=((0, -3, 1),)), "col.*block id -3"),
    "sparse-repeated-block-id": (
        lambda: sparse(col=((0, 1, 1),)), "col.*twice"),
    "sparse-block-ids-descending": (
        lambda: sparse(col=((0, 1, 0),)), "col.*ascending order"),
    "sparse-layout-too-few-rows": (
        lambda: sparse(crow=((0, 1),), col=((0,),)), "crow.*1 rows cover 64 positions"),
    "sparse-key-offsets-beyond-tokens": (
        lambda: sparse(cu_k=(0, 4000)), "cu_seqlens_k.*4000 exceeds"),
    "sparse-queries-neither-one-nor-keys": (
        lambda: sparse(cu_q=(0, 5)), "cu_seqlens_q.*5 queries and 128 keys"),
}

# (call, match): sizes that must agree.
BAD_SIZES = {
    "flash-out-fewer-rows": (
        lambda: flash(out=np.zeros((3, 4, 32), F)), "out: has 3 tokens"),
    "flash-v-fewer-rows": (
        lambda: flash(v=randn(2, 2, 32)), "v: has 2 keys"),
    "flash-offset-counts-differ": (
        lambda: flash(cu_k=(0, 8)), "cu_seqlens_k: has shape"),
    "unified-out-fewer-rows": (
        lambda: unified(out=np.zeros((1, 4, 32), F)), "out: has 1 tokens"),
    "unified-v-cache-fewer-blocks": (
        lambda: unified(v_cache=randn(2, 16, 2, 32)), "v_cache: has 2 blocks"),
    "unified-seqused-short": (
        lambda: unified(used=(20,)), "seqused_k: has 1 rows"),
    "unified-table-short": (
        lambda: unified(table=((0, 1),)), "block_table: has 1 rows"),
    "prefix-out-fewer-rows": (
        lambda: prefix(out=np.zeros((2, 4, 32), F)), "out: has 2 tokens"),
    "prefix-new-keys-fewer-than-offsets": (
        lambda: prefix(k=randn(1, 2, 32)), "query_start.*4 exceeds the 1 rows"),
    "prefix-v-cache-fewer-blocks": (
        lambda: prefix(v_cache=randn(2, 2, 32, 16)), "v_cache: has 2 blocks"),
    "sparse-out-fewer-rows": (
        lambda: sparse(out=np.zeros((3, 4, 64), F)), "out: has 3 tokens"),
    "sparse-v-fewer-rows": (
        lambda: sparse(v=randn(3, 2, 64)), "v: has 3 keys"),
    "merge-out-fewer-rows": (
        lambda: merge(out_rows=1), "out: has 1 tokens"),
    "merge-stats-fewer-rows": (
        lambda: merge(stat_rows=1), "segment_max: has shape"),
}


@pytest.mark.parametrize("op", list(VALID))
def test_valid_calls_pass(op):
    VALID[op]()


def test_sequences_with_fewer_keys_than_queries_pass():
    """seqused_k / seq_lens below a sequence's query count (C < 0) is outside
    the ops' semantics, but reads no memory out of range, and a
    context-parallel rank that holds none of a sequence's keys calls
    unified so (attn_mlir.distributed): the ops leave it to their callers
    (attn_mlir.vllm rejects it)."""
    unified(used=(0, 1))
    prefix(lens=(0, 10))


@pytest.mark.parametrize("case", list(BAD_INDICES))
def test_index_contents_rejected(case):
    call, match = BAD_INDICES[case]
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("case", list(BAD_SIZES))
def test_sizes_rejected(case):
    call, match = BAD_SIZES[case]
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize("case", ["unified-table-entry-huge",
                                  "prefix-table-entry-huge",
                                  "flash-q-offsets-beyond-tokens"])
def test_bad_indices_raise_before_running(case, monkeypatch):
    """The calls that crashed the process: the CPU kernels for real."""
    monkeypatch.delenv("ATTN_MLIR_DRY_RUN")
    call, match = BAD_INDICES[case]
    with pytest.raises(ValueError, match=match):
        call()


def test_sizes_rejected_for_cpu_tensors():
    torch = pytest.importorskip("torch")
    q = torch.randn(8, 4, 32)
    k = torch.randn(8, 2, 32)
    cu = torch.tensor([0, 3, 8], dtype=torch.int32)
    with pytest.raises(ValueError, match="out: has 3 tokens"):
        ops.flash(q, k, k, cu, cu, torch.zeros(3, 4, 32), scale=0.1)
    with pytest.raises(ValueError, match="cu_seqlens_q.*non-decreasing"):
        ops.flash(q, k, k, torch.tensor([0, 5, 3], dtype=torch.int32), cu,
                  torch.zeros(8, 4, 32), scale=0.1)


def test_view_into_a_larger_buffer_reads_its_own_elements():
    """An index View over part of a buffer: its elements are checked, not
    the buffer's."""
    buf = i32([0, 3, 8, 999, 0, 3, 800])
    good = View("cu_seqlens_q", buf.ctypes.data, (3,), (1,), "i32", buf)
    bad = View("cu_seqlens_q", buf.ctypes.data + 16, (3,), (1,), "i32", buf)
    q, k = randn(8, 4, 32), randn(8, 2, 32)
    ops.flash(q, k, k, good, i32([0, 3, 8]), np.zeros_like(q), scale=0.1)
    with pytest.raises(ValueError, match="cu_seqlens_q.*800 exceeds"):
        ops.flash(q, k, k, bad, i32([0, 3, 8]), np.zeros_like(q), scale=0.1)


def test_device_indices_checked_when_validating(monkeypatch):
    """CUDA index tensors are preconditions (reading them synchronizes)
    unless ATTN_MLIR_VALIDATE=1."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    dev = torch.device("cuda")
    q = torch.randn(3, 4, 32, device=dev, dtype=torch.bfloat16)
    kc = torch.randn(6, 16, 2, 32, device=dev, dtype=torch.bfloat16)
    table = torch.tensor([[0, 10 ** 6], [2, 3]], dtype=torch.int32, device=dev)
    cu = torch.tensor([0, 1, 3], dtype=torch.int32, device=dev)
    used = torch.tensor([20, 30], dtype=torch.int32, device=dev)
    monkeypatch.setenv("ATTN_MLIR_VALIDATE", "1")
    with pytest.raises(ValueError, match="block_table.*1000000"):
        ops.unified(q, kc, kc, table, cu, used, torch.zeros_like(q), scale=0.1)
