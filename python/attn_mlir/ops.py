"""Direct calls of the attn ops: each call emits the op for the arguments'
static properties (head counts, head dim, page size, dtypes, features),
compiles it once per specialization, and runs it on the given arrays.

Arguments are numpy arrays (ml_dtypes for bf16/fp8) or torch tensors, all
on the CPU or all on one CUDA device (then the op runs as a GPU kernel on the
current stream, see `_gpu`); outputs are written in place. Calls with
torch tensors go through the torch operators `torch.ops.attn_mlir.<op>`
(`attn_mlir.torch_ops`, so that torch.compile traces them), whose kernels
run the same implementations (`_flash`, `_unified`, ...) as numpy calls.

ATTN_MLIR_RECORD=file.jsonl appends every specialization a call needs to the
file (for `python -m attn_mlir.aot`); with ATTN_MLIR_DRY_RUN=1 calls only
record and run nothing.

Before compiling, every call checks its arguments with a ValueError naming
the bad one: integers (real ints within LIMITS), scales (finite and non-zero
in f32, the softmax scale only finite; in CUDA tensors only under
ATTN_MLIR_VALIDATE=1, reading them synchronizes), softcap > 0, dropout p in
[0, 1), Philox seed/offset within 64 bits, ALiBi slopes and sinks finite
(host arrays; CUDA ones under ATTN_MLIR_VALIDATE), fp8 scales present
exactly where their tensor is fp8, and outputs (writable, no element
addressed twice, no memory shared with another operand: the kernels do not
run in place). Scales that put fp8 values out of range raise
Fp8RangeWarning (once per kind). Sizes that name the same quantity must
agree (tokens of q and out, blocks of the two caches, rows of per-sequence
arrays), and index arrays must address only what the kernels may read:
offsets within their tensors, block-table entries of used blocks within
the cache, sparse layouts well formed (`_preconditions`; host arrays
always, CUDA ones under ATTN_MLIR_VALIDATE). `attn_mlir.vllm` checks the
rest of its entry points' contracts, such as a sequence's keys covering
its queries.
"""

import ctypes
import contextvars
import json
import os
import re
import warnings

import numpy as np

from . import _abi, _launch, _preconditions, _replay
from ._abi import (FP8, View, checking_metadata, descriptor, device_of,
                   extent, host_values, is_torch, memref_type, reads_values,
                   view)
from ._toolchain import load_kernel
# The argument checks (re-exported: vllm.py, torch_ops.py and tests use them
# as ops.*).
from ._checks import (LIMITS, MAX_HEAD_DIM, P_MIN, _ALIBI_FORMS,  # noqa: F401
                      _SCHEDULE_FIELDS, _WARNED, Fp8RangeWarning, _alibi_form,
                      _check_finite_values, _fp8_scale, _i64, _is_bool,
                      _out_scale, _out_scale_range, _p_scale_range,
                      _product_range, _scale_view, _schedule_attr, _softcap,
                      _warn_once, _window, check_head_dim, check_int,
                      check_real, check_scale)


# (torch dtype, shape, strides, device index, static dims, output) of a
# tensor operand -> (memref type, element name, torch device, chunk, bytes
# spanned).
_TORCH_OPERANDS = {}

# (shape, strides, dtype, static dims, output) of a View -> (memref type,
# bytes spanned); outputs are checked for self-overlap on first sight.
_VIEW_INFO = {}

# (MLIR text, device index) -> loaded kernels: a repeated call costs one
# dictionary lookup, not a bundle search.
_GPU_KERNELS = {}

# (op, signature, attributes) -> kernel symbol (_Call.text).
_KERNEL_NAMES = {}

# The list collect_specializations() gathers into (per thread / task).
_COLLECTING = contextvars.ContextVar("attn_mlir_collecting", default=None)


class collect_specializations:
    """`with collect_specializations() as texts:` op calls inside are checked
    and their specializations (MLIR text) appended to `texts`, once each;
    nothing compiles or runs (a dry run that needs no environment
    variable, for attn_mlir.precompile)."""

    def __enter__(self):
        self.texts = []
        self._token = _COLLECTING.set(self.texts)
        return self.texts

    def __exit__(self, *exc):
        _COLLECTING.reset(self._token)
        return False


class _Call:
    """Builds `func.func @attn_<op>_...(...) { attn.<op> ... }` and runs it.
    The function's name is the kernel's symbol (kernel_name())."""

    def __init__(self, op):
        self.op = op
        self.params = []   # (ssa, type, kind, value)
        self.clauses = []
        self.attrs = []
        # Attribute lists of several ops over the same operands (a mixed
        # batch's halves), each added to `attrs`; None: one op.
        self.variants = None
        # Output clauses of each variant where they differ (a mixed batch's
        # split decode op writes partials, then merges into out), appended
        # to `clauses` (outputs come last in every op's syntax); or None.
        self.variant_clauses = None
        # Variants that write disjoint rows may run at once: (the variant
        # whose kernel runs on a side stream, whether at high priority), or
        # None (every kernel on the caller's stream, in order).
        self.side = None
        self.device = None   # torch device of the first operand on a GPU
        self.inputs = []     # (View, bytes spanned)
        self.outputs = []
        # Fake tensors (torch.compile): checks only, no pointers, no run.
        self.meta = checking_metadata()

    def scale(self, kw, x):
        """Adds a scale operand; returns its host value (None if only in
        device memory)."""
        v, value = _scale_view(x, kw, self.device)
        self.mem(kw, v, (0,))
        return value

    def mem(self, kw, v, static=(), output=False, clause=True):
        """Adds a memref operand and returns its View. Outputs are checked
        (writable, no element twice) here and against the other operands'
        memory in run(). clause=False: a parameter of the function only
        (a variant's clauses name it)."""
        if v is None:
            return None
        if is_torch(v):
            # Memoized on the tensor's properties: a serving loop's repeated
            # calls skip the checks and the type construction.
            key = (v.dtype, v.shape, v.stride(), v.get_device(), v.is_cpu,
                   static, output)
            known = _TORCH_OPERANDS.get(key)
            if known is None:
                w = view(v, kw)
                if output:
                    _abi.check_output(w)
                dev = device_of(v)
                # GPU operands: the chunk alignment their rows need.
                chunk = _abi.chunk_alignment(w) if dev is not None else 0
                span = extent(w.shape, w.strides) * v.element_size()
                known = (memref_type(w, static), w.dtype, dev, chunk, span)
                if len(_TORCH_OPERANDS) > 4096:
                    _TORCH_OPERANDS.clear()
                _TORCH_OPERANDS[key] = known
            t, dtype, dev, chunk, span = known
            v = View(kw, 0 if self.meta else v.data_ptr(), key[1], key[2],
                     dtype, v)
            if chunk:
                _abi.check_pointer_alignment(v, chunk)
        else:
            if not isinstance(v, View):
                v = view(v, kw)
            dev = device_of(v.owner)
            key = (v.shape, v.strides, v.dtype, static, output)
            info = _VIEW_INFO.get(key)
            if info is None:
                if output:
                    _abi.check_output(v)
                span = extent(v.shape, v.strides) * \
                    _abi.NUMPY_DTYPES[v.dtype].itemsize
                info = (memref_type(v, static), span)
                if len(_VIEW_INFO) > 4096:
                    _VIEW_INFO.clear()
                _VIEW_INFO[key] = info
            elif output:
                _abi.check_writeable(v)
            t, span = info
        if not self.params:
            self.device = dev
        elif dev != self.device:
            raise ValueError(f"{kw}: on {dev or 'the host'}, but the call's "
                             f"first operand is on {self.device or 'the host'}")
        (self.outputs if output else self.inputs).append((v, span))
        self.params.append((f"%{kw}", t, "mem", v))
        if clause:
            self.clauses.append(f"{kw}(%{kw} : {t})")
        return v

    def typed(self, kw):
        """`%kw : type` of a parameter added by mem()."""
        return next(f"{ssa} : {t}" for ssa, t, _, _ in self.params
                    if ssa == f"%{kw}")

    def ints(self, kw, x, static=()):
        """An index operand (offsets, lengths, block tables, sparse
        layouts): int32, as the kernels read it; anything else is named here
        rather than failing as a missing or uncompilable kernel."""
        v = self.mem(kw, x, static)
        if v is not None and v.dtype != "i32":
            raise ValueError(f"{kw}: expected int32, got {v.dtype}")
        return v

    def varlen_qkv(self, q, k, v, cu_seqlens_q, cu_seqlens_k):
        """The [tokens, heads, head_dim] q, k, v of flash and blocksparse
        and their sequences' offsets: the five Views, in that order."""
        qv = self.mem("q", q, (1, 2))
        check_head_dim(qv)
        return (qv, self.mem("k", k, (1, 2)), self.mem("v", v, (1, 2)),
                self.ints("cu_seqlens_q", cu_seqlens_q),
                self.ints("cu_seqlens_k", cu_seqlens_k))

    def descale(self, kw, x, kv_heads):
        """A unified descale: one value (as scale()), or one per sequence and
        KV head, [batch, kv_heads] f32 of any strides (vLLM passes
        `scale.expand((num_seqs, num_kv_heads))`). Returns the host value of
        a one-value descale, else None."""
        if x is None or getattr(x, "ndim", 0) != 2:
            return self.scale(kw, x)
        v = self.mem(kw, x, (1,))
        if v.dtype != "f32":
            raise ValueError(f"{kw}: a per-(sequence, KV head) descale must be "
                             f"float32, got {v.dtype}")
        if v.shape[1] != kv_heads:
            raise ValueError(f"{kw}: expected [num_seqs, {kv_heads}] (one value "
                             f"per KV head), got shape {tuple(v.shape)}")
        if reads_values(v.owner):
            vals = np.asarray(host_values(v.owner, kw), dtype=np.float64)
            for value in np.unique(vals):
                check_scale(float(value), kw)
        return None

    def finite(self, kw, x, static=(0,)):
        """A per-head operand whose values must be finite (ALiBi slopes,
        sinks)."""
        v = self.mem(kw, x, static)
        if v is not None:
            _check_finite_values(v, v.name)
        return v

    def check_aliasing(self):
        """No output shares memory with another operand (the kernels read
        inputs while writing outputs, so in-place calls are not
        supported). Fake tensors have no addresses to compare."""
        if self.meta:
            return
        for i, (out, span) in enumerate(self.outputs):
            lo, hi = out.ptr, out.ptr + span
            for other, other_span in self.inputs + self.outputs[:i]:
                # Disjoint byte ranges (the usual case) need no more work.
                if other.ptr >= hi or other.ptr + other_span <= lo:
                    continue
                if _abi.shares_memory(out, span, other, other_span):
                    raise ValueError(
                        f"{out.name}: shares memory with {other.name}; the "
                        f"kernels do not run in place: pass a separate "
                        f"output")

    def scalar(self, kw, value, ty="f32", clause=True):
        if value is None:
            return
        self.params.append((f"%{kw}", ty, ty, value))
        if clause:
            self.clauses.append(f"{kw}(%{kw})")

    def attr(self, name, value):
        if value is not None and value is not False:
            self.attrs.append(name if value is True else f"{name} = {value}")

    def kernel_name(self):
        """The kernel's symbol, named for what it computes so that profilers
        (nsys, ncu, perf) tell specializations apart:
        attn_<op>_<q type>_d<head dim>_h<q heads>[_gqa<G>][_kv<cache type>]
        then the features that select another program (causal, split<S>,
        window, softcap, alibi, sinks, bias, lse, ...)."""
        types = {ssa[1:]: t for ssa, t, kind, _ in self.params
                 if kind == "mem"}

        def dims(name):
            m = re.match(r"memref<([^,>]*)", types.get(name, ""))
            return m.group(1).split("x") if m else []

        parts = ["attn", self.op]
        q = dims("q") or dims("out") or dims("partial")
        if q:
            parts += [q[-1].lower(), f"d{q[-2]}"]
            heads = q[1] if len(q) > 2 else None
            if heads and heads != "?":
                parts.append(f"h{heads}")
            kv = dims("k") or dims("k_cache")
            kv_heads = None
            if "k_cache" in types and self.op == "unified":
                kv_heads = kv[2] if len(kv) > 2 else None
            elif kv:
                kv_heads = kv[1] if len(kv) > 1 else None
            if heads and kv_heads and kv_heads not in ("?", heads):
                parts.append(f"gqa{int(heads) // int(kv_heads)}")
            if kv and kv[-1] != q[-1]:
                parts.append(f"kv{kv[-1].lower()}")
        attrs = " ".join(self.attrs + sum(self.variants or [], []))
        operands = {ssa[1:] for ssa, _, _, _ in self.params}
        if self.op == "unified" and "segment_max" in operands:
            operands.add("split")  # split-KV: split<S>, or split (run time)
        if "sequence_partials" in attrs:
            operands.add("seqsplit")
        for word, tag in (("causal", "causal"), ("split", "split"),
                          ("merged_out", "merged"),
                          ("sliding_window", "window"), ("dropout", "dropout"),
                          ("quantize_to", "q8"),
                          ("short_sequences", "short"),
                          ("long_queries", "long"),
                          ("prefill_rows", "prefill"),
                          ("decode_rows", "decode"),
                          ("stream_pages", "stream"),
                          ("seqsplit", "seqsplit"),
                          ("min_query_len", "mixed")):
            if word in attrs or word in operands:
                m = re.search(r"num_segments = (\d+)", attrs)
                parts.append(tag + (m.group(1) if m and tag == "split"
                                    else ""))
        for operand, tag in (("softcap", "softcap"), ("alibi_slopes", "alibi"),
                             ("sinks", "sinks"), ("bias", "bias"),
                             ("qq_bias", "tree"), ("lse", "lse"),
                             ("segment_lse", "lse")):
            if operand in operands:
                parts.append(tag)
        return re.sub(r"[^A-Za-z0-9_]", "", "_".join(parts))

    def text(self):
        sig = ", ".join(f"{ssa}: {t}" for ssa, t, _, _ in self.params)
        ops = []
        for i, extra in enumerate(self.variants or [[]]):
            attrs = self.attrs + extra
            attrs = (" {" + ", ".join(attrs) + "}") if attrs else ""
            clauses = self.clauses + (self.variant_clauses[i]
                                      if self.variant_clauses else [])
            ops.append(f"  attn.{self.op} {' '.join(clauses)}{attrs}\n")
        # The name depends on the signature and attributes alone: memoized,
        # as every call builds its text (computing it is ~4 us).
        key = (self.op, sig, "".join(ops))
        self.name = _KERNEL_NAMES.get(key)
        if self.name is None:
            if len(_KERNEL_NAMES) > 4096:
                _KERNEL_NAMES.clear()
            self.name = _KERNEL_NAMES[key] = self.kernel_name()
        return (f"func.func @{self.name}({sig}) {{\n" + "".join(ops) +
                "  return\n}\n")

    @staticmethod
    def record(text):
        """Appends `text` to $ATTN_MLIR_RECORD when set; True when
        ATTN_MLIR_DRY_RUN says to stop there. Inside collect_specializations()
        the text goes to its list instead, and the call stops."""
        collected = _COLLECTING.get()
        if collected is not None:
            if text not in collected:
                collected.append(text)
            return True
        record = os.environ.get("ATTN_MLIR_RECORD")
        if record:
            with open(record, "a") as f:
                f.write(json.dumps({"mlir": text}) + "\n")
        return bool(os.environ.get("ATTN_MLIR_DRY_RUN"))

    def run(self):
        if self.meta:
            return
        text = self.text()
        if self.record(text):
            return
        if self.device is not None:
            return self._run_gpu(text)
        fn = load_kernel(text, self.name)
        fn.restype = None
        args, keep = [], []
        for _, _, kind, value in self.params:
            if kind == "mem":
                d = descriptor(value)
                keep.append(d)
                args.append(ctypes.byref(d))
            elif kind == "f32":
                args.append(ctypes.c_float(value))
            else:
                args.append(ctypes.c_int64(value))
        fn(*args)

    def _run_gpu(self, text):
        import torch
        from . import _gpu
        dev = self.device
        kernels = _GPU_KERNELS.get((text, dev.index))
        if kernels is None:
            if _launch._hip(torch):
                chip = _gpu.chip_for_hip_device(
                    torch.cuda.get_device_properties(dev))
            else:
                chip = _gpu.chip_for_capability(
                    *torch.cuda.get_device_capability(dev))
            kernels = _gpu.load_bundle(_gpu.bundle_for(text, chip), dev.index,
                                       _launch._hip(torch))
            _GPU_KERNELS[(text, dev.index)] = kernels
        _launch._launch_kernels(kernels, [p[3] for p in self.params], dev,
                                self.name, _launch._side_lane(self, kernels))
        _replay.captured(self, kernels)


def _prefix_prefill(q, k, v, k_cache, v_cache, block_table, query_start,
                    seq_lens, out, *, scale, k_scale=None, v_scale=None,
                    alibi_slopes=None, alibi_form=None, sinks=None,
                    out_scale=None, sliding_window=None, skip_decode=False,
                    schedule=None):
    c = _Call("prefix_prefill")
    qv = c.mem("q", q, (1, 2))
    check_head_dim(qv)
    kv_ = c.mem("k", k, (1, 2))
    vv = c.mem("v", v, (1, 2))
    kc = c.mem("k_cache", k_cache, (1, 2, 3, 4))
    vc = c.mem("v_cache", v_cache, (1, 2, 3))
    if vc is not None and vc.ndim == 4:
        check_int(vc.shape[3], vc.name, "block_size", "page size ")
    if kc is not None and kc.ndim == 5:
        check_int(kc.shape[4], kc.name, "block_size", "key split x = ")
    table = c.ints("block_table", block_table)
    qs = c.ints("query_start", query_start)
    lens = c.ints("seq_lens", seq_lens)
    scale = check_scale(scale, "scale", allow_zero=True)
    c.scalar("scale", scale)
    _fp8_scale(kc, k_scale, "k_scale")
    _fp8_scale(vc, v_scale, "v_scale")
    ks = c.scale("k_scale", k_scale)
    vs = c.scale("v_scale", v_scale)
    c.finite("alibi_slopes", alibi_slopes)
    c.finite("sinks", sinks)
    os_ = c.scale("out_scale", out_scale)
    ov = c.mem("out", out, (1, 2), output=True)
    _out_scale(ov, out_scale)
    if k_scale is not None:
        _product_range([("scale", scale), ("k_scale", ks)])
        _product_range([("v_scale", vs)])
    _out_scale_range(os_)
    c.attr("sliding_window", _window(sliding_window))
    c.attr("skip_decode", bool(skip_decode))
    c.attr("alibi_form", _alibi_form(alibi_form))
    c.attr("schedule", _schedule_attr(schedule))
    c.check_aliasing()
    _preconditions.prefix_prefill(qv, kv_, vv, ov, kc, vc, table, qs, lens)
    c.run()


def _unified(q, k_cache, v_cache, block_table, cu_seqlens_q, seqused_k, out, *,
             scale, softcap=None, q_descale=None, k_descale=None,
             v_descale=None, alibi_slopes=None, alibi_form=None, sinks=None,
             out_scale=None, sliding_window=None, num_segments=None,
             segment_max=None, segment_sum=None, qq_bias=None,
             mm_prefix_range=None, mm_prefix_clamp_window=False,
             rswa_prefix_lens=None, rswa_window=None, causal=True,
             chunk_lookback=None, k_scale_cache=None, v_scale_cache=None,
             lse=None, schedule=None, merged_out=None, merge_counters=None,
             decode_split=None, stream_pages=False):
    """stream_pages: the split-KV form's programs each read few keys
    (the vLLM drop-in's plan says): the attn.stream_pages hint, under
    which sm_90a's split programs load pages with an L2 evict-first
    policy. It never changes the result.

    decode_split(rows): where the call runs as a mixed batch's two ops
    (below), its decode op splits the keys into segments: a function giving
    that op's workspace for `rows` partial rows (sequences x the decode op's
    max_query_len): partial [rows, q_heads, S, head_dim], segment_max and
    segment_sum [rows, q_heads, S] f32, merge counters [rows, q_heads] int32
    (zeros); S is the partial's dim 2; or None: no split. Other calls
    ignore it."""
    if num_segments is not None:
        num_segments = check_int(num_segments, "num_segments", "num_segments")
    c = _Call("unified")
    qv = c.mem("q", q, (1, 2))
    check_head_dim(qv)
    kc = c.mem("k_cache", k_cache, (1, 2, 3))
    vc = c.mem("v_cache", v_cache, (1, 2, 3))
    if kc is not None and kc.ndim == 4:
        check_int(kc.shape[1], kc.name, "block_size", "page size ")
    table = c.ints("block_table", block_table)
    cq = c.ints("cu_seqlens_q", cu_seqlens_q)
    used = c.ints("seqused_k", seqused_k)
    scale = check_scale(scale, "scale", allow_zero=True)
    c.scalar("scale", scale)
    c.scalar("softcap", _softcap(softcap))
    _fp8_scale(qv, q_descale, "q_descale")
    kv_heads = kc.shape[2] if kc is not None else 0
    token_scales = _check_token_scales(kc, qv, k_scale_cache, v_scale_cache,
                                       k_descale, v_descale)
    if not token_scales:
        _fp8_scale(kc, k_descale, "k_descale")
        _fp8_scale(vc, v_descale, "v_descale")
    qs = c.descale("q_descale", q_descale, kv_heads)
    ks = c.descale("k_descale", k_descale, kv_heads)
    vs = c.descale("v_descale", v_descale, kv_heads)
    c.finite("alibi_slopes", alibi_slopes)
    c.finite("sinks", sinks)
    c.mem("qq_bias", qq_bias)
    c.mem("mm_prefix_range", mm_prefix_range, (2,))
    c.mem("rswa_prefix_lens", rswa_prefix_lens)
    if (rswa_prefix_lens is None) != (rswa_window is None):
        raise ValueError("rswa_window: R-SWA needs both rswa_prefix_lens and "
                         "rswa_window")
    if rswa_window is not None:
        rswa_window = check_int(rswa_window, "rswa_window", "sliding_window")
        if sliding_window is not None or mm_prefix_range is not None:
            raise ValueError("rswa_prefix_lens: cannot be combined with "
                             "sliding_window or mm_prefix_range")
    if mm_prefix_clamp_window and mm_prefix_range is None:
        raise ValueError("mm_prefix_clamp_window: requires mm_prefix_range")
    if token_scales:
        _token_scale_operands(c, kc, k_scale_cache, v_scale_cache)
    _causal_operand(c, causal)
    os_ = c.scale("out_scale", out_scale)
    # Split-KV: segment_max/segment_sum given. With num_segments the count
    # is static (a kernel per count); without, it is out's dim 2 at run time
    # (one kernel for every count).
    split = num_segments is not None or segment_max is not None or \
        segment_sum is not None
    static_out = (1, 2, 3) if num_segments else (1, 3) if split else (1, 2)
    ov = c.mem("out", out, static_out, output=True)
    out_clause = len(c.clauses) - 1
    c.mem("segment_max", segment_max, (1, 2) if num_segments else (1,),
          output=True)
    c.mem("segment_sum", segment_sum, (1, 2) if num_segments else (1,),
          output=True)
    if split and num_segments is None and ov is not None:
        if ov.ndim != 4:
            raise ValueError(f"out: the split-KV form (segment_max given) "
                             f"takes [tokens, q_heads, segments, head_dim] "
                             f"f32, got shape {tuple(ov.shape)}")
        check_int(ov.shape[2], "out", "num_segments", "the segment count "
                  "(dim 2) = ")
    if lse is not None and split and merged_out is None:
        raise ValueError("lse: not valid in the split-KV form (num_segments) "
                         "without merged_out; segment_max/segment_sum hold "
                         "the statistics")
    _lse_operand(c, lse, qv)
    fused = _merge_operands(c, merged_out, merge_counters, qv, split)
    if not split:
        _out_scale(ov, out_scale)
    elif fused:
        _out_scale(fused, out_scale)
    elif out_scale is not None or sinks is not None:
        name = "out_scale" if out_scale is not None else "sinks"
        raise ValueError(f"{name}: not valid in the split-KV form "
                         f"(num_segments) without merged_out; the merge "
                         f"applies it")
    if k_descale is not None:
        _product_range([("scale", scale)] + ([("q_descale", qs)] if q_descale
                                             is not None else [])
                       + [("k_descale", ks)])
        _product_range([("v_descale", vs)])
    _out_scale_range(os_)
    c.attr("sliding_window", _window(sliding_window))
    c.attr("num_segments", f"{num_segments} : i64" if num_segments else None)
    c.attr("alibi_form", _alibi_form(alibi_form))
    c.attr("rswa_window", f"{rswa_window} : i64" if rswa_window else None)
    c.attr("mm_prefix_clamp_window", bool(mm_prefix_clamp_window))
    _chunk_lookback(c, chunk_lookback, sliding_window, rswa_window)
    # A planning hint from the shapes alone (no device read): queries that
    # average more than LONG_QUERY_TOKENS a sequence (prefill rows, alone
    # or in a mixed batch). On sm_90a the plan then gives 16-bit unified
    # programs three K/V stages (Plan.cpp, kLongQueriesHint); the result is
    # the same. Set only where it can matter: other calls keep one
    # specialization.
    sequences = cq.shape[0] - 1 if cq is not None else 0
    c.attr("attn.long_queries", schedule is None and sequences > 0 and
           kc is not None and vc is not None and
           qv.shape[0] > LONG_QUERY_TOKENS * sequences and
           qv.dtype in ("bf16", "f16") and kc.dtype == qv.dtype and
           vc.dtype == qv.dtype and qv.shape[-1] in (64, 128))
    # The prefill-rows hint: queries averaging at least PREFILL_ROW_TOKENS a
    # sequence (prefill batches, with few decodes if any). On sm_90a the
    # plan then gives unified programs of 16-bit queries and heads of 64 or
    # 128 prefix prefill's gathering producer warpgroup (Plan.cpp,
    # kPrefillRowsHint), over caches stored like Q or fp8 caches with one
    # descale each. Set only where the plan can take it: other calls keep
    # one specialization.
    def one_value(d):   # a descale of one value, not [num_seqs, kv_heads]
        return d is None or getattr(d, "ndim", 0) != 2
    prefill_rows_but_length = (
           schedule is None and sequences > 0 and
           kc is not None and vc is not None and
           qv.dtype in ("bf16", "f16") and
           ((kc.dtype == qv.dtype and vc.dtype == qv.dtype and
             k_descale is None and v_descale is None) or
            (kc.dtype in FP8 and vc.dtype == kc.dtype and
             one_value(k_descale) and one_value(v_descale))) and
           qv.shape[-1] in (64, 128) and
           ov is not None and ov.dtype == qv.dtype and not split and
           lse is None and out_scale is None and q_descale is None and
           not token_scales and
           qq_bias is None and
           mm_prefix_range is None and rswa_prefix_lens is None and
           chunk_lookback is None and isinstance(causal, (bool, np.bool_)) and
           (alibi_slopes is None or alibi_form != "sqrt"))
    c.attr("attn.prefill_rows", prefill_rows_but_length and
           qv.shape[0] >= PREFILL_ROW_TOKENS * sequences)
    # The decode-rows hint: a sequence's queries times the query heads of a
    # KV head average at most DECODE_ROWS (decode, speculative decode), over
    # fp8 caches (16-bit queries, heads of whole 16-dim steps up to 128). On
    # sm_90a the plan then gives the programs one 16-row slab whose four
    # warps split each KV tile's keys (Plan.cpp, kDecodeRowsHint). Set only
    # where the plan can take it.
    decode_rows = (schedule is None and sequences > 0 and
                   kc is not None and vc is not None and kv_heads > 0 and
                   qv.shape[1] // kv_heads <= DECODE_ROWS and
                   qv.dtype in ("bf16", "f16") and kc.dtype in FP8 and
                   vc.dtype in FP8 and qv.shape[-1] <= 128 and
                   qv.shape[-1] % 16 == 0)
    c.attr("attn.decode_rows", decode_rows and
           qv.shape[0] * (qv.shape[1] // kv_heads) <=
           DECODE_ROWS * sequences)
    c.attr("attn.stream_pages", bool(stream_pages) and
           segment_max is not None)
    c.attr("schedule", _schedule_attr(schedule))
    # A mixed batch (several sequences whose queries average more than
    # LONG_QUERY_TOKENS and fewer than PREFILL_ROW_TOKENS, so no hint above
    # suits it whole) over caches MIXED_SPLIT_CACHES names runs as two
    # ops: sequences of at most a decode program's tokens on decode
    # programs, the others as prefill rows (AttnOps.td, min_query_len).
    # With decode_split (the drop-in's planner), so does any batch of
    # several sequences whose decode op it splits (few sequences over long
    # keys): one prefill-rows program, or one unsplit decode program, would
    # stream a long decode's keys alone.
    if (prefill_rows_but_length and sequences > 1 and
            (("fp8" if kc.dtype in FP8 else "16-bit") in MIXED_SPLIT_CACHES)
            and (kc.dtype not in FP8 or decode_rows)):
        pack = qv.shape[1] // kv_heads
        rows = DECODE_ROWS if kc.dtype in FP8 else 64
        short = max(MIXED_DECODE_TOKENS, rows // pack)
        buffers = decode_split(sequences * short) if decode_split and \
            ov is not None else None
        if buffers is not None or LONG_QUERY_TOKENS * sequences < \
                qv.shape[0] < PREFILL_ROW_TOKENS * sequences:
            c.attrs = [a for a in c.attrs if a not in (
                "attn.long_queries", "attn.prefill_rows",
                "attn.decode_rows")]
            c.variants = [
                ["attn.decode_rows"] * (kc.dtype in FP8) +
                [f"max_query_len = {short} : i64"],
                ["attn.prefill_rows", f"min_query_len = {short + 1} : i64"]]
            # The two ops write disjoint rows: the decode op runs on a side
            # stream beside the prefill op (MIXED_SIDE_HIGH).
            c.side = (0, ("fp8" if kc.dtype in FP8 else "16-bit")
                      in MIXED_SIDE_HIGH)
        if buffers is not None:
            _decode_split_operands(c, buffers, qv, sequences * short,
                                   out_clause)
    c.check_aliasing()
    operands = {ssa[1:]: value for ssa, _, kind, value in c.params
                if kind == "mem"}
    _preconditions.unified(
        qv, ov, kc, vc, table, cq, used,
        [operands.get(kw) for kw in ("q_descale", "k_descale", "v_descale",
                                     "causal_flags", "mm_prefix_range",
                                     "rswa_prefix_lens")
         if operands.get(kw) is not None and
         (kw not in ("q_descale", "k_descale", "v_descale") or
          operands[kw].ndim == 2)],
        # (A mixed batch's split decode op has rows by sequence, checked
        # in _decode_split_operands.)
        [] if c.variant_clauses else
        [operands.get("segment_max"), operands.get("segment_sum")])
    c.run()


# ops.unified's long-queries hint: queries per sequence, on average, above
# which sm_90a runs three K/V stages (the mixed batch of 4 prefills of 1k
# and 60 decodes: 4% faster on H100; decode-only rows 1-3% slower:
# bench/results/2026-11-27-h100-unified-three-stages.md).
LONG_QUERY_TOKENS = 16
# ops.unified's prefill-rows hint: queries per sequence, on average, from
# which sm_90a runs heads of 64 and 128 on the gathering producer warpgroup
# (H200: prefill rows 1.06-1.36x; the mixed batch above, 65 a sequence, 22%
# slower there: bench/results/2026-11-28-h200-unified-prefill-gather.md).
PREFILL_ROW_TOKENS = 128
# ops.unified's decode-rows hint: M-tile rows (query tokens times the query
# heads of a KV head) per sequence, on average, up to which sm_90a runs
# fp8-cache programs of one 16-row slab, four warps splitting the keys (H200:
# 1.27-1.31x for decode of 1 and 4 tokens, B=64 ctx 4096 GQA 32/8:
# bench/results/2026-11-29-h200-decode-key-split.md).
DECODE_ROWS = 16
# ops.unified's mixed-batch split: the cache kinds ("fp8", "16-bit") whose
# mixed batches run as a decode op and a prefill-rows op, and the query
# tokens a sequence (at least) that the decode op takes. The two ops run at
# once: the decode op's kernel on a side stream (_launch._in_lanes) at the
# device's least priority, or its greatest for the cache kinds
# MIXED_SIDE_HIGH names. H200, GQA 32/8 D=128, four mixed batches, CUDA
# graphs (bench/results/2026-11-30-h200-session26.md), against the split on
# one stream: over e4m3 caches 1.04-1.06x (4 prefills of 1k and 60 decodes:
# 219.9 -> 206.5 us), the greatest priority 0.3-1.3% behind the least; over
# bf16 caches, against the one op these batches ran as before, 0.99-1.17x
# (that batch 224.0 -> 226.5; 8 prefills of 512 after 1536 cached beside 56
# decodes 445 -> 380). On one stream the split lost to the one op over bf16
# (0.93x on the first batch: the one op runs the prefills' compute beside
# the decodes' reads, which the side stream now does).
MIXED_SPLIT_CACHES = ("fp8", "16-bit")
MIXED_SIDE_HIGH = ()
MIXED_DECODE_TOKENS = 4


def _decode_split_operands(c, buffers, qv, rows, out_clause):
    """A mixed batch's decode op in the split-KV form with the fused merge
    and partials by sequence (AttnOps.td, sequence_partials): `buffers`
    (partial, segment_max, segment_sum, merge counters) of `rows` rows
    become its outputs; the prefill op keeps out."""
    partial, seg_max, seg_sum, counters = buffers
    tokens, heads, d = qv.shape
    pv = c.mem("partial", partial, (1, 3), output=True, clause=False)
    if pv.dtype != "f32" or pv.ndim != 4 or \
            tuple(pv.shape[:2]) != (rows, heads) or pv.shape[3] != d:
        raise ValueError(f"partial: expected float32 [{rows}, {heads}, "
                         f"segments, {d}], got {pv.dtype} {list(pv.shape)}")
    segments = check_int(pv.shape[2], "partial", "num_segments",
                         "the segment count (dim 2) = ")
    for kw, x in (("segment_max", seg_max), ("segment_sum", seg_sum)):
        v = c.mem(kw, x, (1,), output=True, clause=False)
        if v.dtype != "f32" or tuple(v.shape) != (rows, heads, segments):
            raise ValueError(f"{kw}: expected float32 [{rows}, {heads}, "
                             f"{segments}], got {v.dtype} {list(v.shape)}")
    _counters_operand(c, counters, (rows, heads), clause=False)
    out = c.clauses.pop(out_clause)
    c.variant_clauses = [
        [f"out({c.typed('partial')})",
         f"segment_max({c.typed('segment_max')})",
         f"segment_sum({c.typed('segment_sum')})",
         f"merged_out({c.typed('out')})",
         f"merge_counters({c.typed('merge_counters')})"],
        [out]]
    c.variants[0] = c.variants[0] + ["sequence_partials"]


def _check_token_scales(kc, qv, k_scales, v_scales, k_descale, v_descale):
    """Per-token-head scale caches of unified(); returns whether given."""
    if k_scales is None and v_scales is None:
        if kc is not None and kc.dtype == "i8":
            raise ValueError("k_cache: an int8 cache needs k_scale_cache and "
                             "v_scale_cache (per-token-head scales)")
        return False
    if k_scales is None or v_scales is None:
        missing = "k_scale_cache" if k_scales is None else "v_scale_cache"
        raise ValueError(f"{missing}: per-token-head scales come in pairs")
    for name, d in (("k_descale", k_descale), ("v_descale", v_descale)):
        if d is not None:
            raise ValueError(f"{name}: not valid with per-token-head scale "
                             f"caches (they replace it)")
    if kc.dtype not in FP8 + ("i8",):
        raise ValueError(f"k_cache: per-token-head scale caches need an int8 "
                         f"or fp8 cache, got {kc.dtype}")
    if qv is not None and qv.dtype in FP8:
        raise ValueError("q: must not be fp8 with per-token-head scale caches")
    return True


def _token_scale_operands(c, kc, k_scales, v_scales):
    for kw, x in (("k_scale_cache", k_scales), ("v_scale_cache", v_scales)):
        v = c.mem(kw, x, (1, 2))
        if v.dtype != "f32":
            raise ValueError(f"{kw}: must be float32, got {v.dtype}")
        if v.ndim != 3 or tuple(v.shape) != tuple(kc.shape[:3]):
            raise ValueError(f"{kw}: expected [num_blocks, block_size, "
                             f"kv_heads] = {tuple(kc.shape[:3])}, got shape "
                             f"{tuple(v.shape)}")
        _check_finite_values(v, kw)


def _lse_operand(c, lse, qv):
    """The optional row log-sum-exp output: f32 [tokens, q_heads] of q."""
    if lse is None:
        return
    lv = c.mem("lse", lse, (1,), output=True)
    if lv.dtype != "f32" or lv.ndim != 2 or (
            qv is not None and tuple(lv.shape) != tuple(qv.shape[:2])):
        want = f"[{qv.shape[0]}, {qv.shape[1]}]" if qv is not None else \
            "[tokens, q_heads]"
        raise ValueError(f"lse: expected float32 {want} (one value per query "
                         f"row and head), got {lv.dtype} "
                         f"{list(lv.shape)}")


def _merge_operands(c, merged_out, merge_counters, qv, split):
    """unified()'s fused merge: merged_out ([tokens, q_heads, head_dim], as
    the one-pass form's out) and merge_counters ([tokens, q_heads] int32,
    zeros; every completed call leaves them zero). Returns merged_out's
    View, or None."""
    if merged_out is None and merge_counters is None:
        return None
    if merged_out is None or merge_counters is None:
        missing = "merged_out" if merged_out is None else "merge_counters"
        raise ValueError(f"{missing}: the fused merge takes both merged_out "
                         f"and merge_counters")
    if not split:
        raise ValueError("merged_out: only valid in the split-KV form "
                         "(segment_max/segment_sum), whose segments it merges")
    mo = c.mem("merged_out", merged_out, (1, 2), output=True)
    _counters_operand(c, merge_counters,
                      tuple(qv.shape[:2]) if qv is not None else None)
    if qv is not None and tuple(mo.shape) != tuple(qv.shape):
        raise ValueError(f"merged_out: expected shape {tuple(qv.shape)} (q's), "
                         f"got {tuple(mo.shape)}")
    return mo


def _counters_operand(c, counters, want, clause=True):
    """The fused merge's merge_counters: int32 of shape `want` ([rows,
    q_heads]; None: any rank-2), zeros. Returns its View."""
    mc = c.mem("merge_counters", counters, (1,), output=True, clause=clause)
    if mc.dtype != "i32" or mc.ndim != 2 or (want and tuple(mc.shape) != want):
        raise ValueError(f"merge_counters: expected int32 "
                         f"{list(want) if want else '[tokens, q_heads]'} "
                         f"(zeros), got {mc.dtype} {list(mc.shape)}")
    # Counters that are not zero would make no program the last one: the
    # rows would silently not be merged. Host arrays are always read,
    # device ones under ATTN_MLIR_VALIDATE=1.
    if reads_values(mc.owner) and \
            np.asarray(host_values(mc.owner, "merge_counters")).any():
        raise ValueError("merge_counters: must hold zeros (every completed "
                         "call leaves them zero; a buffer not zeroed, or "
                         "left by a launch that failed)")
    return mc


def _causal_operand(c, causal):
    """unified()'s causal: a bool, or per-sequence flags [batch]."""
    if isinstance(causal, (bool, np.bool_)):
        c.attr("bidirectional", not bool(causal))
        return
    flags = c.mem("causal_flags", causal)
    if flags.ndim != 1 or flags.dtype != "i8":
        raise ValueError(f"causal: expected a bool or a [num_seqs] bool/"
                         f"int8 tensor, got {flags.dtype} of shape "
                         f"{tuple(flags.shape)}")


def _chunk_lookback(c, chunk_lookback, sliding_window, rswa_window):
    if chunk_lookback is None:
        return
    lookback = check_int(chunk_lookback, "chunk_lookback", label="")
    if sliding_window is None:
        raise ValueError("chunk_lookback: requires sliding_window (the "
                         "chunks are cut from it)")
    window = int(sliding_window)
    if not 0 <= lookback < window:
        raise ValueError(f"chunk_lookback: must be in [0, {window}) so that "
                         f"chunks of sliding_window // (chunk_lookback + 1) "
                         f"keys are not empty, got {lookback}")
    if rswa_window is not None:
        raise ValueError("chunk_lookback: cannot be combined with R-SWA")
    c.attr("chunk_lookback", f"{lookback} : i64")


def _flash(q, k, v, cu_seqlens_q, cu_seqlens_k, out, *, scale, causal=False,
           bias=None, dropout=None, fp8_scales=None, out_scale=None,
           lse=None, schedule=None):
    c = _Call("flash")
    qv, kv_, vv, cq, ck = c.varlen_qkv(q, k, v, cu_seqlens_q, cu_seqlens_k)
    scale = check_scale(scale, "scale", allow_zero=True)
    c.scalar("scale", scale)
    bv = c.mem("bias", bias,
               (0, 1) if bias is not None and bias.shape[0] == 1 else (1,))
    if dropout is not None:
        if not isinstance(dropout, (tuple, list)) or len(dropout) != 3:
            raise ValueError(f"dropout: expected (p, philox_seed, "
                             f"philox_offset), got {dropout!r}")
        p = check_real(dropout[0], "dropout_p")
        if not 0.0 <= p < 1.0:
            raise ValueError(f"dropout_p: must be in [0, 1), got {dropout[0]}")
        c.scalar("dropout_p", p, clause=False)
        c.scalar("philox_seed", _i64(dropout[1], "philox_seed"), "i64",
                 clause=False)
        c.scalar("philox_offset", _i64(dropout[2], "philox_offset"), "i64",
                 clause=False)
        c.clauses.append("dropout(%dropout_p, %philox_seed, %philox_offset)")
    names = ("q_scale", "k_scale", "v_scale", "p_scale")
    fp8 = qv.dtype in FP8
    if fp8 and fp8_scales is None:
        raise ValueError(f"fp8_scales: required when q is fp8 ({qv.dtype})")
    quantize_to = None
    if fp8_scales is not None:
        if not isinstance(fp8_scales, (tuple, list)) or len(fp8_scales) != 4:
            raise ValueError("fp8_scales: expected (q_scale, k_scale, "
                             "v_scale, p_scale)")
        types = [t.dtype for t in (qv, kv_, vv)]
        fp8_types = sorted({t for t in types if t in FP8})
        if len(fp8_types) > 1:
            raise ValueError(f"fp8_scales: q, k, v mix fp8 types {fp8_types}")
        if any(t not in FP8 for t in types):
            # Quantized on load to the fp8 type of the others, or e4m3.
            quantize_to = fp8_types[0] if fp8_types else "f8E4M3FN"
        values = [c.scale(kw, s) for kw, s in zip(names, fp8_scales)]
        qs, ks, vs, ps = values
        _product_range([("scale", scale), ("q_scale", qs), ("k_scale", ks)])
        _product_range([("p_scale", ps), ("v_scale", vs)])
        _p_scale_range(ps, quantize_to or vv.dtype)
    os_ = c.scale("out_scale", out_scale)
    ov = c.mem("out", out, (1, 2), output=True)
    _lse_operand(c, lse, qv)
    _out_scale(ov, out_scale)
    _out_scale_range(os_)
    c.attr("causal", bool(causal))
    c.attr("quantize_to", quantize_to)
    # A planning hint from the shapes alone (no device read): queries that
    # average at most SHORT_SEQUENCE_TOKENS a sequence (causal: at most
    # SHORT_CAUSAL_SEQUENCE_TOKENS). On sm_90a the plan
    # then takes the persistent form of its schedule for 16-bit heads up to
    # 128 without bias, dropout or lse (Plan.cpp, kShortSequencesHint); the
    # result is the same. Set only where it can matter: other calls keep
    # one specialization.
    sequences = cq.shape[0] - 1 if cq is not None else 0
    c.attr("attn.short_sequences", schedule is None and sequences > 0 and
           qv.shape[0] <= sequences * (SHORT_CAUSAL_SEQUENCE_TOKENS if causal
                                       else SHORT_SEQUENCE_TOKENS) and
           qv.dtype in ("bf16", "f16") and kv_.dtype == qv.dtype and
           vv.dtype == qv.dtype and qv.shape[-1] <= 128 and bias is None and
           dropout is None and lse is None and quantize_to is None)
    c.attr("schedule", _schedule_attr(schedule))
    c.check_aliasing()
    _preconditions.flash(qv, kv_, vv, cq, ck, ov, bv)
    c.run()


# ops.flash's short-sequences hint: queries per sequence, on average, at or
# under which sm_90a runs the persistent program, whose blocks claim their
# programs in turn (causal ones longest first). On H200 (D = 128, 16K
# tokens, bench/results/2026-11-29-h200-session19.md) it ran 3-12% faster
# than the grid of one block a program at 512 and 1024 (non-causal), level
# at 2048, 5% slower at 4096; causal 3-16% faster up to 4096, 1-5% slower
# at 8192 and 16384. Since its non-causal programs are claimed in sections
# of head groups that share L2 (bench/results/2026-11-30-h200-session23.md)
# it runs 1-2% faster than the grid at 2048 and 4096 too, but 2-3% slower
# on a varlen batch of 8 random lengths up to 4096 (average 1429), so the
# non-causal bound stays at 1024.
SHORT_SEQUENCE_TOKENS = 1024
SHORT_CAUSAL_SEQUENCE_TOKENS = 4096


def _blocksparse(q, k, v, cu_seqlens_q, cu_seqlens_k, crow, col, out, *, scale,
                 block_size, q_block_size=None, schedule=None):
    block_size = check_int(block_size, "block_size", "sparse_block")
    if q_block_size is not None:
        q_block_size = check_int(q_block_size, "q_block_size", "sparse_block")
    c = _Call("blocksparse")
    qv, kv_, vv, cq, ck = c.varlen_qkv(q, k, v, cu_seqlens_q, cu_seqlens_k)
    rows = c.ints("crow", crow, (0,))
    cols = c.ints("col", col, (0,))
    c.scalar("scale", check_scale(scale, "scale", allow_zero=True))
    ov = c.mem("out", out, (1, 2), output=True)
    c.attr("block_size", f"{block_size} : i64")
    c.attr("q_block_size", f"{q_block_size} : i64" if q_block_size else None)
    c.attr("schedule", _schedule_attr(schedule))
    c.check_aliasing()
    if qv is not None:
        _preconditions.blocksparse(qv, kv_, vv, cq, ck, rows, cols, ov,
                                   qv.shape[1], q_block_size or block_size)
    c.run()


def _merge_states(partial, out, *, segment_max=None, segment_sum=None,
                  segment_lse=None, sinks=None, out_scale=None):
    c = _Call("merge_states")
    pv = c.mem("partial", partial, (1, 3))
    allowed = ("f32", "f16", "bf16") if segment_lse is not None else ("f32",)
    if pv is not None and pv.dtype not in allowed:
        form = "the lse form" if segment_lse is not None else \
            "the max/sum form (16-bit partials need segment_lse)"
        raise ValueError(f"partial: expected {', '.join(allowed)} in {form}, "
                         f"got {pv.dtype}")
    stats = [c.mem("segment_max", segment_max, (1,)),
             c.mem("segment_sum", segment_sum, (1,)),
             c.mem("segment_lse", segment_lse, (1,))]
    c.finite("sinks", sinks)
    os_ = c.scale("out_scale", out_scale)
    ov = c.mem("out", out, (1, 2), output=True)
    check_head_dim(ov)
    _out_scale(ov, out_scale)
    _out_scale_range(os_)
    c.check_aliasing()
    _preconditions.merge_states(pv, ov, stats)
    c.run()


# ---------------------------------------------------------------------------
# Entry points: torch tensors go through torch.ops.attn_mlir (torch_ops) where
# something traces or observes the call (torch.compile, a dispatch mode, fake
# tensors), so that torch.compile traces it; other calls run directly.
# ---------------------------------------------------------------------------

_TORCH_OPS = None


def _torch_route(x):
    """attn_mlir.torch_ops when a call on `x` goes through
    torch.ops.attn_mlir (torch.compile, dispatch modes, fake tensors:
    torch_ops.runs_directly), else False: the implementation runs here."""
    if not is_torch(x):
        return False
    t = _torch_ops()
    return t if t and not t.runs_directly(x) else False


def _torch_ops():
    """attn_mlir.torch_ops, imported (registering the torch library) on the
    first torch call: importing attn_mlir does not import torch. False for
    a torch without torch.library.register_fake (before 2.4): torch calls
    then run directly, as before the library existed."""
    global _TORCH_OPS
    if _TORCH_OPS is None:
        try:
            from . import torch_ops
            _TORCH_OPS = torch_ops
        except ImportError as e:
            warnings.warn(f"attn_mlir: torch.ops.attn_mlir not registered "
                          f"({e}); torch calls run directly, and "
                          f"torch.compile breaks the graph at them",
                          RuntimeWarning, stacklevel=3)
            _TORCH_OPS = False
    return _TORCH_OPS


@_replay.replayable("prefix_prefill")
def prefix_prefill(q, k, v, k_cache, v_cache, block_table, query_start,
                   seq_lens, out, *, scale, k_scale=None, v_scale=None,
                   alibi_slopes=None, alibi_form=None, sinks=None,
                   out_scale=None, sliding_window=None, skip_decode=False,
                   schedule=None):
    t = _torch_route(q)
    if t:
        return t.prefix_prefill(
            q, k, v, k_cache, v_cache, block_table, query_start, seq_lens,
            out, scale, k_scale, v_scale, alibi_slopes, alibi_form, sinks,
            out_scale, sliding_window, skip_decode, schedule)
    _prefix_prefill(q, k, v, k_cache, v_cache, block_table, query_start,
                    seq_lens, out, scale=scale, k_scale=k_scale,
                    v_scale=v_scale, alibi_slopes=alibi_slopes,
                    alibi_form=alibi_form, sinks=sinks, out_scale=out_scale,
                    sliding_window=sliding_window, skip_decode=skip_decode,
                    schedule=schedule)


@_replay.replayable("unified")
def unified(q, k_cache, v_cache, block_table, cu_seqlens_q, seqused_k, out, *,
            scale, softcap=None, q_descale=None, k_descale=None,
            v_descale=None, alibi_slopes=None, alibi_form=None, sinks=None,
            out_scale=None, sliding_window=None, num_segments=None,
            segment_max=None, segment_sum=None, qq_bias=None,
            mm_prefix_range=None, mm_prefix_clamp_window=False,
            rswa_prefix_lens=None, rswa_window=None, causal=True,
            chunk_lookback=None, k_scale_cache=None, v_scale_cache=None,
            lse=None, schedule=None, merged_out=None, merge_counters=None):
    """qq_bias: tree bias [rows, cols]; mm_prefix_range: bidirectional
    (start, end) ranges [batch, R, 2] i32; rswa_prefix_lens ([batch] i32) with
    rswa_window: R-SWA (docs/semantics.md 2 and 3.2). causal: True, False
    (bidirectional) or per-sequence flags [batch] (bool or int8);
    chunk_lookback (with sliding_window): chunked attention;
    k_scale_cache/v_scale_cache [num_blocks, block_size, kv_heads] f32:
    per-token-head scales of i8 or fp8 caches (vLLM's kv_quant_mode 2, 3).
    lse: [tokens, q_heads] f32, receives each row's log-sum-exp (see
    flash; in the split-KV form only with merged_out, over all segments).
    In the split-KV form, merged_out ([tokens, q_heads, head_dim]) with
    merge_counters ([tokens, q_heads] int32 zeros, left zero) also merges
    the segments in the same launch, as merge_states would (sinks and
    out_scale apply there)."""
    t = _torch_route(q)
    if t:
        return t.unified(
            q, k_cache, v_cache, block_table, cu_seqlens_q, seqused_k, out,
            scale, softcap, q_descale, k_descale, v_descale, alibi_slopes,
            alibi_form, sinks, out_scale, sliding_window, num_segments,
            segment_max, segment_sum, qq_bias, mm_prefix_range,
            mm_prefix_clamp_window, rswa_prefix_lens, rswa_window, causal,
            chunk_lookback, k_scale_cache, v_scale_cache, lse, schedule,
            merged_out, merge_counters)
    _unified(q, k_cache, v_cache, block_table, cu_seqlens_q, seqused_k, out,
             scale=scale, softcap=softcap, q_descale=q_descale, k_descale=k_descale,
             v_descale=v_descale, alibi_slopes=alibi_slopes, alibi_form=alibi_form,
             sinks=sinks, out_scale=out_scale, sliding_window=sliding_window,
             num_segments=num_segments, segment_max=segment_max,
             segment_sum=segment_sum, qq_bias=qq_bias,
             mm_prefix_range=mm_prefix_range,
             mm_prefix_clamp_window=mm_prefix_clamp_window,
             rswa_prefix_lens=rswa_prefix_lens, rswa_window=rswa_window,
             causal=causal, chunk_lookback=chunk_lookback,
             k_scale_cache=k_scale_cache, v_scale_cache=v_scale_cache, lse=lse,
             schedule=schedule, merged_out=merged_out,
             merge_counters=merge_counters)


@_replay.replayable("flash")
def flash(q, k, v, cu_seqlens_q, cu_seqlens_k, out, *, scale, causal=False,
          bias=None, dropout=None, fp8_scales=None, out_scale=None,
          lse=None, schedule=None):
    """dropout: (p, philox_seed, philox_offset); fp8_scales: (q, k, v, p).
    With fp8_scales, q, k and v that are not fp8 are quantized to fp8 (e4m3,
    or the type of those that are) as the kernel loads them, as vLLM's
    wrapper does with torch ops before its launch. lse: [total_q, q_heads]
    f32, receives each row's log-sum-exp (natural log, -inf for a row that
    sees no key): outputs over disjoint key ranges (context parallelism)
    then merge exactly with merge_states(segment_lse=...)."""
    t = _torch_route(q)
    if t:
        return t.flash(q, k, v, cu_seqlens_q, cu_seqlens_k, out, scale,
                       causal, bias, dropout, fp8_scales, out_scale, lse,
                       schedule)
    _flash(q, k, v, cu_seqlens_q, cu_seqlens_k, out, scale=scale,
           causal=causal, bias=bias, dropout=dropout, fp8_scales=fp8_scales,
           out_scale=out_scale, lse=lse, schedule=schedule)


@_replay.replayable("blocksparse")
def blocksparse(q, k, v, cu_seqlens_q, cu_seqlens_k, crow, col, out, *, scale,
                block_size, q_block_size=None, schedule=None):
    t = _torch_route(q)
    if t:
        return t.blocksparse(q, k, v, cu_seqlens_q, cu_seqlens_k, crow, col,
                             out, scale, block_size, q_block_size, schedule)
    _blocksparse(q, k, v, cu_seqlens_q, cu_seqlens_k, crow, col, out,
                 scale=scale, block_size=block_size,
                 q_block_size=q_block_size, schedule=schedule)


@_replay.replayable("merge_states")
def merge_states(partial, out, *, segment_max=None, segment_sum=None,
                 segment_lse=None, sinks=None, out_scale=None):
    t = _torch_route(partial)
    if t:
        return t.merge_states(partial, out, segment_max, segment_sum,
                              segment_lse, sinks, out_scale)
    _merge_states(partial, out, segment_max=segment_max,
                  segment_sum=segment_sum, segment_lse=segment_lse,
                  sinks=sinks, out_scale=out_scale)
