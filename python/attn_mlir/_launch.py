"""GPU launch plumbing of the ops: the current stream, a mixed batch's side
stream (two ops' kernels at once), NVTX ranges, and the launches of a
specialization's kernels from Python, for ops._Call and attn_mlir._replay."""

import functools
import os

from . import _replay


def _current_stream(torch, dev):
    """The raw handle of the current stream of `dev` (the private accessor
    that Triton's launcher uses is several microseconds faster than
    torch.cuda.current_stream; the public one is the fallback)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(dev.index)
    return torch.cuda.current_stream(dev).cuda_stream


def _hip(torch):
    """1 on ROCm torch, which runs the ROCDL kernels (HSACO) through the HIP
    module API (that path is the CUDA one with other entry points and has
    not run on AMD hardware: docs/runtime.md), else 0."""
    return 1 if torch.version.hip else 0


def _stream_getter(dev):
    """(function returning the raw handle of `dev`'s current stream, the
    runtime's backend): what attn_mlir._replay's one-round-trip launch
    (_gpu.ReplayEngine.launch) takes, resolved once per plan."""
    import torch
    if dev is None:   # a plan without launches never asks
        return (lambda: 0), 0
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return functools.partial(raw, dev.index), _hip(torch)
    return (lambda: _current_stream(torch, dev)), _hip(torch)


def _side_lane(call, kernels):
    """(index of the kernel to launch on a side stream, high priority) for a
    call whose variants may run at once (call.side), or None. Each variant
    must be one kernel (the bundle lists them in the ops' order), and none
    persistent: a persistent kernel's program counter is its module's, so
    launches of one must not overlap (docs/runtime.md)."""
    if call.side is None or len(kernels) != len(call.variants or ()) or \
            any(k.record.get("persistent") for k in kernels):
        return None
    return call.side


def _launch_prepared(launches, ptrs, dev, name, side=None):
    """attn_mlir._replay's launches from Python (tensor maps, NVTX ranges,
    a side stream): _gpu.PreparedLaunch objects given the call's operand
    pointers."""
    from . import _gpu
    _on_stream(dev, name, lambda stream, backend: _in_lanes(
        len(launches), side, stream, backend,
        lambda i, s: _gpu.launch_prepared([launches[i]], ptrs, s, backend)))


def _launch_kernels(kernels, values, dev, name, side=None):
    """Launches a specialization's kernels on `dev`'s current stream (one
    on a side stream where `side`, _side_lane's, says); values[i] is the
    call's i-th parameter (a View or a scalar)."""
    from . import _gpu
    _on_stream(dev, name, lambda stream, backend: _in_lanes(
        len(kernels), side, stream, backend,
        lambda i, s: _gpu.launch(kernels[i], [
            values[p["arg"]] for p in kernels[i].record["params"]],
            s, backend)))


def _in_lanes(count, side, stream, backend, launch):
    """launch(i, stream) for kernels 0 .. count - 1 on `stream` in order;
    where side = (j, high), kernel j instead on the thread's side stream
    (forked off `stream` first, joined after): it runs beside the others.
    The others are issued first: a mixed batch's decode kernel then takes
    SMs as the prefill kernel's programs leave them (H200:
    bench/results/2026-11-30-h200-session26.md; split decode kernels issued
    first showed no rule: bench/results/2026-12-01-h200-mixed-decodes-
    first.log). Without a side stream from the runtime, all on `stream`."""
    from . import _gpu
    lane = _gpu.fork(stream, side[1], backend) if side else None
    if lane is None:
        for i in range(count):
            launch(i, stream)
        return
    try:
        for i in range(count):
            if i != side[0]:
                launch(i, stream)
        launch(side[0], lane)
    finally:
        _gpu.join(stream, lane, backend)


def _on_stream(dev, name, launch):
    """launch(stream, backend) on `dev`'s current stream, inside an NVTX
    range named `name` when ATTN_MLIR_NVTX asks for one."""
    import torch
    nvtx = _nvtx_enabled()
    if nvtx:
        torch.cuda.nvtx.range_push(name)
    try:
        launch(_current_stream(torch, dev), _hip(torch))
    finally:
        if nvtx:
            torch.cuda.nvtx.range_pop()


def _nvtx_enabled():
    """ATTN_MLIR_NVTX=1: each GPU call is an NVTX range named for its kernel
    (nsys shows the op's host-side span beside the kernel)."""
    env = _replay._ENV   # os.environ's own store: no encoding per call
    if env is not None:
        return env.get(b"ATTN_MLIR_NVTX", b"") not in (b"", b"0")
    return os.environ.get("ATTN_MLIR_NVTX", "") not in ("", "0")
