"""torch.ops.attn_mlir (attn_mlir.torch_ops): the nine ops pass
torch.library.opcheck, torch.compile(fullgraph=True) traces the four vLLM
entry points and ops.flash and matches eager calls, fake tensors propagate
shapes, and bad arguments keep their ValueError messages (eagerly, on fake
tensors and under torch.compile).

CPU tensors always; CUDA cases too when ATTN_MLIR_TEST_DEVICE=cuda and a GPU
is present.
"""

import math
import os
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip(
    "torch", reason="torch is not installed: the torch.library layer "
    "(attn_mlir.torch_ops) is only tested with it")
if not hasattr(torch.library, "register_fake"):
    pytest.skip(f"torch {torch.__version__} predates torch.library."
                f"register_fake (2.4): attn_mlir.torch_ops cannot register",
                allow_module_level=True)

from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402

from attn_mlir import _abi, ops, torch_ops, vllm  # noqa: E402
import test_errors  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEVICES = ["cpu"]
if os.environ.get("ATTN_MLIR_TEST_DEVICE") == "cuda" and \
        torch.cuda.is_available():
    DEVICES.append("cuda")
OPS = torch.ops.attn_mlir
# The f32 checks against float64: under ATTN_MLIR_TEST_DEVICE=cuda the test
# hook (conftest.py) runs even CPU-tensor calls on the GPU, where f32
# products are TF32 (10 mantissa bits; docs/runtime.md).
F32_ATOL = 3e-3 if os.environ.get("ATTN_MLIR_TEST_DEVICE") == "cuda" and \
    os.environ.get("ATTN_MLIR_F32_PRECISION") != "3xtf32" else 2e-5


def _inductor_works():
    """torch.compile's inductor backend generates and compiles C++ for CPU
    graphs; where it cannot (no C++ compiler), the compile tests fall back
    to backend="aot_eager", which traces the same graph (dynamo, fake
    kernels, functionalization) and runs it without code generation."""
    try:
        f = torch.compile(lambda x: x * 2 + 1, fullgraph=True,
                          backend="inductor")
        return bool(torch.equal(f(torch.ones(4)), torch.full((4,), 3.0)))
    except Exception as e:   # noqa: BLE001 - any compiler failure
        warnings.warn(f"inductor cannot compile here ({type(e).__name__}: "
                      f"{e}); the torch.compile tests use aot_eager")
        return False


BACKEND = "inductor" if _inductor_works() else "aot_eager"


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.delenv("ATTN_MLIR_DRY_RUN", raising=False)
    monkeypatch.delenv("ATTN_MLIR_VALIDATE", raising=False)
    torch._dynamo.reset()
    yield


# --- inputs: small, random, one case per op ---------------------------------

def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _randn(*shape, g, dtype=torch.float32, dev="cpu"):
    return torch.randn(*shape, generator=g).to(dtype).to(dev)


def _i32(values, dev):
    return torch.tensor(values, dtype=torch.int32, device=dev)


def flash_inputs(dev, seed=0):
    g = _gen(seed)
    return dict(q=_randn(8, 4, 32, g=g, dev=dev), k=_randn(8, 2, 32, g=g, dev=dev),
                v=_randn(8, 2, 32, g=g, dev=dev),
                cu_seqlens_q=_i32([0, 3, 8], dev),
                cu_seqlens_k=_i32([0, 3, 8], dev))


def unified_inputs(dev, seed=1):
    g = _gen(seed)
    return dict(q=_randn(3, 4, 32, g=g, dev=dev),
                k=_randn(6, 16, 2, 32, g=g, dev=dev),
                v=_randn(6, 16, 2, 32, g=g, dev=dev),
                cu_seqlens_q=_i32([0, 1, 3], dev),
                seqused_k=_i32([20, 30], dev),
                block_table=_i32([[0, 1], [2, 3]], dev))


def prefix_inputs(dev, seed=2):
    g = _gen(seed)
    return dict(q=_randn(4, 4, 32, g=g, dev=dev), k=_randn(4, 2, 32, g=g, dev=dev),
                v=_randn(4, 2, 32, g=g, dev=dev),
                k_cache=_randn(4, 2, 8, 16, 4, g=g, dev=dev),
                v_cache=_randn(4, 2, 32, 16, g=g, dev=dev),
                b_loc=_i32([[0, 1], [2, 3]], dev),
                b_start_loc=_i32([0, 1, 4], dev),
                b_seq_len=_i32([20, 10], dev))


def sparse_inputs(dev, seed=3):
    g = _gen(seed)
    return dict(q=_randn(32, 2, 32, g=g, dev=dev), k=_randn(32, 2, 32, g=g, dev=dev),
                v=_randn(32, 2, 32, g=g, dev=dev), cu=_i32([0, 32], dev),
                crow=_i32([[0, 1, 3]], dev), col=_i32([[0, 0, 1]], dev))


def merge_inputs(dev, seed=4):
    g = _gen(seed)
    return dict(partial=_randn(3, 4, 2, 32, g=g, dev=dev),
                segment_max=_randn(3, 4, 2, g=g, dev=dev),
                segment_sum=_randn(3, 4, 2, g=g, dev=dev).abs() + 0.5)


def zeros(*shape, dev, dtype=torch.float32):
    return torch.zeros(*shape, dtype=dtype, device=dev)


# Each op's schema-form call (positional args, keyword args) for opcheck.
def op_cases(dev):
    f, u, p = flash_inputs(dev), unified_inputs(dev), prefix_inputs(dev)
    s, m = sparse_inputs(dev), merge_inputs(dev)
    flash_args = (f["q"], f["k"], f["v"], f["cu_seqlens_q"], f["cu_seqlens_k"])
    unified_args = (u["q"], u["k"], u["v"], u["block_table"],
                    u["cu_seqlens_q"], u["seqused_k"])
    return {
        "flash": (OPS.flash.default, flash_args + (zeros(8, 4, 32, dev=dev),),
                  dict(scale=0.2, causal=True, lse=zeros(8, 4, dev=dev))),
        "flash_dropout": (OPS.flash.default,
                          flash_args + (zeros(8, 4, 32, dev=dev),),
                          # offset 2^64 - 1 as the kernels take it: signed
                          dict(scale=0.2, dropout_p=0.25, philox_seed=7,
                               philox_offset=-1)),
        "unified": (OPS.unified.default,
                    unified_args + (zeros(3, 4, 32, dev=dev),),
                    dict(scale=0.2, sliding_window=24,
                         lse=zeros(3, 4, dev=dev))),
        "unified_split": (OPS.unified.default,
                          unified_args + (zeros(3, 4, 2, 32, dev=dev),),
                          dict(scale=0.2, num_segments=2,
                               segment_max=zeros(3, 4, 2, dev=dev),
                               segment_sum=zeros(3, 4, 2, dev=dev))),
        "unified_split_merged": (
            OPS.unified.default,
            unified_args + (zeros(3, 4, 2, 32, dev=dev),),
            dict(scale=0.2, segment_max=zeros(3, 4, 2, dev=dev),
                 segment_sum=zeros(3, 4, 2, dev=dev),
                 merged_out=zeros(3, 4, 32, dev=dev),
                 merge_counters=zeros(3, 4, dev=dev, dtype=torch.int32))),
        "prefix_prefill": (OPS.prefix_prefill.default,
                           (p["q"], p["k"], p["v"], p["k_cache"], p["v_cache"],
                            p["b_loc"], p["b_start_loc"], p["b_seq_len"],
                            zeros(4, 4, 32, dev=dev)),
                           dict(scale=0.2, out_scale_value=2.0)),
        "blocksparse": (OPS.blocksparse.default,
                        (s["q"], s["k"], s["v"], s["cu"], s["cu"], s["crow"],
                         s["col"], zeros(32, 2, 32, dev=dev)),
                        dict(scale=0.2, block_size=16)),
        "merge_states": (OPS.merge_states.default,
                         (m["partial"], zeros(3, 4, 32, dev=dev)),
                         dict(segment_max=m["segment_max"],
                              segment_sum=m["segment_sum"])),
        "context_attention_fwd": (
            OPS.context_attention_fwd.default,
            (p["q"], p["k"], p["v"], zeros(4, 4, 32, dev=dev), "auto",
             p["k_cache"], p["v_cache"], p["b_loc"], p["b_start_loc"],
             p["b_seq_len"], 20, 3),
            dict(k_scale_value=1.0, v_scale_value=1.0, sm_scale=0.2)),
        "unified_attention": (
            OPS.unified_attention.default,
            (u["q"], u["k"], u["v"], zeros(3, 4, 32, dev=dev),
             u["cu_seqlens_q"], 2, u["seqused_k"], 30, 0.2, True, [-1, -1],
             u["block_table"]),
            dict(softcap=0)),
        "unified_attention_split": (
            OPS.unified_attention.default,
            (u["q"][:2], u["k"], u["v"], zeros(2, 4, 32, dev=dev),
             _i32([0, 1, 2], dev), 1, u["seqused_k"], 30, 0.2, True, None,
             u["block_table"]),
            dict(seq_threshold_3D=4, num_par_softmax_segments=2,
                 softmax_segm_output=zeros(4, 4, 4, 32, dev=dev),
                 softmax_segm_max=zeros(4, 4, 4, dev=dev),
                 softmax_segm_expsum=zeros(4, 4, 4, dev=dev))),
        "triton_attention": (
            OPS.triton_attention.default,
            flash_args[:3] + (zeros(8, 4, 32, dev=dev),) + flash_args[3:]
            + (5, 5, True, 0.2),
            {}),
        "blocksparse_flash_attn_varlen_fwd": (
            OPS.blocksparse_flash_attn_varlen_fwd.default,
            (s["q"], s["k"], s["v"], s["cu"], s["cu"], 0.2,
             [s["crow"], s["col"]], zeros(32, 2, 32, dev=dev)),
            dict(block_size=16)),
    }


def _out_index(op):
    names = [a.name for a in op._schema.arguments]
    return names.index("o" if "o" in names else "out")


def test_every_entry_point_registered():
    names = {"flash", "unified", "prefix_prefill", "blocksparse",
             "merge_states", "context_attention_fwd", "unified_attention",
             "triton_attention", "blocksparse_flash_attn_varlen_fwd"}
    assert set(torch_ops.SCHEMAS) == names
    for name in names:
        schema = getattr(OPS, name).default._schema
        assert schema.returns == []
        written = {a.name for a in schema.arguments
                   if a.alias_info is not None and a.alias_info.is_write}
        assert written, name
    assert {a.name for a in OPS.unified.default._schema.arguments
            if a.alias_info is not None and a.alias_info.is_write} == \
        {"out", "segment_max", "segment_sum", "lse", "merged_out",
         "merge_counters"}
    assert {a.name for a in OPS.flash.default._schema.arguments
            if a.alias_info is not None and a.alias_info.is_write} == \
        {"out", "lse"}


def test_docs_list_the_schemas():
    doc = " ".join((ROOT / "docs" / "runtime.md").read_text().split())
    for name, schema in torch_ops.SCHEMAS.items():
        assert " ".join(schema.split()) in doc, name


@pytest.mark.parametrize("dev", DEVICES)
@pytest.mark.parametrize("case", list(op_cases("cpu")))
def test_opcheck(case, dev):
    op, args, kwargs = op_cases(dev)[case]
    out = args[_out_index(op)]
    torch.library.opcheck(op, args, kwargs)
    # opcheck runs on copies and compares runs, which a no-op would pass:
    # the kernel must also write the output.
    op(*args, **kwargs)
    assert out.abs().sum() > 0
    assert torch.isfinite(out).all()


# --- the Python entry points route torch tensors through the ops ------------

class _Ops(TorchDispatchMode):
    """Records the operators a call dispatches."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.seen.append(str(func))
        return func(*args, **(kwargs or {}))


def _reference_flash(q, k, v, cu, scale, causal):
    """float64 varlen attention (docs/semantics.md 2), for the routing
    test: the op must compute attention, not only dispatch."""
    q, k, v = q.double(), k.double(), v.double()
    out = torch.zeros_like(q)
    group = q.shape[1] // k.shape[1]
    for b in range(len(cu) - 1):
        lo, hi = int(cu[b]), int(cu[b + 1])
        for h in range(q.shape[1]):
            s = q[lo:hi, h] @ k[lo:hi, h // group].T * scale
            if causal:
                n = hi - lo
                s = s.masked_fill(torch.ones(n, n).triu(1).bool(), -math.inf)
            out[lo:hi, h] = torch.softmax(s, -1) @ v[lo:hi, h // group]
    return out


def test_torch_calls_go_through_the_ops():
    f = flash_inputs("cpu")
    out = zeros(8, 4, 32, dev="cpu")
    with _Ops() as mode:
        ops.flash(*f.values(), out, scale=0.2, causal=True)
    assert "attn_mlir.flash.default" in mode.seen
    ref = _reference_flash(f["q"], f["k"], f["v"], f["cu_seqlens_q"], 0.2, True)
    assert torch.allclose(out.double(), ref, atol=F32_ATOL, rtol=0)
    with _Ops() as mode:
        o, none = vllm.triton_attention(f["q"], f["k"], f["v"], None,
                                        f["cu_seqlens_q"], f["cu_seqlens_k"],
                                        5, 5, True, 0.2)
    assert "attn_mlir.triton_attention.default" in mode.seen and none is None
    assert torch.equal(o, out)   # the same kernel: bit for bit


def test_numpy_and_mixed_calls_run_directly():
    f = {k: v.numpy() for k, v in flash_inputs("cpu").items()}
    out = np.zeros((8, 4, 32), np.float32)
    with _Ops() as mode:
        ops.flash(*f.values(), out, scale=0.2)
    # (Under ATTN_MLIR_TEST_DEVICE=cuda the test hook copies the operands
    # through aten ops: there only attn_mlir's operators must be absent.)
    seen = mode.seen if DEVICES == ["cpu"] else \
        [op for op in mode.seen if op.startswith("attn_mlir.")]
    assert seen == []
    # A numpy operand beside torch tensors: no schema type carries it, so
    # the call runs directly (and still computes).
    t = flash_inputs("cpu")
    direct = zeros(8, 4, 32, dev="cpu")
    with _Ops() as mode:
        ops.flash(t["q"], t["k"], t["v"], t["cu_seqlens_q"].numpy(),
                  t["cu_seqlens_k"], direct, scale=0.2)
    assert "attn_mlir.flash.default" not in mode.seen
    assert np.array_equal(direct.numpy(), out)


def test_unobserved_eager_calls_skip_the_dispatcher(monkeypatch):
    """Outside torch.compile and any mode, a call on plain tensors runs the
    implementation itself (the dispatcher's round trip to a Python kernel
    is most of the torch.library layer's host time);
    ATTN_MLIR_EAGER_DISPATCH=1 sends every torch call through the op."""
    from attn_mlir import torch_ops
    routed = []
    wrapper = torch_ops.flash

    def spy(*args, **kwargs):
        routed.append(1)
        return wrapper(*args, **kwargs)
    monkeypatch.setattr(torch_ops, "flash", spy)
    f = flash_inputs("cpu")
    direct = zeros(8, 4, 32, dev="cpu")
    ops.flash(*f.values(), direct, scale=0.2, causal=True)
    assert routed == []
    monkeypatch.setattr(torch_ops, "_ALWAYS_DISPATCH", True)
    through = zeros(8, 4, 32, dev="cpu")
    ops.flash(*f.values(), through, scale=0.2, causal=True)
    assert routed == [1]
    assert torch.equal(direct, through) and direct.abs().sum() > 0


def test_op_path_matches_direct_path():
    """The torch op runs the implementation the numpy path runs: results
    are bitwise equal for every op."""
    for case, (op, args, kwargs) in op_cases("cpu").items():
        i = _out_index(op)
        direct = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        op(*args, **kwargs)
        kernel = torch_ops._KERNELS[op._schema.name.split("::")[1]]
        kernel(*direct, **{k: (v.clone() if isinstance(v, torch.Tensor) else v)
                           for k, v in kwargs.items()})
        assert torch.equal(args[i], direct[i]), case


def test_old_torch_runs_directly(monkeypatch):
    """Without torch.library.register_fake (torch < 2.4) torch_ops cannot
    register: torch calls then run directly, with a warning, and still
    compute."""
    monkeypatch.setattr(ops, "_TORCH_OPS", None)
    monkeypatch.setitem(sys.modules, "attn_mlir.torch_ops", None)
    monkeypatch.delattr(sys.modules["attn_mlir"], "torch_ops")
    f = flash_inputs("cpu")
    out = zeros(8, 4, 32, dev="cpu")
    with pytest.warns(RuntimeWarning, match="torch.ops.attn_mlir not "
                      "registered"), _Ops() as mode:
        ops.flash(*f.values(), out, scale=0.2, causal=True)
    assert "attn_mlir.flash.default" not in mode.seen
    ref = _reference_flash(f["q"], f["k"], f["v"], f["cu_seqlens_q"], 0.2, True)
    assert torch.allclose(out.double(), ref, atol=F32_ATOL, rtol=0)


def test_import_does_not_need_torch():
    code = ("import sys, numpy as np\n"
            "from attn_mlir import ops\n"
            "q = np.zeros((8, 4, 32), np.float32)\n"
            "k = np.zeros((8, 2, 32), np.float32)\n"
            "cu = np.array([0, 3, 8], np.int32)\n"
            "ops.flash(q, k, k, cu, cu, np.zeros_like(q), scale=0.1)\n"
            "assert 'torch' not in sys.modules, 'torch was imported'\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"),
               ATTN_MLIR_DRY_RUN="1")
    r = subprocess.run([sys.executable, "-c", code], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_registered_at_import_when_torch_is_loaded():
    code = ("import torch, attn_mlir\n"
            "print(torch.ops.attn_mlir.unified_attention.default._schema)\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    r = subprocess.run([sys.executable, "-c", code], env=env,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "Tensor(a!) out" in r.stdout


# --- torch.compile -----------------------------------------------------------

def _compiled(fn):
    return torch.compile(fn, fullgraph=True, backend=BACKEND)


def _compare(fn, make_args, op):
    """fn(*args) eagerly and compiled, on separate copies of the inputs
    (outputs are written in place): the results are bitwise equal, and the
    graph is one, holding the op (not a trace through its Python)."""
    explained = torch._dynamo.explain(fn)(*make_args())
    assert (explained.graph_count, explained.graph_break_count) == (1, 0)
    targets = [str(node) for ops_ in explained.ops_per_graph for node in ops_]
    assert f"attn_mlir.{op}.default" in targets, targets
    torch._dynamo.reset()
    eager = fn(*make_args())
    compiled = _compiled(fn)(*make_args())
    for e, c in zip(eager, compiled):
        assert e.abs().sum() > 0
        assert torch.equal(e, c)
    # Again: the compiled graph is reused, and its kernels run each call.
    again = _compiled(fn)(*make_args())
    for e, c in zip(eager, again):
        assert torch.equal(e, c)


@pytest.mark.parametrize("dev", DEVICES)
def test_compile_flash(dev):
    def fn(q, k, v, cu, out, lse):
        ops.flash(q, k, v, cu, cu, out, scale=0.2, causal=True, lse=lse)
        return out, lse

    def make():
        f = flash_inputs(dev)
        return (f["q"], f["k"], f["v"], f["cu_seqlens_q"],
                zeros(8, 4, 32, dev=dev), zeros(8, 4, dev=dev))
    _compare(fn, make, "flash")


@pytest.mark.parametrize("dev", DEVICES)
def test_compile_triton_attention(dev):
    def fn(q, k, v, cu):
        o, _ = vllm.triton_attention(q, k, v, None, cu, cu, 5, 5, True, 0.2)
        return (o,)

    def make():
        f = flash_inputs(dev)
        return f["q"], f["k"], f["v"], f["cu_seqlens_q"]
    _compare(fn, make, "triton_attention")


@pytest.mark.parametrize("dev", DEVICES)
def test_compile_unified_attention(dev):
    def fn(q, k, v, out, cu, seqused, table):
        vllm.unified_attention(q, k, v, out, cu, 2, seqused, 30, 0.2, True,
                               (-1, -1), table, 0, None, None, None)
        return (out,)

    def make():
        u = unified_inputs(dev)
        return (u["q"], u["k"], u["v"], zeros(3, 4, 32, dev=dev),
                u["cu_seqlens_q"], u["seqused_k"], u["block_table"])
    _compare(fn, make, "unified_attention")


@pytest.mark.parametrize("dev", DEVICES)
def test_compile_unified_attention_split_plan(dev):
    """vLLM's split-KV plan: its caller-owned buffers are optional mutable
    arguments, which functionalization must write back."""
    def fn(q, k, v, out, cu, seqused, table, segm, smax, ssum):
        vllm.unified_attention(q, k, v, out, cu, 1, seqused, 30, 0.2, True,
                               None, table, None, None, None, None,
                               seq_threshold_3D=4, num_par_softmax_segments=2,
                               softmax_segm_output=segm, softmax_segm_max=smax,
                               softmax_segm_expsum=ssum)
        return out, smax

    def make():
        u = unified_inputs(dev)
        return (u["q"][:2], u["k"], u["v"], zeros(2, 4, 32, dev=dev),
                _i32([0, 1, 2], dev), u["seqused_k"], u["block_table"],
                zeros(4, 4, 4, 32, dev=dev), zeros(4, 4, 4, dev=dev),
                zeros(4, 4, 4, dev=dev))
    _compare(fn, make, "unified_attention")


@pytest.mark.parametrize("dev", DEVICES)
def test_compile_context_attention_fwd(dev):
    def fn(q, k, v, o, kc, vc, loc, start, lens):
        vllm.context_attention_fwd(q, k, v, o, "auto", kc, vc, loc, start,
                                   lens, 20, 3, 1.0, 1.0, sm_scale=0.2)
        return (o,)

    def make():
        p = prefix_inputs(dev)
        return (p["q"], p["k"], p["v"], zeros(4, 4, 32, dev=dev),
                p["k_cache"], p["v_cache"], p["b_loc"], p["b_start_loc"],
                p["b_seq_len"])
    _compare(fn, make, "context_attention_fwd")


@pytest.mark.parametrize("dev", DEVICES)
def test_compile_blocksparse(dev):
    def fn(q, k, v, cu, crow, col):
        return (vllm.blocksparse_flash_attn_varlen_fwd(
            q, k, v, cu, cu, 0.2, (crow, col), block_size=16),)

    def make():
        s = sparse_inputs(dev)
        return s["q"], s["k"], s["v"], s["cu"], s["crow"], s["col"]
    _compare(fn, make, "blocksparse_flash_attn_varlen_fwd")


def test_compile_dynamic_shapes_one_graph():
    """Token counts vary without recompiling: the fake kernels check the
    traced example's sizes (their hints) without guarding on them."""
    from torch._dynamo.utils import counters
    counters.clear()

    def fn(q, k, v, cu):
        o, _ = vllm.triton_attention(q, k, v, None, cu, cu, 5, 5, True, 0.2)
        return o
    cf = torch.compile(fn, fullgraph=True, backend="aot_eager", dynamic=True)
    g = _gen(5)
    for tokens in (8, 11, 13):
        q, k, v = (_randn(tokens, h, 32, g=g) for h in (4, 2, 2))
        cu = _i32([0, 3, tokens], "cpu")
        assert torch.equal(cf(q, k, v, cu), fn(q, k, v, cu))
    assert counters["stats"]["unique_graphs"] == 1


# --- fake tensors ----------------------------------------------------------

def test_fake_tensor_shapes():
    f = flash_inputs("cpu")
    s = {k: v.to(torch.bfloat16) if v.is_floating_point() else v
         for k, v in sparse_inputs("cpu").items()}
    with FakeTensorMode() as mode:
        ff = {k: mode.from_tensor(v) for k, v in f.items()}
        o, _ = vllm.triton_attention(ff["q"], ff["k"], ff["v"], None,
                                     ff["cu_seqlens_q"], ff["cu_seqlens_k"],
                                     5, 5, True, 0.2)
        assert (o.shape, o.dtype) == ((8, 4, 32), torch.float32)
        # fp8_scales: vLLM's output is fp8 (e4m3 for 16/32-bit v).
        o8, _ = vllm.triton_attention(ff["q"], ff["k"], ff["v"], None,
                                      ff["cu_seqlens_q"], ff["cu_seqlens_k"],
                                      5, 5, True, 0.2,
                                      fp8_scales=(1.0, 1.0, 1.0, 1 / 448))
        assert o8.dtype == torch.float8_e4m3fn
        fs = {k: mode.from_tensor(v) for k, v in s.items()}
        out = vllm.blocksparse_flash_attn_varlen_fwd(
            fs["q"], fs["k"], fs["v"], fs["cu"], fs["cu"], 0.2,
            (fs["crow"], fs["col"]), block_size=16)
        assert (out.shape, out.dtype) == ((32, 2, 32), torch.bfloat16)
        # Ops returning nothing trace on fake tensors too.
        lse = torch.zeros(8, 4)
        ops.flash(*ff.values(), torch.zeros(8, 4, 32), scale=0.2, lse=lse)


def test_meta_tensors():
    f = {k: v.to("meta") for k, v in flash_inputs("cpu").items()}
    o, _ = vllm.triton_attention(f["q"], f["k"], f["v"], None,
                                 f["cu_seqlens_q"], f["cu_seqlens_k"], 5, 5,
                                 True, 0.2)
    assert o.device.type == "meta" and o.shape == (8, 4, 32)
    with pytest.raises(ValueError, match="^out: shape|^o: shape"):
        vllm.triton_attention(f["q"], f["k"], f["v"],
                              torch.empty(8, 4, 16, device="meta"),
                              f["cu_seqlens_q"], f["cu_seqlens_k"], 5, 5)


def _fake_cuda_calls(mode):
    """A split-KV decode (vllm plans segments in a cached workspace) and a
    decode-only block-sparse call (cached arange offsets) on fake CUDA
    tensors: fake mode needs no GPU, so the device path's checks run
    here too."""
    def empty(*shape, dtype=torch.bfloat16):
        return torch.empty(*shape, dtype=dtype, device="cuda")
    q, cache = empty(2, 4, 32), empty(64, 16, 2, 32)
    out = empty(2, 4, 32)
    cu, used = empty(3, dtype=torch.int32), empty(2, dtype=torch.int32)
    table = empty(2, 32, dtype=torch.int32)
    vllm.unified_attention(q, cache, cache, out, cu, 1, used, 512, 0.2, True,
                           (-1, -1), table, 0, None, None, None)
    sq, sk = empty(2, 2, 32), empty(64, 2, 32)
    crow, col = empty(1, 3, dtype=torch.int32), empty(1, 2, dtype=torch.int32)
    o = vllm.blocksparse_flash_attn_varlen_fwd(
        sq, sk, sk, cu, None, 0.2, (crow, col), block_size=16)
    assert (o.shape, o.device.type) == ((2, 2, 32), "cuda")
    # The device path's own checks: index tensors must be int32.
    with pytest.raises(ValueError, match="^cu_seqlens_q: expected int32 on "
                       "the GPU, got torch.int64"):
        vllm.unified_attention(q, cache, cache, out, cu.long(), 1, used, 512,
                               0.2, True, (-1, -1), table, 0, None, None, None)


def test_fake_cuda_tensors():
    with FakeTensorMode() as mode:
        _fake_cuda_calls(mode)


def test_fake_kernels_do_not_cache_fakes():
    """The split-KV workspace and decode offsets are cached per device;
    a trace must not leave fake tensors there for eager calls to use."""
    before = (dict(vllm._WORKSPACES), dict(vllm._DECODE_OFFSETS))
    with FakeTensorMode() as mode:
        _fake_cuda_calls(mode)
    assert (vllm._WORKSPACES, vllm._DECODE_OFFSETS) == before


def test_metadata_mode_is_per_thread():
    """A trace (metadata-only checks) in one thread leaves eager calls in
    others running their kernels."""
    f = flash_inputs("cpu")
    out = zeros(8, 4, 32, dev="cpu")
    with _abi.metadata_only():
        t = threading.Thread(target=lambda: ops.flash(
            *f.values(), out, scale=0.2, causal=True))
        t.start()
        t.join()
    ref = _reference_flash(f["q"], f["k"], f["v"], f["cu_seqlens_q"], 0.2, True)
    assert torch.allclose(out.double(), ref, atol=F32_ATOL, rtol=0)


# --- errors ------------------------------------------------------------------

def _to_torch(x):
    if isinstance(x, np.ndarray):
        if x.dtype.kind == "V" or x.dtype.name.startswith("float8"):
            return torch.from_numpy(x.view(np.uint8)).view(
                {"float8_e4m3fn": torch.float8_e4m3fn,
                 "float8_e5m2": torch.float8_e5m2}[x.dtype.name])
        return torch.from_numpy(x.copy())
    return x


def _cases(test):
    """The (arguments, message) cases of a test_errors test."""
    mark = next(m for m in test.pytestmark if m.name == "parametrize")
    return mark.args[1]


ERROR_CASES = (
    [("flash", over, match) for over, match in _cases(test_errors.test_flash)]
    + [("unified", over, match)
       for over, match in _cases(test_errors.test_unified)]
    + [("prefix", over, match)
       for over, match in _cases(test_errors.test_prefix_prefill)])
ERROR_ENTRY = {
    "flash": (vllm.triton_attention, test_errors.flash_args),
    "unified": (vllm.unified_attention, test_errors.unified_args),
    "prefix": (vllm.context_attention_fwd, test_errors.prefix_args),
}


@pytest.mark.parametrize("entry,over,match", ERROR_CASES,
                         ids=[f"{e}-{m[:30]}" for e, _, m in ERROR_CASES])
def test_errors_keep_their_messages(entry, over, match, monkeypatch):
    """test_errors' cases with torch tensors: the same ValueError."""
    monkeypatch.setenv("ATTN_MLIR_DRY_RUN", "1")
    fn, make = ERROR_ENTRY[entry]
    args = {k: _to_torch(v) for k, v in make(**over).items()}
    with pytest.raises(ValueError, match=match):
        fn(**args)


@pytest.mark.parametrize("over,match", [
    (dict(scale="0.1"), "^scale: expected a real number"),
    (dict(scale=True), "^scale: expected a real number"),
    (dict(scale=math.inf), "^scale: must be finite"),
    (dict(scale=np.float32(math.nan)), "^scale: must be finite"),
    (dict(dropout=(0.1, 1.5, 0)), "^philox_seed: expected an integer"),
    (dict(dropout=(0.1, 1 << 64, 0)), "^philox_seed: 18446744073709551616"),
    (dict(dropout=(1.0, 0, 0)), r"^dropout_p: must be in \[0, 1\)"),
    (dict(schedule=(16, True, 1)), "^schedule: block_n = expected an integer"),
    (dict(schedule={"block_q": 16}), "^schedule: unknown fields"),
    (dict(schedule=(16, 16, 1, 4, 0, 4, 0, 1)),
     "^schedule: persistent needs tma"),
    (dict(fp8_scales=(1.0, 1.0)), r"^fp8_scales: expected \(q_scale"),
    (dict(fp8_scales=(1.0, 0.0, 1.0, 1.0)), "^k_scale: must be non-zero"),
    (dict(out_scale=torch.ones(2)), "^out_scale: expected a single scale"),
    (dict(lse=torch.zeros(8, 4, dtype=torch.float16)), "^lse: expected float32"),
])
def test_ops_flash_errors(over, match, monkeypatch):
    """ops.flash's argument checks with torch tensors: values that the
    schema carries reach the kernel's checks, values it cannot carry
    (strings, bools, 65-bit seeds) run directly; both name the argument."""
    monkeypatch.setenv("ATTN_MLIR_DRY_RUN", "1")
    f = flash_inputs("cpu")
    kw = dict(scale=0.2)
    kw.update(over)
    with pytest.raises(ValueError, match=match):
        ops.flash(*f.values(), zeros(8, 4, 32, dev="cpu"), **kw)


# Errors found by looking at shapes and dtypes only: the fake kernels raise
# them on fake tensors, before anything runs.
SHAPE_ERRORS = [
    ("flash", dict(q=np.zeros((8, 4), np.float32)), "q: expected a rank-3"),
    ("flash", dict(k=np.ones((8, 3, 32), np.float32),
                   v=np.ones((8, 3, 32), np.float32)),
     "k: 3 KV heads must divide"),
    ("flash", dict(v=np.ones((8, 2, 32), np.float16)), "v: dtype f16"),
    ("flash", dict(o=np.zeros((8, 4, 16), np.float32)), "o: shape"),
    ("unified", dict(sinks=np.zeros((4, 1), np.float32)),
     r"sinks: expected shape \(4,\)"),
    ("unified", dict(window_size=(3,)), "window_size: expected"),
    ("unified", dict(q_descale=1.0), "q_descale: only valid when q is fp8"),
    ("prefix", dict(v_cache=np.zeros((4, 2, 16, 16), np.float32)),
     "k_cache/v_cache: shapes"),
    ("prefix", dict(kv_cache_dtype="fp8"), "k_cache: kv_cache_dtype='fp8'"),
]


@pytest.mark.parametrize("entry,over,match", SHAPE_ERRORS,
                         ids=[m[:30] for _, _, m in SHAPE_ERRORS])
def test_fake_kernels_check_shapes(entry, over, match):
    fn, make = ERROR_ENTRY[entry]
    args = {k: _to_torch(v) for k, v in make(**over).items()}
    with FakeTensorMode(allow_non_fake_inputs=True) as mode:
        fake = {k: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v
                for k, v in args.items()}
        with pytest.raises(ValueError, match=match):
            fn(**fake)


def test_fake_kernels_pass_valid_calls():
    """No false alarms: valid calls of every op trace on fake tensors."""
    for case, (op, args, kwargs) in op_cases("cpu").items():
        with FakeTensorMode() as mode:
            fake = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else
                    [mode.from_tensor(e) for e in a] if isinstance(a, list)
                    and a and isinstance(a[0], torch.Tensor) else a
                    for a in args]
            fkw = {k: mode.from_tensor(v) if isinstance(v, torch.Tensor) else v
                   for k, v in kwargs.items()}
            op(*fake, **fkw)


def _compile_error(fn, *args):
    """The exception torch.compile raises for fn(*args), while tracing: the
    backend never sees a graph (a fake kernel raised, not the kernel of a
    compiled graph's run). Dynamo reports a fake kernel's ValueError as a
    TorchRuntimeError (a RuntimeError) that quotes it, or re-raises it."""
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward
    with pytest.raises((ValueError, RuntimeError)) as info:
        torch.compile(fn, fullgraph=True, backend=backend)(*args)
    assert graphs == [], "raised when the graph ran, not while tracing"
    return str(info.value)


def test_compile_reports_argument_errors():
    f = flash_inputs("cpu")

    def rank(q, k, v, cu):
        o, _ = vllm.triton_attention(q, k, v, None, cu, cu, 5, 5, True, 0.2)
        return o
    msg = _compile_error(rank, f["q"][:, 0], f["k"], f["v"], f["cu_seqlens_q"])
    assert "q: expected a rank-3 array" in msg

    def scale(q, k, v, cu, out):
        ops.flash(q, k, v, cu, cu, out, scale=math.inf)
        return out
    msg = _compile_error(scale, f["q"], f["k"], f["v"], f["cu_seqlens_q"],
                         zeros(8, 4, 32, dev="cpu"))
    assert "scale: must be finite in f32" in msg

    u = unified_inputs("cpu")

    def heads(q, k, v, out, cu, seqused, table):
        vllm.unified_attention(q, k, v, out, cu, 2, seqused, 30, 0.2, True,
                               (-1, -1), table, 0, None, None, None)
        return out
    msg = _compile_error(heads, u["q"][:, :3], u["k"], u["v"],
                         zeros(3, 3, 32, dev="cpu"), u["cu_seqlens_q"],
                         u["seqused_k"], u["block_table"])
    assert "k: 2 KV heads must divide the 3 query heads" in msg
