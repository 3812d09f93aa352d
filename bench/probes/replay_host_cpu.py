"""Host cost of a replayed GPU call (attn_mlir._replay) without a GPU: CPU
tensors stand in for CUDA ones (as in test_replay.py), kernels are stand-in
records, and the runtime is the package's own replay code
(gpu_runtime.cpp's replay section) built with a cuLaunchKernel that does
nothing. What it times is the Python and ctypes path of a serving loop's
call: signature, tensor match, pointers, checks and the runtime round trip;
a GPU host adds the driver's launches (bench/host_overhead.py measures
those). Prints the best of --rounds rounds of --calls calls, us per call.

    python bench/probes/replay_host_cpu.py [--calls 2000] [--rounds 7]
"""

import argparse
import ctypes
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "python"))
from attn_mlir import _abi, _gpu, _launch, _replay, ops, vllm  # noqa: E402

HQ, HK, D, PAGE, CTX = 32, 8, 128, 16, 32768


def stub_runtime(workdir):
    """gpu_runtime.cpp's replay functions over a launch that does nothing."""
    src = (ROOT / "python/attn_mlir/_native/gpu_runtime.cpp").read_text()
    body = src[src.index("/// A launch of a replayed call"):
               src.index("/// Encodes the tiled tensor map")]
    stub = Path(workdir) / "stub.cpp"
    stub.write_text(
        'extern "C" {\nint attn_rt_launch(int, void *, unsigned, unsigned, '
        'unsigned, unsigned, unsigned, void *, void **, char *, int) {\n'
        '  return 0;\n}\n' + body + "}\n")
    lib = Path(workdir) / "libstub.so"
    subprocess.run(["c++", "-O2", "-shared", "-fPIC", str(stub), "-o",
                    str(lib)], check=True)
    rt = ctypes.CDLL(str(lib))
    vp, ci, cu = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint
    rt.attn_rt_launch.argtypes = [ci, vp, cu, cu, cu, cu, cu, vp,
                                  ctypes.POINTER(vp), ctypes.c_char_p, ci]
    return rt


def stand_in_gpu(runtime):
    """CPU tensors taken for cuda:0 tensors; a first call's kernels are
    records of its parameters; launches go to `runtime`."""
    fake = torch.device("cuda", 0)
    real = _abi.device_of

    def device_of(x):
        return fake if _abi.is_torch(x) else real(x)
    for module in (ops, vllm, _abi):
        module.device_of = device_of
    _replay._CPU_AS_GPU = True
    vllm._sm_count = lambda dev: 132
    vllm._WORKSPACES[fake] = torch.empty(1 << 22)
    vllm._MERGE_COUNTERS[fake] = torch.zeros(vllm.MIN_MERGE_COUNTERS,
                                             dtype=torch.int32)
    _gpu._runtime = runtime
    _launch._stream_getter = lambda dev: ((lambda: 0), 0)

    def run_gpu(self, text):
        params = []
        for i, (_, _, kind, value) in enumerate(self.params):
            params.append({"arg": i, "kind": "memref",
                           "rank": len(value.shape)} if kind == "mem" else
                          {"arg": i, "kind": "scalar",
                           "dtype": "f32" if isinstance(value, float)
                           else "i32"})
        record = {"params": params, "threads": 128, "shared_bytes": 0,
                  "grid": [{"add": 1, "terms": []}], "name": self.name}
        _replay.captured(self, [_gpu.Kernel(record, ctypes.c_void_p(1),
                                            None, None)])
    ops._Call._run_gpu = run_gpu


def calls():
    pages = CTX // PAGE
    q = torch.randn(1, HQ, D).to(torch.bfloat16)
    kc = torch.zeros(pages, PAGE, HK, D, dtype=torch.bfloat16)
    vc = torch.zeros_like(kc)
    table = torch.arange(pages, dtype=torch.int32).view(1, pages)
    cu = torch.arange(2, dtype=torch.int32)
    used = torch.full((1,), CTX, dtype=torch.int32)
    out = torch.empty_like(q)
    part, smax = torch.empty(1, HQ, 16, D), torch.empty(1, HQ, 16)
    ssum = torch.empty_like(smax)
    ones = torch.ones(1, HK)
    keywords = dict(
        q=q, k=kc, v=vc, out=out, cu_seqlens_q=cu, max_seqlen_q=1,
        seqused_k=used, max_seqlen_k=CTX, softmax_scale=D ** -0.5,
        causal=True, window_size=(-1, -1), block_table=table, softcap=0,
        q_descale=None, k_descale=ones, v_descale=ones, seq_threshold_3D=4,
        num_par_softmax_segments=16, softmax_segm_output=part,
        softmax_segm_max=smax, softmax_segm_expsum=ssum)
    step = [0]

    def growing():
        step[0] += 1
        vllm.unified_attention(q, kc, vc, out, cu, 1, used,
                               CTX + step[0] % 64, D ** -0.5, True, (-1, -1),
                               table, 0.0, None, None, None)
    return {
        "ops.unified (1 launch)": lambda: ops.unified(
            q, kc, vc, table, cu, used, out, scale=D ** -0.5),
        "ops.unified + ops.merge_states (2 calls)": lambda: (
            ops.unified(q, kc, vc, table, cu, used, part, scale=D ** -0.5,
                        segment_max=smax, segment_sum=ssum),
            ops.merge_states(part, out, segment_max=smax, segment_sum=ssum)),
        "drop-in decode B=1, vLLM's keywords": lambda:
            vllm.unified_attention(**keywords),
        "drop-in decode B=1, max_seqlen_k growing": growing,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        stand_in_gpu(stub_runtime(workdir))
        for name, fn in calls().items():
            for _ in range(3):   # the full path, then replays
                fn()
            best = float("inf")
            for _ in range(args.rounds):
                t = time.perf_counter()
                for _ in range(args.calls):
                    fn()
                best = min(best, (time.perf_counter() - t) / args.calls)
            print(f"{name:54s} {best * 1e6:6.1f} us")


if __name__ == "__main__":
    main()
