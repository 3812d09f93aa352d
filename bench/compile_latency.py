"""Compile latency per specialization: attn op -> loadable kernel.

For one representative call of every op (flash, unified, prefix prefill,
block-sparse, merge_states), prints:
  * CPU cold: load_kernel with an empty cache (attn-compile --shared where
    attn-compile is built with LLD, attn-compile and cc where it is built
    without, else attn-opt, mlir-translate, opt, llc and cc; then dlopen),
    and each stage timed alone;
  * CPU warm: load_kernel from the filled cache in a fresh process (digest
    check and dlopen);
  * sm_90a cold: bundle_for with an empty cache (attn-opt's NVVM pipeline
    to PTX, ptxas to a cubin, the bundle written), with the two stages
    timed alone;
  * sm_90a warm: bundle_for from the filled cache in a fresh process (find
    and verify; loading into a GPU is not timed: no GPU here).
The issue's goal (#19): <= 0.3 s cold, <= 10 ms warm, on the 2-core machine.

usage: python3 bench/compile_latency.py [--repeat N]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from ml_dtypes import bfloat16

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from attn_mlir import _gpu, _toolchain, ops  # noqa: E402


def specializations():
    """The MLIR text of one call per op, recorded without running."""
    with tempfile.TemporaryDirectory() as tmp:
        rec = Path(tmp) / "rec.jsonl"
        env = {"ATTN_MLIR_RECORD": str(rec), "ATTN_MLIR_DRY_RUN": "1"}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            bf = bfloat16
            q = np.zeros((64, 32, 128), bf)
            kv = np.zeros((64, 8, 128), bf)
            cu = np.array([0, 64], np.int32)
            ops.flash(q, kv, kv, cu, cu, np.zeros_like(q), scale=0.088,
                      causal=True)
            kc = np.zeros((8, 16, 8, 128), bf)
            ops.unified(q, kc, kc, np.zeros((1, 8), np.int32), cu,
                        np.array([128], np.int32), np.zeros_like(q),
                        scale=0.088)
            pkc = np.zeros((8, 8, 16, 16, 8), bf)
            pvc = np.zeros((8, 8, 128, 16), bf)
            ops.prefix_prefill(q, kv, kv, pkc, pvc,
                               np.zeros((1, 8), np.int32), cu,
                               np.array([128], np.int32), np.zeros_like(q),
                               scale=0.088)
            q64 = np.zeros((128, 32, 64), bf)
            kv64 = np.zeros((128, 8, 64), bf)
            cu2 = np.array([0, 128], np.int32)
            crow = np.array([[0, 1, 3]], np.int32)
            col = np.array([[0, 0, 1]], np.int32)
            ops.blocksparse(q64, kv64, kv64, cu2, cu2, crow, col,
                            np.zeros_like(q64), scale=0.125, block_size=64)
            part = np.zeros((64, 32, 4, 128), np.float32)
            stat = np.zeros((64, 32, 4), np.float32)
            ops.merge_states(part, np.zeros_like(q), segment_max=stat,
                             segment_sum=stat)
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        return [json.loads(line)["mlir"] for line in rec.read_text().split("\n")
                if line]


def name_of(text):
    return text.split("@", 1)[1].split("(", 1)[0]


def timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def cpu_stages(text):
    """Each stage of the CPU build alone: attn-compile (what _toolchain._build
    runs where it is) and, for comparison, the tool chain it replaces."""
    times = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "k.mlir").write_text(text)
        compiler = _toolchain.attn_compile()
        if compiler:
            times["attn-compile"] = timed(lambda: subprocess.run(
                [compiler, str(tmp / "k.mlir"), "-o", str(tmp / "c.o")],
                check=True, capture_output=True))
            if _toolchain._links_itself(compiler):
                # Object and shared library in one process (LLD), as
                # _toolchain._build runs it: no cc stage.
                times["attn-compile --shared"] = timed(
                    lambda: subprocess.run(
                        [compiler, str(tmp / "k.mlir"), "--shared", "-o",
                         str(tmp / "c.so")], check=True, capture_output=True))
        tool = _toolchain._llvm_tool
        steps = [
            ("attn-opt", [_toolchain.attn_opt(), str(tmp / "k.mlir"),
                          "--attn-lower-to-cpu-pipeline",
                          "--verify-each=false", "-o",
                          str(tmp / "k.llvm.mlir")]),
            ("translate", [tool("mlir-translate"), "--mlir-to-llvmir",
                           str(tmp / "k.llvm.mlir"), "-o", str(tmp / "k.ll")]),
            ("opt", [tool("opt"), "-O3", str(tmp / "k.ll"), "-o",
                     str(tmp / "k.bc")]),
            ("llc", [tool("llc"), "-O3", "-relocation-model=pic",
                     "-filetype=obj", str(tmp / "k.bc"), "-o",
                     str(tmp / "k.o")]),
            ("cc", [os.environ.get("CC", "cc"), "-shared", str(tmp / "k.o"),
                    "-o", str(tmp / "k.so"), "-lm"]),
        ]
        for stage, cmd in steps:
            times[stage] = timed(lambda: subprocess.run(cmd, check=True,
                                                        capture_output=True))
    return times


def nvvm_stages(text, chip):
    times = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "kernel.mlir").write_text(text)
        out = {}
        times["attn-opt"] = timed(lambda: out.setdefault(
            "ir", _gpu._lower(tmp, chip, "format=isa", "k.gpu.mlir")))
        isa = _gpu._string_attr(out["ir"], r"#gpu\.object<.*?assembly = ")
        (tmp / "k.ptx").write_text(isa)
        ptxas = _gpu._ptxas()
        if ptxas:
            times["ptxas"] = timed(lambda: subprocess.run(
                [ptxas, f"-arch={chip}", "-O3", str(tmp / "k.ptx"), "-o",
                 str(tmp / "k.cubin")], check=True, capture_output=True))
    return times


WARM = """
import sys, time
sys.path.insert(0, {python!r})
from attn_mlir import _gpu, _toolchain
text, name, chip = sys.argv[1], sys.argv[2], sys.argv[3]
t0 = time.perf_counter()
if chip == "cpu":
    _toolchain.load_kernel(text, name)
else:
    _gpu.bundle_for(text, chip)
print(time.perf_counter() - t0)
"""


def warm(text, chip, cache):
    env = dict(os.environ, ATTN_MLIR_CACHE=str(cache))
    out = subprocess.run(
        [sys.executable, "-c", WARM.format(python=str(ROOT / "python")),
         text, name_of(text), chip],
        env=env, check=True, capture_output=True, text=True)
    return float(out.stdout.split()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=1,
                    help="cold compiles per op and target (best is shown)")
    ap.add_argument("--chip", default="sm_90a")
    args = ap.parse_args()
    print(f"# compile latency, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} "
          f"CPU cores, attn-opt {_toolchain.attn_opt()}")
    print(f"# {'kernel':44s} {'target':7s} {'cold s':>7s} {'warm ms':>8s}  "
          "stages (s)")
    for text in specializations():
        name = name_of(text)
        for chip in ("cpu", args.chip):
            colds = []
            for _ in range(args.repeat):
                with tempfile.TemporaryDirectory() as cache:
                    os.environ["ATTN_MLIR_CACHE"] = cache
                    _toolchain._loaded.clear()
                    if chip == "cpu":
                        colds.append(timed(
                            lambda: _toolchain.load_kernel(text, name)))
                    else:
                        colds.append(timed(
                            lambda: _gpu.bundle_for(text, chip)))
                    warm_s = warm(text, chip, cache)
            stages = (cpu_stages(text) if chip == "cpu"
                      else nvvm_stages(text, chip))
            detail = " ".join(f"{k}={v:.3f}" for k, v in stages.items())
            print(f"{name:46s} {chip:7s} {min(colds):7.3f} "
                  f"{warm_s * 1e3:8.1f}  {detail}", flush=True)


if __name__ == "__main__":
    main()
