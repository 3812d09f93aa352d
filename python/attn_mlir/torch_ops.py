"""The attn ops as torch operators, `torch.ops.attn_mlir.<op>`, so that
torch.compile (dynamo, AOTAutograd, inductor) traces calls instead of
breaking the graph at them.

Importing this module imports torch and registers the `attn_mlir` library:
the five ops of `attn_mlir.ops` (flash, unified, prefix_prefill,
blocksparse, merge_states) and vLLM's four entry points of `attn_mlir.vllm`
(context_attention_fwd, unified_attention, triton_attention,
blocksparse_flash_attn_varlen_fwd). `attn_mlir` imports it on the first call
with torch tensors (and at import when torch is already loaded); numpy calls
never need torch.

Each op has CPU and CUDA kernels, which call the implementations that numpy
calls run (`ops._flash`, `vllm._unified_attention`, ...), and a fake (meta)
kernel for tracing: it runs the same argument checks on the fake tensors'
shapes, strides and dtypes, so a bad argument raises its ValueError while
torch.compile traces, and stops where a check would read tensor contents
(offsets, block tables, host scales), which the real call checks.

Ops write their outputs in place and return nothing: every written tensor
is declared mutable in the schema (`Tensor(a!)`), optional ones too (the
split-KV statistics, `lse`, vLLM's softmax_segm_* buffers). The entry points
that return tensors (triton_attention's o, blocksparse's output) allocate
them in the Python wrapper and pass them to the op as its out argument.

Schema arguments that Python takes in several forms are split: a scale is a
tensor (`Tensor? k_scale`) or a number (`Scalar? k_scale_value`), unified's
causal a bool or per-sequence flags (`Tensor? causal_flags`), fp8_scales and
dropout their parts; schedules are int lists (`int[]?`, dicts converted in
field order). The wrappers in this module (what `attn_mlir.ops.flash` etc.
call for torch tensors) do the splitting; an argument no schema type
carries (a numpy array beside torch tensors, a float where an int belongs)
sends the call to the implementation directly, which names the argument in
its ValueError.
"""

import contextlib
import numbers
import os

import numpy as np
import torch
from torch._subclasses.fake_tensor import is_fake

from . import ops, vllm
from ._abi import NeedsValues, metadata_only

if not hasattr(torch.library, "register_fake"):
    raise ImportError(f"attn_mlir.torch_ops needs torch >= 2.4 "
                      f"(torch.library.register_fake); this is "
                      f"{torch.__version__}")

Tensor = torch.Tensor

_compiling = torch.compiler.is_compiling
_dispatch_modes = torch._C._len_torch_dispatch_stack
_function_modes = torch._C._is_torch_function_mode_enabled


def runs_directly(x):
    """Whether an eager call whose first tensor is `x` may skip the
    dispatcher: a plain CPU or CUDA tensor, outside torch.compile and any
    dispatch or function mode. The dispatcher's round trip to a Python
    kernel costs about 3.5 us on a fast host (about 17 us on the H100
    machine's); where nothing observes the op, the implementation runs as
    the op's kernel would. Under dynamo, fake tensors, meta tensors or a
    mode (profilers' op recorders, FlopCounterMode, `with torch.device`),
    and with ATTN_MLIR_EAGER_DISPATCH=1, calls go through
    torch.ops.attn_mlir."""
    return (type(x) is Tensor and not _ALWAYS_DISPATCH and not x.is_meta
            and not _compiling() and not _dispatch_modes()
            and not _function_modes())


_ALWAYS_DISPATCH = os.environ.get("ATTN_MLIR_EAGER_DISPATCH", "") not in (
    "", "0")

_LIB = torch.library.Library("attn_mlir", "FRAGMENT")

# The schemas (docs/runtime.md lists them). Arguments most calls pass come
# before the `*`: the wrappers pass them by position, which costs the op
# call a quarter of what a keyword does.
SCHEMAS = {
    "flash": (
        "flash(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, "
        "Tensor cu_seqlens_k, Tensor(a!) out, Scalar scale, "
        "bool causal=False, *, Tensor? bias=None, Scalar? dropout_p=None, "
        "int philox_seed=0, int philox_offset=0, "
        "Tensor? q_scale=None, Scalar? q_scale_value=None, "
        "Tensor? k_scale=None, Scalar? k_scale_value=None, "
        "Tensor? v_scale=None, Scalar? v_scale_value=None, "
        "Tensor? p_scale=None, Scalar? p_scale_value=None, "
        "Tensor? out_scale=None, Scalar? out_scale_value=None, "
        "Tensor(b!)? lse=None, int[]? schedule=None) -> ()"),
    "unified": (
        "unified(Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_table, "
        "Tensor cu_seqlens_q, Tensor seqused_k, Tensor(a!) out, "
        "Scalar scale, int? num_segments=None, "
        "Tensor(b!)? segment_max=None, Tensor(c!)? segment_sum=None, *, "
        "Scalar? softcap=None, "
        "Tensor? q_descale=None, Scalar? q_descale_value=None, "
        "Tensor? k_descale=None, Scalar? k_descale_value=None, "
        "Tensor? v_descale=None, Scalar? v_descale_value=None, "
        "Tensor? alibi_slopes=None, str? alibi_form=None, Tensor? sinks=None, "
        "Tensor? out_scale=None, Scalar? out_scale_value=None, "
        "int? sliding_window=None, "
        "Tensor? qq_bias=None, Tensor? mm_prefix_range=None, "
        "bool mm_prefix_clamp_window=False, Tensor? rswa_prefix_lens=None, "
        "int? rswa_window=None, bool causal=True, Tensor? causal_flags=None, "
        "int? chunk_lookback=None, Tensor? k_scale_cache=None, "
        "Tensor? v_scale_cache=None, Tensor(d!)? lse=None, "
        "int[]? schedule=None, Tensor(e!)? merged_out=None, "
        "Tensor(f!)? merge_counters=None) -> ()"),
    "prefix_prefill": (
        "prefix_prefill(Tensor q, Tensor k, Tensor v, Tensor k_cache, "
        "Tensor v_cache, Tensor block_table, Tensor query_start, "
        "Tensor seq_lens, Tensor(a!) out, Scalar scale, *, "
        "Tensor? k_scale=None, Scalar? k_scale_value=None, "
        "Tensor? v_scale=None, Scalar? v_scale_value=None, "
        "Tensor? alibi_slopes=None, str? alibi_form=None, Tensor? sinks=None, "
        "Tensor? out_scale=None, Scalar? out_scale_value=None, "
        "int? sliding_window=None, bool skip_decode=False, "
        "int[]? schedule=None) -> ()"),
    "blocksparse": (
        "blocksparse(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, "
        "Tensor cu_seqlens_k, Tensor crow, Tensor col, Tensor(a!) out, "
        "Scalar scale, int block_size, *, int? q_block_size=None, "
        "int[]? schedule=None) -> ()"),
    "merge_states": (
        "merge_states(Tensor partial, Tensor(a!) out, "
        "Tensor? segment_max=None, Tensor? segment_sum=None, *, "
        "Tensor? segment_lse=None, Tensor? sinks=None, "
        "Tensor? out_scale=None, Scalar? out_scale_value=None) -> ()"),
    "context_attention_fwd": (
        "context_attention_fwd(Tensor q, Tensor k, Tensor v, Tensor(a!) o, "
        "str kv_cache_dtype, Tensor k_cache, Tensor v_cache, Tensor b_loc, "
        "Tensor b_start_loc, Tensor b_seq_len, Scalar? max_seq_len, "
        "Scalar? max_input_len, Scalar? sm_scale=None, *, "
        "Tensor? k_scale=None, Scalar? k_scale_value=None, "
        "Tensor? v_scale=None, Scalar? v_scale_value=None, "
        "Tensor? alibi_slopes=None, int? sliding_window=None, "
        "bool skip_decode=False, "
        "Tensor? fp8_out_scale=None, Scalar? fp8_out_scale_value=None, "
        "Tensor? sinks=None) -> ()"),
    "unified_attention": (
        "unified_attention(Tensor q, Tensor k, Tensor v, Tensor(a!) out, "
        "Tensor cu_seqlens_q, Scalar max_seqlen_q, Tensor seqused_k, "
        "Scalar max_seqlen_k, Scalar softmax_scale, bool causal, "
        "int[]? window_size, Tensor block_table, Scalar? softcap=None, "
        "int? seq_threshold_3D=None, int? num_par_softmax_segments=None, "
        "Tensor(b!)? softmax_segm_output=None, "
        "Tensor(c!)? softmax_segm_max=None, "
        "Tensor(d!)? softmax_segm_expsum=None, *, "
        "Tensor? q_descale=None, Scalar? q_descale_value=None, "
        "Tensor? k_descale=None, Scalar? k_descale_value=None, "
        "Tensor? v_descale=None, Scalar? v_descale_value=None, "
        "Tensor? alibi_slopes=None, "
        "Tensor? output_scale=None, Scalar? output_scale_value=None, "
        "Tensor? sinks=None, Tensor? qq_bias=None, "
        "Tensor? mm_prefix_range=None, Tensor? rswa_prefix_lens=None, "
        "int? rswa_window=None, bool use_alibi_sqrt=False, "
        "int kv_quant_mode=0, Tensor? k_scale_cache=None, "
        "Tensor? v_scale_cache=None, int chunk_lookback=-1, "
        "bool use_td=False, bool mm_prefix_clamp_sliding_window=False, "
        "int? num_segments=None, Tensor? causal_flags=None) -> ()"),
    "triton_attention": (
        "triton_attention(Tensor q, Tensor k, Tensor v, Tensor(a!) o, "
        "Tensor cu_seqlens_q, Tensor cu_seqlens_k, Scalar max_seqlens_q, "
        "Scalar max_seqlens_k, bool causal=False, Scalar sm_scale=1.0, "
        "Tensor? bias=None, *, "
        "Tensor? q_scale=None, Scalar? q_scale_value=None, "
        "Tensor? k_scale=None, Scalar? k_scale_value=None, "
        "Tensor? v_scale=None, Scalar? v_scale_value=None, "
        "Tensor? p_scale=None, Scalar? p_scale_value=None, "
        "Tensor? fp8_out_scale=None, Scalar? fp8_out_scale_value=None, "
        # vllm.triton_attention's Philox defaults
        "Scalar dropout_p=0.0, int philox_seed=114514, "
        "int philox_offset=1919810) -> ()"),
    "blocksparse_flash_attn_varlen_fwd": (
        "blocksparse_flash_attn_varlen_fwd(Tensor q, Tensor k, Tensor v, "
        "Tensor cu_seqlens_k, Tensor? cu_seqlens_q, Scalar sm_scale, "
        "Tensor[] sparse_layout, Tensor(a!) out, int block_size=64, *, "
        "int? q_block_size=None, Scalar? max_seqlen=None) -> ()"),
}

# ---------------------------------------------------------------------------
# Python arguments -> schema arguments
# ---------------------------------------------------------------------------


class _Unfit(Exception):
    """An argument no schema type carries: the call runs directly."""


_NUMBERS = (int, float, bool)
_FP8_TYPES = (torch.float8_e4m3fn, torch.float8_e5m2)
_I64 = (-(1 << 63), (1 << 63) - 1)


def _tensors(*xs):
    for x in xs:
        if not isinstance(x, Tensor):
            raise _Unfit


def _num(x):
    """A Scalar: the implementation checks its value (bools and non-finite
    values included), so only the type is decided here."""
    if type(x) in _NUMBERS or isinstance(x, (torch.SymInt, torch.SymFloat)):
        return x
    if isinstance(x, np.generic):
        x = x.item()   # the Python number the checks treat it as
        if type(x) in _NUMBERS:
            return x
    elif isinstance(x, numbers.Real) and not isinstance(x, Tensor):
        return float(x)   # as ops.check_real reads it
    raise _Unfit


def _int(x):
    if type(x) is not int:
        if isinstance(x, np.integer):
            x = int(x)
        elif isinstance(x, torch.SymInt):
            return x
        else:
            raise _Unfit   # bools and floats too: the checks name them
    if not _I64[0] <= x <= _I64[1]:
        raise _Unfit
    return x


def _philox(x):
    """A 64-bit Philox seed or offset, signed or unsigned, as the signed
    value the kernels take (ops._i64)."""
    if isinstance(x, np.integer):
        x = int(x)
    if type(x) is int and 1 << 63 <= x < 1 << 64:
        return x - (1 << 64)
    return _int(x)


def _int_list(x):
    """A sequence of ints (its length is the implementation's to check)."""
    if not isinstance(x, (tuple, list)):
        raise _Unfit
    return [_int(e) for e in x]


def _schedule(schedule):
    """A schedule as the int list of its fields (ops._SCHEDULE_FIELDS)."""
    if isinstance(schedule, dict):
        fields = ops._SCHEDULE_FIELDS
        if not set(fields[:3]) <= set(schedule) <= set(fields):
            raise _Unfit
        schedule = [schedule.get(f, 0) for f in fields]
    # bools (tma, pingpong, persistent) would become ints in int[]: the
    # implementation rejects them in the other fields, so they run directly.
    return _int_list(schedule)


def _scale(kw, name, x):
    """A scale (tensor or number) into `name` or `name_value`."""
    if isinstance(x, Tensor):
        kw[name] = x
    else:
        kw[name + "_value"] = _num(x)


def _optional(kw, name, x):
    """An optional tensor."""
    if not isinstance(x, Tensor):
        raise _Unfit
    kw[name] = x


_FP8_PARTS = ("q_scale", "k_scale", "v_scale", "p_scale")


def _fp8_scales(kw, fp8_scales):
    if not isinstance(fp8_scales, (tuple, list)) or len(fp8_scales) != 4 \
            or all(x is None for x in fp8_scales):
        raise _Unfit   # (None, None, None, None) reads as no fp8_scales
    for name, x in zip(_FP8_PARTS, fp8_scales):
        if x is not None:
            _scale(kw, name, x)


@contextlib.contextmanager
def _direct(q):
    """Around the direct call of a call the schema cannot carry. Fake or
    meta tensors (a trace) get the fake kernels' treatment: metadata checks
    only, stopping where values are needed."""
    if not (isinstance(q, Tensor) and (q.is_meta or is_fake(q))):
        yield
        return
    try:
        with metadata_only():
            yield
    except NeedsValues:
        pass


# ---------------------------------------------------------------------------
# Kernels: schema arguments -> the implementations. The dispatcher passes
# only keyword arguments that differ from their defaults; they go through
# as they are, but for the split ones.
# ---------------------------------------------------------------------------


def _values(kw):
    """A scale given as a number (`name_value`) back under its name."""
    for key in [key for key in kw if key.endswith("_value")]:
        kw[key[:-6]] = kw.pop(key)
    return kw


def _fp8_tuple(kw):
    if not kw.keys() & _FP8_PARTS:
        return None
    return tuple(kw.pop(name, None) for name in _FP8_PARTS)


def _flash_kernel(q, k, v, cu_seqlens_q, cu_seqlens_k, out, scale,
                  causal=False, **kw):
    if kw:
        _values(kw)
        seed, offset = kw.pop("philox_seed", 0), kw.pop("philox_offset", 0)
        if "dropout_p" in kw:
            kw["dropout"] = (kw.pop("dropout_p"), seed, offset)
        kw["fp8_scales"] = _fp8_tuple(kw)
    ops._flash(q, k, v, cu_seqlens_q, cu_seqlens_k, out, scale=scale,
               causal=causal, **kw)


def _unified_kernel(q, k_cache, v_cache, block_table, cu_seqlens_q, seqused_k,
                    out, scale, num_segments=None, segment_max=None,
                    segment_sum=None, **kw):
    if kw:
        _values(kw)
        if "causal_flags" in kw:
            kw["causal"] = kw.pop("causal_flags")
    ops._unified(q, k_cache, v_cache, block_table, cu_seqlens_q, seqused_k,
                 out, scale=scale, num_segments=num_segments,
                 segment_max=segment_max, segment_sum=segment_sum, **kw)


def _prefix_prefill_kernel(q, k, v, k_cache, v_cache, block_table,
                           query_start, seq_lens, out, scale, **kw):
    ops._prefix_prefill(q, k, v, k_cache, v_cache, block_table, query_start,
                        seq_lens, out, scale=scale, **_values(kw))


def _blocksparse_kernel(q, k, v, cu_seqlens_q, cu_seqlens_k, crow, col, out,
                        scale, block_size, **kw):
    ops._blocksparse(q, k, v, cu_seqlens_q, cu_seqlens_k, crow, col, out,
                     scale=scale, block_size=block_size, **kw)


def _merge_states_kernel(partial, out, segment_max=None, segment_sum=None,
                         **kw):
    ops._merge_states(partial, out, segment_max=segment_max,
                      segment_sum=segment_sum, **_values(kw))


def _context_attention_fwd_kernel(q, k, v, o, kv_cache_dtype, k_cache,
                                  v_cache, b_loc, b_start_loc, b_seq_len,
                                  max_seq_len, max_input_len, sm_scale=None,
                                  **kw):
    if not kw:   # (the usual call: all by position)
        return vllm._context_attention_fwd(
            q, k, v, o, kv_cache_dtype, k_cache, v_cache, b_loc, b_start_loc,
            b_seq_len, max_seq_len, max_input_len, None, None, None, None,
            sm_scale)
    _values(kw)
    vllm._context_attention_fwd(
        q, k, v, o, kv_cache_dtype, k_cache, v_cache, b_loc, b_start_loc,
        b_seq_len, max_seq_len, max_input_len, kw.pop("k_scale", None),
        kw.pop("v_scale", None), sm_scale=sm_scale, **kw)


def _unified_attention_kernel(q, k, v, out, cu_seqlens_q, max_seqlen_q,
                              seqused_k, max_seqlen_k, softmax_scale, causal,
                              window_size, block_table, softcap=None,
                              seq_threshold_3D=None,
                              num_par_softmax_segments=None,
                              softmax_segm_output=None, softmax_segm_max=None,
                              softmax_segm_expsum=None, **kw):
    if not kw:   # (the usual call: all by position)
        return vllm._unified_attention(
            q, k, v, out, cu_seqlens_q, max_seqlen_q, seqused_k, max_seqlen_k,
            softmax_scale, causal, window_size, block_table, softcap, None,
            None, None, None, None, None, seq_threshold_3D,
            num_par_softmax_segments, softmax_segm_output, softmax_segm_max,
            softmax_segm_expsum)
    _values(kw)
    if "causal_flags" in kw:
        causal = kw.pop("causal_flags")
    vllm._unified_attention(
        q, k, v, out, cu_seqlens_q, max_seqlen_q, seqused_k, max_seqlen_k,
        softmax_scale, causal, window_size, block_table, softcap,
        kw.pop("q_descale", None), kw.pop("k_descale", None),
        kw.pop("v_descale", None), seq_threshold_3D=seq_threshold_3D,
        num_par_softmax_segments=num_par_softmax_segments,
        softmax_segm_output=softmax_segm_output,
        softmax_segm_max=softmax_segm_max,
        softmax_segm_expsum=softmax_segm_expsum, **kw)


def _triton_attention_kernel(q, k, v, o, cu_seqlens_q, cu_seqlens_k,
                             max_seqlens_q, max_seqlens_k, causal=False,
                             sm_scale=1.0, bias=None, **kw):
    if kw:
        _values(kw)
        kw["fp8_scales"] = _fp8_tuple(kw)
    vllm._triton_attention(q, k, v, o, cu_seqlens_q, cu_seqlens_k,
                           max_seqlens_q, max_seqlens_k, causal, sm_scale,
                           bias, **kw)


def _blocksparse_varlen_kernel(q, k, v, cu_seqlens_k, cu_seqlens_q, sm_scale,
                               sparse_layout, out, block_size=64, **kw):
    vllm._blocksparse_flash_attn_varlen_fwd(
        q, k, v, cu_seqlens_k, cu_seqlens_q, sm_scale, tuple(sparse_layout),
        block_size=block_size, out=out, **kw)


# ---------------------------------------------------------------------------
# Fake kernels
# ---------------------------------------------------------------------------


def _hint(n):
    """A concrete size for a size that may be symbolic (dynamic shapes): its
    hint, the value of the example input being traced; None when there is
    none (unbacked sizes)."""
    if type(n) is int:
        return n
    try:
        from torch.fx.experimental.symbolic_shapes import (
            guarding_hint_or_throw, has_guarding_hint)
        return guarding_hint_or_throw(n) if has_guarding_hint(n) else None
    except ImportError:
        node = getattr(n, "node", None)
        return getattr(node, "hint", None)


def _concrete(x):
    """`x` with concrete sizes: a tensor with symbolic ones becomes an empty
    one (fake, under the tracing mode) of its hinted sizes and strides, so
    the checks compare numbers without adding guards on the symbols.
    Raises NeedsValues when a size has no hint."""
    if isinstance(x, Tensor):
        shape, strides = tuple(x.shape), tuple(x.stride())
        if all(type(n) is int for n in shape + strides):
            return x
        shape = tuple(_hint(n) for n in shape)
        strides = tuple(_hint(n) for n in strides)
        if None in shape or None in strides:
            raise NeedsValues("size")
        return torch.empty_strided(shape, strides, dtype=x.dtype,
                                   device=x.device)
    if isinstance(x, (list, tuple)):
        return type(x)(_concrete(e) for e in x)
    if isinstance(x, (torch.SymInt, torch.SymFloat)):
        hint = _hint(x) if isinstance(x, torch.SymInt) else None
        if hint is None:
            raise NeedsValues("scalar")
        return hint
    return x


def _fake(kernel):
    """The fake kernel of `kernel`: its argument checks on metadata only
    (attn_mlir._abi.metadata_only); outputs are written in place, so there
    is nothing to return."""
    def fake(*args, **kwargs):
        try:
            args = [_concrete(a) for a in args]
            kwargs = {k: _concrete(a) for k, a in kwargs.items()}
            with metadata_only():
                kernel(*args, **kwargs)
        except NeedsValues:
            pass   # the rest needs tensor contents: checked when it runs
    fake.__name__ = kernel.__name__.replace("_kernel", "_fake")
    return fake


_KERNELS = {
    "flash": _flash_kernel,
    "unified": _unified_kernel,
    "prefix_prefill": _prefix_prefill_kernel,
    "blocksparse": _blocksparse_kernel,
    "merge_states": _merge_states_kernel,
    "context_attention_fwd": _context_attention_fwd_kernel,
    "unified_attention": _unified_attention_kernel,
    "triton_attention": _triton_attention_kernel,
    "blocksparse_flash_attn_varlen_fwd": _blocksparse_varlen_kernel,
}


def _register():
    for name, schema in SCHEMAS.items():
        _LIB.define(schema)
        kernel = _KERNELS[name]
        _LIB.impl(name, kernel, "CPU")
        _LIB.impl(name, kernel, "CUDA")   # ROCm torch reports HIP as CUDA
        torch.library.register_fake(f"attn_mlir::{name}", _fake(kernel),
                                    lib=_LIB)


_register()

# OpOverloads, called directly: the packet's overload resolution costs
# microseconds per call.
_FLASH = torch.ops.attn_mlir.flash.default
_UNIFIED = torch.ops.attn_mlir.unified.default
_PREFIX_PREFILL = torch.ops.attn_mlir.prefix_prefill.default
_BLOCKSPARSE = torch.ops.attn_mlir.blocksparse.default
_MERGE_STATES = torch.ops.attn_mlir.merge_states.default
_CONTEXT_ATTENTION_FWD = torch.ops.attn_mlir.context_attention_fwd.default
_UNIFIED_ATTENTION = torch.ops.attn_mlir.unified_attention.default
_TRITON_ATTENTION = torch.ops.attn_mlir.triton_attention.default
_BLOCKSPARSE_VARLEN = torch.ops.attn_mlir.blocksparse_flash_attn_varlen_fwd.default

# ---------------------------------------------------------------------------
# Wrappers: the Python signatures of attn_mlir.ops and attn_mlir.vllm (which
# call them positionally). Only arguments that differ from the schema's
# defaults are passed, and arguments equivalent to a default (softcap 0, a
# (-1, -1) window) not at all: each keyword costs the op call and its
# kernel's about half a microsecond (bench/host_overhead_cpu.py).
# ---------------------------------------------------------------------------


def flash(q, k, v, cu_seqlens_q, cu_seqlens_k, out, scale, causal=False,
          bias=None, dropout=None, fp8_scales=None, out_scale=None, lse=None,
          schedule=None):
    try:
        _tensors(q, k, v, cu_seqlens_q, cu_seqlens_k, out)
        scale = _num(scale)
        kw = {}
        if bias is not None:
            _optional(kw, "bias", bias)
        if dropout is not None:
            if not isinstance(dropout, (tuple, list)) or len(dropout) != 3:
                raise _Unfit
            kw["dropout_p"] = _num(dropout[0])
            kw["philox_seed"] = _philox(dropout[1])
            kw["philox_offset"] = _philox(dropout[2])
        if fp8_scales is not None:
            _fp8_scales(kw, fp8_scales)
        if out_scale is not None:
            _scale(kw, "out_scale", out_scale)
        if lse is not None:
            _optional(kw, "lse", lse)
        if schedule is not None:
            kw["schedule"] = _schedule(schedule)
    except _Unfit:
        with _direct(q):
            return ops._flash(q, k, v, cu_seqlens_q, cu_seqlens_k, out,
                              scale=scale, causal=causal, bias=bias,
                              dropout=dropout, fp8_scales=fp8_scales,
                              out_scale=out_scale, lse=lse, schedule=schedule)
        return None
    _FLASH(q, k, v, cu_seqlens_q, cu_seqlens_k, out, scale, bool(causal), **kw)


def unified(q, k_cache, v_cache, block_table, cu_seqlens_q, seqused_k, out,
            scale, softcap=None, q_descale=None, k_descale=None,
            v_descale=None, alibi_slopes=None, alibi_form=None, sinks=None,
            out_scale=None, sliding_window=None, num_segments=None,
            segment_max=None, segment_sum=None, qq_bias=None,
            mm_prefix_range=None, mm_prefix_clamp_window=False,
            rswa_prefix_lens=None, rswa_window=None, causal=True,
            chunk_lookback=None, k_scale_cache=None, v_scale_cache=None,
            lse=None, schedule=None, merged_out=None, merge_counters=None):
    try:
        _tensors(q, k_cache, v_cache, block_table, cu_seqlens_q, seqused_k,
                 out)
        kw = {}
        if causal is not True:
            if isinstance(causal, Tensor):
                kw["causal_flags"] = causal
            elif not isinstance(causal, (bool, np.bool_)):
                raise _Unfit
            elif not causal:
                kw["causal"] = False
        if softcap is not None:
            kw["softcap"] = _num(softcap)
        if q_descale is not None:
            _scale(kw, "q_descale", q_descale)
        if k_descale is not None:
            _scale(kw, "k_descale", k_descale)
        if v_descale is not None:
            _scale(kw, "v_descale", v_descale)
        if out_scale is not None:
            _scale(kw, "out_scale", out_scale)
        if alibi_slopes is not None:
            _optional(kw, "alibi_slopes", alibi_slopes)
        if alibi_form is not None:
            if type(alibi_form) is not str:
                raise _Unfit
            kw["alibi_form"] = alibi_form
        if sinks is not None:
            _optional(kw, "sinks", sinks)
        if sliding_window is not None:
            kw["sliding_window"] = _int(sliding_window)
        if qq_bias is not None:
            _optional(kw, "qq_bias", qq_bias)
        if mm_prefix_range is not None:
            _optional(kw, "mm_prefix_range", mm_prefix_range)
        if mm_prefix_clamp_window:
            kw["mm_prefix_clamp_window"] = True
        if rswa_prefix_lens is not None:
            _optional(kw, "rswa_prefix_lens", rswa_prefix_lens)
        if rswa_window is not None:
            kw["rswa_window"] = _int(rswa_window)
        if chunk_lookback is not None:
            kw["chunk_lookback"] = _int(chunk_lookback)
        if k_scale_cache is not None:
            _optional(kw, "k_scale_cache", k_scale_cache)
        if v_scale_cache is not None:
            _optional(kw, "v_scale_cache", v_scale_cache)
        if lse is not None:
            _optional(kw, "lse", lse)
        if schedule is not None:
            kw["schedule"] = _schedule(schedule)
        if merged_out is not None:
            _optional(kw, "merged_out", merged_out)
        if merge_counters is not None:
            _optional(kw, "merge_counters", merge_counters)
        if num_segments is not None:
            num_segments = _int(num_segments)
        if segment_max is not None:
            _tensors(segment_max)
        if segment_sum is not None:
            _tensors(segment_sum)
        split_scale = _num(scale)
    except _Unfit:
        with _direct(q):
            return ops._unified(
                q, k_cache, v_cache, block_table, cu_seqlens_q, seqused_k,
                out, scale=scale, softcap=softcap, q_descale=q_descale,
                k_descale=k_descale, v_descale=v_descale,
                alibi_slopes=alibi_slopes, alibi_form=alibi_form, sinks=sinks,
                out_scale=out_scale, sliding_window=sliding_window,
                num_segments=num_segments, segment_max=segment_max,
                segment_sum=segment_sum, qq_bias=qq_bias,
                mm_prefix_range=mm_prefix_range,
                mm_prefix_clamp_window=mm_prefix_clamp_window,
                rswa_prefix_lens=rswa_prefix_lens, rswa_window=rswa_window,
                causal=causal, chunk_lookback=chunk_lookback,
                k_scale_cache=k_scale_cache, v_scale_cache=v_scale_cache,
                lse=lse, schedule=schedule, merged_out=merged_out,
                merge_counters=merge_counters)
        return None
    _UNIFIED(q, k_cache, v_cache, block_table, cu_seqlens_q, seqused_k, out,
             split_scale, num_segments, segment_max, segment_sum, **kw)


def prefix_prefill(q, k, v, k_cache, v_cache, block_table, query_start,
                   seq_lens, out, scale, k_scale=None, v_scale=None,
                   alibi_slopes=None, alibi_form=None, sinks=None,
                   out_scale=None, sliding_window=None, skip_decode=False,
                   schedule=None):
    try:
        _tensors(q, k, v, k_cache, v_cache, block_table, query_start,
                 seq_lens, out)
        kw = {}
        if k_scale is not None:
            _scale(kw, "k_scale", k_scale)
        if v_scale is not None:
            _scale(kw, "v_scale", v_scale)
        if out_scale is not None:
            _scale(kw, "out_scale", out_scale)
        if alibi_slopes is not None:
            _optional(kw, "alibi_slopes", alibi_slopes)
        if alibi_form is not None:
            if type(alibi_form) is not str:
                raise _Unfit
            kw["alibi_form"] = alibi_form
        if sinks is not None:
            _optional(kw, "sinks", sinks)
        if sliding_window is not None:
            kw["sliding_window"] = _int(sliding_window)
        if skip_decode:
            kw["skip_decode"] = True
        if schedule is not None:
            kw["schedule"] = _schedule(schedule)
        pp_scale = _num(scale)
    except _Unfit:
        with _direct(q):
            return ops._prefix_prefill(
                q, k, v, k_cache, v_cache, block_table, query_start, seq_lens,
                out, scale=scale, k_scale=k_scale, v_scale=v_scale,
                alibi_slopes=alibi_slopes, alibi_form=alibi_form, sinks=sinks,
                out_scale=out_scale, sliding_window=sliding_window,
                skip_decode=skip_decode, schedule=schedule)
        return None
    _PREFIX_PREFILL(q, k, v, k_cache, v_cache, block_table, query_start,
                    seq_lens, out, pp_scale, **kw)


def blocksparse(q, k, v, cu_seqlens_q, cu_seqlens_k, crow, col, out, scale,
                block_size, q_block_size=None, schedule=None):
    try:
        _tensors(q, k, v, cu_seqlens_q, cu_seqlens_k, crow, col, out)
        kw = {}
        if q_block_size is not None:
            kw["q_block_size"] = _int(q_block_size)
        if schedule is not None:
            kw["schedule"] = _schedule(schedule)
        bs_scale, bs_block = _num(scale), _int(block_size)
    except _Unfit:
        with _direct(q):
            return ops._blocksparse(
                q, k, v, cu_seqlens_q, cu_seqlens_k, crow, col, out,
                scale=scale, block_size=block_size, q_block_size=q_block_size,
                schedule=schedule)
        return None
    _BLOCKSPARSE(q, k, v, cu_seqlens_q, cu_seqlens_k, crow, col, out, bs_scale,
                 bs_block, **kw)


def merge_states(partial, out, segment_max=None, segment_sum=None,
                 segment_lse=None, sinks=None, out_scale=None):
    try:
        _tensors(partial, out)
        if segment_max is not None:
            _tensors(segment_max)
        if segment_sum is not None:
            _tensors(segment_sum)
        kw = {}
        if segment_lse is not None:
            _optional(kw, "segment_lse", segment_lse)
        if sinks is not None:
            _optional(kw, "sinks", sinks)
        if out_scale is not None:
            _scale(kw, "out_scale", out_scale)
    except _Unfit:
        with _direct(partial):
            return ops._merge_states(partial, out, segment_max=segment_max,
                                     segment_sum=segment_sum,
                                     segment_lse=segment_lse, sinks=sinks,
                                     out_scale=out_scale)
        return None
    _MERGE_STATES(partial, out, segment_max, segment_sum, **kw)


def _maybe_num(x):
    """max_seq_len and the like: a Scalar, None, or (ignored by the
    implementation or checked there) run directly."""
    return None if x is None else _num(x)


def context_attention_fwd(q, k, v, o, kv_cache_dtype, k_cache, v_cache, b_loc,
                          b_start_loc, b_seq_len, max_seq_len, max_input_len,
                          k_scale, v_scale, alibi_slopes=None,
                          sliding_window=None, sm_scale=None,
                          skip_decode=False, fp8_out_scale=None, sinks=None):
    try:
        _tensors(q, k, v, o, k_cache, v_cache, b_loc, b_start_loc, b_seq_len)
        if type(kv_cache_dtype) is not str:
            raise _Unfit
        max_seq_len = _maybe_num(max_seq_len)
        max_input_len = _maybe_num(max_input_len)
        kw = {}
        # k_scale and v_scale belong to fp8 caches: vLLM passes them always,
        # the implementation ignores them otherwise (and so may the call).
        if "fp8" in kv_cache_dtype:
            if k_scale is not None:
                _scale(kw, "k_scale", k_scale)
            if v_scale is not None:
                _scale(kw, "v_scale", v_scale)
        if alibi_slopes is not None:
            _optional(kw, "alibi_slopes", alibi_slopes)
        if sliding_window is not None:
            kw["sliding_window"] = _int(sliding_window)
        if sm_scale is not None:
            sm_scale = _num(sm_scale)
        if skip_decode:
            kw["skip_decode"] = True
        if fp8_out_scale is not None:
            _scale(kw, "fp8_out_scale", fp8_out_scale)
        if sinks is not None:
            _optional(kw, "sinks", sinks)
    except _Unfit:
        with _direct(q):
            return vllm._context_attention_fwd(
                q, k, v, o, kv_cache_dtype, k_cache, v_cache, b_loc,
                b_start_loc, b_seq_len, max_seq_len, max_input_len, k_scale,
                v_scale, alibi_slopes=alibi_slopes,
                sliding_window=sliding_window, sm_scale=sm_scale,
                skip_decode=skip_decode, fp8_out_scale=fp8_out_scale,
                sinks=sinks)
        return None
    _CONTEXT_ATTENTION_FWD(q, k, v, o, kv_cache_dtype, k_cache, v_cache, b_loc,
                           b_start_loc, b_seq_len, max_seq_len, max_input_len,
                           sm_scale, **kw)


def unified_attention(q, k, v, out, cu_seqlens_q, max_seqlen_q, seqused_k,
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
    try:
        _tensors(q, k, v, out, cu_seqlens_q, seqused_k, block_table)
        kw = {}
        flag = causal
        if type(causal) is not bool:
            if isinstance(causal, Tensor):
                kw["causal_flags"], flag = causal, True
            elif isinstance(causal, np.ndarray):
                raise _Unfit
            else:
                flag = bool(causal)   # as vLLM does
        window = window_size
        if window is not None:
            if type(window) in (tuple, list) and len(window) == 2 and \
                    type(window[0]) is int and type(window[1]) is int and \
                    window[0] < 0:
                window = None   # (-1, -1): no window, nothing to check
            else:
                window = _int_list(window)
        # softcap 0 disables it, as None does
        cap = None
        if softcap is not None and (softcap or type(softcap) not in (int,
                                                                    float)):
            cap = _num(softcap)
        if q_descale is not None:
            _scale(kw, "q_descale", q_descale)
        # k/v_descale belong to fp8 caches: vLLM passes them always, the
        # implementation ignores them for other caches (and so may the call).
        if k.dtype in _FP8_TYPES:
            if k_descale is not None:
                _scale(kw, "k_descale", k_descale)
            if v_descale is not None:
                _scale(kw, "v_descale", v_descale)
        if alibi_slopes is not None:
            _optional(kw, "alibi_slopes", alibi_slopes)
        if output_scale is not None:
            _scale(kw, "output_scale", output_scale)
        if sinks is not None:
            _optional(kw, "sinks", sinks)
        # vLLM's split-KV plan: positional (vLLM passes it with every call).
        # It applies to decode-only batches (max_seqlen_q <= 1), and the
        # implementation ignores it for others: then it is not passed.
        threshold = segments = None
        buffers = (softmax_segm_output, softmax_segm_max, softmax_segm_expsum)
        if type(max_seqlen_q) is int and max_seqlen_q > 1:
            buffers = (None, None, None)
            if seq_threshold_3D is not None:
                _int(seq_threshold_3D)   # (an odd one runs directly)
        else:
            if seq_threshold_3D is not None:
                threshold = _int(seq_threshold_3D)
            if num_par_softmax_segments is not None:
                segments = _int(num_par_softmax_segments)
            for x in buffers:
                if x is not None and not isinstance(x, Tensor):
                    raise _Unfit
        if qq_bias is not None:
            _optional(kw, "qq_bias", qq_bias)
        if mm_prefix_range is not None:
            _optional(kw, "mm_prefix_range", mm_prefix_range)
        if rswa_prefix_lens is not None:
            _optional(kw, "rswa_prefix_lens", rswa_prefix_lens)
        if rswa_window is not None:
            kw["rswa_window"] = _int(rswa_window)
        if use_alibi_sqrt:
            kw["use_alibi_sqrt"] = True
        # (type checks first: False == 0 and 0.0 == 0, both rejected)
        if type(kv_quant_mode) is not int or kv_quant_mode != 0:
            kw["kv_quant_mode"] = _int(kv_quant_mode)
        if k_scale_cache is not None:
            _optional(kw, "k_scale_cache", k_scale_cache)
        if v_scale_cache is not None:
            _optional(kw, "v_scale_cache", v_scale_cache)
        if type(chunk_lookback) is not int or chunk_lookback != -1:
            kw["chunk_lookback"] = _int(chunk_lookback)
        if use_td:
            kw["use_td"] = True
        if mm_prefix_clamp_sliding_window:
            kw["mm_prefix_clamp_sliding_window"] = True
        if num_segments is not None:
            kw["num_segments"] = _int(num_segments)
        max_seqlen_q, max_seqlen_k = _num(max_seqlen_q), _num(max_seqlen_k)
        softmax_scale = _num(softmax_scale)
    except _Unfit:
        with _direct(q):
            return vllm._unified_attention(
                q, k, v, out, cu_seqlens_q, max_seqlen_q, seqused_k,
                max_seqlen_k, softmax_scale, causal, window_size, block_table,
                softcap, q_descale, k_descale, v_descale,
                alibi_slopes=alibi_slopes, output_scale=output_scale,
                sinks=sinks, seq_threshold_3D=seq_threshold_3D,
                num_par_softmax_segments=num_par_softmax_segments,
                softmax_segm_output=softmax_segm_output,
                softmax_segm_max=softmax_segm_max,
                softmax_segm_expsum=softmax_segm_expsum, qq_bias=qq_bias,
                mm_prefix_range=mm_prefix_range,
                rswa_prefix_lens=rswa_prefix_lens, rswa_window=rswa_window,
                use_alibi_sqrt=use_alibi_sqrt, kv_quant_mode=kv_quant_mode,
                k_scale_cache=k_scale_cache, v_scale_cache=v_scale_cache,
                chunk_lookback=chunk_lookback, use_td=use_td,
                mm_prefix_clamp_sliding_window=mm_prefix_clamp_sliding_window,
                num_segments=num_segments)
        return None
    if cap is None and threshold is None and segments is None and \
            buffers[0] is None and buffers[1] is None and \
            buffers[2] is None:   # fewer arguments to parse
        _UNIFIED_ATTENTION(q, k, v, out, cu_seqlens_q, max_seqlen_q,
                           seqused_k, max_seqlen_k, softmax_scale, flag,
                           window, block_table, **kw)
    else:
        _UNIFIED_ATTENTION(q, k, v, out, cu_seqlens_q, max_seqlen_q,
                           seqused_k, max_seqlen_k, softmax_scale, flag,
                           window, block_table, cap, threshold, segments,
                           *buffers, **kw)


def _new_output(q, dtype):
    """vllm._new_like for a q of any shape (the op checks it): the kernels
    write every row of a CUDA output; CPU ones start zeroed, as the numpy
    path's do."""
    if q.is_cuda:
        return torch.empty(q.shape, dtype=dtype, device=q.device)
    return torch.zeros(q.shape, dtype=dtype, device=q.device)


def triton_attention(q, k, v, o, cu_seqlens_q, cu_seqlens_k, max_seqlens_q,
                     max_seqlens_k, causal=False, sm_scale=1.0, bias=None,
                     fp8_scales=None, fp8_out_scale=None, dropout_p=0.0,
                     philox_seed=0x1BF52, philox_offset=0x1D4B42):
    if o is None and isinstance(q, Tensor) and isinstance(v, Tensor):
        # vLLM: empty_like(q, dtype=v.dtype) with v already quantized, so
        # fp8 (e4m3, or v's own fp8 type) whenever fp8_scales are given
        # (vllm._triton_attention allocates the same).
        dtype = v.dtype
        if fp8_scales is not None and dtype not in _FP8_TYPES:
            dtype = torch.float8_e4m3fn
        o = _new_output(q, dtype)
    try:
        _tensors(q, k, v, o, cu_seqlens_q, cu_seqlens_k)
        kw = {}
        if bias is not None:
            _optional(kw, "bias", bias)
        if fp8_scales is not None:
            _fp8_scales(kw, fp8_scales)
        if fp8_out_scale is not None:
            _scale(kw, "fp8_out_scale", fp8_out_scale)
        if dropout_p:
            kw["dropout_p"] = _num(dropout_p)
            kw["philox_seed"] = _philox(philox_seed)
            kw["philox_offset"] = _philox(philox_offset)
        elif type(dropout_p) not in (int, float):
            raise _Unfit   # False, numpy or tensor zeros: checked directly
        max_seqlens_q, max_seqlens_k = _num(max_seqlens_q), _num(max_seqlens_k)
        sm_scale = _num(sm_scale)
    except _Unfit:
        with _direct(q):
            return vllm._triton_attention(
                q, k, v, o, cu_seqlens_q, cu_seqlens_k, max_seqlens_q,
                max_seqlens_k, causal, sm_scale, bias, fp8_scales,
                fp8_out_scale, dropout_p=dropout_p, philox_seed=philox_seed,
                philox_offset=philox_offset)
        return o, None
    _TRITON_ATTENTION(q, k, v, o, cu_seqlens_q, cu_seqlens_k, max_seqlens_q,
                      max_seqlens_k, bool(causal), sm_scale, **kw)
    return o, None


def blocksparse_flash_attn_varlen_fwd(q, k, v, cu_seqlens_k, cu_seqlens_q,
                                      sm_scale, sparse_layout, block_size=64,
                                      q_block_size=None, max_seqlen=None):
    out = _new_output(q, q.dtype) if isinstance(q, Tensor) else None
    try:
        _tensors(q, k, v, cu_seqlens_k)
        if cu_seqlens_q is not None and not isinstance(cu_seqlens_q, Tensor):
            raise _Unfit
        if not isinstance(sparse_layout, (tuple, list)) or \
                len(sparse_layout) != 2:
            raise _Unfit
        _tensors(*sparse_layout)
        kw = {}
        block_size = _int(block_size)
        if q_block_size is not None:
            kw["q_block_size"] = _int(q_block_size)
        if max_seqlen is not None:
            kw["max_seqlen"] = _num(max_seqlen)
        sm_scale = _num(sm_scale)
    except _Unfit:
        with _direct(q):
            return vllm._blocksparse_flash_attn_varlen_fwd(
                q, k, v, cu_seqlens_k, cu_seqlens_q, sm_scale, sparse_layout,
                block_size=block_size, q_block_size=q_block_size,
                max_seqlen=max_seqlen, out=out)
        return out
    _BLOCKSPARSE_VARLEN(q, k, v, cu_seqlens_k, cu_seqlens_q, sm_scale,
                        list(sparse_layout), out, block_size, **kw)
    return out
