"""Random feature combinations of vllm.triton_attention (varlen flash)
against the float64 reference, as test_unified_fuzz.py does for the paged
call: each case draws, from its own seed, a varlen batch (queries shorter,
as long as or longer than their keys), GQA of any ratio, a head dim, the
input and output types (fp8 q/k/v given as fp8 or quantized on load, fp8
outputs with a scale), bottom-right causal masks, an additive bias and
Philox dropout.

ATTN_MLIR_FUZZ_CASES (default 12) and ATTN_MLIR_FUZZ_SEED (default 2026)
as there; ATTN_MLIR_FUZZ_TORCH=1 with ATTN_MLIR_TEST_DEVICE=cuda passes
torch CUDA tensors (the drop-in's own GPU planning).
"""

import numpy as np
import pytest

from attn_mlir import vllm
from reference import F8, RECORDING_ONLY, check, e4m3_rounding, f64
from test_flash import make, quantize_like_vllm, reference
from test_unified_fuzz import (CASES, HEAD_DIMS, SEED, call, check_fp8_output,
                               heads, poisoned_output)

# Half a step of each output type, relative (e4m3's by e4m3_rounding).
HALF_STEP = {"f32": 2.0 ** -24, "f16": 2.0 ** -11, "bf16": 2.0 ** -8}


def draw(case):
    """The configuration of one case: plain values, printed on failure."""
    rng = np.random.default_rng([SEED, case, 7])
    n = int(rng.integers(1, 7))
    lq = [int(x) for x in rng.integers(1, 600, n)]
    same = rng.random() < 0.5
    lk = lq if same else [int(x) for x in rng.integers(1, 800, n)]
    hk, hq = heads(rng)
    c = dict(case=case, lq=lq, lk=lk, hk=hk, hq=hq,
             d=int(rng.choice(HEAD_DIMS)),
             dtype=str(rng.choice(["bf16", "f16", "f32"], p=[0.5, 0.3, 0.2])),
             causal=bool(rng.random() < 0.6),
             scale_factor=float(rng.uniform(0.5, 1.5)))
    c["fp8"] = str(rng.choice(["none", "given", "on_load"], p=[0.7, 0.15, 0.15]))
    c["out_fp8"] = c["fp8"] != "none" and rng.random() < 0.3
    c["bias"] = str(rng.choice(["none", "shared", "per_seq"], p=[0.8, 0.1, 0.1]))
    c["dropout"] = float(rng.uniform(0.05, 0.5)) if rng.random() < 0.15 else 0.0
    c["philox"] = [int(x) for x in rng.integers(0, 1 << 31, 2)]
    return c


def run(c):
    rng = np.random.default_rng([SEED, c["case"], 8])
    q, k, v, cq, ck = make(rng, c["lq"], c["lk"], c["hq"], c["hk"], c["d"],
                           c["dtype"])
    scale = c["scale_factor"] * c["d"] ** -0.5
    kw, rkw = {}, {}
    qf, kf, vf = q, k, v
    if c["fp8"] != "none":
        s = [float(x) for x in rng.uniform(0.005, 0.05, 3)]
        kw["fp8_scales"] = (*s, 1.0 / 448)
        # Section 3.3's quantization on load, which "given" inputs share.
        quantized = [quantize_like_vllm(x, si, c["dtype"])
                     for x, si in zip((q, k, v), s)]
        if c["fp8"] == "given":
            q, k, v = quantized
        # The reference takes the values the kernel sees.
        qf, kf, vf = (f64(x) * si for x, si in zip(quantized, s))
    if c["bias"] != "none":
        rows = 1 if c["bias"] == "shared" else len(c["lq"])
        rkw["bias"] = kw["bias"] = rng.standard_normal(
            (rows, c["hq"], max(c["lq"]), max(c["lk"]))).astype(np.float32)
    if c["dropout"]:
        kw.update(dropout_p=c["dropout"], philox_seed=c["philox"][0],
                  philox_offset=c["philox"][1])
        rkw["dropout"] = (c["dropout"], *c["philox"])
    o, out_scale = poisoned_output(rng, q.shape, c["dtype"], c["out_fp8"])
    if out_scale is not None:
        kw["fp8_out_scale"] = out_scale
    args = [q, k, v, o, cq, ck, max(c["lq"]), max(c["lk"])]
    kw.update(causal=c["causal"], sm_scale=scale)
    o = call(vllm.triton_attention, args, kw, out=3)
    if RECORDING_ONLY:  # nothing ran: the reference is not needed
        return 0.0
    ref = reference(qf, kf, vf, cq, ck, scale, c["causal"], **rkw)
    if c["fp8"] == "none":
        return check(o, ref, c["dtype"], str(c))
    # fp8 cases: the fixed tolerances they had (0.2 of max(1, |ref|) with an
    # fp8 output, e4m3's 0.13 otherwise), and element by element the bound
    # of the roundings a program may make.
    bound = fp8_error_bound(qf, kf, vf, cq, ck, scale, c["causal"], rkw, ref,
                            c["dtype"], out_scale)
    if out_scale is not None:
        return check_fp8_output(o, ref, out_scale, str(c), tol=0.2,
                                bound=bound)
    return check(o, ref, "f8E4M3FN", str(c), bound=bound)


def fp8_error_bound(qf, kf, vf, cq, ck, scale, causal, rkw, ref, dtype,
                    out_scale):
    """How far an fp8 program's output may be from `ref`, element by element,
    from the roundings it is allowed (docs/semantics.md, section 6 notes):
    - dequantized q, k, v in a 16-bit compute type (at most bf16's half
      step u each) and dot products summed with fewer bits (Hopper's fp8
      MMA; 2^-10 of the terms' magnitudes): each score off by at most
      d = (2u + 2^-10) m, m = scale * |q| @ |k|, so its numerator p by a
      factor within e^d;
    - p rounded to e4m3 for PV (with p_scale 1/448 <= 1: at most
      e4m3_rounding of p);
    together each numerator off by e <= p (e^d - 1) + e4m3_rounding(p) e^d.
    With A = sum e|v| / z and r = sum e / z, O moves by at most
    (A + |O| r) / (1 - r), whether the row sum takes p before or after its
    rounding; v's own rounding adds u of sum p'|v| / z'. Then the output's
    rounding (e4m3 at out_scale, or the 16/32-bit type) and 1e-3 of
    max(1, |ref|) for the remaining f32 arithmetic."""
    u = HALF_STEP["bf16"]
    delta = 2 * u + 2.0 ** -10

    def numerator_error(p, m):
        grow = np.exp(delta * m)
        return p * (grow - 1) + e4m3_rounding(p) * grow

    av = np.abs(vf)
    weighted = reference(qf, kf, av, cq, ck, scale, causal, **rkw)
    ones = np.ones(vf.shape[:2] + (1,))
    e = reference(qf, kf, np.concatenate([av, ones], axis=2), cq, ck, scale,
                  causal, p_error=numerator_error, **rkw)
    a, r = e[..., :-1], e[..., -1:]
    moved = (a + np.abs(ref) * r) / np.maximum(1.0 - r, 1e-12)
    moved += u * (weighted + moved)
    near = np.abs(ref) + moved
    if out_scale is None:
        rounded = HALF_STEP[dtype] * near
    else:
        rounded = e4m3_rounding(near / out_scale) * out_scale
    return moved + rounded + 1e-3 * max(1.0, np.abs(ref).max(initial=0.0))


@pytest.mark.parametrize("case", [f"case_{i}" for i in range(CASES)])
def test_flash_fuzz(case):
    run(draw(int(case[5:])))


def test_e4m3_rounding_bounds_the_rounding():
    """fp8_error_bound's foundation: e4m3_rounding(x) bounds |e4m3(x) - x|
    on [0, 448] (normals, subnormals, underflow to zero) and is reached."""
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(0, 1, 100000),
                        2.0 ** rng.uniform(-14, 8.8, 100000)])
    err = np.abs(f64(x.astype(F8["f8E4M3FN"])) - x)
    bound = e4m3_rounding(x)
    assert (err <= bound).all()
    assert (err / np.maximum(bound, 1e-300)).max() > 0.99
