"""Argument checks of the op entry points (attn_mlir.ops): integers,
scales, head dims, fp8 scale ranges, schedules, ALiBi forms and windows.
Each raises a ValueError naming the bad argument; ops re-exports them."""

import math
import numbers
import warnings

import numpy as np

from . import _abi
from ._abi import (FP8, checking_metadata, host_values, is_torch, reads_values,
                   validating, view)

MAX_HEAD_DIM = 1024

# Inclusive bounds of the integers an op takes: those of the verifiers
# (dialect/attn/IR/AttnLimits.h), so that a call fails here, by name, with
# the same limits, instead of in the compiler.
LIMITS = {
    "head_dim": (1, MAX_HEAD_DIM),
    "heads": (1, 4096),                 # query or KV heads
    # Keys per cache page, and the key split x of the split key cache.
    "block_size": (1, 1 << 16),
    # Block-sparse layout block sizes (block_size, q_block_size).
    "sparse_block": (1, 1 << 16),
    # Larger windows than any sequence mean no window: omit it instead.
    "sliding_window": (1, (1 << 31) - 1),
    "num_segments": (1, 4096),
    # Tile schedule fields; block_q * heads_per_program is a program's rows.
    "block_q": (1, 4096),
    "block_n": (1, 4096),
    "heads_per_program": (1, 4096),
    "program_rows": (1, 4096),
    "warps": (0, 32),
    "tma": (0, 1),
    "producer_warps": (0, 4),
    "pingpong": (0, 1),
    "persistent": (0, 1),
    "stages": (0, 4),
    # Philox seed and offset: any 64-bit pattern, signed or unsigned.
    "philox": (-(1 << 63), (1 << 64) - 1),
}

_F32_MAX = float(np.finfo(np.float32).max)
_F32_TINY = float(np.finfo(np.float32).tiny)   # smallest normal f32
FP8_MAX = {"f8E4M3FN": 448.0, "f8E5M2": 57344.0}
# Smallest positive (subnormal) value of each fp8 type.
FP8_TINY = {"f8E4M3FN": 2.0 ** -9, "f8E5M2": 2.0 ** -16}
# The smallest probability P (relative to its row's largest, 1) that an fp8
# PV product must keep: a key whose score is ln(2^16) ~ 11.1 below the row
# max. Rounding P below it to 0 costs at most 2^-16 a key, so a row needs
# 4096 such keys before they add up to e4m3's rounding (2^-4) of P = 1.
P_MIN = 2.0 ** -16


class Fp8RangeWarning(UserWarning):
    """A scale puts fp8 values (or scaled scores) outside the range the
    element type represents: they saturate, flush to zero or overflow f32.
    Issued once per process per argument and kind (docs/semantics.md 6)."""


_WARNED = set()


def _warn_once(key, message):
    if key not in _WARNED:
        _WARNED.add(key)
        warnings.warn(message, Fp8RangeWarning, stacklevel=4)


def _is_bool(x):
    return isinstance(x, (bool, np.bool_))


def check_int(x, name, limit=None, label=""):
    """`x` as an int: a real integer (bool and float rejected) within
    LIMITS[limit]; ValueError names `name`."""
    if type(x) is not int:   # the usual case skips the ABC checks
        if _is_bool(x) or not isinstance(x, numbers.Integral):
            raise ValueError(f"{name}: {label}expected an integer, got {x!r} "
                             f"({type(x).__name__})")
        x = int(x)
    if limit is not None:
        lo, hi = LIMITS[limit]
        if not lo <= x <= hi:
            raise ValueError(f"{name}: {label}{x} is outside the supported "
                             f"range [{lo}, {hi}]")
    return x


def check_real(x, name):
    """`x` as a float: a real number on the host (int, float, numpy scalar,
    or a one-element host array or tensor); ValueError names `name`."""
    if type(x) is float:
        return x
    if _is_bool(x):
        raise ValueError(f"{name}: expected a real number, got {x!r}")
    if isinstance(x, numbers.Real):
        return float(x)
    if is_torch(x) and not x.is_cpu:
        raise ValueError(f"{name}: expected a Python float, got a tensor on "
                         f"{x.device} (reading it would synchronize)")
    if isinstance(x, np.ndarray) or is_torch(x):
        vals = np.asarray(host_values(x, name))
        if vals.size == 1 and vals.dtype.kind in "fiu":
            return float(vals.reshape(-1)[0])
    raise ValueError(f"{name}: expected a real number, got {x!r} "
                     f"({type(x).__name__})")


def check_scale(x, name, allow_zero=False):
    """A scale's host value: finite and non-zero as the f32 the kernels read
    (negative scales are allowed). Returns it as a float. `allow_zero`: the
    softmax scale, for which 0 is well defined (uniform weights)."""
    x = check_real(x, name)
    if not math.isfinite(x) or abs(x) > _F32_MAX:
        raise ValueError(f"{name}: must be finite in f32, got {x}")
    if allow_zero:
        return x
    if float(np.float32(x)) == 0.0:
        raise ValueError(f"{name}: must be non-zero, got {x}"
                         + (" (0 in f32)" if x else ""))
    return x


def check_head_dim(v):
    """q (or out) [tokens, heads, head_dim]: heads >= 1, head dim within
    LIMITS."""
    if v.ndim != 3:
        raise ValueError(f"{v.name}: expected a rank-3 array [tokens, heads, "
                         f"head_dim], got shape {tuple(v.shape)}")
    check_int(v.shape[1], v.name, "heads", "heads ")
    check_int(v.shape[2], v.name, "head_dim", "head dim ")


def _softcap(softcap):
    if softcap is None:
        return None
    c = check_real(softcap, "softcap")
    if not (math.isfinite(c) and 0 < c <= _F32_MAX) or np.float32(c) == 0:
        raise ValueError(f"softcap: must be positive and finite in f32 "
                         f"(omit it to disable), got {softcap}")
    return c


def _check_finite_values(v, name):
    """Per-head values (ALiBi slopes, sinks) finite: host arrays always,
    device ones only when validating (reading them synchronizes)."""
    if not reads_values(v.owner):
        return
    vals = np.asarray(host_values(v.owner, name), dtype=np.float64)
    if not np.all(np.isfinite(vals)):
        bad = vals.reshape(-1)[~np.isfinite(vals.reshape(-1))][0]
        raise ValueError(f"{name}: values must be finite, got {bad}")


def _fp8_scale(t, scale, scale_name):
    """A scale operand is required exactly when its tensor `t` is fp8."""
    if t is None:
        return
    if t.dtype in FP8 and scale is None:
        raise ValueError(f"{scale_name}: required when {t.name} is fp8 "
                         f"({t.dtype})")
    if t.dtype not in FP8 and scale is not None:
        raise ValueError(f"{scale_name}: only valid when {t.name} is fp8, but "
                         f"it is {t.dtype}")


def _out_scale(out, scale):
    """`out_scale` is required for an fp8 `out`; with a 16/32-bit `out` it
    quantizes to the fp8 range as vLLM's kernels do (docs/semantics.md 6)."""
    if out is not None and out.dtype in FP8 and scale is None:
        raise ValueError(f"out_scale: required when {out.name} is fp8 "
                         f"({out.dtype})")


def _product_range(factors):
    """Warns when a product of scales that the kernels form overflows f32 or
    falls below its normal range. `factors`: (name, host value, or None when
    only in device memory: then nothing is checked)."""
    if any(v is None or v == 0 for _, v in factors):
        return   # unknown, or exactly 0 (a softmax scale of 0 is valid)
    names = " * ".join(n for n, _ in factors)
    prod = abs(math.prod(v for _, v in factors))
    if prod > _F32_MAX or prod < _F32_TINY:
        what = "overflows" if prod > _F32_MAX else "underflows"
        _warn_once((names, what),
                   f"{names} = {prod:.3g} {what} f32 (normal range "
                   f"[{_F32_TINY:.3g}, {_F32_MAX:.3g}]): the scaled values "
                   f"become inf or lose precision")


def _p_scale_range(p_scale, dtype):
    """The fp8 PV product rounds P / p_scale (P in [0, 1]) to `dtype`:
    1 / |p_scale| above the type's max saturates P, and p_scale * tiny / 2
    above P_MIN flushes meaningful probabilities to zero."""
    if p_scale is None or dtype not in FP8_MAX:
        return
    s = abs(p_scale)
    if 1.0 / s > FP8_MAX[dtype]:
        _warn_once(("p_scale", "saturates"),
                   f"p_scale: {p_scale:.3g} saturates P: P / p_scale reaches "
                   f"{1.0 / s:.3g} > {FP8_MAX[dtype]:g} ({dtype} max); "
                   f"use |p_scale| >= 1 / {FP8_MAX[dtype]:g}")
    elif s * FP8_TINY[dtype] / 2 > P_MIN:
        _warn_once(("p_scale", "flushes"),
                   f"p_scale: {p_scale:.3g} flushes P below "
                   f"{s * FP8_TINY[dtype] / 2:.3g} to zero in {dtype} "
                   f"(probabilities down to 2^-16 matter); use |p_scale| <= "
                   f"{2 * P_MIN / FP8_TINY[dtype]:g}")


def _out_scale_range(out_scale):
    if out_scale is not None and 1.0 / abs(out_scale) > _F32_MAX:
        _warn_once(("out_scale", "overflows"),
                   f"out_scale: 1 / {out_scale:.3g} overflows f32")


def _scale_view(x, name, device=None):
    """A scale given as a float or a 1-element array, as a 1-element f32 view
    (a host copy: the CPU kernels read it once per call), and its value when
    known on the host (None for a CUDA tensor unless validating). On a GPU a
    scale must be in device memory: a CUDA tensor is used as it is, a float
    is filled into a new 1-element tensor (stream-ordered, no
    synchronization)."""
    if x is None:
        return None, None
    if device is not None:
        import torch
        # (_abi's, looked up per call: test_replay.py stands CPU tensors in
        # for CUDA ones by patching it.)
        if _abi.device_of(x) is not None:
            if x.numel() != 1 or x.dtype != torch.float32:
                raise ValueError(f"{name}: expected one float32 value, got "
                                 f"{x.numel()} values of {x.dtype}")
            value = check_scale(x.item(), name) if validating() else None
            return view(x.reshape(1), name), value
        if isinstance(x, numbers.Real) and not _is_bool(x):
            value = check_scale(x, name)
            return view(torch.full((1,), value, dtype=torch.float32,
                                   device=device), name), value
        raise ValueError(f"{name}: on a GPU call give a float or a float32 "
                         f"CUDA tensor, got {type(x).__name__}")
    if _is_bool(x):
        raise ValueError(f"{name}: expected a real number, got {x!r}")
    if is_torch(x) and checking_metadata():
        # A fake tensor: its one value is checked when the op runs.
        if x.numel() != 1:
            raise ValueError(f"{name}: expected a single scale value, got "
                             f"{x.numel()} values")
        return view(x.reshape(1), name), None
    raw = [x] if isinstance(x, numbers.Real) else host_values(x, name)
    try:
        vals = np.asarray(raw, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: expected a real number, got {x!r}") from None
    if vals.size != 1:
        raise ValueError(f"{name}: expected a single scale value, got "
                         f"{vals.size} values")
    value = check_scale(float(vals[0]), name)
    return view(np.array([value], np.float32), name), value


_SCHEDULE_FIELDS = ("block_q", "block_n", "heads_per_program", "warps",
                    "tma", "producer_warps", "pingpong", "persistent",
                    "stages")


def _schedule_attr(schedule):
    """The schedule attribute of (block_q, block_n, heads_per_program[,
    warps[, tma[, producer_warps[, pingpong[, persistent[, stages]]]]]]) or
    of a dict
    with those keys (block_q, block_n and heads_per_program required)."""
    if schedule is None:
        return None
    if isinstance(schedule, dict):
        unknown = set(schedule) - set(_SCHEDULE_FIELDS)
        missing = set(_SCHEDULE_FIELDS[:3]) - set(schedule)
        if unknown or missing:
            raise ValueError(f"schedule: unknown fields {sorted(unknown)}, "
                             f"missing {sorted(missing)} (fields: "
                             f"{', '.join(_SCHEDULE_FIELDS)})")
        schedule = [schedule.get(f, 0) for f in _SCHEDULE_FIELDS]
    if isinstance(schedule, (str, bytes)) or \
            not hasattr(schedule, "__len__") or not 3 <= len(schedule) <= 9:
        raise ValueError(f"schedule: expected (block_q, block_n, "
                         f"heads_per_program[, warps[, tma[, producer_warps"
                         f"[, pingpong[, persistent[, stages]]]]]]), got "
                         f"{schedule!r}")
    flags = ("tma", "pingpong", "persistent")
    bq, bn, pack, *rest = [
        check_int(int(x) if f in flags and _is_bool(x) else x, "schedule", f,
                  f"{f} = ")
        for x, f in zip(schedule, _SCHEDULE_FIELDS)]
    check_int(bq * pack, "schedule", "program_rows",
              "block_q * heads_per_program = ")
    rest += [0] * (6 - len(rest))
    warps, tma, producers, pingpong, persistent, stages = rest
    # The verifier's rules of the KV pipeline fields (AttnDialect.cpp).
    if producers not in (0, 4):
        raise ValueError(f"schedule: producer_warps = {producers}: 0 or 4 "
                         f"(a producer warpgroup)")
    for flag, on in (("pingpong", pingpong), ("persistent", persistent)):
        if on and not producers:
            raise ValueError(f"schedule: {flag} needs producer_warps = 4")
    if persistent and not tma:
        raise ValueError("schedule: persistent needs tma = true (its "
                         "producer loads by TMA)")
    if producers and stages not in (0, 2):
        raise ValueError(f"schedule: producer_warps = 4 needs a ring of 2 "
                         f"stages, got stages = {stages}")
    extra = f", warps = {warps}" if warps else ""
    extra += ", tma = true" if tma else ""
    extra += f", producer_warps = {producers}" if producers else ""
    extra += ", pingpong = true" if pingpong else ""
    extra += ", persistent = true" if persistent else ""
    extra += f", stages = {stages}" if stages else ""
    return (f"#attn.schedule<block_q = {bq}, block_n = {bn}, "
            f"heads_per_program = {pack}{extra}>")


def _i64(x, name):
    """A 64-bit pattern (signed or unsigned) as the signed value the C ABI
    passes."""
    x = check_int(x, name, "philox")
    return x - (1 << 64) if x >= 1 << 63 else x


_ALIBI_FORMS = ("relative", "context", "absolute", "sqrt")


def _alibi_form(form):
    if form is not None and form not in _ALIBI_FORMS:
        raise ValueError(f"alibi_form: expected one of {', '.join(_ALIBI_FORMS)}"
                         f", got {form!r}")
    return f"#attn.alibi<{form}>" if form else None


def _window(w):
    if w is None:
        return None
    return f"{check_int(w, 'sliding_window', 'sliding_window')} : i64"
