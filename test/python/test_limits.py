"""The size limits (issue 14): the Python API and the verifiers enforce the
same bounds, and the largest schedule the verifier accepts runs on the CPU
(before the bounds, schedule=(2**31, 64, 1) verified and the CPU kernel
segfaulted)."""

import os
import re
from pathlib import Path

import numpy as np
import pytest

from attn_mlir import ops
from reference import check
from test_flash import make, reference

HEADER = (Path(__file__).resolve().parents[2] / "dialect" / "attn" / "IR" /
          "AttnLimits.h")


def _header_limits():
    text = HEADER.read_text()
    values = {}
    for name, expr in re.findall(
            r"inline constexpr int64_t (k\w+) = ([^;]+);", text):
        expr = expr.replace("int64_t{1}", "1")
        values[name] = eval(expr, {"__builtins__": {}})  # integer literals only
    return values


@pytest.mark.parametrize("limit,constant", [
    ("head_dim", "kMaxHeadDim"), ("heads", "kMaxHeads"),
    ("block_size", "kMaxBlockSize"), ("sparse_block", "kMaxSparseBlock"),
    ("num_segments", "kMaxSegments"), ("sliding_window", "kMaxSlidingWindow"),
    ("block_q", "kMaxTile"), ("block_n", "kMaxTile"),
    ("heads_per_program", "kMaxHeads"), ("program_rows", "kMaxProgramRows"),
    ("warps", "kMaxWarps"), ("stages", "kMaxStages"),
])
def test_python_limits_match_the_verifier(limit, constant):
    assert ops.LIMITS[limit][1] == _header_limits()[constant]


def test_schedule_2pow31_is_a_value_error(monkeypatch):
    monkeypatch.delenv("ATTN_MLIR_DRY_RUN", raising=False)
    rng = np.random.default_rng(0)
    q, k, v, cq, ck = make(rng, [5], [5], 2, 2, 32, "f32")
    o = np.zeros_like(q)
    with pytest.raises(ValueError, match=r"^schedule: block_q = 2147483648"):
        ops.flash(q, k, v, cq, ck, o, scale=0.2, schedule=(2 ** 31, 64, 1))


@pytest.mark.skipif(os.environ.get("ATTN_MLIR_TEST_DEVICE") == "cuda",
                    reason="GPU programs reject schedules past the unrolled-"
                    "body budget (test/Conversion checks the diagnostic)")
@pytest.mark.parametrize("schedule", [(4096, 16, 1), (16, 4096, 1),
                                      (1024, 64, 4)])
def test_largest_schedules_run_on_the_cpu(monkeypatch, schedule):
    monkeypatch.delenv("ATTN_MLIR_DRY_RUN", raising=False)
    rng = np.random.default_rng(1)
    q, k, v, cq, ck = make(rng, [3, 70], [9, 70], 8, 2, 40, "f32")
    o = np.full(q.shape, np.nan, np.float32)
    ops.flash(q, k, v, cq, ck, o, scale=40 ** -0.5, causal=True,
              schedule=schedule)
    check(o, reference(q, k, v, cq, ck, 40 ** -0.5, True), "f32", "flash")
