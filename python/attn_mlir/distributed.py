"""Context-parallel attention over torch.distributed (docs/distributed.md).

Every rank of a process group holds *all* the queries of a batch (the same
`q` on every rank) and a *shard* of its keys and values. Each rank runs
`ops.flash` (or `ops.unified` for paged decode) over its own keys with the
`lse` output, the partial outputs and their log-sum-exps are all-gathered
(`torch.distributed.all_gather_into_tensor`: NCCL on GPUs, gloo on the
CPU), and `ops.merge_states(segment_lse=...)` combines them exactly into
`out`, on every rank.

* `context_parallel_flash`: varlen prefill or decode, causal or not. With
  `causal`, a rank's keys of a sequence are one contiguous range
  `[kv_start, kv_start + n)` of its absolute positions; the queries are the
  last positions of the sequence (flash's bottom-right alignment over the
  whole sequence). `FlashPlan` is the same call split into its host-side
  planning and its device work, for CUDA graphs.
* `context_parallel_decode`: one query per sequence over a paged cache whose
  pages are spread across ranks (any split of the keys).
* `merge_partials`: the all-gather and merge alone.
* `shard_calls`: the causal planning alone (host numpy, no torch).
* `split_keys`: cuts each sequence's keys into contiguous ranges in rank
  order (used by the example and the tests).

torch.distributed must be initialized; `group` (default: the world) names
the ranks taking part. Inputs are torch tensors (CPU or CUDA) or numpy
arrays; the exchanged buffers are torch tensors on `q`'s device.
"""

import numpy as np

try:
    import torch
    import torch.distributed as dist
except ImportError as e:   # pragma: no cover - torch is optional elsewhere
    raise ImportError("attn_mlir.distributed needs torch with "
                      "torch.distributed") from e

from . import ops
from ._abi import FLOATS, is_torch, view

__all__ = ["FlashPlan", "context_parallel_flash", "context_parallel_decode",
           "merge_partials", "merge_pieces", "shard_calls", "split_keys"]

_TORCH_FLOATS = {"f32": torch.float32, "f16": torch.float16,
                 "bf16": torch.bfloat16}


# ---------------------------------------------------------------------------
# Host-side checks
# ---------------------------------------------------------------------------

def _show(a, limit=8):
    a = [int(x) for x in a]
    return str(a) if len(a) <= limit else str(a[:limit])[:-1] + ", ...]"


def _host_ints(x, name, ndim=1):
    """An index array's values (rank `ndim`) as int64 numpy (a CUDA tensor
    is copied to the host, which synchronizes)."""
    if x is None:
        raise ValueError(f"{name}: expected a {ndim}-D integer array, got "
                         f"None")
    if is_torch(x):
        x = x.detach().cpu().numpy()
    a = np.asarray(x)
    if a.ndim != ndim or (a.size and a.dtype.kind not in "iu"):
        raise ValueError(f"{name}: expected a {ndim}-D integer array, got "
                         f"{a.dtype} of shape {a.shape}")
    return a.astype(np.int64)


def _offsets(x, name):
    a = _host_ints(x, name)
    if a.size == 0 or a[0] != 0 or np.any(np.diff(a) < 0):
        raise ValueError(f"{name}: expected non-decreasing offsets starting "
                         f"at 0 (batch + 1 entries), got {_show(a)}")
    return a


def _ndim(x):
    return x.dim() if is_torch(x) else np.ndim(x)


def _check_within(kv_start, n, seqlens_k, name):
    bad = np.nonzero((kv_start < 0) | (kv_start + n > seqlens_k))[0]
    if bad.size:
        b = int(bad[0])
        raise ValueError(f"{name}: sequence {b}'s shard [{kv_start[b]}, "
                         f"{kv_start[b] + n[b]}) is not within its "
                         f"seqlens_k = {seqlens_k[b]} keys")


def _per_sequence(x, name, batch):
    a = _host_ints(x, name)
    if a.size != batch:
        raise ValueError(f"{name}: expected {batch} values (one per "
                         f"sequence), got {a.size}")
    return a


def _group_info(group):
    """(rank, world size) of this process in `group`."""
    if not dist.is_available() or not dist.is_initialized():
        raise ValueError("group: torch.distributed is not initialized (call "
                         "torch.distributed.init_process_group first)")
    rank = dist.get_rank(group)
    if rank < 0:
        raise ValueError("group: this process is not a member of the group")
    return rank, dist.get_world_size(group)


def _collective_device(group):
    """Where small host metadata travels: a CUDA tensor for NCCL-only
    groups, else the CPU (gloo)."""
    if dist.get_backend(group) == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _all_gather_ints(values, group):
    """Every rank's int64 vector (all of one length) as [world, len]."""
    rank, world = _group_info(group)
    dev = _collective_device(group)
    mine = torch.as_tensor(values, dtype=torch.int64).to(dev)
    got = torch.empty(world * mine.numel(), dtype=torch.int64, device=dev)
    dist.all_gather_into_tensor(got, mine, group=group)
    return got.view(world, -1).cpu().numpy()


def _float_view(x, name, dtypes=FLOATS):
    v = view(x, name)
    if v.ndim != 3:
        raise ValueError(f"{name}: expected a rank-3 array [tokens, heads, "
                         f"head_dim], got shape {tuple(v.shape)}")
    if v.dtype not in dtypes:
        raise ValueError(f"{name}: expected one of {', '.join(dtypes)}, got "
                         f"{v.dtype}")
    return v


def _check_qkv(q, k, v, k_name="k_shard", v_name="v_shard"):
    """q [tokens, Hq, D] and this rank's k/v [keys, Hk, D] of q's dtype."""
    qv = _float_view(q, "q")
    kv = _float_view(k, k_name)
    vv = _float_view(v, v_name)
    if tuple(vv.shape) != tuple(kv.shape):
        raise ValueError(f"{v_name}: expected the shape of {k_name} "
                         f"{tuple(kv.shape)}, got {tuple(vv.shape)}")
    for name, t in ((k_name, kv), (v_name, vv)):
        if t.dtype != qv.dtype:
            raise ValueError(f"{name}: expected q's dtype {qv.dtype}, got "
                             f"{t.dtype}")
    if kv.shape[2] != qv.shape[2]:
        raise ValueError(f"{k_name}: head dim {kv.shape[2]} differs from q's "
                         f"{qv.shape[2]}")
    if kv.shape[1] < 1 or qv.shape[1] % kv.shape[1]:
        raise ValueError(f"{k_name}: {kv.shape[1]} KV heads do not divide "
                         f"q's {qv.shape[1]} heads")
    return qv, kv


def _normalized(dev):
    """A device with its CUDA index (so that "cuda" and "cuda:0" compare
    equal)."""
    dev = torch.device(dev)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return dev


def _device(x):
    return _normalized(x.device if is_torch(x) else "cpu")


# ---------------------------------------------------------------------------
# Causal shards
# ---------------------------------------------------------------------------

def _interleave(*parts):
    """Offsets (int32) of the sequences parts[0][0], parts[1][0], ...,
    parts[0][1], parts[1][1], ...: each sequence cut into len(parts)."""
    lens = np.stack(parts, axis=1).reshape(-1)
    return np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)


def shard_calls(cu_seqlens_q, cu_seqlens_k_shard, kv_start, seqlens_k):
    """The causal flash calls of one rank: a list of (cu_seqlens_q,
    cu_seqlens_k, causal) int32 offset arrays over the same q and k_shard
    whose outputs, added row by row, are the rank's partial (each row is
    non-empty in at most one call).

    Sequence b has Lq queries at absolute positions Lk - Lq + i (Lk =
    seqlens_k[b]) and the rank holds its keys [k0, k0 + n) (k0 =
    kv_start[b]). Query i sees local key j iff k0 + j <= Lk - Lq + i, i.e.
    j <= i + c with c = Lk - Lq - k0; flash's own causal mask over Lq' rows
    and n' keys is j <= i + n' - Lq'. So the rows i < split = clamp(n - c,
    0, Lq), which see part of the shard (or none of it), run causal over the
    first n2 = split + c keys (n' - Lq' = c: the same mask, and rows with
    i + c < 0 see nothing, so lse -inf and weight 0); the rows from split on
    see all n keys and run non-causal. In each call a sequence becomes
    several: the rows it computes with their keys, the rows the other call
    computes with no key (0, lse -inf), and in the causal one the rest of
    the shard with no query."""
    cq = np.asarray(cu_seqlens_q, np.int64)
    ck = np.asarray(cu_seqlens_k_shard, np.int64)
    lq, n = np.diff(cq), np.diff(ck)
    c = np.asarray(seqlens_k, np.int64) - lq - np.asarray(kv_start, np.int64)
    split = np.clip(n - c, 0, lq)
    n2 = np.where(split > 0, split + c, 0)
    none, calls = np.zeros_like(n), []
    if split.any():
        calls.append((_interleave(split, lq - split, none),
                      _interleave(n2, none, n - n2), True))
    if (split < lq).any() or not calls:
        calls.append((_interleave(split, lq - split),
                      _interleave(none, n), False))
    return calls


def _rank_order_positions(cq, n, group):
    """kv_start and seqlens_k when every rank holds one contiguous range of
    each sequence, ranks in order: gathers every rank's cu_seqlens_q (which
    must agree) and shard lengths."""
    sizes = _all_gather_ints([cq.size], group)[:, 0]
    if (sizes != sizes[0]).any():
        raise ValueError(f"cu_seqlens_q: ranks disagree on the batch size "
                         f"(entries per rank: {sizes.tolist()}); every rank "
                         f"holds all the queries")
    got = _all_gather_ints(np.concatenate([cq, n]), group)
    all_cq, all_n = got[:, :cq.size], got[:, cq.size:]
    bad = np.nonzero((all_cq != all_cq[0]).any(axis=1))[0]
    if bad.size:
        raise ValueError(f"cu_seqlens_q: rank {int(bad[0])} has "
                         f"{_show(all_cq[bad[0]])}, rank 0 has "
                         f"{_show(all_cq[0])}; every rank holds all the "
                         f"queries")
    rank, _ = _group_info(group)
    return all_n[:rank].sum(axis=0), all_n.sum(axis=0)


class FlashPlan:
    """The host-side part of context_parallel_flash for one batch layout:
    build it once (outside a CUDA graph), then call it.

    cu_seqlens_q: [batch + 1] offsets of q's rows (the same on every rank);
    cu_seqlens_k_shard: [batch + 1] offsets of this rank's keys.
    Non-causal plans take them as they are (host or device) and read
    nothing. Causal plans read both on the host (a CUDA tensor is copied,
    which synchronizes) with each sequence's absolute key positions:
    kv_start [batch] (this rank's first key of each sequence) and seqlens_k
    [batch] (the sequence's keys over all ranks). Without them the ranks
    hold contiguous ranges in rank order, and the plan gathers every rank's
    shard lengths: then every rank of the group must build it together.
    A rank holding several key ranges of each sequence (split_keys'
    zigzag) passes cu_seqlens_k_shard [pieces, batch + 1] (piece p's rows
    after piece p - 1's in k_shard) and, causal, kv_start [pieces, batch]:
    each piece is planned as a shard, and all of them merge in one
    merge_states with the other ranks'.
    `device`: where q will be (for the plan's index arrays); default: that
    of cu_seqlens_q when a tensor, else the CPU."""

    def __init__(self, cu_seqlens_q, cu_seqlens_k_shard, *, causal=False,
                 kv_start=None, seqlens_k=None, group=None, device=None):
        self.group = group
        self.causal = bool(causal)
        self.device = _device(cu_seqlens_q) if device is None else \
            _normalized(device)
        if _ndim(cu_seqlens_k_shard) == 2:
            self._plan_pieces(cu_seqlens_q, cu_seqlens_k_shard, kv_start,
                              seqlens_k)
            return
        if not self.causal:
            host = not is_torch(cu_seqlens_q) or cu_seqlens_q.is_cpu
            host = host and (not is_torch(cu_seqlens_k_shard) or
                             cu_seqlens_k_shard.is_cpu)
            if host:
                cq = _offsets(cu_seqlens_q, "cu_seqlens_q")
                ck = _offsets(cu_seqlens_k_shard, "cu_seqlens_k_shard")
                self._check_batch(cq, ck)
                self.tokens = (int(cq[-1]), int(ck[-1]))
                self.pieces = [(0, [(cq.astype(np.int32),
                                     ck.astype(np.int32), False)])]
                self._to_device()
            else:
                # Device offsets are used as they are: nothing is read on
                # the host, so nothing synchronizes.
                self.tokens = None
                self.pieces = [(0, [(cu_seqlens_q, cu_seqlens_k_shard,
                                     False)])]
            return
        cq = _offsets(cu_seqlens_q, "cu_seqlens_q")
        ck = _offsets(cu_seqlens_k_shard, "cu_seqlens_k_shard")
        self._check_batch(cq, ck)
        batch, n = cq.size - 1, np.diff(ck)
        if (kv_start is None) != (seqlens_k is None):
            missing = "kv_start" if kv_start is None else "seqlens_k"
            raise ValueError(f"{missing}: give kv_start and seqlens_k "
                             f"together, or neither (ranks in order)")
        if kv_start is None:
            kv_start, seqlens_k = _rank_order_positions(cq, n, group)
        else:
            kv_start = _per_sequence(kv_start, "kv_start", batch)
            seqlens_k = _per_sequence(seqlens_k, "seqlens_k", batch)
            _check_within(kv_start, n, seqlens_k, "kv_start")
        self.kv_start, self.seqlens_k = kv_start, seqlens_k
        self.tokens = (int(cq[-1]), int(ck[-1]))
        self.pieces = [(0, shard_calls(cq, ck, kv_start, seqlens_k))]
        self._to_device()

    def _plan_pieces(self, cu_seqlens_q, cu_seqlens_k_shard, kv_start,
                     seqlens_k):
        """Several key ranges of each sequence on this rank (split_keys'
        zigzag layout): cu_seqlens_k_shard [pieces, batch + 1], piece p's
        rows following piece p - 1's, and with causal kv_start [pieces,
        batch]. Each piece is planned as a shard of its own."""
        cq = _offsets(cu_seqlens_q, "cu_seqlens_q")
        ck = _host_ints(cu_seqlens_k_shard, "cu_seqlens_k_shard", 2)
        at = 0
        for p, row in enumerate(ck):
            if row[0] != at or np.any(np.diff(row) < 0):
                raise ValueError(
                    f"cu_seqlens_k_shard: piece {p}'s offsets must be "
                    f"non-decreasing and start where piece {p - 1}'s end "
                    f"({at}), got {_show(row)}" if p else
                    f"cu_seqlens_k_shard: piece 0's offsets must be "
                    f"non-decreasing and start at 0, got {_show(row)}")
            at = row[-1]
            self._check_batch(cq, row)
        batch = cq.size - 1
        self.tokens = (int(cq[-1]), int(at))
        if not self.causal:
            self.pieces = [(int(row[0]), [(cq.astype(np.int32),
                                           (row - row[0]).astype(np.int32),
                                           False)]) for row in ck]
            self._to_device()
            return
        if kv_start is None or seqlens_k is None:
            raise ValueError("kv_start: a causal plan over several pieces "
                             "per sequence needs kv_start [pieces, batch] "
                             "and seqlens_k [batch]")
        starts = _host_ints(kv_start, "kv_start", 2)
        if starts.shape != (ck.shape[0], batch):
            raise ValueError(f"kv_start: expected shape {(ck.shape[0], batch)}"
                             f" (one per piece and sequence), got "
                             f"{starts.shape}")
        seqlens_k = _per_sequence(seqlens_k, "seqlens_k", batch)
        self.pieces = []
        for p, row in enumerate(ck):
            n = np.diff(row)
            _check_within(starts[p], n, seqlens_k, f"kv_start[{p}]")
            self.pieces.append((int(row[0]), shard_calls(
                cq, row - row[0], starts[p], seqlens_k)))
        self.kv_start, self.seqlens_k = starts, seqlens_k
        self._to_device()

    @staticmethod
    def _check_batch(cq, ck):
        if cq.size != ck.size:
            raise ValueError(f"cu_seqlens_k_shard: {ck.size - 1} sequences, "
                             f"but cu_seqlens_q has {cq.size - 1}")

    def _to_device(self):
        """The planned offsets as int32 arrays where q lives (numpy on the
        CPU, a one-time copy on a GPU)."""
        if self.device.type == "cpu":
            return
        self.pieces = [(row0, [(torch.as_tensor(a, device=self.device),
                                torch.as_tensor(b, device=self.device),
                                causal) for a, b, causal in calls])
                       for row0, calls in self.pieces]

    def partial(self, q, k_shard, v_shard, *, scale):
        """This rank's share alone, no communication: (partial [tokens,
        q_heads, D] in q's dtype, lse [tokens, q_heads] float32), torch
        tensors on q's device; with several pieces per sequence, one of
        each per piece ([pieces, tokens, q_heads, D], [pieces, tokens,
        q_heads]), which merge_partials takes as they are. Rows that see
        none of a shard are 0 with lse -inf."""
        qv, kv = _check_qkv(q, k_shard, v_shard)
        if _device(q) != self.device:
            raise ValueError(f"q: on {_device(q)}, but the plan was built "
                             f"for {self.device}")
        if self.tokens is not None:
            for name, t, have in (("q", self.tokens[0], qv.shape[0]),
                                  ("k_shard", self.tokens[1], kv.shape[0])):
                if t > have:
                    raise ValueError(f"{name}: the offsets address {t} rows, "
                                     f"it has {have}")
        dtype = _TORCH_FLOATS[qv.dtype]
        shape = tuple(qv.shape)
        many = len(self.pieces) > 1
        lead = (len(self.pieces),) if many else ()
        part = torch.empty(lead + shape, dtype=dtype, device=self.device)
        lse = torch.empty(lead + shape[:2], dtype=torch.float32,
                          device=self.device)
        for p, (row0, calls) in enumerate(self.pieces):
            k_p, v_p = (k_shard, v_shard) if row0 == 0 else \
                (k_shard[row0:], v_shard[row0:])
            self._run_calls(calls, q, k_p, v_p, part[p] if many else part,
                            lse[p] if many else lse, scale)
        return part, lse

    @staticmethod
    def _run_calls(calls, q, k, v, part, lse, scale):
        """One piece's flash calls, summed into part/lse."""
        for i, (cu_q, cu_k, causal) in enumerate(calls):
            if i == 0:
                o, m = part, lse
            else:
                o, m = torch.empty_like(part), torch.empty_like(lse)
            ops.flash(q, k, v, cu_q, cu_k, o, scale=scale, causal=causal,
                      lse=m)
            if i:
                # Disjoint rows: the other call left exact zeros and -inf
                # there, so the sum and the maximum are exact.
                part.add_(o)
                torch.maximum(lse, m, out=lse)

    def __call__(self, q, k_shard, v_shard, out, *, scale, sinks=None,
                 lse=None):
        """Runs the plan: partial, all-gather, merge into `out` [tokens,
        q_heads, D] (any of merge_states' output types). sinks [q_heads]
        f32 enter the merge once; lse [tokens, q_heads] f32 receives the
        merged log-sum-exp (sinks included)."""
        part, part_lse = self.partial(q, k_shard, v_shard, scale=scale)
        if part.dim() == 4:
            # This rank's pieces merged first: half the exchange of sending
            # each piece (one extra rounding to q's dtype).
            part, part_lse = merge_pieces(part, part_lse)
        merge_partials(part, part_lse, out, sinks=sinks, lse=lse,
                       group=self.group)


def context_parallel_flash(q, k_shard, v_shard, cu_seqlens_q,
                           cu_seqlens_k_shard, out, *, scale, causal=False,
                           kv_start=None, seqlens_k=None, sinks=None,
                           lse=None, group=None):
    """Attention of all queries `q` over keys sharded across the group's
    ranks; `out` (and `lse`) receive the full result on every rank. See
    FlashPlan for the arguments; with causal and no kv_start/seqlens_k, the
    call is collective before the all-gather too (shard lengths)."""
    plan = FlashPlan(cu_seqlens_q, cu_seqlens_k_shard, causal=causal,
                     kv_start=kv_start, seqlens_k=seqlens_k, group=group,
                     device=_device(q))
    plan(q, k_shard, v_shard, out, scale=scale, sinks=sinks, lse=lse)


# ---------------------------------------------------------------------------
# Paged decode
# ---------------------------------------------------------------------------

_DECODE_OFFSETS = {}   # (batch, device) -> arange(batch + 1) int32


def _decode_offsets(batch, device):
    key = (batch, str(device))
    cu = _DECODE_OFFSETS.get(key)
    if cu is None:
        if len(_DECODE_OFFSETS) > 256:
            _DECODE_OFFSETS.clear()
        cu = torch.arange(batch + 1, dtype=torch.int32, device=device)
        _DECODE_OFFSETS[key] = cu
    return cu


def context_parallel_decode(q, k_cache, v_cache, block_table,
                            seqused_k_shard, out, *, scale, sinks=None,
                            lse=None, softcap=None, q_descale=None,
                            k_descale=None, v_descale=None, group=None,
                            num_segments=None):
    """One query per sequence (q [batch, q_heads, D], the same on every
    rank) over a paged KV cache spread across ranks: this rank's cache
    (k_cache/v_cache [num_blocks, page, kv_heads, D]), block_table and
    seqused_k_shard [batch] i32 hold *its* keys of each sequence, in any
    order and any split (a decode query sees all of its keys, so positions
    do not matter); a rank may hold none of a sequence (seqused 0). Runs
    ops.unified with lse on the local pages, then all-gathers and merges
    into out [batch, q_heads, D] on every rank.

    num_segments (int >= 2): split each rank's walk of a sequence into
    that many segments (split-KV, merged in the same launch), so that a
    batch of few sequences fills the GPU (one program per sequence and KV
    head otherwise: 8 programs for one sequence of 8 KV heads);
    attn_mlir.vllm.plan_segments(1, longest shard, page size, batch, KV
    heads) gives the count vLLM's drop-in would use. The rank's lse then
    comes from the fused merge.

    Not supported here: position-dependent features (sliding window, ALiBi,
    chunked or R-SWA masks, bidirectional ranges), which would need each
    key's absolute position; prefill over paged shards (use
    context_parallel_flash on gathered keys)."""
    qv = _float_view(q, "q")
    device = _device(q)
    dtype = _TORCH_FLOATS[qv.dtype]
    shape = tuple(qv.shape)
    if num_segments is not None and (type(num_segments) is not int or
                                     num_segments < 2):
        raise ValueError(f"num_segments: expected an int >= 2 (or None "
                         f"for one pass), got {num_segments!r}")
    _check_merged(out, lse, shape)
    _, world = _group_info(group)
    ws = _decode_workspace(device, dtype, shape, world, num_segments)
    cu = _decode_offsets(shape[0], device)
    common = dict(scale=scale, softcap=softcap, q_descale=q_descale,
                  k_descale=k_descale, v_descale=v_descale)
    # The rank's partial and lse go straight into one buffer, so that one
    # all-gather exchanges both (bench/results/2026-11-29-h200-session21.md).
    if num_segments is None:
        ops.unified(q, k_cache, v_cache, block_table, cu, seqused_k_shard,
                    ws.part, lse=ws.part_lse, **common)
    else:
        ops.unified(q, k_cache, v_cache, block_table, cu, seqused_k_shard,
                    ws.segs, segment_max=ws.seg_max, segment_sum=ws.seg_sum,
                    merged_out=ws.part, merge_counters=ws.counters,
                    lse=ws.part_lse, **common)
    dist.all_gather_into_tensor(ws.gathered, ws.packed, group=group)
    _merge_gathered(ws.gathered_part, ws.gathered_lse, out, sinks, lse)


class _DecodeWorkspace:
    """context_parallel_decode's buffers for one shape, reused call after
    call (in stream order, as vLLM's workspaces are; a CUDA graph keeps
    their addresses): `packed` holds the rank's partial [batch, q_heads,
    D] (q's dtype) and then its lse [batch, q_heads] f32, each 16-byte
    aligned; `gathered` [world * packed bytes] every rank's, viewed as
    [world, batch, q_heads, D] and [world, batch, q_heads]; the split-KV
    segments and merge counters."""

    def __init__(self, device, dtype, shape, world, segments):
        batch, heads, dim = shape
        size = torch.empty((), dtype=dtype).element_size()
        part_bytes = batch * heads * dim * size
        lse_at = -(-part_bytes // 16) * 16
        lse_bytes = batch * heads * 4
        total = -(-(lse_at + lse_bytes) // 16) * 16
        u8 = torch.uint8
        self.packed = torch.empty(total, dtype=u8, device=device)
        self.part = self.packed[:part_bytes].view(dtype).view(shape)
        self.part_lse = self.packed[lse_at:lse_at + lse_bytes].view(
            torch.float32).view(batch, heads)
        # (1-D, as gloo's all-gather wants it.)
        self.gathered = torch.empty(world * total, dtype=u8, device=device)
        rows = self.gathered.view(world, total)
        self.gathered_part = rows[:, :part_bytes].view(dtype).view(
            world, batch, heads, dim)
        self.gathered_lse = rows[:, lse_at:lse_at + lse_bytes].view(
            torch.float32).view(world, batch, heads)
        if segments:
            self.segs = torch.empty((batch, heads, segments, dim),
                                    dtype=torch.float32, device=device)
            self.seg_max = torch.empty((batch, heads, segments),
                                       dtype=torch.float32, device=device)
            self.seg_sum = torch.empty_like(self.seg_max)
            # (The drop-in's: every launch leaves them zero.)
            from attn_mlir import vllm
            self.counters = vllm._merge_counters(device, batch, heads)


_DECODE_WORKSPACES = {}


def _decode_workspace(device, dtype, shape, world, segments):
    key = (str(device), dtype, shape, world, segments)
    ws = _DECODE_WORKSPACES.get(key)
    if ws is None:
        if len(_DECODE_WORKSPACES) > 64:
            _DECODE_WORKSPACES.clear()
        ws = _DecodeWorkspace(device, dtype, shape, world, segments)
        _DECODE_WORKSPACES[key] = ws
    return ws


# ---------------------------------------------------------------------------
# Exchange and merge
# ---------------------------------------------------------------------------

def merge_pieces(partial, partial_lse):
    """One rank's pieces ([pieces, tokens, q_heads, D], [pieces, tokens,
    q_heads], as FlashPlan.partial returns them) merged on the rank:
    (partial [tokens, q_heads, D] in the pieces' dtype, lse [tokens,
    q_heads] f32), no communication."""
    out = torch.empty(partial.shape[1:], dtype=partial.dtype,
                      device=partial.device)
    ops.merge_states(partial.permute(1, 2, 0, 3), out,
                     segment_lse=partial_lse.permute(1, 2, 0))
    return out, torch.logsumexp(partial_lse, dim=0)


def merge_partials(partial, partial_lse, out, *, sinks=None, lse=None,
                   group=None):
    """All-gathers every rank's partial [tokens, q_heads, D] (torch, f32,
    f16 or bf16) and partial_lse [tokens, q_heads] (torch f32) and merges
    them with ops.merge_states(segment_lse=...) into out [tokens, q_heads,
    D] on every rank. A rank with several pieces passes them stacked
    ([pieces, tokens, q_heads, D] and [pieces, tokens, q_heads], the same
    count on every rank). Every rank passes the same shapes. sinks
    [q_heads] f32: the attention sinks, applied once here. lse: [tokens,
    q_heads] f32 output of the merged log-sum-exp (sinks included)."""
    for name, t in (("partial", partial), ("partial_lse", partial_lse)):
        if not is_torch(t):
            raise ValueError(f"{name}: expected a torch tensor (it is "
                             f"exchanged with torch.distributed), got "
                             f"{type(t).__name__}")
    if partial.dim() not in (3, 4) or \
            partial.dtype not in _TORCH_FLOATS.values():
        raise ValueError(f"partial: expected [tokens, q_heads, head_dim] (or "
                         f"[pieces, tokens, q_heads, head_dim]) f32, f16 or "
                         f"bf16, got {partial.dtype} of shape "
                         f"{tuple(partial.shape)}")
    pieces = partial.shape[0] if partial.dim() == 4 else 1
    tokens, heads, dim = partial.shape[-3:]
    want = ((pieces,) if partial.dim() == 4 else ()) + (tokens, heads)
    if partial_lse.dtype != torch.float32 or \
            tuple(partial_lse.shape) != want:
        raise ValueError(f"partial_lse: expected float32 {list(want)}, got "
                         f"{partial_lse.dtype} {list(partial_lse.shape)}")
    _check_merged(out, lse, (tokens, heads, dim))
    _, world = _group_info(group)
    device = partial.device
    segments = world * pieces
    # Gathered along dim 0 ([world * pieces * tokens, ...]): the form both
    # NCCL and gloo take. The partials travel in their own precision.
    gathered = torch.empty((segments * tokens, heads, dim),
                           dtype=partial.dtype, device=device)
    dist.all_gather_into_tensor(gathered, partial.contiguous().view(
        pieces * tokens, heads, dim), group=group)
    lses = torch.empty((segments * tokens, heads), dtype=torch.float32,
                       device=device)
    dist.all_gather_into_tensor(lses, partial_lse.contiguous().view(
        pieces * tokens, heads), group=group)
    _merge_gathered(gathered.view(segments, tokens, heads, dim),
                    lses.view(segments, tokens, heads), out, sinks, lse)


def _check_merged(out, lse, shape):
    """out must be [tokens, q_heads, D] (`shape`, q's) and lse, if given,
    float32 [tokens, q_heads]."""
    ov = view(out, "out")
    if tuple(ov.shape) != tuple(shape):
        raise ValueError(f"out: expected shape {tuple(shape)} (q's), got "
                         f"{tuple(ov.shape)}")
    if lse is not None:
        lv = view(lse, "lse")
        if lv.dtype != "f32" or tuple(lv.shape) != tuple(shape[:2]):
            raise ValueError(f"lse: expected float32 {list(shape[:2])}, got "
                             f"{lv.dtype} {list(lv.shape)}")


def _merge_gathered(partials, lses, out, sinks, lse):
    """Merges the gathered partials [segments, tokens, q_heads, D] and
    lses [segments, tokens, q_heads] into out (and lse, when given)."""
    # Segment s of merge_states is row s of the gathered views (strided
    # views, no copy).
    ops.merge_states(partials.permute(1, 2, 0, 3), out,
                     segment_lse=lses.permute(1, 2, 0), sinks=sinks)
    if lse is not None:
        total = torch.logsumexp(lses, dim=0)
        if sinks is not None:
            s = torch.as_tensor(sinks, dtype=torch.float32,
                                device=lses.device)
            total = torch.logaddexp(total, s.view(1, -1))
        if is_torch(lse):
            lse.copy_(total)
        else:
            np.copyto(lse, total.cpu().numpy())


# ---------------------------------------------------------------------------
# Sharding helper
# ---------------------------------------------------------------------------

def split_keys(cu_seqlens_k, world_size, rank, weights=None, zigzag=False):
    """Rank `rank`'s keys when each sequence is cut into `world_size`
    contiguous ranges in rank order, of sizes proportional to `weights`
    (non-negative ints, one per rank; default equal; a 0 gives that rank an
    empty shard). Returns numpy (rows, cu_seqlens_k_shard, kv_start,
    seqlens_k): k_shard = k[rows], and the positions FlashPlan takes.

    zigzag: each sequence is cut into 2 * world_size equal chunks and rank
    r holds chunks r and 2 * world_size - 1 - r, which gives every rank the
    same causal work. Then cu_seqlens_k_shard is [2, batch + 1] and
    kv_start [2, batch] (one row per chunk; rows holds the first chunk of
    every sequence, then the second), which FlashPlan takes as pieces."""
    ck = _offsets(cu_seqlens_k, "cu_seqlens_k")
    world_size = ops.check_int(world_size, "world_size")
    if world_size < 1:
        raise ValueError(f"world_size: must be >= 1, got {world_size}")
    rank = ops.check_int(rank, "rank")
    if not 0 <= rank < world_size:
        raise ValueError(f"rank: must be in [0, {world_size}), got {rank}")
    lens = np.diff(ck)
    if zigzag:
        if weights is not None:
            raise ValueError("weights: zigzag chunks are equal; give "
                             "weights or zigzag, not both")
        chunks = 2 * world_size
        bounds = lens[:, None] * np.arange(chunks + 1)[None, :] // chunks
        picked = (rank, chunks - 1 - rank)
        rows, cu, starts = [], [], []
        at = 0
        for c in picked:
            lo, hi = bounds[:, c], bounds[:, c + 1]
            rows += [np.arange(ck[b] + lo[b], ck[b] + hi[b])
                     for b in range(lens.size)]
            cu.append(at + np.concatenate([[0], np.cumsum(hi - lo)]))
            at = cu[-1][-1]
            starts.append(lo)
        rows = np.concatenate(rows + [np.zeros(0, int)])
        return (rows.astype(np.int64), np.stack(cu).astype(np.int32),
                np.stack(starts), lens)
    w = np.ones(world_size, np.int64) if weights is None else \
        _host_ints(weights, "weights")
    if w.size != world_size:
        raise ValueError(f"weights: expected world_size = {world_size} "
                         f"values (one per rank), got {w.size}")
    if (w < 0).any() or w.sum() == 0:
        raise ValueError(f"weights: expected non-negative values, not all "
                         f"0, got {w.tolist()}")
    cum = np.concatenate([[0], np.cumsum(w)])
    bounds = lens[:, None] * cum[None, :] // cum[-1]   # [batch, world + 1]
    lo, hi = bounds[:, rank], bounds[:, rank + 1]
    rows = np.concatenate([np.arange(ck[b] + lo[b], ck[b] + hi[b])
                           for b in range(lens.size)] + [np.zeros(0, int)])
    cu = np.concatenate([[0], np.cumsum(hi - lo)]).astype(np.int32)
    return rows.astype(np.int64), cu, lo, lens
