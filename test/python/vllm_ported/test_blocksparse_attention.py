"""Port of vLLM's tests/kernels/attention/test_blocksparse_attention.py at
vllm-project/vllm@24559c7739854a8ccd0d988e21d8043bc1090c0d, run on
attn_mlir.vllm.blocksparse_flash_attn_varlen_fwd.

test_varlen_blocksparse_attention_prefill (vLLM's only test of the Triton
kernel): 3 prefill sequences with `random.sample` lengths, q/k/v as column
slices of one qkv tensor uniform in +-1/sqrt(d), vLLM's
LocalStridedBlockSparseAttn layout (get_sparse_attn_mask: local blocks plus
vertical stride, homo-head broadcast with stride 0 or per-head sliding,
dense_to_crow_col's CSR with column lists padded by -1), called as its
varlen_attn calls the kernel (cu_seqlens_q=None, block_size, max_seqlen).
The layout helpers are reimplemented in numpy here.

vLLM's test is weaker than it looks: its reference is dense causal attention
(ref_multi_query_kv_attention), which ignores the sparsity, and its inputs
(+-1/sqrt(d)) make every score ~0.005, so the softmax is almost uniform: it
passes within 1e-2 whichever blocks the kernel reads and whatever it does
with the scores. The port runs vLLM's check, then the same case with unit
normal inputs against the block-sparse reference (the key blocks the layout
lists for the query's block row, and the causal mask) with vLLM's tolerance,
and checks that the dense reference would fail there.

test_paged_attention tests vLLM's CUDA paged_attention_v1/v2 ops with
block-sparse parameters, not an entry point of attn_mlir.vllm. Its
block-sparse decode semantics are ported to blocksparse_flash_attn_varlen_fwd
(test_blocksparse_decode): one query per sequence over dense K/V (what its
paged cache holds), the layout built from vLLM's reference mask (local
blocks, vertical stride, head sliding by query head (2) or KV head (-1))
through dense_to_crow_col, vLLM's reference and tolerance (atol 1e-3, rtol
1e-5), again also with real-valued scores. Left out with it: `version` (v1/v2
are the CUDA op's variants), `use_alibi` and `kv_cache_dtype` fp8 (the
entry point has no ALiBi and takes K/V in q's dtype), `block_size` 16 and
NUM_BLOCKS (the paged cache's page size and pool), `tp_rank` (0).

Adapted: numpy on the host instead of torch on CUDA; Python's
random.Random(0) draws the lengths as vLLM's seeded `random` does, numpy the
values; the references compute in float32 (vLLM's softmax precision) from
the inputs' exact values and are rounded to the output dtype. vLLM's
MAX_SEQ_LEN derives from the GPU's shared memory (57600 on an H100, a limit
of its CUDA kernels): the prefill test uses min(MAX_SEQ_LEN, 4096) = 4096,
the decode port 8192. Grids: vLLM's full grids and lengths under
ATTN_MLIR_FULL_GRID=1, else the covering subsets below with shorter
sequences (the 40-head prefill takes ~10 s per 1000 tokens on the CPU): one
sequence just long enough to leave the 16 local blocks, so that the vertical
stride decides which blocks are read.
"""

import random

import numpy as np
import pytest

from attn_mlir import vllm

from . import (_DRY_RUN, BF16, FULL_GRID, assert_close, assert_discriminates, cases,
               cast, f64, matmul, softmax_rows)

NUMPY = {"half": np.float16, "bf16": BF16}
DTYPES = ["half", "bf16"]
NUM_HEADS = [(40, 40)]
HEAD_SIZES = [64, 112]
BLOCKSPARSE_LOCAL_BLOCKS = [16]
BLOCKSPARSE_VERT_STRIDES = [8]
BLOCKSPARSE_BLOCK_SIZES = [64]
BLOCKSPARSE_HEADS_SLIDINGS = [2, -1]
BLOCKSPARSE_HOMO_HEADS = [True, False]


# --- vLLM's layout helpers (blocksparse_attention/utils.py), in numpy ----------

def dense_to_crow_col(x):
    """CSR of a 2-D/3-D block mask: crows [H, rows + 1], cols [H, max nnz]
    int64, each head's columns (row-major) padded with -1 to the longest
    head; a 2-D input drops the head axis."""
    x = np.asarray(x)
    assert x.ndim in (2, 3)
    dim = x.ndim
    if dim == 2:
        x = x[None]
    crows, cols = [], []
    for xi in x.astype(bool):
        rows, c = np.nonzero(xi)
        crows.append(np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=xi.shape[0]))]))
        cols.append(c)
    max_cols = max(len(c) for c in cols)
    cols = [np.concatenate([c, np.full(max_cols - len(c), -1)]) for c in cols]
    crows = np.vstack(crows).astype(np.int64)
    cols = np.vstack(cols).astype(np.int64)
    if dim == 2:
        crows, cols = crows[0], cols[0]
    return crows, cols


def get_head_sliding_step(n_heads, vert_stride, homo_head=False):
    if homo_head:
        return 0
    return max(1, int(vert_stride / n_heads))


def get_sparse_attn_mask(n_heads, q_len, max_seqlen, block_size=64,
                         local_blocks=4, vert_stride=4, homo_head=True):
    """(crow, col) of vLLM's local + vertical-stride block layout; homo-head
    layouts are one CSR broadcast to every head (stride 0, as torch's
    expand)."""
    num_blocks = -(-max_seqlen // block_size)
    q_pos = np.arange(num_blocks)[:, None]
    k_pos = np.arange(num_blocks)[None, :]
    num_blocks_q = -(-q_len // block_size)
    if homo_head:
        vert = (np.arange(num_blocks) + 1) % vert_stride == 0
        mask = (q_pos >= k_pos) & ((q_pos - k_pos < local_blocks) | vert[None, :])
        crow, col = dense_to_crow_col(mask[-num_blocks_q:])
        return (np.broadcast_to(crow[None], (n_heads,) + crow.shape),
                np.broadcast_to(col[None], (n_heads,) + col.shape))
    step = get_head_sliding_step(n_heads, vert_stride)
    vert = np.stack([(np.arange(num_blocks) + h * step + 1) % vert_stride == 0
                     for h in range(n_heads)])[:, None, :]
    mask = (q_pos >= k_pos)[None] & ((q_pos - k_pos < local_blocks)[None] | vert)
    return dense_to_crow_col(mask[:, -num_blocks_q:])


def attend(q, k, v, scale, visible):
    """Softmax attention of one sequence, all heads at once, in float32 as
    vLLM's references compute it: q [lq, Hq, d], k/v [lk, Hk, d] (GQA: query
    head h reads KV head h // (Hq / Hk)), visible [Hq or 1, lq, lk]."""
    if _DRY_RUN:   # nothing is compared (see matmul)
        return np.zeros((q.shape[0], q.shape[1], v.shape[-1]))
    group = q.shape[1] // k.shape[1]
    qq = np.ascontiguousarray(np.asarray(q, np.float32).transpose(1, 0, 2))
    k = np.repeat(np.asarray(k, np.float32), group, axis=1)
    v = np.repeat(np.asarray(v, np.float32), group, axis=1)
    kk = np.ascontiguousarray(k.transpose(1, 2, 0))
    vv = np.ascontiguousarray(v.transpose(1, 0, 2))
    s = matmul(qq, kk)
    s *= np.float32(scale)
    np.copyto(s, np.float32(-np.inf), where=~np.broadcast_to(visible, s.shape))
    m = s.max(axis=-1, keepdims=True)
    m[~np.isfinite(m)] = 0
    s -= m
    np.exp(s, out=s)  # masked keys: exp(-inf) = 0
    z = s.sum(axis=-1, keepdims=True)
    z[z == 0] = 1     # rows with no visible key stay 0
    s /= z
    return f64(matmul(s, vv).transpose(1, 0, 2))


def blocksparse_visible(crow, col, pos, lk, block_size, q_block_size):
    """[Hq, lq, lk]: query at position pos[i] sees key j <= pos[i] whose block
    j // block_size is listed in its head's layout row pos[i] //
    q_block_size (the kernel reads only crow[h, r] .. crow[h, r + 1])."""
    heads = crow.shape[0]
    nkb = -(-lk // block_size)
    rows = pos // q_block_size
    listed = np.zeros((heads, crow.shape[1] - 1, nkb), bool)
    for h in range(heads):
        for r in np.unique(rows):
            blocks = col[h, crow[h, r]:crow[h, r + 1]]
            listed[h, r, blocks[blocks < nkb]] = True
    j = np.arange(lk)
    return listed[:, rows][:, :, j // block_size] & (j[None, :] <= pos[:, None])[None]


def blocksparse_reference(q, k, v, cu_q, cu_k, scale, crow, col, block_size,
                          q_block_size):
    """What the kernel computes, per sequence (query i at position p = k_len
    - q_len + i)."""
    out = np.zeros(q.shape)
    if _DRY_RUN:
        return out
    for b in range(len(cu_q) - 1):
        lq, lk = cu_q[b + 1] - cu_q[b], cu_k[b + 1] - cu_k[b]
        pos = lk - lq + np.arange(lq)
        visible = blocksparse_visible(crow, col, pos, lk, block_size, q_block_size)
        out[cu_q[b]:cu_q[b + 1]] = attend(q[cu_q[b]:cu_q[b + 1]], k[cu_k[b]:cu_k[b + 1]],
                                          v[cu_k[b]:cu_k[b + 1]], scale, visible)
    return out


def ref_multi_query_kv_attention(cu_seq_lens, query, key, value, scale):
    """vLLM's reference: dense causal attention per sequence (GQA by
    repeat_interleave), softmax in float32."""
    out = np.zeros(query.shape)
    for i in range(len(cu_seq_lens) - 1):
        s, e = cu_seq_lens[i], cu_seq_lens[i + 1]
        causal = np.tril(np.ones((e - s, e - s), bool))[None]
        out[s:e] = attend(query[s:e], key[s:e], value[s:e], scale, causal)
    return out


# --- test_varlen_blocksparse_attention_prefill ------------------------------

PREFILL_NAMES = ("num_seqs, num_heads, head_size, blocksparse_local_blocks, "
                 "blocksparse_vert_stride, blocksparse_block_size, "
                 "blocksparse_homo_heads, dtype, seed")
PREFILL_CASES = cases(PREFILL_NAMES, dict(
    num_seqs=[3], num_heads=NUM_HEADS, head_size=HEAD_SIZES,
    blocksparse_local_blocks=BLOCKSPARSE_LOCAL_BLOCKS,
    blocksparse_vert_stride=BLOCKSPARSE_VERT_STRIDES,
    blocksparse_block_size=BLOCKSPARSE_BLOCK_SIZES,
    blocksparse_homo_heads=BLOCKSPARSE_HOMO_HEADS, dtype=DTYPES, seed=[0]), [
    (3, (40, 40), 64, 16, 8, 64, True, "half", 0),
    (3, (40, 40), 112, 16, 8, 64, False, "bf16", 0),
])
MAX_LEN = 4096  # min(MAX_SEQ_LEN, 4096) on GPUs with >= 18 KB shared memory


def run_prefill(num_seqs, num_heads, head_size, local_blocks, vert_stride,
                block_size, homo_heads, dtype, seed, seq_lens, real_values):
    rng = np.random.default_rng(seed)
    dt = NUMPY[dtype]
    cu_seq_lens = np.cumsum([0] + seq_lens).astype(np.int32)
    num_tokens = sum(seq_lens)
    scale = float(1.0 / (head_size ** 0.5))
    num_query_heads, num_kv_heads = num_heads
    shape = (num_tokens, num_query_heads + 2 * num_kv_heads, head_size)
    if real_values:
        qkv = rng.standard_normal(shape).astype(dt)
    else:
        qkv = rng.uniform(-scale, scale, shape).astype(dt)
    # qkv.split([...], dim=1): strided views of one tensor, as vLLM passes them
    query = qkv[:, :num_query_heads]
    key = qkv[:, num_query_heads:num_query_heads + num_kv_heads]
    value = qkv[:, num_query_heads + num_kv_heads:]
    # LocalStridedBlockSparseAttn(num_query_heads, MAX_LEN, ...).varlen_attn
    crow, col = get_sparse_attn_mask(num_query_heads, MAX_LEN, MAX_LEN,
                                     block_size=block_size,
                                     local_blocks=local_blocks,
                                     vert_stride=vert_stride,
                                     homo_head=homo_heads)
    if not homo_heads:
        assert (col == -1).any(), "the per-head layout has no -1 padding"
    output = vllm.blocksparse_flash_attn_varlen_fwd(
        query, key, value, cu_seq_lens, None, scale, (crow, col),
        block_size=block_size, q_block_size=None, max_seqlen=MAX_LEN)
    if not real_values:
        dense = ref_multi_query_kv_attention(cu_seq_lens, query, key, value,
                                             scale)
        assert_close(output, cast(dense, dt), atol=1e-2, rtol=1e-2,
                     what="vLLM's inputs, dense reference")
        return
    sparse = blocksparse_reference(query, key, value, cu_seq_lens, cu_seq_lens,
                                   scale, crow, col, block_size, block_size)
    assert_close(output, cast(sparse, dt), atol=1e-2, rtol=1e-2,
                 what="unit inputs, block-sparse reference")
    # Dense causal attention (vLLM's reference) of the longest sequence's
    # rows past the local window, where the layout drops blocks, must fail.
    b = int(np.argmax(seq_lens))
    first = local_blocks * block_size
    start, end = cu_seq_lens[b], cu_seq_lens[b + 1]
    assert end - start > first, "no sequence leaves the local window"
    rows = slice(start + first, end)
    pos = np.arange(first, end - start)
    causal = (np.arange(end - start)[None, :] <= pos[:, None])[None]
    dense = attend(query[rows], key[start:end], value[start:end], scale, causal)
    assert_discriminates(cast(dense, dt), cast(sparse[rows], dt), atol=1e-2,
                         rtol=1e-2, what="dense attention")


@pytest.mark.parametrize(PREFILL_NAMES, PREFILL_CASES)
def test_varlen_blocksparse_attention_prefill(num_seqs, num_heads, head_size,
                                              blocksparse_local_blocks,
                                              blocksparse_vert_stride,
                                              blocksparse_block_size,
                                              blocksparse_homo_heads, dtype,
                                              seed):
    args = (num_seqs, num_heads, head_size, blocksparse_local_blocks,
            blocksparse_vert_stride, blocksparse_block_size,
            blocksparse_homo_heads, dtype, seed)
    pyrng = random.Random(seed)
    if FULL_GRID:
        seq_lens = pyrng.sample(range(1, MAX_LEN), num_seqs)
        long_lens = seq_lens
    else:
        seq_lens = pyrng.sample(range(1, 300), num_seqs)
        # one sequence 3 blocks past the local window, the others short
        long_lens = seq_lens[:-1] + [
            (blocksparse_local_blocks + 3) * blocksparse_block_size + 5]
    run_prefill(*args, seq_lens=seq_lens, real_values=False)
    run_prefill(*args, seq_lens=long_lens, real_values=True)


# --- test_paged_attention, as block-sparse decode ----------------------------

DECODE_NAMES = ("num_seqs, num_heads, head_size, dtype, seed, "
                "blocksparse_local_blocks, blocksparse_vert_stride, "
                "blocksparse_block_size, blocksparse_head_sliding_step")
DECODE_CASES = cases(DECODE_NAMES, dict(
    num_seqs=[3], num_heads=NUM_HEADS, head_size=HEAD_SIZES, dtype=DTYPES,
    seed=[0], blocksparse_local_blocks=BLOCKSPARSE_LOCAL_BLOCKS,
    blocksparse_vert_stride=BLOCKSPARSE_VERT_STRIDES,
    blocksparse_block_size=BLOCKSPARSE_BLOCK_SIZES,
    blocksparse_head_sliding_step=BLOCKSPARSE_HEADS_SLIDINGS), [
    (3, (40, 40), 64, "half", 0, 16, 8, 64, 2),
    (3, (40, 40), 112, "bf16", 0, 16, 8, 64, -1),
])
DECODE_MAX_SEQ_LEN = 8192 if FULL_GRID else 2048


def decode_layout(num_query_heads, num_kv_heads, max_seq_len, local_blocks,
                  vert_stride, block_size, head_sliding_step, tp_rank=0):
    """vLLM's reference mask of ref_single_query_cached_kv_attention as a
    per-head block layout: key block kb is visible from query block qb iff
    kb <= qb and (qb - kb < local_blocks or (kb + bs_offset) % vert_stride
    == 0), bs_offset sliding with the query head (step >= 0) or the KV head
    (step < 0)."""
    nb = -(-max_seq_len // block_size)
    group = num_query_heads // num_kv_heads
    qb = np.arange(nb)[:, None]
    kb = np.arange(nb)[None, :]
    masks = []
    for h in range(num_query_heads):
        if head_sliding_step >= 0:
            bs_offset = (tp_rank * num_query_heads + h) * head_sliding_step + 1
        else:
            bs_offset = (tp_rank * num_kv_heads + h // group) * (-head_sliding_step) + 1
        masks.append((kb <= qb) & ((qb - kb < local_blocks) |
                                   ((kb + bs_offset) % vert_stride == 0)))
    return dense_to_crow_col(np.stack(masks))


def run_decode(num_seqs, num_heads, head_size, dtype, seed, local_blocks,
               vert_stride, block_size, head_sliding_step, real_values):
    pyrng = random.Random(seed)
    rng = np.random.default_rng(seed)
    dt = NUMPY[dtype]
    scale = float(1.0 / (head_size ** 0.5))
    num_query_heads, num_kv_heads = num_heads
    seq_lens = [pyrng.randint(1, DECODE_MAX_SEQ_LEN) for _ in range(num_seqs)]
    seq_lens[-1] = DECODE_MAX_SEQ_LEN
    qk_range = 1.0 if real_values else scale
    query = rng.uniform(-qk_range, qk_range, (num_seqs, num_query_heads, head_size)).astype(dt)
    key = rng.uniform(-qk_range, qk_range, (sum(seq_lens), num_kv_heads, head_size)).astype(dt)
    value = rng.uniform(-scale, scale, (sum(seq_lens), num_kv_heads, head_size)).astype(dt)
    cu_seqlens_k = np.cumsum([0] + seq_lens).astype(np.int32)
    crow, col = decode_layout(num_query_heads, num_kv_heads,
                              DECODE_MAX_SEQ_LEN, local_blocks, vert_stride,
                              block_size, head_sliding_step)
    assert (col == -1).any(), "the per-head layout has no -1 padding"
    # cu_seqlens_q=None with one query per sequence: decoding
    output = vllm.blocksparse_flash_attn_varlen_fwd(
        query, key, value, cu_seqlens_k, None, scale, (crow, col),
        block_size=block_size, max_seqlen=DECODE_MAX_SEQ_LEN)
    cu_q = np.arange(num_seqs + 1)
    ref = blocksparse_reference(query, key, value, cu_q, cu_seqlens_k, scale,
                                crow, col, block_size, block_size)
    what = "real values" if real_values else "vLLM's inputs"
    assert_close(output, cast(ref, dt), atol=1e-3, rtol=1e-5, what=what)
    if real_values:
        dense = np.zeros(ref.shape)
        for b in range(num_seqs):
            ks = slice(cu_seqlens_k[b], cu_seqlens_k[b + 1])
            for h in range(num_query_heads):
                kvh = h // (num_query_heads // num_kv_heads)
                s = f64(key[ks, kvh]) @ f64(query[b, h]) * scale
                dense[b, h] = softmax_rows(s) @ f64(value[ks, kvh])
        assert_discriminates(cast(dense, dt), cast(ref, dt), atol=1e-3,
                             rtol=1e-5, what="dense attention")


@pytest.mark.parametrize(DECODE_NAMES, DECODE_CASES)
def test_blocksparse_decode(num_seqs, num_heads, head_size, dtype, seed,
                            blocksparse_local_blocks, blocksparse_vert_stride,
                            blocksparse_block_size,
                            blocksparse_head_sliding_step):
    args = (num_seqs, num_heads, head_size, dtype, seed,
            blocksparse_local_blocks, blocksparse_vert_stride,
            blocksparse_block_size, blocksparse_head_sliding_step)
    run_decode(*args, real_values=False)
    run_decode(*args, real_values=True)
