"""Bad arguments raise ValueError naming the argument, before any kernel."""

import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from attn_mlir import ops, vllm

F = np.float32


def flash_args(**over):
    a = dict(q=np.zeros((8, 4, 32), F), k=np.ones((8, 2, 32), F),
             v=np.ones((8, 2, 32), F), o=np.zeros((8, 4, 32), F),
             cu_seqlens_q=np.array([0, 3, 8], np.int32),
             cu_seqlens_k=np.array([0, 3, 8], np.int32),
             max_seqlens_q=5, max_seqlens_k=5)
    a.update(over)
    return a


@pytest.mark.parametrize("over,match", [
    (dict(q=np.zeros((8, 4), F)), "q: expected a rank-3"),
    (dict(q=np.zeros((8, 4, 32), np.int16)), "q: unsupported dtype"),
    (dict(k=np.ones((8, 3, 32), F), v=np.ones((8, 3, 32), F)), "k: 3 KV heads must divide"),
    (dict(k=np.ones((8, 2, 16), F), v=np.ones((8, 2, 16), F)), "k: head dim 16"),
    (dict(v=np.ones((8, 2, 32), np.float16)), "v: dtype f16"),
    (dict(cu_seqlens_q=np.array([0, 5, 3], np.int32)), "cu_seqlens_q: offsets must be"),
    (dict(cu_seqlens_k=np.array([0, 3, 9], np.int32)), "cu_seqlens_k: last offset 9"),
    (dict(cu_seqlens_k=np.array([0, 8], np.int32)), "cu_seqlens_k: expected 3 entries"),
    (dict(cu_seqlens_q=np.array([0.0, 3, 8])), "cu_seqlens_q: expected integers"),
    (dict(bias=np.zeros((1, 3, 5, 5), F)), "bias: shape"),
    (dict(o=np.zeros((8, 4, 16), F)), "o: shape"),
    (dict(dropout_p=1.5), "dropout_p: must be in"),
    (dict(q="not an array"), "q: expected a numpy array"),
])
def test_flash(over, match):
    with pytest.raises(ValueError, match=match):
        vllm.triton_attention(**flash_args(**over))


def unified_args(**over):
    a = dict(q=np.zeros((3, 4, 32), F), k=np.zeros((6, 16, 2, 32), F),
             v=np.zeros((6, 16, 2, 32), F), out=np.zeros((3, 4, 32), F),
             cu_seqlens_q=np.array([0, 1, 3], np.int32), max_seqlen_q=2,
             seqused_k=np.array([20, 30], np.int32), max_seqlen_k=30,
             softmax_scale=0.2, causal=True, window_size=(-1, -1),
             block_table=np.array([[0, 1], [2, 3]], np.int32), softcap=0,
             q_descale=None, k_descale=None, v_descale=None)
    a.update(over)
    return a


@pytest.mark.parametrize("over,match", [
    (dict(causal=np.array([True, False, True])), "causal: expected a bool or 2 per-sequence"),
    (dict(block_table=np.array([[0, 1], [2, 6]], np.int32)), "block_table: sequence 1 uses block 6"),
    (dict(block_table=np.array([[0], [2]], np.int32)), "block_table: sequence 0 needs 2 blocks"),
    (dict(seqused_k=np.array([20, 1], np.int32)), "seqused_k: sequence 1 has 1 keys but 2 queries"),
    (dict(window_size=(3,)), "window_size: expected"),
    (dict(softcap=-1.0), "softcap: must be >= 0"),
    (dict(alibi_slopes=np.zeros(3, F)), r"alibi_slopes: expected shape \(4,\)"),
    (dict(sinks=np.zeros((4, 1), F)), r"sinks: expected shape \(4,\)"),
    (dict(q_descale=1.0), "q_descale: only valid when q is fp8"),
    (dict(output_scale=0.0), "output_scale: must be non-zero"),
    (dict(num_segments=0), r"num_segments: 0 is outside the supported range \[1, "),
])
def test_unified(over, match):
    with pytest.raises(ValueError, match=match):
        vllm.unified_attention(**unified_args(**over))


def prefix_args(**over):
    a = dict(q=np.zeros((4, 4, 32), F), k=np.zeros((4, 2, 32), F),
             v=np.zeros((4, 2, 32), F), o=np.zeros((4, 4, 32), F),
             kv_cache_dtype="auto", k_cache=np.zeros((4, 2, 8, 16, 4), F),
             v_cache=np.zeros((4, 2, 32, 16), F),
             b_loc=np.array([[0, 1], [2, 3]], np.int32),
             b_start_loc=np.array([0, 1, 4], np.int32),
             b_seq_len=np.array([20, 10], np.int32), max_seq_len=20,
             max_input_len=3, k_scale=1.0, v_scale=1.0)
    a.update(over)
    return a


@pytest.mark.parametrize("over,match", [
    (dict(kv_cache_dtype="fp8_inc"), "kv_cache_dtype: unsupported fp8 format"),
    (dict(kv_cache_dtype=8), "kv_cache_dtype: expected a string"),
    (dict(kv_cache_dtype="fp8"), "k_cache: kv_cache_dtype='fp8' needs uint8"),
    (dict(k_cache=np.zeros((4, 2, 8, 16, 4), np.uint8)), "k_cache/v_cache: dtypes"),
    (dict(b_start_loc=np.array([0, 1, 9], np.int32)), "b_start_loc: last offset 9"),
    (dict(b_seq_len=np.array([20, 2], np.int32)), "b_seq_len: sequence 1 has 2 tokens"),
    (dict(b_loc=np.array([[0, 9], [2, 3]], np.int32)), "b_loc: sequence 0 uses block 9"),
    (dict(alibi_slopes=np.zeros(4, F), sinks=np.zeros(4, F)), "sinks: cannot be combined"),
    (dict(fp8_out_scale=float("nan")), "fp8_out_scale: must be finite"),
    (dict(v_cache=np.zeros((4, 2, 16, 16), F)), "k_cache/v_cache: shapes"),
])
def test_prefix_prefill(over, match):
    with pytest.raises(ValueError, match=match):
        vllm.context_attention_fwd(**prefix_args(**over))


def test_blocksparse():
    q = np.zeros((32, 2, 32), F)
    cu = np.array([0, 32], np.int32)
    good = (np.array([[0, 1, 2]], np.int32), np.array([[0, 1]], np.int32))
    call = lambda **kw: vllm.blocksparse_flash_attn_varlen_fwd(
        kw.get("q", q), q, q, kw.get("ck", cu), kw.get("cq", cu), 0.1,
        kw.get("layout", good), block_size=kw.get("bs", 16))
    with pytest.raises(ValueError, match="sparse_layout: expected"):
        call(layout=good[0])
    with pytest.raises(ValueError, match="crow.*non-decreasing"):
        call(layout=(np.array([[0, 2, 1]], np.int32), good[1]))
    with pytest.raises(ValueError, match="col.*lists a block twice"):
        call(layout=(np.array([[0, 2, 2]], np.int32), np.array([[0, 0]], np.int32)))
    with pytest.raises(ValueError, match="crow.*rows cover 32 positions"):
        vllm.blocksparse_flash_attn_varlen_fwd(
            np.zeros((40, 2, 32), F), np.zeros((40, 2, 32), F), np.zeros((40, 2, 32), F),
            np.array([0, 40], np.int32), np.array([0, 40], np.int32), 0.1, good,
            block_size=16)
    with pytest.raises(ValueError, match="cu_seqlens_q: sequence 0 has 5 queries"):
        call(cq=np.array([0, 5], np.int32), q=np.zeros((5, 2, 32), F))
    with pytest.raises(ValueError, match=r"block_size: 0 is outside the supported range \[1, "):
        call(bs=0)


def test_resource_report_parsing():
    # What the AOT manifests record from `ptxas -v`, including wgmma
    # performance losses (C75xx: serialized wgmma, ignored setmaxnreg).
    from attn_mlir import _gpu
    report = """ptxas info    : Compiling entry function 'kernel' for 'sm_90a'
ptxas info    : (C7518) Potential Performance Loss: wgmma.mma_async instructions are serialized due to program dependence on compiler-inserted WG.DP in divergent path in the function 'kernel'
ptxas info    : Function properties for kernel
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 1 bytes smem
"""
    assert _gpu.parse_resource_report(report) == {"kernel": {
        "stack_bytes": 8, "spill_stores": 4, "spill_loads": 12,
        "registers": 168, "performance_loss": "C7518"}}
    # setmaxnreg that ptxas ignores names no function: the entry's.
    report = """ptxas info    : Compiling entry function 'ws' for 'sm_90a'
ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; unable to determine register count at entry.
ptxas info    : Used 126 registers, used 16 barriers, 72 bytes smem
"""
    assert _gpu.parse_resource_report(report) == {"ws": {
        "registers": 126, "performance_loss": "C7508"}}


def test_cpu_plan_env(monkeypatch):
    # ATTN_MLIR_CPU_PLAN picks whose tile schedules the CPU kernels run.
    from attn_mlir import _toolchain
    monkeypatch.setenv("ATTN_MLIR_CPU_PLAN", "rocdl:gfx942")
    assert _toolchain.cpu_plan() == ("rocdl", "gfx942")
    monkeypatch.setenv("ATTN_MLIR_CPU_PLAN", "tpu:v5")
    with pytest.raises(ValueError, match="ATTN_MLIR_CPU_PLAN='tpu:v5': expected"):
        _toolchain.cpu_plan()
    monkeypatch.delenv("ATTN_MLIR_CPU_PLAN")
    assert _toolchain.cpu_plan() == ("cpu", "")


def test_attn_opt_lookup(tmp_path, monkeypatch):
    # $ATTN_MLIR_OPT, then PATH, then the development checkout's build; a
    # missing one is an error that says how to get one.
    from attn_mlir import _toolchain

    def tool(d):
        d.mkdir()
        exe = d / "attn-opt"
        exe.write_text("#!/bin/sh\n")
        exe.chmod(0o755)
        return str(exe)
    env, on_path, checkout = (tool(tmp_path / d) for d in ("env", "path", "co"))
    monkeypatch.setattr(_toolchain, "_CHECKOUT_ATTN_OPT", Path(checkout))
    monkeypatch.setenv("PATH", str(Path(on_path).parent))
    monkeypatch.setenv("ATTN_MLIR_OPT", env)
    assert _toolchain.attn_opt() == env
    monkeypatch.delenv("ATTN_MLIR_OPT")
    assert _toolchain.attn_opt() == on_path
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    assert _toolchain.attn_opt() == checkout
    monkeypatch.setattr(_toolchain, "_CHECKOUT_ATTN_OPT", tmp_path / "none")
    with pytest.raises(_toolchain.CompileError, match="cannot find 'attn-opt'.*"
                                                      "ATTN_MLIR_OPT"):
        _toolchain.attn_opt()


def test_spill_warning():
    # A kernel that spills (only pinned schedules may) is reported with its
    # op and schedule; a clean one is not.
    from attn_mlir import _gpu
    text = ("func.func @kernel(%q: memref<?x16x128xbf16>) {\n  attn.flash "
            "{schedule = #attn.schedule<block_q = 128, block_n = 64, "
            "heads_per_program = 1, warps = 4>}\n")
    with pytest.warns(_gpu.SpillWarning, match=r"kernel of attn.flash .* on "
                      r"sm_90a spills 132 bytes .*block_q = 128, block_n = 64"):
        _gpu.warn_on_spills({"kernel": {"stack_bytes": 56, "spill_stores": 132,
                                        "spill_loads": 144}}, text, "sm_90a")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _gpu.warn_on_spills({"kernel": {"stack_bytes": 0, "spill_stores": 0,
                                        "registers": 200}}, text, "sm_90a")


def test_gpu_chunk_alignment():
    # GPU kernels stage 16-bit rows as 16-byte chunks and fp8 rows as 8-byte
    # ones: misaligned pointers or strides are refused by name.
    from attn_mlir._abi import View, chunk_alignment, check_pointer_alignment
    q = View("q", 0x1000, (4, 8, 64), (512, 64, 1), "bf16", None)
    assert chunk_alignment(q) == 16
    check_pointer_alignment(q, 16)
    kc = View("k_cache", 0x1008, (4, 2, 8, 16, 16), (4096, 2048, 256, 16, 1),
              "f8E4M3FN", None)
    assert chunk_alignment(kc) == 8
    check_pointer_alignment(kc, 8)
    # Rows of no whole chunks are gathered element by element: no constraint.
    assert chunk_alignment(
        View("q", 0x1002, (4, 8, 20), (160, 20, 1), "bf16", None)) == 0
    with pytest.raises(ValueError, match="q: GPU kernels read its rows in 16-byte chunks; the tensor must start"):
        check_pointer_alignment(
            View("q", 0x1008, (4, 8, 64), (512, 64, 1), "bf16", None), 16)
    with pytest.raises(ValueError, match="v: .*outer strides"):
        chunk_alignment(View("v", 0x1000, (4, 8, 64), (516, 64, 1), "f16", None))
    with pytest.raises(ValueError, match="v_cache: GPU kernels read its rows in 8-byte"):
        check_pointer_alignment(View("v_cache", 0x1004, (4, 2, 64, 16),
                                     (2048, 1024, 16, 1), "f8E4M3FN", None), 8)


def test_rocdl_bundle(tmp_path):
    # The AMD half of the runtime path, up to the code object a ROCm device
    # would load (no AMD GPU here): an HSACO (AMDGPU ELF) per specialization,
    # its manifest, and resources without scratch.
    from attn_mlir import _gpu
    from attn_mlir._toolchain import CompileError
    text = (Path(__file__).parents[2] / "examples" / "flash.mlir").read_text()
    try:
        bundle = _gpu.compile_bundle(text, "gfx942", tmp_path / "b")
    except CompileError as e:
        # A machine given attn-opt alone (the GPU machine's wheel binary)
        # has no linker for the code object: attn-opt says so by name.
        if "ld.lld, which was not found" not in str(e):
            raise
        pytest.skip("no ld.lld to link HSACO code objects on this machine")
    record = json.loads((bundle / "manifest.json").read_text())
    assert record["binary"] == "kernel.hsaco"
    elf = (bundle / "kernel.hsaco").read_bytes()
    assert elf[:4] == b"\x7fELF"
    assert int.from_bytes(elf[18:20], "little") == 224  # EM_AMDGPU
    assert [k["name"] for k in record["kernels"]] == ["varlen_causal_flash"]
    res = record["resources"]["varlen_causal_flash"]
    assert res["stack_bytes"] == 0 and res["spill_stores"] == 0
    assert res["registers"] > 0
    assert "v_mfma_f32_16x16x16_bf16" in (bundle / "kernel.s").read_text()


def test_hip_chip_name():
    from attn_mlir import _gpu

    class Props:
        gcnArchName = "gfx942:sramecc+:xnack-"
    assert _gpu.chip_for_hip_device(Props()) == "gfx942"
    assert _gpu.is_amd("gfx1100") and not _gpu.is_amd("sm_90a")


@pytest.mark.parametrize("name", ["cu_seqlens_q", "cu_seqlens_k"])
def test_index_operands_must_be_int32(name):
    """An int64 offset array is named before any kernel lookup (on a GPU
    machine without attn-opt it used to surface as a missing kernel)."""
    q = np.zeros((4, 2, 32), np.float32)
    cu = {"cu_seqlens_q": np.array([0, 4], np.int32),
          "cu_seqlens_k": np.array([0, 4], np.int32)}
    cu[name] = cu[name].astype(np.int64)
    with pytest.raises(ValueError, match=f"{name}: expected int32, got i64"):
        ops.flash(q, q, q, cu["cu_seqlens_q"], cu["cu_seqlens_k"],
                  np.zeros_like(q), scale=0.1)


def test_ptxas_from_a_wheel(monkeypatch, tmp_path):
    """Without a CUDA toolkit or ptxas on PATH, the ptxas of a Python wheel
    (nvidia-cuda-nvcc, or Triton's) turns PTX into cubins; with none, the
    bundle carries PTX for the driver (no ptxas)."""
    import importlib.util
    from attn_mlir import _gpu
    monkeypatch.delenv("ATTN_MLIR_PTXAS", raising=False)
    monkeypatch.setattr(_gpu.Path, "is_file",
                        lambda self: str(self).startswith(str(tmp_path))
                        and self.exists())
    monkeypatch.setattr(_gpu.shutil, "which", lambda name: None)
    fake = tmp_path / "triton" / "backends" / "nvidia" / "bin" / "ptxas"
    fake.parent.mkdir(parents=True)
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)

    class Spec:
        origin = str(tmp_path / "triton" / "__init__.py")
        submodule_search_locations = [str(tmp_path / "triton")]
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name: Spec() if name == "triton" else None)
    assert _gpu._ptxas() == str(fake)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert _gpu._ptxas() is None
