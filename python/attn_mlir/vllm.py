"""Drop-in replacements for vLLM's four Triton attention entry points.

Same names, argument order and semantics as the seeds (docs/semantics.md
says exactly what each computes). Arguments are numpy arrays (bf16/fp8 as
ml_dtypes; fp8 caches may also be uint8 storage), torch CPU tensors, or torch
CUDA tensors. Every argument is checked before any kernel runs; a bad one
raises ValueError naming it. Torch calls go through
`torch.ops.attn_mlir.<entry point>` (`attn_mlir.torch_ops`): torch.compile
traces them into its graphs.

On CUDA the kernels run on the current stream with no host synchronization
and no allocation except outputs the seed also allocates and a cached
split-KV workspace, so calls can be captured in CUDA graphs. Index tensors
(offsets, sequence lengths, block tables, sparse layouts) must then be int32
tensors on q's device; their shapes and dtypes are checked, but reading their
values would synchronize, so their contents are trusted (as vLLM's own
kernels do) unless ATTN_MLIR_VALIDATE=1, which checks them on the host too.
The same holds for scales in CUDA tensors: finite and non-zero is a
precondition, checked only under ATTN_MLIR_VALIDATE (host floats always are;
see `attn_mlir.ops` for the checks every op makes).
"""

import functools
import math

import numpy as np

from . import _gpu, _preconditions, _replay, ops
from ._abi import (FLOATS, FP8, NUMPY_DTYPES, checking_metadata, device_of,
                   host_values, is_torch, validating, view)
from .ops import check_head_dim, check_int, check_real, check_scale

# ---------------------------------------------------------------------------
# Argument checks
# ---------------------------------------------------------------------------


def _rank(v, ndim, layout):
    if v.ndim != ndim:
        raise ValueError(f"{v.name}: expected a rank-{ndim} array {layout}, got "
                         f"shape {v.shape}")


def _dtype(v, allowed):
    if v.dtype not in allowed:
        raise ValueError(f"{v.name}: dtype {v.dtype} is not one of "
                         f"{', '.join(allowed)}")


def _same(a, b, what):
    if a != b:
        raise ValueError(what)


_validating = validating


def _host_scale(x, name, required=False, allow_zero=False):
    """A scale given on the host, checked under its vLLM name (finite and
    non-zero in f32). `ops` checks every scale again under its operand name,
    those in CUDA tensors only when validating; fake tensors (torch.compile)
    have no value to check."""
    if (x is not None or required) and device_of(x) is None and \
            not (is_torch(x) and checking_metadata()):
        check_scale(x, name, allow_zero)


def _descale(x, name, batch, kv_heads):
    """A unified descale: one value, or [num_seqs, num_kv_heads] of any
    strides (vLLM's `layer._k_scale.expand(...)`, FlashAttention-3's
    per-(sequence, head) scales); `ops` checks the values."""
    if getattr(x, "ndim", 0) != 2:
        _host_scale(x, name)
    elif tuple(x.shape) != (batch, kv_heads):
        raise ValueError(f"{name}: expected one value or [num_seqs, "
                         f"num_kv_heads] = [{batch}, {kv_heads}], got shape "
                         f"{tuple(x.shape)}")


def _ranks(x, name, device, ndim):
    """An int32 operand of rank `ndim` (ranges, lengths), host or device."""
    if device is not None:
        return _device_ints(x, name, device, ndim)
    arr = _ints(x, name)
    if arr.ndim != ndim:
        raise ValueError(f"{name}: expected rank {ndim}, got shape {arr.shape}")
    return arr


def _segment_buffers(output, seg_max, seg_sum, tokens, heads, segments, d,
                     device):
    """The caller's split-KV buffers (vLLM's softmax_segm_output [>= tokens,
    heads, segments, >= head_dim] and softmax_segm_max/_expsum [>= tokens,
    heads, segments], f32), sliced to this call: nothing is allocated, so a
    CUDA graph replays with them."""
    parts = []
    for x, name, dims in ((output, "softmax_segm_output", 4),
                          (seg_max, "softmax_segm_max", 3),
                          (seg_sum, "softmax_segm_expsum", 3)):
        if device_of(x) != device:
            raise ValueError(f"{name}: must be on {device or 'the host'}")
        v = view(x, name)
        if v.dtype != "f32" or v.ndim != dims:
            raise ValueError(f"{name}: expected a rank-{dims} float32 buffer, "
                             f"got {v.dtype} of shape {v.shape}")
        need = (tokens, heads, segments, d)[:dims]
        if (v.shape[0] < tokens or v.shape[1] != heads or
                v.shape[2] < segments or (dims == 4 and v.shape[3] < d)):
            raise ValueError(f"{name}: shape {v.shape} cannot hold {need} "
                             f"(tokens, heads, segments[, head_dim])")
        parts.append(x[:tokens, :, :segments, :d] if dims == 4
                     else x[:tokens, :, :segments])
    return parts


def _device_ints(x, name, device, ndim, length=None):
    """An int32 index tensor on the GPU `device`, passed to the kernel as it
    is (see the module docstring)."""
    if x is None:
        raise ValueError(f"{name}: expected an int32 tensor on {device}, got None")
    if device_of(x) != device:
        where = device_of(x) or "the host"
        raise ValueError(f"{name}: expected an int32 tensor on {device} (q's "
                         f"device), got one on {where}")
    if str(x.dtype) != "torch.int32":
        raise ValueError(f"{name}: expected int32 on the GPU, got {x.dtype} "
                         f"(converting would allocate inside the call)")
    if x.ndim != ndim or (length is not None and x.shape[0] != length):
        want = f"{length} entries" if length is not None else f"rank {ndim}"
        raise ValueError(f"{name}: expected {want}, got shape {tuple(x.shape)}")
    return x


def _device_floats(x, name, device, heads):
    """A per-head float32 tensor on the GPU, passed through."""
    if x is None:
        return None
    if device_of(x) != device or str(x.dtype) != "torch.float32" or \
            tuple(x.shape) != (heads,):
        raise ValueError(f"{name}: expected a float32 tensor of shape "
                         f"({heads},) on {device}, got {getattr(x, 'dtype', type(x))} "
                         f"{tuple(getattr(x, 'shape', ()))} on "
                         f"{device_of(x) or 'the host'}")
    return x


# Split-KV workspace and the fused merge's arrival counters, per device.
# A buffer outgrown is kept, never freed: a CUDA graph captured before the
# growth still writes into it at every replay (freed, its memory would go
# to other tensors). Buffers grow to at least twice their size, so what is
# kept stays within the size of the current one. Calls on one device share
# them: one stream at a time (README, docs/vllm_backend.md).
_WORKSPACES = {}
_MERGE_COUNTERS = {}
_OUTGROWN = []
MIN_MERGE_COUNTERS = 1 << 16   # 256 KB: 4096 tokens x 16 heads


def _cached_buffer(cache, device, need, new):
    """cache[device] when it holds `need` elements, else a new buffer of at
    least max(need, twice the old) made by new(n); the old one is kept."""
    buf = cache.get(device)
    if buf is not None and buf.numel() >= need and not checking_metadata():
        return buf
    grown = max(need, 2 * buf.numel() if buf is not None else 0, 1)
    fresh = new(grown)
    if not checking_metadata():   # never cache a fake tensor
        if buf is not None:
            _OUTGROWN.append(buf)
        cache[device] = fresh
    return fresh


def _workspace(device, shapes):
    """float32 tensors of `shapes` carved from one cached buffer."""
    import torch
    need = sum(int(np.prod(s)) for s in shapes)
    buf = _cached_buffer(_WORKSPACES, device, need, lambda n: torch.empty(
        n, dtype=torch.float32, device=device))
    out, at = [], 0
    for s in shapes:
        n = int(np.prod(s))
        out.append(buf[at:at + n].view(s))
        at += n
    return out


def _merge_counters(device, tokens, heads):
    """[tokens, heads] int32 zeros on `device` (None: the host, a fresh
    array). Every completed kernel leaves the entries it used zero again,
    so one buffer serves every call (and a CUDA graph's replays)."""
    if device is None:
        return np.zeros((tokens, heads), np.int32)
    import torch
    need = tokens * heads
    buf = _cached_buffer(_MERGE_COUNTERS, device, need, lambda n: torch.zeros(
        max(n, MIN_MERGE_COUNTERS), dtype=torch.int32, device=device))
    return buf[:need].view(tokens, heads)


def _ints(x, name, length=None):
    """A 1-D or 2-D integer array as a contiguous int32 numpy array."""
    if x is None:
        raise ValueError(f"{name}: expected an integer array, got None")
    vals = np.asarray(host_values(x, name))
    if vals.dtype.kind not in "iu":
        raise ValueError(f"{name}: expected integers, got dtype {vals.dtype}")
    if length is not None and (vals.ndim != 1 or len(vals) != length):
        raise ValueError(f"{name}: expected {length} entries, got shape "
                         f"{vals.shape}")
    if vals.size and (vals.min() < np.iinfo(np.int32).min or
                      vals.max() > np.iinfo(np.int32).max):
        raise ValueError(f"{name}: values do not fit in int32")
    return np.ascontiguousarray(vals, dtype=np.int32)


def _offsets(x, name, batch, total):
    return _preconditions.check_offsets(_ints(x, name, batch + 1), name, total)


def _per_head(x, name, heads, device=None):
    if device is not None:
        return _device_floats(x, name, device, heads)
    if x is None:
        return None
    if is_torch(x) and checking_metadata():
        # A fake tensor: the shape is checked, the values when the op runs.
        if tuple(x.shape) != (heads,):
            raise ValueError(f"{name}: expected shape ({heads},) (one value "
                             f"per query head), got {tuple(x.shape)}")
        return x.float()
    vals = np.asarray(host_values(x, name), dtype=np.float32)
    if vals.shape != (heads,):
        raise ValueError(f"{name}: expected shape ({heads},) (one value per "
                         f"query head), got {vals.shape}")
    return np.ascontiguousarray(vals)


def _paged_batch(lens, offsets, table, tokens, block_size, num_blocks, dev,
                 *, new_tokens_cached, nouns):
    """Per-sequence key counts, query offsets and block table of a paged
    batch, each given as (value, name): checked host arrays, or on the GPU
    int32 tensors passed through (values checked only when validating).
    The table covers every key when `new_tokens_cached`, else only the
    context before the new tokens; `nouns` name what lens and offsets count
    in the error message."""
    (lens, lens_name), (offsets, offsets_name), (table, table_name) = \
        lens, offsets, table
    if dev is None or _validating():
        host_lens = _ints(lens, lens_name)
        if host_lens.ndim != 1:
            raise ValueError(f"{lens_name}: expected a 1-D array, got "
                             f"{host_lens.shape}")
        host_offsets = _ints(offsets, offsets_name, len(host_lens) + 1)
        host_table = _ints(table, table_name)
        _preconditions.check_paged(
            host_lens, lens_name, host_offsets, offsets_name, host_table,
            table_name, tokens, block_size, num_blocks,
            new_tokens_cached=new_tokens_cached, nouns=nouns)
        if dev is None:
            return host_lens, host_offsets, host_table
    lens = _device_ints(lens, lens_name, dev, 1)
    batch = lens.shape[0]
    offsets = _device_ints(offsets, offsets_name, dev, 1, batch + 1)
    table = _device_ints(table, table_name, dev, 2)
    if table.shape[0] < batch:
        raise ValueError(f"{table_name}: expected [batch, max_blocks], got "
                         f"shape {tuple(table.shape)}")
    return lens, offsets, table


def _dense_qkv(qv, kv_, vv, same_dtype=True):
    """Varlen q [total_q, Hq, D] and k/v [total_k, Hk, D] of one dtype
    (unless `same_dtype` is off: fp8 inputs quantized on load)."""
    if same_dtype:
        _same(kv_.dtype, qv.dtype,
              f"k: dtype {kv_.dtype} differs from q's {qv.dtype}")
        _same(vv.dtype, qv.dtype,
              f"v: dtype {vv.dtype} differs from q's {qv.dtype}")
    _same(kv_.shape, vv.shape, f"v: shape {vv.shape} differs from k's {kv_.shape}")
    hq, d = qv.shape[1], qv.shape[2]
    hk, dk = kv_.shape[1], kv_.shape[2]
    if hk == 0 or hq % hk:
        raise ValueError(f"k: {hk} KV heads must divide the {hq} query heads")
    if dk != d:
        raise ValueError(f"k: head dim {dk} differs from q's {d}")


def _is_fp8_cache_dtype(kv_cache_dtype):
    """vLLM's rule: a cache dtype string selects an fp8 cache exactly when it
    contains "fp8"; every other string ("auto", "float16", "bfloat16",
    "half", "float", ...) is an unquantized cache of the stored dtype."""
    if not isinstance(kv_cache_dtype, str):
        raise ValueError(f"kv_cache_dtype: expected a string, got "
                         f"{kv_cache_dtype!r}")
    return "fp8" in kv_cache_dtype


def _fp8_cache(v, kv_cache_dtype):
    """vLLM's fp8 cache dtype string -> the fp8 element type of `v`."""
    if kv_cache_dtype in ("fp8", "fp8_e4m3"):
        want = "f8E4M3FN"
    elif kv_cache_dtype == "fp8_e5m2":
        want = "f8E5M2"
    else:
        raise ValueError(f"kv_cache_dtype: unsupported fp8 format "
                         f"{kv_cache_dtype!r} (expected 'fp8', 'fp8_e4m3' or "
                         f"'fp8_e5m2')")
    if v.dtype == "u8":
        return v.reinterpret(want)
    if v.dtype != want:
        raise ValueError(f"{v.name}: kv_cache_dtype={kv_cache_dtype!r} needs "
                         f"uint8 or {want} storage, got {v.dtype}")
    return v


def _new_like(x, dtype_name, shape=None):
    shape = tuple(x.shape) if shape is None else shape
    if is_torch(x):
        import torch
        table = {"f32": torch.float32, "f16": torch.float16,
                 "bf16": torch.bfloat16, "f8E4M3FN": torch.float8_e4m3fn,
                 "f8E5M2": torch.float8_e5m2}
        if device_of(x) is not None:  # written in full by the kernel
            return torch.empty(shape, dtype=table[dtype_name], device=x.device)
        return torch.zeros(shape, dtype=table[dtype_name])
    return np.zeros(shape, dtype=NUMPY_DTYPES[dtype_name])


# ---------------------------------------------------------------------------
# prefix prefill
# ---------------------------------------------------------------------------


def _context_attention_fwd(q, k, v, o, kv_cache_dtype, k_cache, v_cache, b_loc,
                           b_start_loc, b_seq_len, max_seq_len, max_input_len,
                           k_scale, v_scale, alibi_slopes=None,
                           sliding_window=None, sm_scale=None,
                           skip_decode=False, fp8_out_scale=None, sinks=None):
    dev = device_of(q)
    qv, kv_, vv, ov = (view(q, "q"), view(k, "k"), view(v, "v"), view(o, "o"))
    for t in (qv, kv_, vv, ov):
        _rank(t, 3, "[tokens, heads, head_dim]")
    _dtype(qv, FLOATS)
    _same(kv_.dtype, qv.dtype, f"k: dtype {kv_.dtype} differs from q's {qv.dtype}")
    _same(vv.dtype, qv.dtype, f"v: dtype {vv.dtype} differs from q's {qv.dtype}")
    _same(kv_.shape, vv.shape, f"v: shape {vv.shape} differs from k's {kv_.shape}")
    check_head_dim(qv)
    tokens, hq, d = qv.shape
    hk = kv_.shape[1]
    if hk == 0 or hq % hk:
        raise ValueError(f"k: {hk} KV heads must divide the {hq} query heads")
    if kv_.shape[2] != d:
        raise ValueError(f"k: head dim {kv_.shape[2]} differs from q's {d}")
    if kv_.shape[0] != tokens:
        raise ValueError(f"k: {kv_.shape[0]} tokens, q has {tokens}")
    _same(ov.shape, qv.shape, f"o: shape {ov.shape} differs from q's {qv.shape}")

    kc, vc = view(k_cache, "k_cache"), view(v_cache, "v_cache")
    _rank(kc, 5, "[num_blocks, kv_heads, head_dim/x, block_size, x]")
    _rank(vc, 4, "[num_blocks, kv_heads, head_dim, block_size]")
    fp8 = _is_fp8_cache_dtype(kv_cache_dtype)
    if fp8:
        kc, vc = _fp8_cache(kc, kv_cache_dtype), _fp8_cache(vc, kv_cache_dtype)
        for name, scale in (("k_scale", k_scale), ("v_scale", v_scale)):
            if scale is None:
                raise ValueError(f"{name}: required with an fp8 KV cache "
                                 f"(kv_cache_dtype={kv_cache_dtype!r})")
            _host_scale(scale, name)
    elif kc.dtype != qv.dtype or vc.dtype != qv.dtype:
        raise ValueError(f"k_cache/v_cache: dtypes {kc.dtype}/{vc.dtype} must "
                         f"match q ({qv.dtype}) in an unquantized cache "
                         f"(kv_cache_dtype={kv_cache_dtype!r})")
    if kc.shape[1] != hk or vc.shape[1] != hk:
        raise ValueError(f"k_cache/v_cache: {kc.shape[1]}/{vc.shape[1]} KV "
                         f"heads, k has {hk}")
    if kc.shape[2] * kc.shape[4] != d or vc.shape[2] != d:
        raise ValueError(f"k_cache/v_cache: shapes {kc.shape}/{vc.shape} do not "
                         f"hold head dim {d}")
    block_size = vc.shape[3]
    if kc.shape[3] != block_size or kc.shape[0] != vc.shape[0]:
        raise ValueError(f"k_cache/v_cache: shapes {kc.shape}/{vc.shape} "
                         f"disagree on blocks")

    slopes = _per_head(alibi_slopes, "alibi_slopes", hq, dev)
    sink_vals = _per_head(sinks, "sinks", hq, dev)
    if slopes is not None and sink_vals is not None:
        raise ValueError("sinks: cannot be combined with alibi_slopes (the "
                         "prefix-prefill ALiBi kernel has no sinks)")
    if ov.dtype in FP8:
        if fp8_out_scale is None:
            raise ValueError("fp8_out_scale: required when o is fp8")
        _host_scale(fp8_out_scale, "fp8_out_scale")
    elif fp8_out_scale is not None:
        # vLLM quantizes to the fp8 range whenever a scale is given.
        _host_scale(fp8_out_scale, "fp8_out_scale")
    if ov.dtype not in FP8 and ov.dtype != qv.dtype:
        raise ValueError(f"o: dtype {ov.dtype} differs from q's {qv.dtype}")
    _host_scale(sm_scale, "sm_scale", allow_zero=True)
    window = None
    if sliding_window is not None:
        # vLLM: None or <= 0 means no window.
        window = check_int(sliding_window, "sliding_window")
        if window <= 0:
            window = None
        else:
            check_int(window, "sliding_window", "sliding_window")
    # Last: what the offsets and block table hold (fake tensors, traced by
    # torch.compile, have no values: their checks stop here).
    seq_lens, starts, table = _paged_batch(
        (b_seq_len, "b_seq_len"), (b_start_loc, "b_start_loc"),
        (b_loc, "b_loc"), tokens, block_size, kc.shape[0], dev,
        new_tokens_cached=False, nouns=("tokens", "new ones"))
    ops._prefix_prefill(
        qv, kv_, vv, kc, vc, table, starts, seq_lens, ov,
        scale=1.0 / math.sqrt(d) if sm_scale is None else sm_scale,
        k_scale=k_scale if fp8 else None, v_scale=v_scale if fp8 else None,
        alibi_slopes=slopes, sinks=sink_vals,
        out_scale=fp8_out_scale, sliding_window=window,
        skip_decode=skip_decode)


# ---------------------------------------------------------------------------
# unified attention
# ---------------------------------------------------------------------------


def plan_segments(max_seqlen_q, max_seqlen_k, block_size, num_seqs=None,
                  num_kv_heads=None, num_sms=None, key_bytes=None,
                  programs_per_sm=None, num_query_heads=None,
                  tile_rows=64):
    """Split-KV segment count for a decode batch (None: no split).

    A decode program walks one (sequence, KV head)'s keys: P = num_seqs *
    num_kv_heads programs unsplit, P * S with S segments (merged in the
    launch). The count minimizes a cost model of the launch on num_sms SMs
    (default an H100's 132) fitted to the H200's split decode kernels
    (bench/results/2026-11-30-h200-session27.md):

    * a program costs a fixed SEGMENT_FIXED_KB (its start and end, in KB
      that its SM would stream meanwhile) plus its bytes (keys x key_bytes,
      K and V of one KV head: default 512, heads of 128 in 16 bits) times
      the programs sharing its SM (a lone program streams at about
      1 / SEGMENT_LONE_PROGRAM of an SM's share); a split adds
      SEGMENT_MERGE_KB per 16 segments (the fused merge's rounds);
    * the launch runs one wave of programs: programs_per_sm lists the
      kernel's footprints' blocks an SM (default (2,); fp8 cache programs
      on sm_90 also have a compact one of three), and the runtime takes the
      smallest that holds the grid in as few waves (_gpu.wave_footprint);
      a split grid leaves SEGMENT_SPARE_SLOTS of those slots free (a grid of
      exactly two an SM ran 4% slower than one of 8 fewer programs);
    * the least S within SEGMENT_TIE of the best cost wins (fewer partials).

    Segments hold at least SEGMENT_MIN_KEYS keys, at most MAX_SEGMENTS of
    them. The model reads the context through max_seqlen_k_bucket (its
    fewest keys), so a CUDA graph replays the plan of its bucket. Without
    the batch: the seed's rule, up to 16 segments of at least 256 keys. The
    count depends on host integers only.

    Speculative (multi-token) decode, max_seqlen_q up to
    SPLIT_MAX_QUERY_TOKENS, with the batch and num_query_heads: a program
    holds tile_rows rows (query tokens times the query heads of a KV head:
    64 for 16-bit programs, 16 for fp8 decode rows), so a sequence takes
    ceil(max_seqlen_q * group / tile_rows) programs a KV head."""
    if max_seqlen_k < 2 * SEGMENT_MIN_KEYS:
        return None
    tiles = 1
    if max_seqlen_q > 1:
        if max_seqlen_q > SPLIT_MAX_QUERY_TOKENS or num_seqs is None or \
                num_kv_heads is None or not num_query_heads:
            return None
        group = max(1, int(num_query_heads) // max(1, int(num_kv_heads)))
        tiles = -(-int(max_seqlen_q) * group // max(1, int(tile_rows)))
    if num_seqs is None or num_kv_heads is None:
        return int(min(16, max(2, max_seqlen_k // 256)))
    return _planned_segments(
        _bucket(int(max_seqlen_k)),
        int(block_size), max(1, int(num_seqs) * int(num_kv_heads) * tiles),
        int(num_sms or 132), int(key_bytes or 512),
        tuple(sorted(programs_per_sm or (2,))))


@functools.lru_cache(maxsize=4096)
def _planned_segments(bucket, block_size, programs, sms, key_bytes,
                      footprints):
    """plan_segments' cost model over every count (cached: a decode loop
    asks the same few questions every step)."""
    pages = -(-_bucket_keys(bucket) // block_size)
    row_kb = key_bytes / 1024

    def cost(s):
        grid = programs * s
        # The footprint the runtime takes (its blocks an SM, per_sm).
        per_sm = _gpu.wave_footprint(grid, [o * sms for o in footprints]) \
            // sms
        waves = -(-grid // (per_sm * sms))
        kb = -(-pages // s) * block_size * row_kb
        if waves > 1:
            return None if s > 1 else waves * (SEGMENT_FIXED_KB + kb * per_sm)
        if s > 1 and grid > per_sm * sms - SEGMENT_SPARE_SLOTS:
            return None
        sharing = -(-grid // sms)
        merge = SEGMENT_MERGE_KB * -(-s // 16) if s > 1 else 0
        return SEGMENT_FIXED_KB + merge + kb * (
            SEGMENT_LONE_PROGRAM if sharing == 1 else sharing)

    cap = max(2, min(bucket, MAX_SEGMENTS))
    costs = {s: cost(s) for s in range(1, cap + 1)}
    costs = {s: c for s, c in costs.items() if c is not None}
    best = min(costs.values())
    segments = min(s for s, c in costs.items()
                   if c <= best * (1 + SEGMENT_TIE))
    return segments if segments > 1 else None


def max_seqlen_k_bucket(max_seqlen_k):
    """All that unified_attention reads of max_seqlen_k: plan_segments'
    segment cap, no-split cutoff and the context its cost model counts (it
    always passes the batch). Replay signatures keep this instead of the
    value, so a decode loop whose max_seqlen_k grows by one a step keeps
    replaying: a new signature once per SEGMENT_MIN_KEYS keys up to
    MAX_SEGMENTS of them, then once per doubling. Other types keep their
    value (and the full path's checks)."""
    if type(max_seqlen_k) is not int:
        return max_seqlen_k
    return _bucket(max_seqlen_k)


def _bucket(max_seqlen_k):
    steps = max_seqlen_k // SEGMENT_MIN_KEYS
    if steps < MAX_SEGMENTS:
        return steps
    return MAX_SEGMENTS + (steps // MAX_SEGMENTS).bit_length() - 1


def _bucket_keys(bucket):
    """The fewest keys of a bucket (what the cost model counts)."""
    if bucket <= MAX_SEGMENTS:
        return bucket * SEGMENT_MIN_KEYS
    return MAX_SEGMENTS * SEGMENT_MIN_KEYS << (bucket - MAX_SEGMENTS)


# plan_segments' constants. Its cost model's were fitted to the H200's split
# decode kernels (bench/results/2026-11-30-h200-session27.md: bf16 and e4m3
# caches, GQA 32/8, D=128, B=1..64, every count measured there: the model
# picks within 1% of the best measured count on all 21 shapes).
SEGMENT_MIN_KEYS = 128
MAX_SEGMENTS = 64
SEGMENT_FIXED_KB = 600
SEGMENT_MERGE_KB = 50
SEGMENT_LONE_PROGRAM = 1.7
SEGMENT_SPARE_SLOTS = 8
SEGMENT_TIE = 0.005
# Blocks an SM of the split decode kernels' footprints: fp8 cache programs
# of heads of 128 on sm_90 have a compact one of three
# (bench/results/2026-11-30-h200-session24.md).
COMPACT_DECODE_PROGRAMS_PER_SM = 3
# plan_segments splits speculative decode of up to this many query tokens a
# sequence (one op, partials by token).
SPLIT_MAX_QUERY_TOKENS = 16
# Whether a mixed batch's decode op (ops.unified's two-op split) splits its
# keys by plan_segments (_mixed_decode_split); False keeps it one pass.
MIXED_DECODE_SPLIT = True
# Split-KV programs of at most this many keys (a segment, counted from the
# context's bucket) stream their pages with an L2 evict-first policy (the
# attn.stream_pages hint): a fixed 2-3 us off a launch, about 3% of the
# streaming, on H200 (bench/results/2026-12-01-h200-decode-evict-first.log:
# 1.06-1.07x at 1024 keys (B=1 ctx 32k), 1.00-1.03x at 2048, 0.97-1.00x
# from 4096). 0: never.
STREAM_SEGMENT_KEYS = 2048


def streams_pages(max_seqlen_k, segments):
    """Whether a split-KV launch of `segments` over up to max_seqlen_k keys
    takes the attn.stream_pages hint: its segments of the context bucket's
    fewest keys hold at most STREAM_SEGMENT_KEYS (one kernel a bucket, as
    the plan; host integers only)."""
    if not segments or not STREAM_SEGMENT_KEYS:
        return False
    keys = _bucket_keys(_bucket(int(max_seqlen_k)))
    return -(-keys // int(segments)) <= STREAM_SEGMENT_KEYS


_SM_COUNTS = {}


def _sm_count(dev):
    """Streaming multiprocessors of a torch device (None on the host, or
    where no driver answers: fake CUDA tensors traced without a GPU)."""
    if dev is None:
        return None
    count = _SM_COUNTS.get(dev)
    if count is None:
        import torch
        try:
            count = torch.cuda.get_device_properties(dev).multi_processor_count
        except (RuntimeError, AssertionError):
            return None
        _SM_COUNTS[dev] = count
    return count


_FOOTPRINTS = {}


def _decode_footprints(dev, compact):
    """Blocks an SM of the split decode kernel's footprints, as
    plan_segments counts them: a compact one of
    COMPACT_DECODE_PROGRAMS_PER_SM besides two for fp8 cache programs of
    heads of 128 on sm_90 (CUDA), where it was measured; two elsewhere."""
    if not compact or dev is None:
        return (2,)
    found = _FOOTPRINTS.get(dev)
    if found is None:
        import torch
        found = (2,)
        try:
            if torch.version.hip is None and \
                    torch.cuda.get_device_capability(dev)[0] == 9:
                found = (2, COMPACT_DECODE_PROGRAMS_PER_SM)
        except (RuntimeError, AssertionError):
            pass
        _FOOTPRINTS[dev] = found
    return found


def _unified_attention(q, k, v, out, cu_seqlens_q, max_seqlen_q, seqused_k,
                       max_seqlen_k, softmax_scale, causal, window_size,
                       block_table, softcap, q_descale, k_descale, v_descale,
                       alibi_slopes=None, output_scale=None, sinks=None,
                       seq_threshold_3D=None, num_par_softmax_segments=None,
                       softmax_segm_output=None, softmax_segm_max=None,
                       softmax_segm_expsum=None, qq_bias=None,
                       mm_prefix_range=None, rswa_prefix_lens=None,
                       rswa_window=None, use_alibi_sqrt=False, kv_quant_mode=0,
                       k_scale_cache=None, v_scale_cache=None,
                       chunk_lookback=-1, use_td=False,
                       mm_prefix_clamp_sliding_window=False,
                       num_segments=None):
    mode = check_int(kv_quant_mode, "kv_quant_mode", label="")
    if mode not in (0, 1, 2, 3):
        raise ValueError(f"kv_quant_mode: {mode} is not supported here "
                         f"(vLLM runs modes >= 4, int4 and NVFP4, in kernels "
                         f"of their own); modes 0-3 are")
    token_scales = mode in (2, 3)
    if token_scales:
        if k_scale_cache is None or v_scale_cache is None:
            raise ValueError(f"k_scale_cache/v_scale_cache: required with "
                             f"kv_quant_mode {mode} (per-token-head scales)")
        # vLLM ignores the per-tensor descales in these modes.
        k_descale = v_descale = None
    elif k_scale_cache is not None or v_scale_cache is not None:
        raise ValueError(f"k_scale_cache/v_scale_cache: only valid with "
                         f"kv_quant_mode 2 or 3, got {mode}")
    chunk_lookback = check_int(chunk_lookback, "chunk_lookback", label="")
    dev = device_of(q)
    if is_torch(causal) or isinstance(causal, np.ndarray):
        # Per-sequence flags (vLLM: a bool tensor of num_seqs entries).
        if device_of(causal) != dev:
            where = device_of(causal) or "the host"
            raise ValueError(f"causal: flags on {where}, but q is on "
                             f"{dev or 'the host'}")
        flags = view(causal, "causal")
        if flags.ndim != 1 or flags.dtype != "i8" or \
                flags.shape[0] != len(seqused_k):
            raise ValueError(f"causal: expected a bool or {len(seqused_k)} "
                             f"per-sequence bool flags, got {flags.dtype} of "
                             f"shape {tuple(flags.shape)}")
    else:
        causal = bool(causal)
    qv, kc, vc, ov = (view(q, "q"), view(k, "k"), view(v, "v"), view(out, "out"))
    _rank(qv, 3, "[tokens, q_heads, head_dim]")
    _rank(ov, 3, "[tokens, q_heads, head_dim]")
    _rank(kc, 4, "[num_blocks, block_size, kv_heads, head_dim]")
    _same(kc.shape, vc.shape, f"v: shape {vc.shape} differs from k's {kc.shape}")
    _dtype(qv, FLOATS + FP8)
    _dtype(kc, FLOATS + FP8 + (("i8",) if token_scales else ()))
    _same(vc.dtype, kc.dtype, f"v: dtype {vc.dtype} differs from k's {kc.dtype}")
    if mode == 2 and kc.dtype != "i8":
        raise ValueError(f"k: kv_quant_mode 2 (int8 per token-head) needs an "
                         f"int8 cache, got {kc.dtype}")
    if mode == 3 and kc.dtype not in FP8:
        raise ValueError(f"k: kv_quant_mode 3 (fp8 per token-head) needs an "
                         f"fp8 cache, got {kc.dtype}")
    check_head_dim(qv)
    tokens, hq, d = qv.shape
    num_blocks, block_size, hk, dk = kc.shape
    check_int(block_size, "k", "block_size", "block size ")
    if hk == 0 or hq % hk:
        raise ValueError(f"k: {hk} KV heads must divide the {hq} query heads")
    if dk != d:
        raise ValueError(f"k: head dim {dk} differs from q's {d}")
    _same(ov.shape, qv.shape, f"out: shape {ov.shape} differs from q's {qv.shape}")
    cache_fp8, q_fp8 = kc.dtype in FP8 and not token_scales, qv.dtype in FP8
    if q_fp8 and (kc.dtype not in FP8 or token_scales):
        raise ValueError("q: an fp8 query needs an fp8 KV cache with "
                         "per-tensor scales")
    if not cache_fp8 and not token_scales and kc.dtype != qv.dtype:
        raise ValueError(f"k: dtype {kc.dtype} differs from q's {qv.dtype}")
    if q_fp8 and q_descale is None:
        raise ValueError("q_descale: required when q is fp8")
    if not q_fp8 and q_descale is not None:
        raise ValueError("q_descale: only valid when q is fp8")
    if cache_fp8 and (k_descale is None or v_descale is None):
        raise ValueError("k_descale/v_descale: required with an fp8 KV cache")
    _host_scale(softmax_scale, "softmax_scale", True, allow_zero=True)
    batch = len(seqused_k)
    if q_fp8:
        _descale(q_descale, "q_descale", batch, hk)
    if cache_fp8:
        _descale(k_descale, "k_descale", batch, hk)
        _descale(v_descale, "v_descale", batch, hk)

    window = None
    if window_size is not None:
        if not hasattr(window_size, "__len__") or len(window_size) != 2:
            raise ValueError(f"window_size: expected (left, right), got "
                             f"{window_size!r}")
        left = check_int(window_size[0], "window_size", label="left ")
        check_int(window_size[1], "window_size", label="right ")
        if left >= 0:
            # The op's window counts the query itself (W = left + 1).
            window = check_int(left + 1, "window_size",
                               "sliding_window", "left + 1 = ")
    if softcap is not None:
        softcap = check_real(softcap, "softcap")
        if not (softcap >= 0 and math.isfinite(softcap)):
            raise ValueError(f"softcap: must be >= 0 and finite (0 disables "
                             f"it), got {softcap}")
    slopes = _per_head(alibi_slopes, "alibi_slopes", hq, dev)
    sink_vals = _per_head(sinks, "sinks", hq, dev)
    if ov.dtype in FP8:
        if output_scale is None:
            raise ValueError("output_scale: required when out is fp8")
        _host_scale(output_scale, "output_scale")
    elif output_scale is not None:
        # vLLM quantizes to the fp8 range whenever a scale is given.
        _host_scale(output_scale, "output_scale")
    if ov.dtype not in FP8 and not q_fp8 and ov.dtype != qv.dtype:
        raise ValueError(f"out: dtype {ov.dtype} differs from q's {qv.dtype}")

    if use_alibi_sqrt and slopes is None:
        raise ValueError("use_alibi_sqrt: requires alibi_slopes")
    if (rswa_window is None) != (rswa_prefix_lens is None):
        raise ValueError("rswa_window: R-SWA needs both rswa_prefix_lens and "
                         "rswa_window")
    # After the checks of shapes and scalars: fake tensors stop here.
    seqused, cu, table = _paged_batch(
        (seqused_k, "seqused_k"), (cu_seqlens_q, "cu_seqlens_q"),
        (block_table, "block_table"), tokens, block_size, num_blocks, dev,
        new_tokens_cached=True, nouns=("keys", "queries"))
    masks = dict(
        qq_bias=None if qq_bias is None else view(qq_bias, "qq_bias"),
        mm_prefix_range=None if mm_prefix_range is None else
        _ranks(mm_prefix_range, "mm_prefix_range", dev, 3),
        mm_prefix_clamp_window=bool(mm_prefix_clamp_sliding_window) and
        window is not None,
        rswa_prefix_lens=None if rswa_window is None else
        _ranks(rswa_prefix_lens, "rswa_prefix_lens", dev, 1),
        rswa_window=rswa_window, causal=causal,
        # vLLM: chunks only with a window (chunk_lookback is -1 without).
        chunk_lookback=chunk_lookback if chunk_lookback >= 0 and
        window is not None else None,
        k_scale_cache=k_scale_cache if token_scales else None,
        v_scale_cache=v_scale_cache if token_scales else None)
    common = dict(scale=softmax_scale,
                  softcap=softcap if softcap else None,
                  q_descale=q_descale if q_fp8 else None,
                  k_descale=k_descale if cache_fp8 else None,
                  v_descale=v_descale if cache_fp8 else None,
                  alibi_slopes=slopes, sliding_window=window,
                  alibi_form="sqrt" if use_alibi_sqrt else None, **masks)
    vllm_plan = (seq_threshold_3D, num_par_softmax_segments,
                 softmax_segm_output, softmax_segm_max, softmax_segm_expsum)
    buffers = None
    segments = num_segments
    if segments is not None:
        segments = check_int(segments, "num_segments", "num_segments")
    elif all(x is not None for x in vllm_plan):
        # vLLM's rule: split only decode-only batches of few sequences.
        threshold = check_int(seq_threshold_3D, "seq_threshold_3D")
        if max_seqlen_q <= 1 and len(seqused_k) <= threshold:
            segments = check_int(num_par_softmax_segments,
                                 "num_par_softmax_segments", "num_segments")
            buffers = _segment_buffers(softmax_segm_output, softmax_segm_max,
                                       softmax_segm_expsum, tokens, hq,
                                       segments, d, dev)
    vllm_planned = all(x is not None for x in vllm_plan)
    if segments is None and (not vllm_planned or max_seqlen_q > 1):
        # (vLLM's rule never splits speculative decode; the planner may.)
        fp8_rows = cache_fp8 and qv.dtype in ("bf16", "f16") and \
            d <= 128 and d % 16 == 0 and \
            max_seqlen_q * (hq // hk) <= ops.DECODE_ROWS
        segments = plan_segments(
            max_seqlen_q, max_seqlen_k, block_size,
            num_seqs=len(seqused_k), num_kv_heads=kc.shape[2],
            num_sms=_sm_count(dev),
            key_bytes=2 * d * NUMPY_DTYPES[kc.dtype].itemsize,
            programs_per_sm=_decode_footprints(dev, cache_fp8 and d == 128),
            num_query_heads=hq, tile_rows=ops.DECODE_ROWS if fp8_rows else 64)
    if not segments:
        ops._unified(qv, kc, vc, table, cu, seqused, ov, sinks=sink_vals,
                     out_scale=output_scale, decode_split=functools.partial(
                         _mixed_decode_split, dev, max_seqlen_k, block_size,
                         len(seqused_k), hk, hq, d, kc.dtype, cache_fp8,
                         tokens, max_seqlen_q)
                     if MIXED_DECODE_SPLIT and num_segments is None and
                     max_seqlen_q > SPLIT_MAX_QUERY_TOKENS else None,
                     **common)
        return
    shapes = [(tokens, hq, segments, d), (tokens, hq, segments),
              (tokens, hq, segments)]
    if buffers is not None:
        partial, seg_max, seg_sum = buffers
    elif dev is not None:
        partial, seg_max, seg_sum = _workspace(dev, shapes)
    else:
        partial, seg_max, seg_sum = (np.zeros(s, np.float32) for s in shapes)
    # The segment count is the buffers' dim 2, read by the kernel at run
    # time: one kernel (one specialization) serves every count.
    # The last segment program of each tile merges it, in the same launch
    # (attn.unified's merged_out). Rows of no sequence (padding past
    # cu_seqlens_q[-1]) are left unspecified, as in the one-pass form.
    ops._unified(qv, kc, vc, table, cu, seqused, partial,
                 segment_max=seg_max, segment_sum=seg_sum, merged_out=ov,
                 merge_counters=_merge_counters(dev, tokens, hq),
                 sinks=sink_vals, out_scale=output_scale,
                 stream_pages=streams_pages(max_seqlen_k, segments), **common)


# ---------------------------------------------------------------------------
# flash (varlen FlashAttention-2 forward)
# ---------------------------------------------------------------------------


def _triton_attention(q, k, v, o, cu_seqlens_q, cu_seqlens_k, max_seqlens_q,
                      max_seqlens_k, causal=False, sm_scale=1.0, bias=None,
                      fp8_scales=None, fp8_out_scale=None, *, dropout_p=0.0,
                      philox_seed=0x1BF52, philox_offset=0x1D4B42):
    dev = device_of(q)
    qv, kv_, vv = view(q, "q"), view(k, "k"), view(v, "v")
    for t in (qv, kv_, vv):
        _rank(t, 3, "[tokens, heads, head_dim]")
    if fp8_scales is not None:
        if len(fp8_scales) != 4:
            raise ValueError("fp8_scales: expected (q_scale, k_scale, v_scale, "
                             "p_scale)")
        for name, scale in zip(("q_scale", "k_scale", "v_scale", "p_scale"),
                               fp8_scales):
            _host_scale(scale, f"fp8_scales ({name})", required=True)
        # q, k, v that are not fp8 are quantized as the kernel loads them
        # (vLLM quantizes them with torch ops before its launch): nothing
        # is allocated and nothing waits for the device.
    for t in (qv, kv_, vv):
        _dtype(t, FLOATS + FP8)
    _dense_qkv(qv, kv_, vv, same_dtype=fp8_scales is None)
    if qv.dtype in FP8 and fp8_scales is None:
        raise ValueError("fp8_scales: required when q, k, v are fp8")
    total_q, hq, d = qv.shape
    total_k = kv_.shape[0]
    if o is None:
        # vLLM: torch.empty_like(q, dtype=v.dtype) with v already quantized,
        # so fp8 (e4m3, or v's own fp8 type) whenever fp8_scales are given.
        o = _new_like(q, (vv.dtype if vv.dtype in FP8 else "f8E4M3FN")
                      if fp8_scales is not None else vv.dtype,
                      (total_q, hq, d))
    ov = view(o, "o")
    _same(ov.shape, qv.shape, f"o: shape {ov.shape} differs from q's {qv.shape}")
    if fp8_out_scale is not None:
        # vLLM quantizes to the fp8 range whenever a scale is given.
        _host_scale(fp8_out_scale, "fp8_out_scale")
    elif ov.dtype in FP8:
        # vLLM then casts to fp8 as it is (saturating): a scale of 1.
        fp8_out_scale = 1.0
    if (ov.dtype not in FP8 and fp8_scales is None and
            ov.dtype != qv.dtype):
        raise ValueError(f"o: dtype {ov.dtype} differs from q's {qv.dtype}")
    _host_scale(sm_scale, "sm_scale", True, allow_zero=True)
    dropout = None
    dropout_p = check_real(dropout_p, "dropout_p")
    if not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p: must be in [0, 1), got {dropout_p}")
    if dropout_p:
        dropout = (dropout_p, philox_seed, philox_offset)
    # The offsets' values last (fake tensors have none: their checks stop).
    if dev is None or _validating():
        cq_raw = _ints(cu_seqlens_q, "cu_seqlens_q")
        batch = len(cq_raw) - 1
        if batch < 0:
            raise ValueError("cu_seqlens_q: must have at least one entry")
        cq = _offsets(cq_raw, "cu_seqlens_q", batch, total_q)
        ck = _offsets(cu_seqlens_k, "cu_seqlens_k", batch, total_k)
        lq_max = int(np.diff(cq).max()) if batch else 0
        lk_max = int(np.diff(ck).max()) if batch else 0
    if dev is not None:
        cq = _device_ints(cu_seqlens_q, "cu_seqlens_q", dev, 1)
        batch = cq.shape[0] - 1
        if batch < 0:
            raise ValueError("cu_seqlens_q: must have at least one entry")
        ck = _device_ints(cu_seqlens_k, "cu_seqlens_k", dev, 1, batch + 1)
        # The longest sequences as the caller states them (vLLM passes them).
        lq_max, lk_max = int(max_seqlens_q), int(max_seqlens_k)
    if bias is not None:
        bv = view(bias, "bias")
        _rank(bv, 4, "[1|batch, q_heads, max_seqlen_q, max_seqlen_k]")
        _dtype(bv, FLOATS)
        if (bv.shape[0] not in (1, batch) or bv.shape[1] != hq or
                (batch and (bv.shape[2] < lq_max or bv.shape[3] < lk_max))):
            raise ValueError(f"bias: shape {bv.shape} does not cover [1|{batch}, "
                             f"{hq}, {lq_max}, {lk_max}]")
        bias = bv
    ops._flash(qv, kv_, vv, cq, ck, ov, scale=sm_scale, causal=causal,
               bias=bias, dropout=dropout, fp8_scales=fp8_scales,
               out_scale=fp8_out_scale)
    return o, None


# ---------------------------------------------------------------------------
# block-sparse
# ---------------------------------------------------------------------------


# cu_seqlens_q of an all-decode batch (0, 1, ..., batch), per device.
_DECODE_OFFSETS = {}


def _decode_count_bound(num_seqs, tokens, max_seqlen_q, short):
    """At most how many of num_seqs sequences have `short` queries or
    fewer, from host integers: the others, of at most max_seqlen_q queries
    each, must hold the tokens those cannot (tokens <= P * max_seqlen_q +
    (num_seqs - P) * short for P longer sequences). Padding rows past the
    last sequence make it smaller than it should be; the count it feeds
    only sets the segment count."""
    if max_seqlen_q <= short or tokens <= num_seqs * short:
        return num_seqs
    longer = -(-(tokens - num_seqs * short) // (max_seqlen_q - short))
    return max(1, num_seqs - longer)


def _mixed_decode_split(dev, max_seqlen_k, block_size, num_seqs, kv_heads,
                        heads, d, cache_dtype, cache_fp8, tokens,
                        max_seqlen_q, rows):
    """ops._unified's decode_split for a batch it runs as a decode op and a
    prefill op: the decode op's workspace for `rows` partial rows (one per
    sequence and decode query), with plan_segments' count for the decodes
    the batch can hold at most (_decode_count_bound: the host cannot tell
    them apart without reading the offsets; the prefills' programs run
    beside them), or None."""
    decodes = _decode_count_bound(num_seqs, tokens, max_seqlen_q,
                                  rows // max(1, num_seqs))
    segments = plan_segments(
        1, max_seqlen_k, block_size, num_seqs=decodes,
        num_kv_heads=kv_heads, num_sms=_sm_count(dev),
        key_bytes=2 * d * NUMPY_DTYPES[cache_dtype].itemsize,
        programs_per_sm=_decode_footprints(dev, cache_fp8 and d == 128))
    if not segments:
        return None
    shapes = [(rows, heads, segments, d), (rows, heads, segments),
              (rows, heads, segments)]
    if dev is not None:
        parts = _workspace(dev, shapes)
    else:
        parts = [np.zeros(s, np.float32) for s in shapes]
    return (*parts, _merge_counters(dev, rows, heads))


def _decode_offsets(device, batch):
    key = (device, batch)
    if key not in _DECODE_OFFSETS:
        import torch
        offsets = torch.arange(batch + 1, dtype=torch.int32, device=device)
        if checking_metadata():   # never cache a fake tensor
            return offsets
        _DECODE_OFFSETS[key] = offsets
    return _DECODE_OFFSETS[key]


def _blocksparse_flash_attn_varlen_fwd(q, k, v, cu_seqlens_k, cu_seqlens_q,
                                       sm_scale, sparse_layout, *,
                                       block_size=64, q_block_size=None,
                                       max_seqlen=None, out=None):
    """`out` (not in vLLM): the output to write, allocated when None."""
    dev = device_of(q)
    qv, kv_, vv = view(q, "q"), view(k, "k"), view(v, "v")
    for t in (qv, kv_, vv):
        _rank(t, 3, "[tokens, heads, head_dim]")
    _dtype(qv, FLOATS)
    _dense_qkv(qv, kv_, vv)
    check_head_dim(qv)
    total_q, hq, d = qv.shape
    total_k = kv_.shape[0]
    block_size = check_int(block_size, "block_size", "sparse_block")
    if q_block_size is not None:
        q_block_size = check_int(q_block_size, "q_block_size", "sparse_block")
    _host_scale(sm_scale, "sm_scale", True, allow_zero=True)
    qbs = q_block_size or block_size
    if not isinstance(sparse_layout, (list, tuple)) or len(sparse_layout) != 2:
        raise ValueError("sparse_layout: expected (crow_indices, col_indices)")
    if dev is None or _validating():
        ck_raw = _ints(cu_seqlens_k, "cu_seqlens_k")
        batch = len(ck_raw) - 1
        ck = _offsets(ck_raw, "cu_seqlens_k", batch, total_k)
        k_lens = np.diff(ck)
        if cu_seqlens_q is None:
            if total_q == batch:
                cq = np.arange(batch + 1, dtype=np.int32)
            elif total_q == total_k:
                cq = ck
            else:
                raise ValueError("cu_seqlens_q: must be given for a mix of prefill "
                                 "and decode")
        else:
            cq = _offsets(cu_seqlens_q, "cu_seqlens_q", batch, total_q)
        q_lens = np.diff(cq)
        bad = (q_lens != 1) & (q_lens != k_lens)
        if np.any(bad):
            b = int(np.argmax(bad))
            raise ValueError(f"cu_seqlens_q: sequence {b} has {q_lens[b]} queries "
                             f"and {k_lens[b]} keys; expected 1 (decode) or equal")
        if max_seqlen and batch and k_lens.max() > max_seqlen:
            raise ValueError(f"max_seqlen: {max_seqlen} is below the longest "
                             f"sequence ({k_lens.max()})")
        names = ("sparse_layout[0] (crow)", "sparse_layout[1] (col)")
        crow = _ints(sparse_layout[0], names[0])
        col = _ints(sparse_layout[1], names[1])
        _preconditions.check_csr(crow, col, hq,
                                 int(k_lens.max()) if batch else 0, qbs, names)
    if dev is not None:
        ck = _device_ints(cu_seqlens_k, "cu_seqlens_k", dev, 1)
        batch = ck.shape[0] - 1
        if cu_seqlens_q is not None:
            cq = _device_ints(cu_seqlens_q, "cu_seqlens_q", dev, 1, batch + 1)
        elif total_q == total_k:
            cq = ck
        elif total_q == batch:
            cq = _decode_offsets(dev, batch)
        else:
            raise ValueError("cu_seqlens_q: must be given for a mix of prefill "
                             "and decode")
        crow = _device_ints(sparse_layout[0], "sparse_layout[0] (crow)", dev, 2)
        col = _device_ints(sparse_layout[1], "sparse_layout[1] (col)", dev, 2)
        if crow.shape[0] != col.shape[0] or crow.shape[0] not in (1, hq) or \
                crow.shape[1] < 2:
            raise ValueError(f"sparse_layout: shapes {tuple(crow.shape)}/"
                             f"{tuple(col.shape)} must be [1|{hq}, rows+1] and "
                             f"[1|{hq}, nnz]")
    if out is None:
        out = _new_like(q, qv.dtype, tuple(qv.shape))
    ops._blocksparse(qv, kv_, vv, cq, ck, crow, col, view(out, "out"),
                     scale=sm_scale, block_size=block_size,
                     q_block_size=q_block_size)
    return out


# ---------------------------------------------------------------------------
# Entry points: torch tensors go through torch.ops.attn_mlir (torch_ops) where
# something traces or observes the call (ops._torch_route), so that
# torch.compile traces it; other calls run directly.
# ---------------------------------------------------------------------------


def context_attention_fwd(q, k, v, o, kv_cache_dtype, k_cache, v_cache, b_loc,
                          b_start_loc, b_seq_len, max_seq_len, max_input_len,
                          k_scale, v_scale, alibi_slopes=None,
                          sliding_window=None, sm_scale=None,
                          skip_decode=False, fp8_out_scale=None, sinks=None):
    t = ops._torch_route(q)
    f = t.context_attention_fwd if t else _context_attention_fwd
    f(q, k, v, o, kv_cache_dtype, k_cache, v_cache, b_loc, b_start_loc,
      b_seq_len, max_seq_len, max_input_len, k_scale, v_scale, alibi_slopes,
      sliding_window, sm_scale, skip_decode, fp8_out_scale, sinks)


@_replay.replayable("unified_attention",
                    buckets={7: max_seqlen_k_bucket,
                             "max_seqlen_k": max_seqlen_k_bucket})
def unified_attention(q, k, v, out, cu_seqlens_q, max_seqlen_q, seqused_k,
                      max_seqlen_k, softmax_scale, causal, window_size,
                      block_table, softcap, q_descale, k_descale, v_descale,
                      alibi_slopes=None, output_scale=None, sinks=None, *,
                      seq_threshold_3D=None, num_par_softmax_segments=None,
                      softmax_segm_output=None, softmax_segm_max=None,
                      softmax_segm_expsum=None, qq_bias=None,
                      mm_prefix_range=None, rswa_prefix_lens=None,
                      rswa_window=None, use_alibi_sqrt=False, kv_quant_mode=0,
                      k_scale_cache=None, v_scale_cache=None,
                      chunk_lookback=-1, use_td=False,
                      mm_prefix_clamp_sliding_window=False,
                      num_segments=None):
    """vLLM's unified_attention. The positional parameters are the seed's
    (alibi_slopes at 16); today's vLLM passes everything by keyword, and its
    keywords are all accepted:

    * seq_threshold_3D, num_par_softmax_segments, softmax_segm_output/_max/
      _expsum: vLLM's split-KV plan. When all are given, a decode-only batch
      (max_seqlen_q <= 1) of at most seq_threshold_3D sequences runs in
      num_par_softmax_segments segments through the caller's buffers (sliced
      to the batch, nothing allocated), merged into `out`; else one pass.
    * qq_bias, mm_prefix_range (+ mm_prefix_clamp_sliding_window),
      rswa_prefix_lens + rswa_window, use_alibi_sqrt: docs/semantics.md.
    * kv_quant_mode 0 (none; an fp8 cache still uses k/v_descale, as the
      seed's kernel did), 1 (fp8 per tensor), 2 (int8 cache) and 3 (fp8
      cache) with per-token-head k_scale_cache/v_scale_cache
      [num_blocks, block_size, kv_heads] f32 (k/v_descale are ignored then,
      as vLLM does); modes >= 4 (int4, NVFP4) have their own vLLM kernels
      and are rejected by name.
    * causal: a bool (False: bidirectional) or per-sequence flags
      [num_seqs] (bool); chunk_lookback >= 0 with a window: chunked
      attention (ignored without a window, as in vLLM).
    * use_td selects Intel tensor-descriptor loads in vLLM: same math,
      ignored here.

    `num_segments` (keyword, not in vLLM) forces the split-KV form."""
    t = ops._torch_route(q)
    if t:
        return t.unified_attention(
            q, k, v, out, cu_seqlens_q, max_seqlen_q, seqused_k, max_seqlen_k,
            softmax_scale, causal, window_size, block_table, softcap,
            q_descale, k_descale, v_descale, alibi_slopes, output_scale,
            sinks, seq_threshold_3D, num_par_softmax_segments,
            softmax_segm_output, softmax_segm_max, softmax_segm_expsum,
            qq_bias, mm_prefix_range, rswa_prefix_lens, rswa_window,
            use_alibi_sqrt, kv_quant_mode, k_scale_cache, v_scale_cache,
            chunk_lookback, use_td, mm_prefix_clamp_sliding_window,
            num_segments)
    _unified_attention(
        q, k, v, out, cu_seqlens_q, max_seqlen_q, seqused_k, max_seqlen_k,
        softmax_scale, causal, window_size, block_table, softcap, q_descale,
        k_descale, v_descale, alibi_slopes=alibi_slopes,
        output_scale=output_scale, sinks=sinks,
        seq_threshold_3D=seq_threshold_3D,
        num_par_softmax_segments=num_par_softmax_segments,
        softmax_segm_output=softmax_segm_output,
        softmax_segm_max=softmax_segm_max,
        softmax_segm_expsum=softmax_segm_expsum, qq_bias=qq_bias,
        mm_prefix_range=mm_prefix_range, rswa_prefix_lens=rswa_prefix_lens,
        rswa_window=rswa_window, use_alibi_sqrt=use_alibi_sqrt,
        kv_quant_mode=kv_quant_mode, k_scale_cache=k_scale_cache,
        v_scale_cache=v_scale_cache, chunk_lookback=chunk_lookback,
        use_td=use_td,
        mm_prefix_clamp_sliding_window=mm_prefix_clamp_sliding_window,
        num_segments=num_segments)


def triton_attention(q, k, v, o, cu_seqlens_q, cu_seqlens_k, max_seqlens_q,
                     max_seqlens_k, causal=False, sm_scale=1.0, bias=None,
                     fp8_scales=None, fp8_out_scale=None, *, dropout_p=0.0,
                     philox_seed=0x1BF52, philox_offset=0x1D4B42):
    """Returns (o, None). `dropout_p` and the Philox seed/offset (keywords,
    not in vLLM's signature, which always passes 0) enable dropout."""
    t = ops._torch_route(q)
    if t:
        return t.triton_attention(
            q, k, v, o, cu_seqlens_q, cu_seqlens_k, max_seqlens_q,
            max_seqlens_k, causal, sm_scale, bias, fp8_scales, fp8_out_scale,
            dropout_p, philox_seed, philox_offset)
    return _triton_attention(q, k, v, o, cu_seqlens_q, cu_seqlens_k,
                             max_seqlens_q, max_seqlens_k, causal, sm_scale,
                             bias, fp8_scales, fp8_out_scale,
                             dropout_p=dropout_p, philox_seed=philox_seed,
                             philox_offset=philox_offset)


def blocksparse_flash_attn_varlen_fwd(q, k, v, cu_seqlens_k, cu_seqlens_q,
                                      sm_scale, sparse_layout, *,
                                      block_size=64, q_block_size=None,
                                      max_seqlen=None):
    t = ops._torch_route(q)
    if t:
        return t.blocksparse_flash_attn_varlen_fwd(
            q, k, v, cu_seqlens_k, cu_seqlens_q, sm_scale, sparse_layout,
            block_size, q_block_size, max_seqlen)
    return _blocksparse_flash_attn_varlen_fwd(
        q, k, v, cu_seqlens_k, cu_seqlens_q, sm_scale, sparse_layout,
        block_size=block_size, q_block_size=q_block_size,
        max_seqlen=max_seqlen)
