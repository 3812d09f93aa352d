"""Compiling attn MLIR to host shared libraries, with an on-disk cache.

attn-opt --attn-lower-to-cpu-pipeline | mlir-translate | opt -O3 | llc, then
the system C compiler links a shared library. Libraries are cached by a hash
of the MLIR text and of the attn-opt binary, under $ATTN_MLIR_CACHE (default
~/.cache/attn_mlir); a file lock per entry keeps concurrent processes from
compiling the same kernel twice or reading a half-written one.
"""

import ctypes
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

_REPO = Path(__file__).resolve().parents[2]
_LLVM_BIN = Path(os.environ.get("ATTN_MLIR_LLVM_BIN", "/usr/lib/llvm-22/bin"))


class CompileError(RuntimeError):
    """attn-opt or the LLVM toolchain rejected a kernel."""


def _find(tool, candidates):
    for c in candidates:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return str(c)
    found = shutil.which(tool)
    if found:
        return found
    raise CompileError(
        f"cannot find {tool!r}: build the project first (scripts/build.sh) or "
        f"set ATTN_MLIR_OPT / ATTN_MLIR_LLVM_BIN")


def attn_opt():
    return _find("attn-opt", [os.environ.get("ATTN_MLIR_OPT"),
                              _REPO / "build" / "bin" / "attn-opt"])


def _llvm_tool(name):
    return _find(name, [_LLVM_BIN / name])


_compiler_hash = None


def _compiler_fingerprint():
    global _compiler_hash
    if _compiler_hash is None:
        h = hashlib.sha256()
        with open(attn_opt(), "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        _compiler_hash = h.hexdigest()[:16]
    return _compiler_hash


def cache_dir():
    d = Path(os.environ.get("ATTN_MLIR_CACHE",
                            Path.home() / ".cache" / "attn_mlir"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def _run(cmd, what):
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CompileError(f"{what} failed ({' '.join(map(str, cmd))}):\n"
                           f"{proc.stderr[-4000:]}")


PLAN_ENV = "ATTN_MLIR_CPU_PLAN"


def cpu_plan():
    """(target, chip) whose default tile schedules the CPU kernels run:
    ATTN_MLIR_CPU_PLAN=rocdl:gfx942 (or nvvm:sm_90a, ...) runs another
    target's tile sizes through the CPU program, checking that target's
    schedule logic against the references without its hardware. Default
    ("cpu", "")."""
    spec = os.environ.get(PLAN_ENV, "")
    if not spec:
        return "cpu", ""
    target, _, chip = spec.partition(":")
    if target not in ("cpu", "nvvm", "rocdl"):
        raise ValueError(f"{PLAN_ENV}={spec!r}: expected TARGET[:CHIP] with "
                         "TARGET cpu, nvvm or rocdl")
    return target, chip


def _build(mlir_text, out_so):
    target, chip = cpu_plan()
    with tempfile.TemporaryDirectory(prefix="attn_mlir_") as tmp:
        tmp = Path(tmp)
        src = tmp / "kernel.mlir"
        src.write_text(mlir_text)
        _run([attn_opt(), str(src),
              f"--attn-lower-to-cpu-pipeline=plan-target={target} "
              f"plan-chip={chip}",
              "-o", str(tmp / "kernel.llvm.mlir")], "attn-opt")
        _run([_llvm_tool("mlir-translate"), "--mlir-to-llvmir",
              str(tmp / "kernel.llvm.mlir"), "-o", str(tmp / "kernel.ll")],
             "mlir-translate")
        _run([_llvm_tool("opt"), "-O3", str(tmp / "kernel.ll"),
              "-o", str(tmp / "kernel.bc")], "opt")
        _run([_llvm_tool("llc"), "-O3", "-relocation-model=pic",
              "-filetype=obj", str(tmp / "kernel.bc"),
              "-o", str(tmp / "kernel.o")], "llc")
        cc = os.environ.get("CC", "cc")
        _run([cc, "-shared", str(tmp / "kernel.o"), "-o", str(out_so), "-lm"],
             "linking")


def load_kernel(mlir_text, func_name):
    """Returns the C-interface entry of `func_name`, compiling if needed."""
    key = hashlib.sha256((_compiler_fingerprint() + ":".join(cpu_plan()) +
                          mlir_text).encode()).hexdigest()[:32]
    d = cache_dir()
    so = d / f"{key}.so"
    if not so.exists():
        with open(d / f"{key}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not so.exists():
                # Build beside the entry, then rename: readers never see a
                # partial library.
                staging = d / f"{key}.so.tmp{os.getpid()}"
                try:
                    _build(mlir_text, staging)
                    os.replace(staging, so)
                finally:
                    if staging.exists():
                        staging.unlink()
    lib = _loaded.get(so)
    if lib is None:
        lib = _loaded[so] = ctypes.CDLL(str(so))
    return getattr(lib, f"_mlir_ciface_{func_name}")


_loaded = {}
