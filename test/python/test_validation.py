"""Argument validation (issue 14): scales, outputs, integers and fp8 ranges
are rejected with a ValueError naming the argument (or warned about with
Fp8RangeWarning) before anything compiles. Calls that must pass run with
ATTN_MLIR_DRY_RUN=1: every check runs, no kernel is compiled."""

import math
import warnings

import numpy as np
import pytest

from attn_mlir import ops, vllm
from attn_mlir.ops import Fp8RangeWarning
from reference import F8
from test_errors import prefix_args, unified_args

F = np.float32
E4 = F8["f8E4M3FN"]
E5 = F8["f8E5M2"]
BAD_SCALES = [0.0, -0.0, math.nan, math.inf, -math.inf, 1e39, 1e-50]
BAD_IDS = ["zero", "negzero", "nan", "inf", "-inf", "f32-overflow", "f32-zero"]
# The softmax scale may be 0 (uniform weights, test_flash checks it) or
# negative, but not infinite or NaN.
NON_FINITE = [math.nan, math.inf, -math.inf, 1e39]
NON_FINITE_IDS = ["nan", "inf", "-inf", "f32-overflow"]


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    """No kernel runs (checks only) and warnings are not yet spent."""
    monkeypatch.setenv("ATTN_MLIR_DRY_RUN", "1")
    monkeypatch.delenv("ATTN_MLIR_VALIDATE", raising=False)
    ops._WARNED.clear()
    yield
    ops._WARNED.clear()


# --- arguments of the four entry points ------------------------------------

def flash_args(**over):
    a = dict(q=np.zeros((8, 4, 32), F), k=np.ones((8, 2, 32), F),
             v=np.ones((8, 2, 32), F), o=np.zeros((8, 4, 32), F),
             cu_seqlens_q=np.array([0, 3, 8], np.int32),
             cu_seqlens_k=np.array([0, 3, 8], np.int32),
             max_seqlens_q=5, max_seqlens_k=5, sm_scale=0.2)
    a.update(over)
    return a


def unified_fp8(**over):
    a = unified_args(k=np.zeros((6, 16, 2, 32), E4), v=np.zeros((6, 16, 2, 32), E4),
                     k_descale=0.5, v_descale=0.5)
    a.update(over)
    return a


def prefix_fp8(**over):
    a = prefix_args(kv_cache_dtype="fp8", k_cache=np.zeros((4, 2, 8, 16, 4), np.uint8),
                    v_cache=np.zeros((4, 2, 32, 16), np.uint8))
    a.update(over)
    return a


def sparse_args(**over):
    q = np.zeros((32, 2, 32), F)
    cu = np.array([0, 32], np.int32)
    a = dict(q=q, k=q, v=q, cu_seqlens_k=cu, cu_seqlens_q=cu, sm_scale=0.1,
             sparse_layout=(np.array([[0, 1, 2]], np.int32),
                            np.array([[0, 1]], np.int32)), block_size=16)
    a.update(over)
    return a


ENTRY = {"flash": (vllm.triton_attention, flash_args),
         "unified": (vllm.unified_attention, unified_args),
         "unified_fp8": (vllm.unified_attention, unified_fp8),
         "prefix": (vllm.context_attention_fwd, prefix_args),
         "prefix_fp8": (vllm.context_attention_fwd, prefix_fp8),
         "sparse": (vllm.blocksparse_flash_attn_varlen_fwd, sparse_args)}


def call(entry, **over):
    fn, args = ENTRY[entry]
    return fn(**args(**over))


@pytest.mark.parametrize("entry", list(ENTRY))
def test_valid_arguments_pass(entry):
    call(entry)


# --- every scale: finite and non-zero (in f32) -------------------------------

SOFTMAX_SCALES = [("flash", "sm_scale"), ("unified", "softmax_scale"),
                  ("prefix", "sm_scale"), ("sparse", "sm_scale")]


@pytest.mark.parametrize("bad", NON_FINITE, ids=NON_FINITE_IDS)
@pytest.mark.parametrize("entry,arg", SOFTMAX_SCALES)
def test_softmax_scale_rejected(entry, arg, bad):
    with pytest.raises(ValueError, match=f"^{arg}: must be finite"):
        call(entry, **{arg: bad})


@pytest.mark.parametrize("entry,arg", SOFTMAX_SCALES)
def test_softmax_scale_zero_allowed(entry, arg):
    call(entry, **{arg: 0.0})
    call(entry, **{arg: -0.5})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        call("unified_fp8", softmax_scale=0.0)


SCALES = [
    ("unified_fp8", "k_descale", "k_descale"),
    ("unified_fp8", "v_descale", "v_descale"),
    ("prefix_fp8", "k_scale", "k_scale"),
    ("prefix_fp8", "v_scale", "v_scale"),
]


@pytest.mark.parametrize("bad", BAD_SCALES, ids=BAD_IDS)
@pytest.mark.parametrize("entry,arg,name", SCALES,
                         ids=[f"{e}-{a}" for e, a, _ in SCALES])
def test_scale_rejected(entry, arg, name, bad):
    with pytest.raises(ValueError, match=rf"^{name}: must be (finite|non-zero)"):
        call(entry, **{arg: bad})


@pytest.mark.parametrize("bad", BAD_SCALES, ids=BAD_IDS)
def test_scale_in_array_rejected(bad):
    # Scales given as one-element host arrays are checked the same way.
    with pytest.raises(ValueError, match="^k_scale: must be"):
        call("prefix_fp8", k_scale=np.array([bad]))


@pytest.mark.parametrize("bad", BAD_SCALES, ids=BAD_IDS)
def test_q_descale_rejected(bad):
    q8 = np.zeros((3, 4, 32), E4)
    with pytest.raises(ValueError, match="^q_descale: must be"):
        call("unified_fp8", q=q8, q_descale=bad)


@pytest.mark.parametrize("bad", BAD_SCALES, ids=BAD_IDS)
@pytest.mark.parametrize("entry,arg,out", [
    ("flash", "fp8_out_scale", "o"), ("prefix", "fp8_out_scale", "o"),
    ("unified", "output_scale", "out")])
def test_out_scale_rejected(entry, arg, out, bad):
    shape = (8, 4, 32) if entry == "flash" else (4, 4, 32) if entry == "prefix" \
        else (3, 4, 32)
    with pytest.raises(ValueError, match=f"^{arg}: must be"):
        call(entry, **{arg: bad, out: np.zeros(shape, E4)})


@pytest.mark.parametrize("bad", BAD_SCALES, ids=BAD_IDS)
@pytest.mark.parametrize("i,name", list(enumerate(["q_scale", "k_scale", "v_scale",
                                                   "p_scale"])))
@pytest.mark.parametrize("stored", ["f32", "fp8"])
def test_fp8_scales_rejected(stored, i, name, bad):
    # Host f32 q/k/v are quantized with these scales: checked before that.
    scales = [0.02, 0.02, 0.02, 1 / 448]
    scales[i] = bad
    over = dict(fp8_scales=tuple(scales))
    if stored == "fp8":
        over.update(q=np.zeros((8, 4, 32), E4), k=np.zeros((8, 2, 32), E4),
                    v=np.zeros((8, 2, 32), E4))
    with pytest.raises(ValueError, match=rf"{name}\)?: must be"):
        call("flash", **over)


@pytest.mark.parametrize("bad,match", [
    (-1.0, "softcap: must be >= 0"), (math.nan, "softcap: must be >= 0 and finite"),
    (math.inf, "softcap: must be >= 0 and finite"), ("2", "softcap: expected a real")])
def test_softcap_rejected(bad, match):
    with pytest.raises(ValueError, match=match):
        call("unified", softcap=bad)


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf, 1e39])
def test_ops_softcap_positive(bad):
    # At the op level softcap means c > 0 (omit it to disable).
    a = unified_args()
    with pytest.raises(ValueError, match="^softcap: must be positive"):
        ops.unified(a["q"], a["k"], a["v"], a["block_table"], a["cu_seqlens_q"],
                    a["seqused_k"], a["out"], scale=0.2, softcap=bad)


@pytest.mark.parametrize("bad,match", [
    (1.0, "dropout_p: must be in"), (-0.1, "dropout_p: must be in"),
    (math.nan, "dropout_p: must be in"), ("0.1", "dropout_p: expected a real"),
    (True, "dropout_p: expected a real")])
def test_dropout_p_rejected(bad, match):
    with pytest.raises(ValueError, match=match):
        call("flash", dropout_p=bad)


@pytest.mark.parametrize("bad", ["abc", None, [0.1, 0.2], True, object()],
                         ids=["str", "none", "list", "bool", "object"])
@pytest.mark.parametrize("entry,arg", [("flash", "sm_scale"),
                                       ("unified", "softmax_scale"),
                                       ("sparse", "sm_scale")])
def test_non_numeric_scale(entry, arg, bad):
    with pytest.raises(ValueError, match=f"^{arg}: expected a real number"):
        call(entry, **{arg: bad})


@pytest.mark.parametrize("arg", ["alibi_slopes", "sinks"])
@pytest.mark.parametrize("entry", ["unified", "prefix"])
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_per_head_values_finite(entry, arg, bad):
    vals = np.full(4, 0.1, F)
    vals[2] = bad
    with pytest.raises(ValueError, match=f"^{arg}: values must be finite"):
        call(entry, **{arg: vals})


def test_merge_states_sinks_finite():
    partial = np.zeros((2, 4, 3, 32), F)
    with pytest.raises(ValueError, match="^sinks: values must be finite"):
        ops.merge_states(partial, np.zeros((2, 4, 32), F),
                         segment_lse=np.zeros((2, 4, 3), F),
                         sinks=np.array([0, np.nan, 0, 0], F))


def test_negative_scale_allowed():
    # Finite non-zero scales of either sign are valid (a negative fp8 scale
    # flips signs, as test_flash's mma.sync case uses).
    q8 = np.zeros((8, 4, 32), E4)
    call("flash", q=q8, k=np.zeros((8, 2, 32), E4), v=np.zeros((8, 2, 32), E4),
         fp8_scales=(-0.02, 0.03, 0.02, 1 / 448), sm_scale=-0.1)


# --- op level: every op checks its scales ------------------------------------

def op_calls():
    a = unified_args()
    f = flash_args()
    p = prefix_args()
    s = sparse_args()
    return {
        "flash": lambda **kw: ops.flash(f["q"], f["k"], f["v"], f["cu_seqlens_q"],
                                        f["cu_seqlens_k"], kw.pop("out", f["o"]),
                                        scale=kw.pop("scale", 0.1), **kw),
        "unified": lambda **kw: ops.unified(
            a["q"], a["k"], a["v"], a["block_table"], a["cu_seqlens_q"],
            a["seqused_k"], kw.pop("out", a["out"]), scale=kw.pop("scale", 0.1), **kw),
        "prefix_prefill": lambda **kw: ops.prefix_prefill(
            p["q"], p["k"], p["v"], p["k_cache"], p["v_cache"], p["b_loc"],
            p["b_start_loc"], p["b_seq_len"], kw.pop("out", p["o"]),
            scale=kw.pop("scale", 0.1), **kw),
        "blocksparse": lambda **kw: ops.blocksparse(
            s["q"], s["k"], s["v"], s["cu_seqlens_q"], s["cu_seqlens_k"],
            *s["sparse_layout"], kw.pop("out", np.zeros((32, 2, 32), F)),
            scale=kw.pop("scale", 0.1), block_size=kw.pop("block_size", 16), **kw),
    }


@pytest.mark.parametrize("bad", NON_FINITE, ids=NON_FINITE_IDS)
@pytest.mark.parametrize("op", ["flash", "unified", "prefix_prefill", "blocksparse"])
def test_ops_scale_rejected(op, bad):
    with pytest.raises(ValueError, match="^scale: must be finite"):
        op_calls()[op](scale=bad)


@pytest.mark.parametrize("bad", BAD_SCALES, ids=BAD_IDS)
def test_ops_merge_out_scale_rejected(bad):
    with pytest.raises(ValueError, match="^out_scale: must be"):
        ops.merge_states(np.zeros((2, 4, 3, 32), F), np.zeros((2, 4, 32), E4),
                         segment_lse=np.zeros((2, 4, 3), F), out_scale=bad)


@pytest.mark.parametrize("dropout,match", [
    ((1.0, 1, 2), "dropout_p: must be in"),
    ((0.1, 1 << 64, 2), r"philox_seed: 18446744073709551616 is outside"),
    ((0.1, -(1 << 63) - 1, 2), "philox_seed: .* is outside"),
    ((0.1, 1, 1 << 64), "philox_offset: .* is outside"),
    ((0.1, 1.0, 2), "philox_seed: expected an integer"),
    ((0.1, 1), "dropout: expected"),
])
def test_ops_dropout(dropout, match):
    with pytest.raises(ValueError, match=match):
        op_calls()["flash"](dropout=dropout)


def test_philox_64_bit_patterns_pass():
    # Any 64-bit pattern: unsigned seeds are passed as their signed bits.
    op_calls()["flash"](dropout=(0.1, (1 << 64) - 1, -(1 << 63)))
    assert ops._i64((1 << 64) - 1, "philox_seed") == -1


# --- outputs -----------------------------------------------------------------

def readonly(shape, dtype=F):
    x = np.zeros(shape, dtype)
    x.setflags(write=False)
    return x


def broadcast(shape, dtype=F):
    return np.broadcast_to(np.zeros(shape[-1:], dtype), shape)


def overlapping(shape, dtype=F):
    # Token rows half as far apart as a token's elements: rows overlap.
    buf = np.zeros(int(np.prod(shape)), dtype)
    item = buf.itemsize
    return np.lib.stride_tricks.as_strided(
        buf, shape, (shape[2] * item * shape[1] // 2, shape[2] * item, item))


BAD_OUTPUTS = {"readonly": (readonly, "must be writable"),
               "broadcast": (broadcast, "zero stride"),
               "overlap": (overlapping, "map several indices to one element")}


@pytest.mark.parametrize("kind", list(BAD_OUTPUTS))
@pytest.mark.parametrize("entry,arg,shape", [
    ("flash", "o", (8, 4, 32)), ("unified", "out", (3, 4, 32)),
    ("prefix", "o", (4, 4, 32))])
def test_vllm_output_rejected(entry, arg, shape, kind):
    make, why = BAD_OUTPUTS[kind]
    with pytest.raises(ValueError, match=f"^{arg}: .*{why}"):
        call(entry, **{arg: make(shape)})


@pytest.mark.parametrize("kind", list(BAD_OUTPUTS))
def test_unified_split_output_rejected(kind):
    # The split form through vllm writes `out` via merge_states.
    make, why = BAD_OUTPUTS[kind]
    with pytest.raises(ValueError, match=f"^out: .*{why}"):
        call("unified", out=make((3, 4, 32)), num_segments=2)


@pytest.mark.parametrize("kind", list(BAD_OUTPUTS))
@pytest.mark.parametrize("op", ["flash", "unified", "prefix_prefill", "blocksparse"])
def test_ops_output_rejected(op, kind):
    make, why = BAD_OUTPUTS[kind]
    shape = {"flash": (8, 4, 32), "unified": (3, 4, 32),
             "prefix_prefill": (4, 4, 32), "blocksparse": (32, 2, 32)}[op]
    with pytest.raises(ValueError, match=f"^out: .*{why}"):
        op_calls()[op](out=make(shape))


@pytest.mark.parametrize("kind", list(BAD_OUTPUTS))
@pytest.mark.parametrize("arg", ["out", "segment_max", "segment_sum"])
def test_ops_split_outputs_rejected(arg, kind):
    make, why = BAD_OUTPUTS[kind]
    outs = dict(out=np.zeros((3, 4, 2, 32), F), segment_max=np.zeros((3, 4, 2), F),
                segment_sum=np.zeros((3, 4, 2), F))
    shape = outs[arg].shape
    if kind == "overlap":
        buf = np.zeros(int(np.prod(shape)), F)
        strides = [4 * int(np.prod(shape[1:]))] + \
            [4 * int(np.prod(shape[i + 1:])) for i in range(1, len(shape))]
        strides[0] //= 2
        outs[arg] = np.lib.stride_tricks.as_strided(buf, shape, strides)
    else:
        outs[arg] = make(shape)
    with pytest.raises(ValueError, match=f"^{arg}: .*{why}"):
        op_calls()["unified"](num_segments=2, **outs)


@pytest.mark.parametrize("kind", list(BAD_OUTPUTS))
def test_merge_states_output_rejected(kind):
    make, why = BAD_OUTPUTS[kind]
    with pytest.raises(ValueError, match=f"^out: .*{why}"):
        ops.merge_states(np.zeros((2, 4, 3, 32), F), make((2, 4, 32)),
                         segment_lse=np.zeros((2, 4, 3), F))


def test_output_aliasing_input():
    # In place is not supported: out may not share memory with an input.
    q = np.zeros((8, 4, 32), F)
    with pytest.raises(ValueError, match="^o: shares memory with q"):
        call("flash", q=q, o=q)
    buf = np.zeros((9, 4, 32), F)
    with pytest.raises(ValueError, match="^o: shares memory with q"):
        call("flash", q=buf[:8], o=buf[1:])
    flat = np.zeros(8 * 4 * 32, F)
    kv = flat[:8 * 2 * 32].reshape(8, 2, 32)
    with pytest.raises(ValueError, match="^out: shares memory with k"):
        ops.flash(np.zeros((8, 4, 32), F), kv, kv.copy(),
                  np.array([0, 8], np.int32), np.array([0, 8], np.int32),
                  flat.reshape(8, 4, 32), scale=0.1)
    # Split-KV outputs may not share memory with each other.
    acc = np.zeros((3, 4, 2, 32), F)
    with pytest.raises(ValueError, match="^segment_sum: shares memory with out"):
        op_calls()["unified"](num_segments=2, out=acc,
                              segment_max=np.zeros((3, 4, 2), F),
                              segment_sum=acc.reshape(-1)[:24].reshape(3, 4, 2))


def test_disjoint_views_of_one_buffer_pass():
    # q, k, v sliced from a fused QKV buffer, and an output interleaved with
    # q in one buffer without sharing elements: all valid.
    qkv = np.zeros((8, 3, 4, 32), F)
    call("flash", q=qkv[:, 0], k=qkv[:, 1, :2], v=qkv[:, 2, :2])
    qo = np.zeros((8, 2, 4, 32), F)
    call("flash", q=qo[:, 0], o=qo[:, 1])
    # Inputs may alias each other.
    q = np.zeros((32, 2, 32), F)
    call("sparse", q=q, k=q, v=q)


# --- values the verifier would reject: ValueError before compiling ----------

@pytest.mark.parametrize("entry,over,match", [
    ("flash", dict(o=np.zeros((8, 4, 32), np.float16)), "^o: dtype f16 differs from q's f32"),
    ("prefix_fp8", dict(k_scale=None), r"^k_scale: required with an fp8 KV cache"),
    ("prefix_fp8", dict(v_scale=None), r"^v_scale: required with an fp8 KV cache"),
    ("prefix", dict(sliding_window=1 << 63), r"^sliding_window: 9223372036854775808 is outside"),
    ("prefix", dict(sliding_window=1 << 31), r"^sliding_window: 2147483648 is outside"),
    ("prefix", dict(sliding_window=8.0), "^sliding_window: expected an integer"),
    ("prefix", dict(sliding_window=True), "^sliding_window: expected an integer"),
    ("unified", dict(window_size=((1 << 63) - 1, 0)), "^window_size: left \\+ 1 = .* is outside"),
    ("unified", dict(window_size=(3.0, 0)), "^window_size: left expected an integer"),
    ("unified", dict(num_segments=1.5), "^num_segments: expected an integer"),
    ("unified", dict(num_segments=True), "^num_segments: expected an integer"),
    ("sparse", dict(block_size=16.0), "^block_size: expected an integer"),
    ("sparse", dict(block_size=True), "^block_size: expected an integer"),
    ("sparse", dict(block_size=(1 << 16) + 1), r"^block_size: 65537 is outside the supported range \[1, 65536\]"),
    ("sparse", dict(q_block_size=8.0), "^q_block_size: expected an integer"),
    ("sparse", dict(q_block_size=-8), "^q_block_size: -8 is outside"),
    ("flash", dict(dropout_p=0.1, philox_seed=1 << 64), "^philox_seed: .* is outside"),
    ("flash", dict(dropout_p=0.1, philox_offset=-(1 << 63) - 1), "^philox_offset: .* is outside"),
    ("flash", dict(dropout_p=0.1, philox_seed="7"), "^philox_seed: expected an integer"),
])
def test_compile_errors_become_value_errors(entry, over, match):
    with pytest.raises(ValueError, match=match):
        call(entry, **over)


def test_no_window_values_pass():
    # vLLM's "no window" spellings stay valid.
    call("prefix", sliding_window=0)
    call("prefix", sliding_window=-1)
    call("prefix", sliding_window=None)
    call("unified", window_size=(-1, -1))
    call("unified", window_size=((1 << 31) - 2, 0))


@pytest.mark.parametrize("d", [0, 1025])
@pytest.mark.parametrize("entry", ["flash", "unified", "prefix", "sparse"])
def test_head_dim_bounds(entry, d):
    args = ENTRY[entry][1]()
    over = {}
    for name in ("q", "k", "v", "o", "out", "k_cache", "v_cache"):
        if name not in args:
            continue
        shape = list(args[name].shape)
        if name == "k_cache":
            shape[2], shape[4] = 1, d
        elif name == "v_cache":
            shape[2] = d
        else:
            shape[-1] = d
        over[name] = np.zeros(shape, args[name].dtype)
    with pytest.raises(ValueError,
                       match=rf"^q: head dim {d} is outside the supported range \[1, {ops.MAX_HEAD_DIM}\]"):
        call(entry, **over)


def test_heads_bound():
    q = np.broadcast_to(np.zeros(1, F), (1, 4097, 32))
    with pytest.raises(ValueError, match=r"^q: heads 4097 is outside"):
        ops.flash(q, q, q, np.array([0, 1], np.int32), np.array([0, 1], np.int32),
                  np.zeros((1, 4097, 32), F), scale=0.1)
    q0 = np.zeros((1, 0, 32), F)
    with pytest.raises(ValueError, match=r"^q: heads 0 is outside"):
        ops.flash(q0, q0, q0, np.array([0, 1], np.int32), np.array([0, 1], np.int32),
                  np.zeros((1, 0, 32), F), scale=0.1)


def test_page_size_bound():
    # A page larger than LIMITS allows (a broadcast cache: no memory).
    big = np.broadcast_to(np.zeros(1, F), (1, (1 << 16) + 1, 2, 32))
    a = unified_args(k=big, v=big)
    with pytest.raises(ValueError, match=r"^k: block size 65537 is outside"):
        vllm.unified_attention(**a)
    with pytest.raises(ValueError, match=r"^k_cache: page size 65537 is outside"):
        ops.unified(a["q"], big, big, a["block_table"], a["cu_seqlens_q"],
                    a["seqused_k"], a["out"], scale=0.1)


@pytest.mark.parametrize("op", ["flash", "unified", "prefix_prefill", "blocksparse"])
@pytest.mark.parametrize("schedule,match", [
    ((4097, 64, 1), r"schedule: block_q = 4097 is outside the supported range \[1, 4096\]"),
    ((16, 0, 1), r"schedule: block_n = 0 is outside"),
    ((1, 64, 4097), r"schedule: heads_per_program = 4097 is outside"),
    ((2048, 64, 4), r"schedule: block_q \* heads_per_program = 8192 is outside"),
    ((16, 64, 1, 33), r"schedule: warps = 33 is outside the supported range \[0, 32\]"),
    ((16, 64, 1, -1), r"schedule: warps = -1 is outside"),
    ((16.0, 64, 1), r"schedule: block_q = expected an integer"),
    ((16, 64), r"schedule: expected \(block_q"),
    ("16,64,1", r"schedule: expected \(block_q"),
    ((128, 128, 1, 8, 1, 4, 1, 2), r"schedule: persistent = 2 is outside the supported range \[0, 1\]"),
    ((128, 128, 1, 8, 1, 4, 1, 1, 5), r"schedule: stages = 5 is outside the supported range \[0, 4\]"),
    ((128, 128, 1, 8, 1, 4, 1, 1, 2, 0), r"schedule: expected \(block_q.*stages"),
    (dict(block_q=128, block_n=128, heads_per_program=1, turbo=1), r"schedule: unknown fields \['turbo'\]"),
])
def test_schedule_bounds(op, schedule, match):
    with pytest.raises(ValueError, match=match):
        op_calls()[op](schedule=schedule)


@pytest.mark.parametrize("schedule,match", [
    (dict(tma=True, persistent=True), "persistent needs producer_warps = 4"),
    (dict(tma=True, pingpong=True), "pingpong needs producer_warps = 4"),
    (dict(producer_warps=4, persistent=True), "persistent needs tma = true"),
    (dict(tma=True, producer_warps=2), "producer_warps = 2: 0 or 4"),
    (dict(tma=True, producer_warps=4, stages=1),
     "producer_warps = 4 needs a ring of 2 stages"),
])
def test_schedule_pipeline_rules(schedule, match):
    # The verifier's rules of the KV pipeline fields (invalid.mlir:
    # @schedule_*), checked before compiling.
    with pytest.raises(ValueError, match="^schedule: " + match):
        op_calls()["flash"](schedule=dict(block_q=16, block_n=64,
                                          heads_per_program=1, **schedule))


def test_schedule_bounds_are_the_limits():
    # One table holds the bounds the messages quote.
    assert ops.LIMITS["block_q"] == (1, 4096) and ops.LIMITS["warps"] == (0, 32)
    assert ops.LIMITS["head_dim"] == (1, ops.MAX_HEAD_DIM)
    op_calls()["flash"](schedule=(1024, 4096, 4, 32))


@pytest.mark.parametrize("over,match", [
    (dict(sliding_window=0), "^sliding_window: 0 is outside"),
    (dict(sliding_window=1 << 63), "^sliding_window: .* is outside"),
    (dict(sliding_window=16.0), "^sliding_window: expected an integer"),
    (dict(alibi_form="left"), "^alibi_form: expected one of"),
    (dict(num_segments=0), "^num_segments: 0 is outside"),
    (dict(num_segments=4097), r"^num_segments: 4097 is outside the supported range \[1, 4096\]"),
    (dict(k_scale=0.5), "^k_scale: only valid when k_cache is fp8"),
    (dict(out_scale=0.0), "^out_scale: must be non-zero"),
])
def test_ops_attribute_values(over, match):
    op = "unified" if "num_segments" in over else "prefix_prefill"
    with pytest.raises(ValueError, match=match):
        op_calls()[op](**over)


def test_ops_fp8_scale_required():
    p = prefix_args()
    kc = np.zeros((4, 2, 8, 16, 4), E4)
    vc = np.zeros((4, 2, 32, 16), E4)
    with pytest.raises(ValueError, match=r"^k_scale: required when k_cache is fp8"):
        ops.prefix_prefill(p["q"], p["k"], p["v"], kc, vc, p["b_loc"],
                           p["b_start_loc"], p["b_seq_len"], p["o"], scale=0.1,
                           v_scale=1.0)
    with pytest.raises(ValueError, match=r"^out_scale: required when out is fp8"):
        op_calls()["flash"](out=np.zeros((8, 4, 32), E4))
    with pytest.raises(ValueError, match=r"^fp8_scales: required when q is fp8"):
        ops.flash(np.zeros((8, 4, 32), E4), np.zeros((8, 2, 32), E4),
                  np.zeros((8, 2, 32), E4), np.array([0, 8], np.int32),
                  np.array([0, 8], np.int32), np.zeros((8, 4, 32), F), scale=0.1)
    with pytest.raises(ValueError, match=r"^fp8_scales: q, k, v mix fp8 types"):
        ops.flash(np.zeros((8, 4, 32), E4), np.zeros((8, 2, 32), E5),
                  np.zeros((8, 2, 32), F), np.array([0, 8], np.int32),
                  np.array([0, 8], np.int32), np.zeros((8, 4, 32), F),
                  scale=0.1, fp8_scales=(1.0, 1.0, 1.0, 1.0))
    with pytest.raises(ValueError, match=r"^out_scale: not valid in the split-KV"):
        op_calls()["unified"](num_segments=2, out=np.zeros((3, 4, 2, 32), F),
                              segment_max=np.zeros((3, 4, 2), F),
                              segment_sum=np.zeros((3, 4, 2), F), out_scale=1.0)


# --- fp8 ranges: warned once --------------------------------------------------

def flash8(**kw):
    f8 = dict(q=np.zeros((8, 4, 32), E4), k=np.zeros((8, 2, 32), E4),
              v=np.zeros((8, 2, 32), E4))
    f8.update(kw)
    return call("flash", **f8)


@pytest.mark.parametrize("scales,sm_scale,match", [
    ((0.02, 0.02, 0.02, 1 / 1000), 0.2, r"p_scale: .* saturates P"),
    ((0.02, 0.02, 0.02, -1 / 1000), 0.2, r"p_scale: .* saturates P"),
    ((0.02, 0.02, 0.02, 1.0), 0.2, r"p_scale: .* flushes P below .* e4m3|p_scale: .* flushes P"),
    ((1e20, 1e20, 0.02, 1 / 448), 1.0, r"scale \* q_scale \* k_scale = 1e\+40 overflows f32"),
    ((1e-20, 1e-20, 0.02, 1 / 448), 1.0, r"scale \* q_scale \* k_scale = 1e-40 underflows f32"),
    ((0.02, 0.02, 1e-36, 1 / 448), 0.2, r"p_scale \* v_scale = .* underflows f32"),
])
def test_fp8_range_warning(scales, sm_scale, match):
    with pytest.warns(Fp8RangeWarning, match=match):
        flash8(fp8_scales=scales, sm_scale=sm_scale)
    # Once per process and kind: a serving loop is not flooded.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flash8(fp8_scales=scales, sm_scale=sm_scale)


def test_fp8_range_e5m2():
    # e5m2 (max 57344, subnormals down to 2^-16) takes p_scale in
    # [1/57344, 2]: 1/448 is fine there, 1/60000 saturates, 4 flushes.
    e5 = F8["f8E5M2"]
    kw = dict(q=np.zeros((8, 4, 32), e5), k=np.zeros((8, 2, 32), e5),
              v=np.zeros((8, 2, 32), e5))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flash8(fp8_scales=(0.02, 0.02, 0.02, 1 / 448), **kw)
        flash8(fp8_scales=(0.02, 0.02, 0.02, 2.0), **kw)
    with pytest.warns(Fp8RangeWarning, match="saturates P.*57344"):
        flash8(fp8_scales=(0.02, 0.02, 0.02, 1 / 60000), **kw)
    with pytest.warns(Fp8RangeWarning, match="flushes P"):
        flash8(fp8_scales=(0.02, 0.02, 0.02, 4.0), **kw)


def test_fp8_in_range_is_silent():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        flash8(fp8_scales=(0.02, 0.02, 0.02, 1 / 448))
        flash8(fp8_scales=(0.02, 0.02, 0.02, 1 / 64))      # e4m3's upper end
        call("unified_fp8", k_descale=1e-3, v_descale=1e3)


@pytest.mark.parametrize("entry,over,match", [
    ("unified_fp8", dict(softmax_scale=1e-30, k_descale=1e-20),
     r"scale \* k_descale = 1e-50 underflows"),
    ("unified_fp8", dict(softmax_scale=1e30, k_descale=1e20),
     r"scale \* k_descale = 1e\+50 overflows"),
    ("unified_fp8", dict(q=np.zeros((3, 4, 32), E4), q_descale=1e20,
                         softmax_scale=1e20, k_descale=1.0),
     r"scale \* q_descale \* k_descale = 1e\+40 overflows"),
    ("prefix_fp8", dict(sm_scale=1e-20, k_scale=1e-20), r"scale \* k_scale = 1e-40 underflows"),
    ("prefix_fp8", dict(v_scale=1e-39), r"v_scale = 1e-39 underflows"),
    ("unified", dict(out=np.zeros((3, 4, 32), E4), output_scale=1e-39),
     r"out_scale: 1 / 1e-39 overflows f32"),
])
def test_descale_products_warn(entry, over, match):
    with pytest.warns(Fp8RangeWarning, match=match):
        call(entry, **over)


# --- torch tensors --------------------------------------------------------------

def test_torch_outputs():
    torch = pytest.importorskip("torch")
    q = torch.zeros(8, 4, 32)
    args = flash_args(q=q, k=torch.ones(8, 2, 32), v=torch.ones(8, 2, 32),
                      cu_seqlens_q=torch.tensor([0, 3, 8], dtype=torch.int32),
                      cu_seqlens_k=torch.tensor([0, 3, 8], dtype=torch.int32))
    with pytest.raises(ValueError, match="^o: .*zero stride"):
        vllm.triton_attention(**dict(args, o=torch.zeros(1, 4, 32).expand(8, 4, 32)))
    with pytest.raises(ValueError, match="^o: .*map several indices"):
        vllm.triton_attention(**dict(args, o=torch.zeros(7 * 64 + 128).as_strided(
            (8, 4, 32), (64, 32, 1))))
    with pytest.raises(ValueError, match="^o: shares memory with q"):
        vllm.triton_attention(**dict(args, o=q))
    vllm.triton_attention(**dict(args, o=torch.zeros(8, 4, 32)))
    # Direct op calls memoize tensor operands: the check holds on repeats.
    f = flash_args()
    bad = torch.zeros(1, 4, 32).expand(8, 4, 32)
    for _ in range(2):
        with pytest.raises(ValueError, match="^out: .*zero stride"):
            ops.flash(q, args["k"], args["v"], args["cu_seqlens_q"],
                      args["cu_seqlens_k"], bad, scale=0.1)
    with pytest.raises(ValueError, match="^out: shares memory with q"):
        ops.flash(q, args["k"], args["v"], args["cu_seqlens_q"],
                  args["cu_seqlens_k"], q, scale=0.1)
    with pytest.raises(ValueError, match="^scale: must be finite"):
        ops.flash(q, args["k"], args["v"], args["cu_seqlens_q"],
                  args["cu_seqlens_k"], torch.zeros(8, 4, 32), scale=f["sm_scale"] * math.inf)
    with pytest.raises(ValueError, match="^k_scale: must be non-zero"):
        call("prefix_fp8", k_scale=torch.zeros(1))


def test_cuda_scales_checked_when_validating(monkeypatch):
    # Device scales are a precondition (reading them would synchronize),
    # checked under ATTN_MLIR_VALIDATE=1.
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    dev = "cuda"
    q = torch.zeros(3, 4, 32, dtype=torch.bfloat16, device=dev)
    kc = torch.zeros(6, 16, 2, 32, dtype=torch.float8_e4m3fn, device=dev)
    args = unified_args(
        q=q, k=kc, v=kc, out=torch.zeros_like(q),
        cu_seqlens_q=torch.tensor([0, 1, 3], dtype=torch.int32, device=dev),
        seqused_k=torch.tensor([20, 30], dtype=torch.int32, device=dev),
        block_table=torch.tensor([[0, 1], [2, 3]], dtype=torch.int32, device=dev),
        k_descale=torch.zeros(1, device=dev), v_descale=torch.ones(1, device=dev),
        sinks=torch.tensor([0, math.nan, 0, 0], device=dev))
    vllm.unified_attention(**args)            # trusted: no synchronization
    monkeypatch.setenv("ATTN_MLIR_VALIDATE", "1")
    with pytest.raises(ValueError, match="^k_descale: must be non-zero"):
        vllm.unified_attention(**args)
    args["k_descale"] = torch.ones(1, device=dev)
    with pytest.raises(ValueError, match="^sinks: values must be finite"):
        vllm.unified_attention(**args)
    args["sinks"] = torch.zeros(4, device=dev)
    vllm.unified_attention(**args)
    with pytest.raises(ValueError, match="^out: shares memory with q"):
        vllm.unified_attention(**dict(args, out=q))
