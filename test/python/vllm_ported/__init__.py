"""Ports of vLLM's own kernel tests for the four entry points of
`attn_mlir.vllm` (issue "Drop-in parity"), one file per entry point.

Each port calls `attn_mlir.vllm` the way vLLM's test calls vLLM's function
(same argument names and positions), with inputs built by numpy on the host
(bf16/fp8 as ml_dtypes; fp8 caches as uint8 storage where vLLM passes them
so), and checks the result against a numpy reimplementation of the test's
reference with vLLM's tolerances. Each file's docstring names the vLLM file
and commit it follows and what was adapted.

Grids: vLLM's full grids run with ATTN_MLIR_FULL_GRID=1 (meant for the GPU
machine: ATTN_MLIR_TEST_DEVICE=cuda ATTN_MLIR_FULL_GRID=1 pytest
test/python/vllm_ported, or in parallel processes and parts per device call
with bench/run_grid.py; there the references' matmuls run in float64 on the
GPU, see `matmul`). By default a covering subset runs: every value of
every axis of vLLM's grid appears in at least one case (`cases` checks this
when the module is imported), except the few values named as full-grid-only
at their definition, and problem sizes that make a case take minutes on the
CPU (sequence counts and lengths) are scaled down where the file says so.

This package's __init__ exists because the port files share their basenames
with test/python's own tests; it also holds the helpers the four files share.
"""

import itertools
import os

import ml_dtypes
import numpy as np

FULL_GRID = os.environ.get("ATTN_MLIR_FULL_GRID") == "1"

# vLLM's dtypes as numpy types (current_platform.fp8_dtype() is e4m3fn on
# CUDA; the ROCm e4m3fnuz variants are ROCm-only and not ported).
BF16 = ml_dtypes.bfloat16
FP8_E4M3 = ml_dtypes.float8_e4m3fn
FP8_E5M2 = ml_dtypes.float8_e5m2
FP8_MAX = 448.0  # torch.finfo(torch.float8_e4m3fn).max


def cases(names, full_axes, reduced, full_only=None):
    """The parameter tuples of one test: the product of `full_axes` (a dict
    axis -> values, in `names` order) under ATTN_MLIR_FULL_GRID=1, else the
    hand-picked `reduced` tuples. Checks that every reduced tuple lies in the
    full grid and that every value of every axis appears in some reduced
    tuple, except those listed in `full_only` (axis -> values that only the
    full grid runs, each with its reason at the call)."""
    names = [n.strip() for n in names.split(",")]
    assert list(full_axes) == names, (list(full_axes), names)
    full_only = full_only or {}
    for case in reduced:
        assert len(case) == len(names), case
        for name, value in zip(names, case):
            assert value in full_axes[name], f"{name}={value!r} is not in vLLM's grid"
    for i, name in enumerate(names):
        for value in full_axes[name]:
            if value in full_only.get(name, ()):
                continue
            assert any(case[i] == value for case in reduced), \
                f"the reduced grid never sets {name}={value!r}"
    if FULL_GRID:
        return [tuple(c) for c in itertools.product(*full_axes.values())]
    return [tuple(c) for c in reduced]


_TEST_DEVICE = os.environ.get("ATTN_MLIR_TEST_DEVICE", "cpu")
_DRY_RUN = bool(os.environ.get("ATTN_MLIR_DRY_RUN"))


def matmul(a, b):
    """np.matmul of float64 arrays. On the GPU machine
    (ATTN_MLIR_TEST_DEVICE=cuda) the product runs as a float64 (DGEMM)
    matmul on the GPU: the references of vLLM's full grids are hundreds of
    GFLOP each, minutes per test on one CPU core. Still float64 throughout;
    only the order of the sums differs. A dry run (recording the
    specializations) compares nothing and skips the products."""
    if _DRY_RUN:   # nothing is compared: only the shape matters
        return np.zeros(np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
                        + (a.shape[-2], b.shape[-1]))
    if _TEST_DEVICE == "cuda":
        import torch
        ta = torch.from_numpy(np.ascontiguousarray(a, np.float64)).cuda()
        tb = torch.from_numpy(np.ascontiguousarray(b, np.float64)).cuda()
        out = torch.matmul(ta, tb).cpu().numpy()
        del ta, tb
        torch.cuda.empty_cache()   # see conftest.py: processes share the GPU
        return out
    return np.matmul(a, b)


def f64(x):
    return np.asarray(x).astype(np.float64)


def cast(x, dtype):
    """Round float64 values to `dtype` (RNE) and return them as float64, as
    comparing two tensors of `dtype` does."""
    return np.asarray(x).astype(dtype).astype(np.float64)


# Elements compared at a time: the float64 copies of one chunk, not of the
# whole output (vLLM's 533 prefills of 533 tokens x 8 heads x 256 are 5.8e8
# elements, tens of GB of float64 temporaries in one process).
_COMPARE_CHUNK = 1 << 22


def assert_close(actual, expected, *, atol, rtol, what=""):
    """torch.testing.assert_close(actual, expected, atol=, rtol=) on float64
    copies: |actual - expected| <= atol + rtol * |expected| elementwise, and
    a NaN anywhere fails (equal_nan=False). A dry run (ATTN_MLIR_DRY_RUN:
    record the specializations, run nothing) has nothing to compare, and
    goes on to the test's later calls."""
    if _DRY_RUN:
        return
    actual, expected = np.asarray(actual), np.asarray(expected)
    assert actual.shape == expected.shape, \
        f"{what}: shape {actual.shape} != {expected.shape}"
    flat_a, flat_e = actual.reshape(-1), expected.reshape(-1)
    bad_count, first, worst = 0, None, np.nan
    for lo in range(0, flat_a.size, _COMPARE_CHUNK):
        a = flat_a[lo:lo + _COMPARE_CHUNK].astype(np.float64)
        e = flat_e[lo:lo + _COMPARE_CHUNK].astype(np.float64)
        with np.errstate(invalid="ignore"):
            diff = np.abs(a - e)
            ok = diff <= atol + rtol * np.abs(e)
        if ok.all():
            continue
        bad = ~ok
        bad_count += int(bad.sum())
        if first is None:
            first = lo + int(np.argmax(bad))
        if not np.isnan(diff[bad]).all():
            worst = np.nanmax([worst, np.nanmax(diff[bad])])
    if not bad_count:
        return
    i = np.unravel_index(first, actual.shape)
    raise AssertionError(
        f"{what}: {bad_count} of {actual.size} elements differ beyond "
        f"atol={atol}, rtol={rtol} (greatest |difference| {worst:.4g}); first "
        f"at {tuple(int(x) for x in i)}: {np.float64(actual[i])!r} vs "
        f"{np.float64(expected[i])!r}")


def assert_discriminates(wrong, expected, *, atol, rtol, what):
    """A guard on the test itself: the result of a mistaken semantics
    (`wrong`, e.g. ignoring sinks or the sparsity) must fail the same check,
    else the test could not tell the two apart."""
    if _DRY_RUN:
        return
    with np.errstate(invalid="ignore"):
        close = np.abs(f64(wrong) - f64(expected)) <= atol + rtol * np.abs(f64(expected))
    assert not close.all(), f"the test cannot tell {what} from the reference"


def softmax_rows(s, extra=None):
    """Row softmax of float64 scores with -inf for masked keys; `extra` an
    additional per-row logit in the denominator only (a sink). Rows with no
    visible key give 0 (NaN -> 0, as vLLM's references and docs/semantics.md
    say)."""
    m = np.max(s, axis=-1, keepdims=True) if s.shape[-1] else \
        np.full(s.shape[:-1] + (1,), -np.inf)
    if extra is not None:
        m = np.maximum(m, extra)
    m = np.where(np.isfinite(m), m, 0.0)
    p = np.exp(s - m)
    z = p.sum(axis=-1, keepdims=True)
    if extra is not None:
        z = z + np.exp(extra - m)
    return np.where(z > 0, p / np.where(z > 0, z, 1.0), 0.0)
