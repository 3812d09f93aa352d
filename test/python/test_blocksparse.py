"""attn.blocksparse through vllm.blocksparse_flash_attn_varlen_fwd."""

import os

import numpy as np
import pytest

from attn_mlir import ops, vllm
from reference import DTYPES, attend, check, f64


def layout(heads, rows, local, stride, per_head):
    """vLLM-style layout: `local` diagonal blocks plus every `stride`-th block
    (offset by the head when per_head), each row ending with its diagonal."""
    crow = np.zeros((heads, rows + 1), np.int32)
    cols = []
    for h in range(heads):
        row_cols = []
        for r in range(rows):
            picked = {c for c in range(r + 1)
                      if r - c < local or (c + (h if per_head else 0) + 1) % stride == 0}
            ids = sorted(picked)
            row_cols.append(ids)
            crow[h, r + 1] = crow[h, r] + len(ids)
        cols.append([c for ids in row_cols for c in ids])
    nnz = max(len(c) for c in cols)
    col = np.zeros((heads, nnz), np.int32)
    for h, c in enumerate(cols):
        col[h, :len(c)] = c
    return crow, col


def reference(q, k, v, cq, ck, scale, crow, col, bs, qbs):
    q, k, v = f64(q), f64(k), f64(v)
    hq, hk = q.shape[1], k.shape[1]
    ref = np.zeros(q.shape)
    for b in range(len(cq) - 1):
        lq, lk = cq[b + 1] - cq[b], ck[b + 1] - ck[b]
        pos = lk - lq + np.arange(lq)
        for h in range(hq):
            lh = h if crow.shape[0] > 1 else 0
            vis = np.zeros((lq, lk), bool)
            for i, p in enumerate(pos):
                r = p // qbs
                blocks = col[lh, crow[lh, r]:crow[lh, r + 1]]
                j = np.arange(lk)
                vis[i] = np.isin(j // bs, blocks) & (j <= p)
            kv = h // (hq // hk)
            ref[cq[b]:cq[b + 1], h] = attend(q[cq[b]:cq[b + 1], h],
                                             k[ck[b]:ck[b + 1], kv],
                                             v[ck[b]:ck[b + 1], kv], scale, vis)
    return ref


@pytest.mark.parametrize("per_head", [False, True])
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
@pytest.mark.parametrize("bs,qbs", [(16, None), (32, 16), (16, 32)])
def test_prefill_and_decode(per_head, dtype, bs, qbs):
    rng = np.random.default_rng(bs + (qbs or 0))
    hq, hk, d = 8, 2, 64
    # Prefills (Lq == Lk) and decode rows (Lq == 1).
    q_lens, k_lens = [100, 1, 37, 1], [100, 150, 37, 9]
    cq = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    ck = np.concatenate([[0], np.cumsum(k_lens)]).astype(np.int32)
    q = rng.standard_normal((cq[-1], hq, d)).astype(DTYPES[dtype])
    k = rng.standard_normal((ck[-1], hk, d)).astype(DTYPES[dtype])
    v = rng.standard_normal((ck[-1], hk, d)).astype(DTYPES[dtype])
    qb = qbs or bs
    rows = -(-160 // qb)
    crow, col = layout(hq if per_head else 1, rows, 2, 3, per_head)
    out = vllm.blocksparse_flash_attn_varlen_fwd(
        q, k, v, ck, cq, 0.125, (crow, col), block_size=bs, q_block_size=qbs,
        max_seqlen=200)
    check(out, reference(q, k, v, cq, ck, 0.125, crow, col, bs, qb), dtype,
          "blocksparse")


def test_empty_layout_row_outputs_zero():
    rng = np.random.default_rng(3)
    q = rng.standard_normal((32, 2, 32)).astype(np.float32)
    k, v = q.copy(), rng.standard_normal((32, 2, 32)).astype(np.float32)
    cu = np.array([0, 32], np.int32)
    crow = np.array([[0, 1, 1]], np.int32)   # row 1 lists no block
    col = np.array([[0]], np.int32)
    out = vllm.blocksparse_flash_attn_varlen_fwd(q, k, v, cu, cu, 0.2, (crow, col),
                                                 block_size=16)
    assert np.all(out[16:] == 0) and np.isfinite(out).all()
    check(out, reference(q, k, v, cu, cu, 0.2, crow, col, 16, 16), "f32", "empty row")


def test_cu_seqlens_q_none_means_decode_or_prefill():
    rng = np.random.default_rng(4)
    k = rng.standard_normal((40, 2, 32)).astype(np.float32)
    v = rng.standard_normal((40, 2, 32)).astype(np.float32)
    ck = np.array([0, 10, 40], np.int32)
    crow, col = layout(1, 3, 3, 2, False)
    qd = rng.standard_normal((2, 2, 32)).astype(np.float32)   # decode only
    out = vllm.blocksparse_flash_attn_varlen_fwd(qd, k, v, ck, None, 0.2, (crow, col),
                                                 block_size=16)
    check(out, reference(qd, k, v, np.array([0, 1, 2]), ck, 0.2, crow, col, 16, 16),
          "f32", "decode")


@pytest.mark.parametrize("d", [80, 96, 112])
def test_mid_head_dims(d):
    """Heads between 64 and 128 (four warps on NVVM; 32-key tiles over 96)."""
    rng = np.random.default_rng(d)
    hq, hk = 4, 2
    q_lens, k_lens = [130, 1], [130, 70]
    cq = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    ck = np.concatenate([[0], np.cumsum(k_lens)]).astype(np.int32)
    q = rng.standard_normal((cq[-1], hq, d)).astype(DTYPES["bf16"])
    k = rng.standard_normal((ck[-1], hk, d)).astype(DTYPES["bf16"])
    v = rng.standard_normal((ck[-1], hk, d)).astype(DTYPES["bf16"])
    crow, col = layout(hq, 3, 2, 2, True)
    out = vllm.blocksparse_flash_attn_varlen_fwd(
        q, k, v, ck, cq, d ** -0.5, (crow, col), block_size=64, max_seqlen=130)
    check(out, reference(q, k, v, cq, ck, d ** -0.5, crow, col, 64, 64), "bf16",
          f"blocksparse D={d}")


def union_layout(heads, rows, rng, per_head):
    """Random ascending rows: some empty, some with blocks past the
    shortest sequences, most ending with their diagonal block."""
    crow = np.zeros((heads, rows + 1), np.int32)
    cols = []
    for h in range(heads):
        ids_of = []
        for r in range(rows):
            if r % 7 == 5:
                ids = []                              # an empty row
            else:
                ids = sorted(set(rng.choice(rows, size=3).tolist()) |
                             ({r} if r % 5 else set()))
            ids_of.append(ids)
            crow[h, r + 1] = crow[h, r] + len(ids)
        cols.append([c for ids in ids_of for c in ids])
    col = np.full((heads, max(1, max(len(c) for c in cols))), -1, np.int32)
    for h, c in enumerate(cols):
        col[h, :len(c)] = c
    return crow, col


@pytest.mark.parametrize("per_head", [True, False])
@pytest.mark.parametrize("d,dtype", [(128, "bf16"), (64, "f16")])
def test_programs_of_two_layout_rows(per_head, d, dtype):
    """Programs over two layout rows (block_q twice the query block, as
    sm_90a's 128 x 128 block-sparse programs): the union of both CSR rows,
    two blocks a 128-key tile, each row seeing only its own blocks. Varlen
    prefills ending inside, at and past a block and a program, decode rows,
    empty layout rows, rows listing blocks past short sequences, a row
    pair whose union is odd, block ids in both rows or one."""
    rng = np.random.default_rng(21 + d)
    hq, hk = 4, 2
    q_lens = [1, 63, 64, 65, 128, 129, 300, 1, 520]
    k_lens = [700, 63, 64, 65, 128, 129, 300, 64, 520]
    cq = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    ck = np.concatenate([[0], np.cumsum(k_lens)]).astype(np.int32)
    q = rng.standard_normal((cq[-1], hq, d)).astype(DTYPES[dtype])
    k = rng.standard_normal((ck[-1], hk, d)).astype(DTYPES[dtype])
    v = rng.standard_normal((ck[-1], hk, d)).astype(DTYPES[dtype])
    crow, col = union_layout(hq if per_head else 1, 11, rng, per_head)
    out = np.full(q.shape, np.nan, q.dtype)
    ops.blocksparse(q, k, v, cq, ck, crow, col, out, scale=d ** -0.5,
                    block_size=64, schedule=(128, 128, 1, 8, 1, 4, 1))
    check(out, reference(q, k, v, cq, ck, d ** -0.5, crow, col, 64, 64),
          dtype, "two layout rows")


@pytest.mark.skipif(os.environ.get("ATTN_MLIR_TEST_DEVICE") == "cuda",
                    reason="a CPU schedule (GPU programs over two layout "
                           "rows are sm_90a's of blocks of 64)")
@pytest.mark.parametrize("pack", [1, 2])
def test_two_layout_rows_other_blocks(pack):
    """The union walk on the CPU with query blocks of 16 and key blocks of
    32, GQA packing under a shared layout (rows of two heads each token)."""
    rng = np.random.default_rng(31 + pack)
    hq, hk, d = 4, 2, 32
    q_lens, k_lens = [1, 15, 16, 17, 33, 90], [50, 15, 16, 17, 33, 90]
    cq = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    ck = np.concatenate([[0], np.cumsum(k_lens)]).astype(np.int32)
    q = rng.standard_normal((cq[-1], hq, d)).astype(np.float32)
    k = rng.standard_normal((ck[-1], hk, d)).astype(np.float32)
    v = rng.standard_normal((ck[-1], hk, d)).astype(np.float32)
    crow, col = union_layout(1 if pack > 1 else hq, 7, rng, pack == 1)
    out = np.full(q.shape, np.nan, q.dtype)
    ops.blocksparse(q, k, v, cq, ck, crow, col, out, scale=0.2,
                    block_size=32, q_block_size=16,
                    schedule=(32, 32, pack))
    check(out, reference(q, k, v, cq, ck, 0.2, crow, col, 32, 16), "f32",
          "two layout rows, blocks 16 / 32")


@pytest.mark.parametrize("per_head", [True, False])
def test_key_tiles_of_whole_blocks_of_128(per_head):
    """Blocks of 128 keys under 128 x 128 programs of one layout row (one
    block a KV tile): varlen prefills ending inside and past a block,
    decode rows, empty rows."""
    rng = np.random.default_rng(41)
    hq, hk, d = 4, 2, 128
    q_lens, k_lens = [1, 127, 128, 129, 300], [400, 127, 128, 129, 300]
    cq = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    ck = np.concatenate([[0], np.cumsum(k_lens)]).astype(np.int32)
    q = rng.standard_normal((cq[-1], hq, d)).astype(DTYPES["bf16"])
    k = rng.standard_normal((ck[-1], hk, d)).astype(DTYPES["bf16"])
    v = rng.standard_normal((ck[-1], hk, d)).astype(DTYPES["bf16"])
    crow, col = union_layout(hq if per_head else 1, 4, rng, per_head)
    out = np.full(q.shape, np.nan, q.dtype)
    ops.blocksparse(q, k, v, cq, ck, crow, col, out, scale=d ** -0.5,
                    block_size=128, schedule=(128, 128, 1, 8, 1, 4, 1))
    check(out, reference(q, k, v, cq, ck, d ** -0.5, crow, col, 128, 128),
          "bf16", "blocks of 128")


@pytest.mark.parametrize("d", [64, 128])
def test_paired_blocks_of_one_layout_row(d):
    """GQA-packed programs of one layout row (a shared layout, 32 tokens x
    4 heads) on 128-key tiles of two 64-key blocks of the row (sm_90a's
    plan: the producer pairs the row's blocks; elsewhere ranges): odd rows,
    empty rows, blocks past short sequences, varlen and decode rows."""
    rng = np.random.default_rng(51 + d)
    hq, hk = 8, 2
    q_lens = [1, 31, 32, 33, 64, 65, 300, 1]
    k_lens = [500, 31, 32, 33, 64, 65, 300, 70]
    cq = np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32)
    ck = np.concatenate([[0], np.cumsum(k_lens)]).astype(np.int32)
    q = rng.standard_normal((cq[-1], hq, d)).astype(DTYPES["bf16"])
    k = rng.standard_normal((ck[-1], hk, d)).astype(DTYPES["bf16"])
    v = rng.standard_normal((ck[-1], hk, d)).astype(DTYPES["bf16"])
    crow, col = union_layout(1, 8, rng, False)
    out = np.full(q.shape, np.nan, q.dtype)
    ops.blocksparse(q, k, v, cq, ck, crow, col, out, scale=d ** -0.5,
                    block_size=64, schedule=(32, 128, 4, 8, 1, 4, 1))
    check(out, reference(q, k, v, cq, ck, d ** -0.5, crow, col, 64, 64),
          "bf16", "paired blocks of one row")
