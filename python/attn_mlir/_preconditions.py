"""The run-time preconditions of the ops (docs/semantics.md, section 8) that
the IR cannot check, for attn_mlir.ops and attn_mlir.vllm:

* sizes that name the same quantity agree (tokens of q and out, blocks of
  the two caches, sequences of the per-sequence arrays, ...): the IR types
  leave them dynamic, so every call checks them (shapes only: no read of
  device memory);
* index contents (offsets, lengths, block tables, sparse layouts) lie in
  the ranges the kernels address: host arrays always, device ones only
  under ATTN_MLIR_VALIDATE=1 (reading them synchronizes).

A kernel given indices outside these ranges reads or writes out of bounds,
so every failure is a ValueError naming the argument, raised before any
kernel runs.
"""

import ctypes

import numpy as np

from ._abi import NUMPY_DTYPES, device_of, extent, host_values, is_torch, \
    reads_values


def _need(cond, message):
    if not cond:
        raise ValueError(message)


def same_rows(a, b, what="rows"):
    """Dim 0 of Views `a` and `b` (either may be None) agree."""
    if a is not None and b is not None:
        _need(a.shape[0] == b.shape[0],
              f"{b.name}: has {b.shape[0]} {what}, {a.name} has "
              f"{a.shape[0]}; they must match")


def at_least_rows(v, n, what):
    """A per-sequence View `v` (may be None) has at least `n` rows."""
    if v is not None:
        _need(v.shape[0] >= n,
              f"{v.name}: has {v.shape[0]} rows, the batch has {n} {what}")


# ---------------------------------------------------------------------------
# Index contents
# ---------------------------------------------------------------------------


def index_values(v):
    """The values of an integer View as an int64 numpy array of its shape,
    or None where they are not read (device memory unless validating, fake
    tensors). A View covering its whole owner reads the owner; one into a
    larger buffer reads its own elements."""
    owner = v.owner
    if not reads_values(owner):
        return None
    shape = tuple(v.shape)
    if tuple(getattr(owner, "shape", ())) == shape and \
            _pointer(owner) == v.ptr:
        return np.asarray(host_values(owner, v.name)).astype(np.int64)
    if 0 in shape:
        return np.zeros(shape, np.int64)
    item = NUMPY_DTYPES[v.dtype].itemsize
    if is_torch(owner) and device_of(owner) is not None:
        import torch
        start = owner.storage_offset() + (v.ptr - owner.data_ptr()) // item
        sub = torch.as_strided(owner, shape, v.strides, start)
        return sub.detach().cpu().numpy().astype(np.int64)
    # Host memory: the View's own elements, from its address.
    span = extent(shape, v.strides)
    raw = (ctypes.c_byte * (span * item)).from_address(v.ptr)
    flat = np.frombuffer(raw, dtype=NUMPY_DTYPES[v.dtype])
    return np.lib.stride_tricks.as_strided(
        flat, shape, [s * item for s in v.strides]).astype(np.int64)


def _pointer(x):
    if is_torch(x):
        return x.data_ptr()
    if isinstance(x, np.ndarray):
        return x.__array_interface__["data"][0]
    return None


def check_offsets(vals, name, total):
    """Offsets: non-negative, non-decreasing, the last within the `total`
    rows they index."""
    _need(vals.ndim == 1 and len(vals) >= 1,
          f"{name}: expected a 1-D array of offsets, got shape {vals.shape}")
    _need(vals[0] >= 0 and not np.any(np.diff(vals) < 0),
          f"{name}: offsets must be non-negative and non-decreasing, got "
          f"{vals.tolist()[:16]}")
    _need(vals[-1] <= total,
          f"{name}: last offset {int(vals[-1])} exceeds the {total} rows of "
          f"the tensor it indexes")
    return vals


def check_block_table(table, name, keys_per_seq, block_size, num_blocks):
    """Every block a sequence's keys use (keys_per_seq[b] keys from column
    0 on) is a column of the table and a block in [0, num_blocks)."""
    _need(table.ndim == 2 and table.shape[0] >= len(keys_per_seq),
          f"{name}: expected [batch, max_blocks] with a row for each of the "
          f"{len(keys_per_seq)} sequences, got shape {table.shape}")
    for b, n in enumerate(keys_per_seq):
        used = -(-int(n) // block_size)
        _need(used <= table.shape[1],
              f"{name}: sequence {b} needs {used} blocks but the table has "
              f"{table.shape[1]} columns")
        row = table[b, :used]
        if row.size and (row.min() < 0 or row.max() >= num_blocks):
            bad = row.max() if row.max() >= num_blocks else row.min()
            raise ValueError(f"{name}: sequence {b} uses block {int(bad)}, "
                             f"outside [0, {num_blocks})")


def check_paged(lens, lens_name, offsets, offsets_name, table, table_name,
                tokens, block_size, num_blocks, new_tokens_cached, nouns,
                queries_within_keys=True):
    """A paged batch: the block table covers the cached keys of `lens`
    (keys of each sequence: every key is cached when `new_tokens_cached`,
    else the context before the new tokens). With `queries_within_keys`,
    each sequence also has at least as many keys as queries from `offsets`
    (docs/semantics.md: C >= 0). The kernels read no key outside the
    sequence either way, so attn_mlir.ops leaves that one to its callers:
    a context-parallel rank holds no key of some sequences. Arrays are
    numpy."""
    batch = len(offsets) - 1
    check_offsets(offsets, offsets_name, tokens)
    _need(lens.ndim == 1 and len(lens) >= batch,
          f"{lens_name}: expected one entry for each of the {batch} "
          f"sequences, got shape {lens.shape}")
    lens = lens[:batch]
    q_lens = np.diff(offsets)
    short = lens < q_lens
    if queries_within_keys and np.any(short):
        b = int(np.argmax(short))
        raise ValueError(f"{lens_name}: sequence {b} has {int(lens[b])} "
                         f"{nouns[0]} but {int(q_lens[b])} {nouns[1]}")
    cached = lens if new_tokens_cached else lens - q_lens
    check_block_table(table, table_name, cached, block_size, num_blocks)


def check_csr(crow, col, heads, positions, q_block_size,
              names=("crow", "col")):
    """A block-sparse layout: [1 | heads, rows + 1] row pointers,
    non-decreasing within [0, nnz]; each row's column ids non-negative,
    distinct and ascending; a row for each of `positions` query positions. `names`: the
    two arrays' names in messages."""
    crow_name, col_name = names
    _need(crow.ndim == 2 and col.ndim == 2 and
          crow.shape[0] == col.shape[0] and crow.shape[0] in (1, heads) and
          crow.shape[1] >= 2,
          f"{crow_name}: shapes {crow.shape} / {col.shape} must be "
          f"[1|{heads}, rows + 1] and [1|{heads}, nnz]")
    _need(not np.any(np.diff(crow, axis=1) < 0) and crow.min() >= 0 and
          crow.max() <= col.shape[1],
          f"{crow_name}: row pointers must be non-decreasing within "
          f"[0, {col.shape[1]}]")
    # Only entries inside a row's range are block ids: vLLM's
    # dense_to_crow_col pads the columns of heads with fewer blocks with -1
    # past their last row, and the kernels never read the padding.
    for h in range(crow.shape[0]):
        for r in range(crow.shape[1] - 1):
            ids = col[h, crow[h, r]:crow[h, r + 1]]
            if ids.size and ids.min() < 0:
                raise ValueError(f"{col_name}: head {h} row {r} lists block "
                                 f"id {int(ids.min())}; block ids must be "
                                 f">= 0")
            if len(np.unique(ids)) != len(ids):
                raise ValueError(f"{col_name}: head {h} row {r} lists a "
                                 f"block twice")
            # (Programs over two layout rows merge the rows' lists.)
            if np.any(np.diff(ids) < 0):
                raise ValueError(f"{col_name}: head {h} row {r} lists block "
                                 f"ids out of ascending order")
    rows = crow.shape[1] - 1
    _need(rows * q_block_size >= positions,
          f"{crow_name}: {rows} rows cover {rows * q_block_size} positions, "
          f"sequences reach {positions}")


# ---------------------------------------------------------------------------
# Per op (the Views attn_mlir.ops built; any may be None, which the
# verifier then reports)
# ---------------------------------------------------------------------------


def _batch(cq):
    """Sequences of a call whose query offsets View is `cq`."""
    _need(cq.ndim == 1 and cq.shape[0] >= 1,
          f"{cq.name}: expected a 1-D array of batch + 1 offsets, got shape "
          f"{tuple(cq.shape)}")
    return cq.shape[0] - 1


def flash(q, k, v, cq, ck, out, bias):
    same_rows(k, v, "keys")
    same_rows(q, out, "tokens")
    if cq is None or ck is None:
        return
    batch = _batch(cq)
    _need(ck.ndim == 1 and ck.shape[0] == cq.shape[0],
          f"cu_seqlens_k: has shape {tuple(ck.shape)}, cu_seqlens_q "
          f"{tuple(cq.shape)}; both take batch + 1 offsets")
    if bias is not None:
        _need(bias.shape[0] in (1, batch),
              f"bias: dim 0 is {bias.shape[0]}; expected 1 or the batch "
              f"({batch})")
    qo, ko = values_of(cq), values_of(ck)
    if qo is None or ko is None:
        return
    check_offsets(qo, "cu_seqlens_q", q.shape[0])
    check_offsets(ko, "cu_seqlens_k", k.shape[0])
    if bias is not None and batch:
        lq, lk = int(np.diff(qo).max()), int(np.diff(ko).max())
        _need(lq <= bias.shape[2] and lk <= bias.shape[3],
              f"bias: [{bias.shape[2]}, {bias.shape[3]}] per head is smaller "
              f"than the longest sequences ({lq} queries, {lk} keys)")


def unified(q, out, kc, vc, table, cq, used, per_sequence, stats):
    """`per_sequence`: Views indexed by sequence (2-D descales, causal
    flags, mm_prefix_range, rswa_prefix_lens); `stats`: the split-KV
    segment_max / segment_sum."""
    same_rows(q, out, "tokens")
    same_rows(kc, vc, "blocks")
    for st in stats:
        if st is not None:
            same_rows(q, st, "tokens")
            if out is not None and out.ndim == 4:
                _need(st.ndim == 3 and st.shape[2] == out.shape[2],
                      f"{st.name}: has shape {tuple(st.shape)}; expected "
                      f"[tokens, q_heads, {out.shape[2]}] (out's segments)")
    if cq is None:
        return
    batch = _batch(cq)
    for v in (used, table, *per_sequence):
        at_least_rows(v, batch, "sequences")
    if used is None or table is None or kc is None:
        return
    offsets, lens, rows = values_of(cq), values_of(used), values_of(table)
    if offsets is None or lens is None or rows is None:
        return
    check_paged(lens, "seqused_k", offsets, "cu_seqlens_q", rows,
                "block_table", q.shape[0], kc.shape[1], kc.shape[0],
                new_tokens_cached=True, nouns=("keys", "queries"),
                queries_within_keys=False)


def prefix_prefill(q, k, v, out, kc, vc, table, qs, lens):
    same_rows(q, out, "tokens")
    same_rows(k, v, "new tokens")
    same_rows(kc, vc, "blocks")
    if qs is None:
        return
    batch = _batch(qs)
    at_least_rows(lens, batch, "sequences")
    at_least_rows(table, batch, "sequences")
    if lens is None or table is None or vc is None or vc.ndim != 4:
        return
    offsets, n, rows = values_of(qs), values_of(lens), values_of(table)
    if offsets is None or n is None or rows is None:
        return
    # The offsets index q and the new tokens' k and v alike.
    tokens = min(q.shape[0], k.shape[0]) if k is not None else q.shape[0]
    check_paged(n, "seq_lens", offsets, "query_start", rows, "block_table",
                tokens, vc.shape[3], vc.shape[0], new_tokens_cached=False,
                nouns=("tokens", "new tokens"), queries_within_keys=False)


def blocksparse(q, k, v, cq, ck, crow, col, out, heads, q_block_size):
    same_rows(k, v, "keys")
    same_rows(q, out, "tokens")
    if cq is None or ck is None:
        return
    _batch(cq)
    _need(ck.ndim == 1 and ck.shape[0] == cq.shape[0],
          f"cu_seqlens_k: has shape {tuple(ck.shape)}, cu_seqlens_q "
          f"{tuple(cq.shape)}; both take batch + 1 offsets")
    qo, ko = values_of(cq), values_of(ck)
    if qo is None or ko is None or crow is None or col is None:
        return
    check_offsets(qo, "cu_seqlens_q", q.shape[0])
    check_offsets(ko, "cu_seqlens_k", k.shape[0])
    q_lens, k_lens = np.diff(qo), np.diff(ko)
    bad = (q_lens != 1) & (q_lens != k_lens)
    if np.any(bad):
        b = int(np.argmax(bad))
        raise ValueError(f"cu_seqlens_q: sequence {b} has {int(q_lens[b])} "
                         f"queries and {int(k_lens[b])} keys; expected 1 "
                         f"(decode) or as many as keys")
    rows, cols = values_of(crow), values_of(col)
    if rows is None or cols is None:
        return
    positions = int(k_lens.max()) if len(k_lens) else 0
    check_csr(rows, cols, heads, positions, q_block_size)


def merge_states(partial, out, stats):
    same_rows(partial, out, "tokens")
    for st in stats:
        if st is not None and partial is not None:
            _need(tuple(st.shape) == tuple(partial.shape[:3]),
                  f"{st.name}: has shape {tuple(st.shape)}; expected "
                  f"{tuple(partial.shape[:3])} (partial's tokens, heads and "
                  f"segments)")


def values_of(v):
    """index_values of a View that may be None."""
    return None if v is None else index_values(v)


