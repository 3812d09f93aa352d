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
    dry run, validation (ops read these per call too), fake tensors."""
    if _abi.checking_metadata():
        return True
    env = _ENV
    if env is None:
        return bool(os.environ.get("ATTN_MLIR_RECORD")
                    or os.environ.get("ATTN_MLIR_DRY_RUN")
                    or _abi.validating())
    if env.get(_FLAGS[0]) or env.get(_FLAGS[1]):
        return True
    return env.get(_VALIDATE, b"") not in (b"", b"0")


class _Plan:
    """How one signature's kernels are launched from a call's arguments."""

    def __init__(self, call, kernels, args, kwargs):
        from . import _gpu
        sources = list(args) + list(kwargs.values())
        self.device = call.device
        self.name = call.name
        self.sources = []   # argument position of each pointer
        self.checks = []    # (pointer, chunk alignment)
        pointer_of = {}     # id(View) -> pointer index
        for _, _, kind, value in call.params:
            if kind != "mem":
                continue
            at = next((j for j, s in enumerate(sources)
                       if s is value or s is value.owner), None)
            if at is None:
                raise _NotReplayable(value.name)
            pointer_of[id(value)] = len(self.sources)
            chunk = _abi.chunk_alignment(value)
            if chunk:
                self.checks.append((len(self.sources), chunk))
            self.sources.append((at, type(sources[at]) is View))
        # Outputs against every other operand, by byte range (the full
        # path tells a true overlap from interleaved strides).
        everything = call.inputs + call.outputs
        if any(id(v) not in pointer_of for v, _ in everything):
            raise _NotReplayable("operands")
        self.ranges = [(pointer_of[id(v)], span) for v, span in everything]
        self.outputs = [(pointer_of[id(v)], span) for v, span in call.outputs]
        values = [p[3] for p in call.params]
        index = [pointer_of.get(id(v)) for v in values]
        self.launches = []
        for kernel in kernels:
            args_of = [p["arg"] for p in kernel.record["params"]]
            self.launches.append(_gpu.PreparedLaunch(
                kernel, [values[i] for i in args_of],
                [index[i] for i in args_of]))

    def launch(self, args, kwargs):
        """Launches on the arguments; False where the full path must run
        (a pointer check failed: it raises the error)."""
        given = args + tuple(kwargs.values()) if kwargs else args
        ptrs = [given[at].ptr if is_view else given[at].data_ptr()
                for at, is_view in self.sources]
        for i, chunk in self.checks:
            if ptrs[i] % chunk:
                return False
        for o, o_span in self.outputs:
            lo, hi = ptrs[o], ptrs[o] + o_span
            for i, span in self.ranges:
                if i != o and ptrs[i] < hi and ptrs[i] + span > lo:
                    return False
        _ops._launch_prepared(self.launches, ptrs, self.device, self.name)
        return True


class _NotReplayable(Exception):
    pass


def captured(call, kernels):
    """_Call.run's report of a call it launched on a GPU (under replayable's
    first call)."""
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
            global _TENSOR, _ops
            if _TENSOR is None:
                if not args or not _abi.is_torch(args[0]):
                    return fn(*args, **kwargs)
                import torch
                from . import ops
                _TENSOR, _ops = torch.Tensor, ops
            if not args or _full_path_only() or _ops._torch_route(args[0]):
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
            if len(seen) == 1 and seen[0][0].device is not None:
                try:
                    plan = _Plan(seen[0][0], seen[0][1], args, kwargs)
                except Exception:   # anything unforeseen: the full path
                    plan = None
            if len(_PLANS) > 4096:
                _PLANS.clear()
            _PLANS[key] = plan
            return result
        return call
    return wrap
