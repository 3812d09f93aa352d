"""float64 references written from docs/semantics.md (never from the kernels).

Each function returns the expected output rows of one sequence and head as
float64, from inputs already converted to float64 (fp8 and bf16 values are
exact in float64).
"""

import os

import ml_dtypes
import numpy as np
import pytest

from attn_mlir import _toolchain

F8 = {"f8E4M3FN": ml_dtypes.float8_e4m3fn, "f8E5M2": ml_dtypes.float8_e5m2}
F8_MAX = {"f8E4M3FN": 448.0, "f8E5M2": 57344.0}
DTYPES = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16,
          **F8}
TOL = {"f32": 2e-5, "f16": 3e-3, "bf16": 2e-2, "f8E4M3FN": 0.13,
       "f8E5M2": 0.26}
if os.environ.get("ATTN_MLIR_TEST_DEVICE") == "cuda":
    # Tensor cores round P to the input type before PV (FlashAttention-2
    # does the same); the CPU program keeps P in f32. f32 runs on TF32
    # (10 mantissa bits, as f16; vLLM's kernels do the same): q, k, v and P
    # are rounded to it (worst f32 error seen on H100: 6.3e-4).
    TOL.update({"f16": 8e-3, "bf16": 3e-2, "f32": 3e-3})
    if os.environ.get("ATTN_MLIR_F32_PRECISION") == "3xtf32":
        # 3xTF32 products: f32's level, as the CPU program (worst seen on
        # H100: 2.4e-6). Only f32 inputs: f32 outputs of 16-bit inputs keep
        # their rounding of P.
        TOL["f32"] = 2e-5


def f64(x):
    return np.asarray(x).astype(np.float64)


def attend(q, k, v, scale, visible, *, softcap=None, alibi=None, bias=None,
           sink=None, keep=None, dropout_p=0.0, p_error=None):
    """Section 2 for one (sequence, head): q [Lq, D], k/v [Lk, D], visible
    [Lq, Lk] bool, alibi/bias [Lq, Lk] additive (already in score units),
    sink a scalar, keep [Lq, Lk] bool dropout mask. With `p_error`, a bound
    on each softmax numerator's error, p_error(p, m) of the numerators p
    (all <= 1) and the magnitudes m = scale * |q| @ |k|.T of the scores'
    terms, the result is those errors carried through: sum(p_error v) / z
    (pass |v| for their weight in the output)."""
    s = scale * (q @ k.T)
    if softcap:
        s = softcap * np.tanh(s / softcap)
    if alibi is not None:
        s = s + alibi
    if bias is not None:
        s = s + bias
    s = np.where(visible, s, -np.inf)
    m = s.max(axis=1, keepdims=True) if s.shape[1] else np.full((len(q), 1), -np.inf)
    if sink is not None:
        m = np.maximum(m, sink)
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.where(visible, np.exp(s - m), 0.0)
    z = p.sum(axis=1, keepdims=True)
    if sink is not None:
        z = z + np.exp(sink - m)
    if p_error is not None:
        p = np.where(visible, p_error(p, abs(scale) * (np.abs(q) @ np.abs(k).T)),
                     0.0)
    if keep is not None:
        p = np.where(keep, p, 0.0) / (1.0 - dropout_p)
    out = p @ v
    return np.where(z > 0, out / np.where(z > 0, z, 1.0), 0.0)


def e4m3_rounding(x):
    """The largest error of rounding |x| to e4m3 (nearest): half a step,
    2^-4 of x for normals (>= 2^-6), below that min(|x|, 2^-10)."""
    x = np.abs(x)
    return np.where(x >= 2.0 ** -6, x * 2.0 ** -4, np.minimum(x, 2.0 ** -10))


def to_fp8_out(o, out_scale, fp8):
    """Section 6: clamp(o / out_scale) rounded to the fp8 type, as float64."""
    x = np.clip(o / out_scale, -F8_MAX[fp8], F8_MAX[fp8])
    return f64(x.astype(F8[fp8]))


def philox_uniform(seed, counters):
    """Section 7: Triton's tl.rand(seed, counter) for an array of counters."""
    mask = np.uint64(0xFFFFFFFF)
    k0 = np.uint64(seed & 0xFFFFFFFF)
    k1 = np.uint64((seed >> 32) & 0xFFFFFFFF)
    c0 = np.asarray(counters, dtype=np.int64).astype(np.uint64) & mask
    c1 = np.zeros_like(c0)
    c2 = np.zeros_like(c0)
    c3 = np.zeros_like(c0)
    A, B = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)
    for _ in range(10):
        pa, pb = A * c0, B * c2
        n0 = (pb >> np.uint64(32)) ^ c1 ^ k0
        n2 = (pa >> np.uint64(32)) ^ c3 ^ k1
        c0, c1, c2, c3 = n0 & mask, pb & mask, n2 & mask, pa & mask
        k0 = (k0 + np.uint64(0x9E3779B9)) & mask
        k1 = (k1 + np.uint64(0xBB67AE85)) & mask
    x = c0.astype(np.uint32).view(np.int32).astype(np.int64)
    x = np.where(x < 0, -x - 1, x)
    return (x.astype(np.float32) * np.float32(4.6566127342e-10)).astype(np.float32)


# A recording run (ATTN_MLIR_DRY_RUN=1 ATTN_MLIR_RECORD=f.jsonl with
# ATTN_MLIR_TEST_RECORD_ALL=1): no kernel runs, so there is nothing to
# check, and a test goes on past its first check to record every kernel it
# calls (conftest.py says so in the summary). Nowhere else.
RECORDING_ONLY = bool(os.environ.get("ATTN_MLIR_DRY_RUN")) and \
    bool(os.environ.get("ATTN_MLIR_TEST_RECORD_ALL"))


# Tests that build CPU kernels on purpose (the cache, its log lines, the
# fuzzer's references) skip, with the reason, where no CPU toolchain is found
# (a GPU machine given the wheel's attn-opt alone); everywhere else they run.
_CPU_TOOLCHAIN_PROBLEM = _toolchain.cpu_toolchain_problem()
needs_cpu_kernels = pytest.mark.skipif(
    _CPU_TOOLCHAIN_PROBLEM is not None,
    reason=f"builds CPU kernels, which this machine cannot: "
           f"{_CPU_TOOLCHAIN_PROBLEM}")


def check(out, ref, dtype, what="", tol=None, bound=None):
    """|out - ref| within the dtype's rounding (or `tol`), relative to
    max(1, |ref|); and, where `bound` (absolute, element by element) is
    given, within that too."""
    if RECORDING_ONLY:
        return 0.0
    out = f64(out)
    assert not np.isnan(out).any(), f"{what}: NaN in output (unwritten rows?)"
    diff = np.abs(out - ref)
    err = diff.max() if out.size else 0.0
    limit = (tol or TOL[dtype]) * max(1.0, np.abs(ref).max() if ref.size else 0.0)
    assert err <= limit, f"{what}: max error {err:.3g} > {limit:.3g}"
    if bound is not None and out.size:
        at = np.unravel_index(np.argmax(diff - bound), diff.shape)
        assert diff[at] <= bound[at], (
            f"{what}: error {diff[at]:.3g} > bound {bound[at]:.3g} at {at} "
            f"(ref {ref[at]:.3g})")
    return err
