"""Randomized check of attn_mlir.ops' run-time preconditions
(attn_mlir._preconditions) on the CPU kernels: calls of ops.flash and
ops.unified with mutated index arrays and sizes (offsets out of order or
past their tensors, block-table entries outside the cache, lengths beyond
the table, outputs of other row counts) must either raise ValueError or
compute the float64 reference, with the rows of no sequence left as they
were (NaN-poisoned). A call that reads out of bounds would crash the
child process or compute something else; before 2026-11-28 many such calls
did (test_preconditions.py lists them).

The calls run in a child process, so that a crash fails this test instead
of ending the test run."""

import json
import subprocess
import sys
from pathlib import Path

from reference import needs_cpu_kernels

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

CHILD = r"""
import json, sys
import numpy as np
sys.path[:0] = [sys.argv[1], sys.argv[2]]
from attn_mlir import ops
from reference import attend
from test_flash import reference as flash_reference

rng = np.random.default_rng(int(sys.argv[3]))
count = int(sys.argv[4])
HQ, HK, D, BS, NB = 4, 2, 32, 16, 6
stats = {"flash": [0, 0], "unified": [0, 0]}   # [accepted, rejected]


def offsets(batch, total):
    lens = rng.integers(0, 9, batch)
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    roll = rng.random()
    if roll < 0.15:      # out of order
        i = rng.integers(1, batch + 1)
        cu[i] = max(cu[i] - rng.integers(1, 9), -3)
    elif roll < 0.3:     # past the tensor
        cu[-1] += rng.integers(1, 40)
    return cu.astype(np.int32), int(lens.sum()) if total is None else total


def rows_of(cu, n):
    rows = np.zeros(n, bool)
    for b in range(len(cu) - 1):
        lo, hi = max(int(cu[b]), 0), min(int(cu[b + 1]), n)
        rows[lo:hi] = True
    return rows


def check(name, out, ref, cu):
    rows = rows_of(cu, len(out))
    if not np.all(np.isnan(out[~rows])):
        raise SystemExit(f"{name}: rows of no sequence were written")
    err = np.max(np.abs(out[rows] - ref[rows])) if rows.any() else 0.0
    if not err < 1e-3:
        raise SystemExit(f"{name}: accepted call differs from the "
                         f"reference by {err}")


def fuzz_flash():
    batch = int(rng.integers(1, 4))
    cq, tq = offsets(batch, None)
    ck, tk = offsets(batch, None)
    tq = max(tq + int(rng.integers(-2, 3)) * (rng.random() < 0.2), 0)
    tk = max(tk + int(rng.integers(-2, 3)) * (rng.random() < 0.2), 0)
    q = rng.standard_normal((tq, HQ, D)).astype(np.float32)
    k = rng.standard_normal((tk, HK, D)).astype(np.float32)
    v = rng.standard_normal((tk, HK, D)).astype(np.float32)
    out_rows = tq + int(rng.integers(-1, 2)) * (rng.random() < 0.1)
    out = np.full((max(out_rows, 0), HQ, D), np.nan, np.float32)
    causal = bool(rng.random() < 0.5)
    try:
        ops.flash(q, k, v, cq, ck, out, scale=0.2, causal=causal)
    except ValueError:
        stats["flash"][1] += 1
        return
    stats["flash"][0] += 1
    check("flash", out, flash_reference(q, k, v, cq, ck, 0.2, causal), cq)


def fuzz_unified():
    batch = int(rng.integers(1, 4))
    cu, tq = offsets(batch, None)
    tq = max(tq + int(rng.integers(-2, 3)) * (rng.random() < 0.2), 0)
    used = rng.integers(0, 4 * BS + 8, batch + (rng.random() < 0.1))
    table = rng.integers(0, NB, (batch, 4))
    if rng.random() < 0.3:
        table[rng.integers(0, batch), rng.integers(0, 4)] = \
            rng.choice([-2, -1, NB, NB + 5, 10 ** 6])
    q = rng.standard_normal((tq, HQ, D)).astype(np.float32)
    kc = rng.standard_normal((NB, BS, HK, D)).astype(np.float32)
    vc = rng.standard_normal((NB, BS, HK, D)).astype(np.float32)
    out = np.full((tq, HQ, D), np.nan, np.float32)
    try:
        ops.unified(q, kc, vc, table.astype(np.int32), cu,
                    used.astype(np.int32), out, scale=0.2)
    except ValueError:
        stats["unified"][1] += 1
        return
    stats["unified"][0] += 1
    ref = np.zeros(q.shape)
    for b in range(batch):
        lo, hi = int(cu[b]), int(cu[b + 1])
        n = int(used[b])
        keys = np.arange(n)
        blocks = table[b, keys // BS]
        for h in range(HQ):
            kk = kc[blocks, keys % BS, h // (HQ // HK)].astype(np.float64)
            vv = vc[blocks, keys % BS, h // (HQ // HK)].astype(np.float64)
            c = n - (hi - lo)
            i = np.arange(hi - lo)[:, None]
            vis = keys[None, :] <= c + i
            ref[lo:hi, h] = attend(q[lo:hi, h].astype(np.float64), kk, vv,
                                   0.2, vis)
    check("unified", out, ref, cu)


for _ in range(count):
    fuzz_flash()
    fuzz_unified()
print(json.dumps(stats))
"""


@needs_cpu_kernels
def test_mutated_calls_raise_or_match_the_reference():
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, str(ROOT / "python"), str(HERE),
         "20261128", "150"],
        capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-4000:])
    stats = json.loads(proc.stdout.strip().splitlines()[-1])
    # Both outcomes occur for both ops (the mutations reach the checks and
    # the kernels).
    for op, (accepted, rejected) in stats.items():
        assert accepted >= 20 and rejected >= 20, stats
