"""Per-signature replay of GPU op calls: the host path of a serving loop.

An op call on CUDA tensors builds its specialization (argument checks,
operand views, MLIR text) and launches its kernels. Everything but the
pointers is decided by the arguments' metadata (dtypes, shapes, strides,
devices) and their Python values (scales, flags, window sizes): without
ATTN_MLIR_VALIDATE the checks read no tensor contents. So the first call
with a signature runs in full and records how each kernel parameter is made
from the arguments; a later call with the same signature takes the
arguments' pointers, checks what depends on them (alignment, outputs not
sharing memory with other operands) and launches. Anything unusual (a host
array, an operand the call derived itself, a pointer check that fails, a
dry run, recording, validation, fake tensors) takes the full path, which
raises the errors.
"""

import contextvars
import functools
import os

from . import _abi
from ._abi import View

# signature -> _Plan, or None where the call cannot be replayed.
_PLANS = {}
_CAPTURE = contextvars.ContextVar("attn_mlir_replay_capture", default=None)
_ops = None   # attn_mlir.ops (imported on the first torch call)
_compiling = None   # torch.compiler.is_compiling, likewise
_SCALARS = (bool, int, float, str, type(None))


def _arg_key(a):
    """The part of the signature one argument contributes; _NO where the
    call is not replayable."""
    if a is None:
        return None
    t = type(a)
    if t is _TENSOR:
        if not _on_gpu(a):
            return _NO
        return (a.dtype, a.shape, a.stride(), a.get_device())
    if t in _SCALARS:
        return (t, a)
    if t is View:
        if type(a.owner) is not _TENSOR or not _on_gpu(a.owner):
            return _NO
        return ("view", a.shape, a.strides, a.dtype, a.owner.get_device())
    if t is tuple or t is list:
        keys = tuple(_arg_key(x) for x in a)
        return _NO if any(k is _NO for k in keys) else (t, keys)
    return _NO


_NO = object()


def _on_gpu(tensor):
    """Device memory: its contents are not checked per call (host arrays'
    are, so their calls always take the full path)."""
    return tensor.is_cuda


_TENSOR = None   # torch.Tensor, once a call has brought torch in


def _signature(op, args, kwargs):
    parts = [op]
    for a in args:
        k = _arg_key(a)
        if k is _NO:
            return None
        parts.append(k)
    for name, a in kwargs.items():
        k = _arg_key(a)
        if k is _NO:
            return None
        parts.append((name, k))
    return tuple(parts)


# os.environ's own store (bytes keys on POSIX): read without encoding each
# key per call; os.environ.get elsewhere.
_ENV = getattr(os.environ, "_data", None) if os.name == "posix" else None
_FLAGS = (b"ATTN_MLIR_RECORD", b"ATTN_MLIR_DRY_RUN")
_VALIDATE = b"ATTN_MLIR_VALIDATE"


def _full_path_only():
    """Environments in which every call takes the full path: recording, a
    dry run, validation (ops read these per call too), fake tensors, and
    ops.collect_specializations (precompile), whose calls launch nothing."""
    if _abi.checking_metadata() or _ops._COLLECTING.get() is not None:
        return True
    env = _ENV
    if env is None:
        return bool(os.environ.get("ATTN_MLIR_RECORD")
                    or os.environ.get("ATTN_MLIR_DRY_RUN")
                    or _abi.validating())
    if env.get(_FLAGS[0]) or env.get(_FLAGS[1]):
        return True
    return env.get(_VALIDATE, b"") not in (b"", b"0")


def _span(x):
    """(pointer, bytes spanned) of a replayable argument in device memory,
    else None."""
    if type(x) is View:
        return x.ptr, _abi.extent(x.shape, x.strides) * \
            _abi.NUMPY_DTYPES[x.dtype].itemsize
    if type(x) is _TENSOR:
        return x.data_ptr(), _abi.extent(tuple(x.shape), x.stride()) * \
            x.element_size()
    return None


class _Plan:
    """How one signature's kernels are launched from a call's arguments:
    the launches of every op call the entry point made, in order, and where
    each operand's pointer comes from: an argument (itself, or memory
    inside it at a fixed offset: a view the call derived from it), or a
    buffer of attn_mlir's own (a cached workspace), kept alive here. An
    operand from neither is never derived from argument values (the checks
    read none), so its pointer is that buffer's."""

    def __init__(self, captured, args, kwargs):
        from . import _gpu
        sources = list(args) + list(kwargs.values())
        spans = [_span(x) for x in sources]
        self.pointers = []   # ("arg", position, offset) | ("const", ptr)
        self.keep = []       # owners of constant pointers
        self.steps = []      # per op call: (device, name, launches, checks,
        #                       ranges, outputs)
        for call, kernels in captured:
            if call.device is None:
                raise _NotReplayable("a host call")
            index = {}
            checks = []
            for _, _, kind, value in call.params:
                if kind != "mem" or id(value) in index:
                    continue
                index[id(value)] = len(self.pointers)
                self.pointers.append(self._source(value, sources, spans))
                chunk = _abi.chunk_alignment(value)
                if chunk:
                    checks.append((index[id(value)], chunk))
            everything = call.inputs + call.outputs
            if any(id(v) not in index for v, _ in everything):
                raise _NotReplayable("operands")
            ranges = [(index[id(v)], span) for v, span in everything]
            outputs = [(index[id(v)], span) for v, span in call.outputs]
            values = [p[3] for p in call.params]
            at = [index.get(id(v)) for v in values]
            launches = []
            for kernel in kernels:
                args_of = [p["arg"] for p in kernel.record["params"]]
                launches.append(_gpu.PreparedLaunch(
                    kernel, [values[i] for i in args_of],
                    [at[i] for i in args_of]))
            self.steps.append((call.device, call.name, launches, checks,
                               ranges, outputs))

    def _source(self, value, sources, spans):
        for j, x in enumerate(sources):
            if x is value or x is value.owner:
                return ("arg", j, 0)
        inside = [j for j, span in enumerate(spans) if span and
                  span[0] <= value.ptr < span[0] + max(span[1], 1)]
        if len(inside) > 1:
            # Arguments that share memory (k and v views of one cache): the
            # signature does not say how they will lie next time.
            raise _NotReplayable(value.name)
        if inside:
            return ("arg", inside[0], value.ptr - spans[inside[0]][0])
        self.keep.append(value.owner)
        return ("const", value.ptr)

    def launch(self, args, kwargs):
        """Launches on the arguments; False where the full path must run
        (a pointer check failed: it raises the error)."""
        given = args + tuple(kwargs.values()) if kwargs else args
        ptrs = []
        for src in self.pointers:
            if src[0] == "const":
                ptrs.append(src[1])
                continue
            x = given[src[1]]
            ptrs.append((x.ptr if type(x) is View else x.data_ptr()) + src[2])
        for _, _, _, checks, ranges, outputs in self.steps:
            for i, chunk in checks:
                if ptrs[i] % chunk:
                    return False
            for o, o_span in outputs:
                lo, hi = ptrs[o], ptrs[o] + o_span
                for i, span in ranges:
                    if i != o and ptrs[i] < hi and ptrs[i] + span > lo:
                        return False
        for device, name, launches, _, _, _ in self.steps:
            _ops._launch_prepared(launches, ptrs, device, name)
        return True


class _NotReplayable(Exception):
    pass


def captured(call, kernels):
    """_Call.run's report of an op call it launched on a GPU (during an
    entry point's first call with a signature)."""
    seen = _CAPTURE.get()
    if seen is not None:
        seen.append((call, kernels))


def replayable(op):
    """Decorator for an op's entry point (ops.unified, ...): calls that go
    through torch.ops.attn_mlir (torch.compile, modes: ops._torch_route)
    and host arrays always take the full path."""
    def wrap(fn):
        @functools.wraps(fn)
        def call(*args, **kwargs):
            global _TENSOR, _ops, _compiling
            if _TENSOR is None:
                if not args or not _abi.is_torch(args[0]):
                    return fn(*args, **kwargs)
                import torch
                from . import ops
                _TENSOR, _ops = torch.Tensor, ops
                _compiling = torch.compiler.is_compiling
            # First, before anything dynamo cannot trace (a ContextVar):
            # under torch.compile the entry point routes to torch.ops.
            if _compiling():
                return fn(*args, **kwargs)
            # Inside another entry point's first call, that one records the
            # whole call.
            if not args or _CAPTURE.get() is not None or \
                    _full_path_only() or _ops._torch_route(args[0]):
                return fn(*args, **kwargs)
            key = _signature(op, args, kwargs)
            if key is None:
                return fn(*args, **kwargs)
            plan = _PLANS.get(key, _NO)
            if plan is not _NO:
                if plan is not None and plan.launch(args, kwargs):
                    return None
                return fn(*args, **kwargs)
            token = _CAPTURE.set([])
            try:
                result = fn(*args, **kwargs)
                seen = _CAPTURE.get()
            finally:
                _CAPTURE.reset(token)
            plan = None
            if seen and result is None:
                try:
                    plan = _Plan(seen, args, kwargs)
                except Exception:   # anything unforeseen: the full path
                    plan = None
            if len(_PLANS) > 4096:
                _PLANS.clear()
            _PLANS[key] = plan
            return result
        return call
    return wrap
