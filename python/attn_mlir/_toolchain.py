"""Compiling attn MLIR to host shared libraries, with an on-disk cache.

attn-compile (the CPU pipeline, LLVM IR, -O3 and code generation in one
process) makes the kernel; built with LLD's libraries, as the wheel's is, it
also links the shared library, else the system C compiler does. Without
attn-compile: attn-opt --attn-lower-to-cpu-pipeline | mlir-translate | opt
-O3 | llc, then the C compiler. Libraries are cached by a hash
of the MLIR text and of the attn-opt binary, under `cache_dir()`
($ATTN_MLIR_CACHE, else $XDG_CACHE_HOME/attn_mlir, else ~/.cache/attn_mlir;
a private temporary directory, with a CacheWarning, where that cannot be
written); a file lock per entry keeps concurrent processes from compiling
the same kernel twice or reading a half-written one.

A cache entry is never trusted as it is: `{key}.so` has a sidecar
`{key}.json` with its size and sha256, both written atomically and fsynced,
and a library is checked against it before its first dlopen in a process
(dlopen of a truncated library dies of SIGBUS, not an exception). A missing,
damaged or unverifiable entry is discarded with a CacheWarning and rebuilt.
`build_locked` and `publish` are that lock-check-build-rename protocol, for
these libraries and for the GPU bundles of `_gpu` alike.
"""

import ctypes
import fcntl
import hashlib
import json
import os
import shutil
import stat
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

from . import _log

# attn-opt of the development checkout's build (python/attn_mlir/ -> the
# repository root -> build/bin): the last place attn-opt is looked for, after
# $ATTN_MLIR_OPT and PATH. The one path relative to the checkout; nothing
# else the package needs lives outside it (the GPU runtime's source is
# package data, _native/).
# The wheel's own compiler (built and installed there by pyproject.toml's
# CMake options, docs/wheel.md): statically linked, looked for first.
_PACKAGE_BIN = Path(__file__).resolve().parent / "_bin"
_CHECKOUT_ATTN_OPT = (Path(__file__).resolve().parents[2] / "build" / "bin" /
                      "attn-opt")
_LLVM_BIN = Path(os.environ.get("ATTN_MLIR_LLVM_BIN", "/usr/lib/llvm-22/bin"))


class CompileError(RuntimeError):
    """attn-opt or the LLVM toolchain rejected a kernel."""


class CacheWarning(UserWarning):
    """A damaged cache entry (library or GPU bundle) was discarded and is
    being rebuilt, or the cache directory could not be used and a
    temporary one is used instead."""


def _executable(path):
    return bool(path) and Path(path).is_file() and os.access(path, os.X_OK)


def _find(tool, first=(), last=()):
    """`tool`: the first executable of `first`, else on PATH, else the first
    of `last`."""
    for c in first:
        if _executable(c):
            return str(c)
    found = shutil.which(tool)
    if found:
        return found
    for c in last:
        if _executable(c):
            return str(c)
    raise CompileError(
        f"cannot find {tool!r}: build the project first (scripts/build.sh) or "
        f"set ATTN_MLIR_OPT / ATTN_MLIR_LLVM_BIN")


def attn_opt():
    """$ATTN_MLIR_OPT, else the one installed with the package (the wheel's
    attn_mlir/_bin), else attn-opt on PATH, else the development checkout's
    build/bin/attn-opt."""
    return _find("attn-opt", first=[os.environ.get("ATTN_MLIR_OPT"),
                                    _PACKAGE_BIN / "attn-opt"],
                 last=[_CHECKOUT_ATTN_OPT])


def _llvm_tool(name):
    return _find(name, first=[_LLVM_BIN / name])


def attn_compile():
    """attn-compile beside attn-opt (same build or install), or None: it makes
    a CPU kernel's object file in one process, where the fallback runs
    attn-opt, mlir-translate, opt and llc."""
    try:
        c = Path(attn_opt()).with_name("attn-compile")
    except CompileError:
        return None
    return str(c) if _executable(c) else None


def cpu_toolchain_problem():
    """Why CPU kernels cannot be built here (the CompileError's message),
    or None: attn-compile beside attn-opt, or attn-opt with mlir-translate,
    opt and llc. (A GPU machine given attn-opt alone compiles GPU kernels
    but no CPU ones.)"""
    try:
        attn_opt()
        if attn_compile():
            return None
        for name in ("mlir-translate", "opt", "llc"):
            _llvm_tool(name)
    except CompileError as e:
        return str(e)
    return None


def _file_hash(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


_compiler_hash = None


def _compiler_fingerprint():
    global _compiler_hash
    if _compiler_hash is None:
        _compiler_hash = _file_hash(attn_opt())
    return _compiler_hash


_cpu_hash = None


def _cpu_compiler_fingerprint():
    """What makes CPU kernels: attn-opt, and attn-compile where it is used."""
    global _cpu_hash
    if _cpu_hash is None:
        tool = attn_compile()
        _cpu_hash = _compiler_fingerprint() + (
            "+" + _file_hash(tool) if tool else "")
    return _cpu_hash


CACHE_ENV = "ATTN_MLIR_CACHE"

# (ATTN_MLIR_CACHE, XDG_CACHE_HOME, HOME) -> (directory, how it was chosen):
# resolved (and the fallback warned about) once per setting, and repeated
# calls cost three lookups, not a mkdir.
_cache_dirs = {}


def cache_location():
    """(cache directory, where it came from: "ATTN_MLIR_CACHE",
    "XDG_CACHE_HOME", "~/.cache" or "temporary fallback")."""
    env = os.environ
    key = (env.get(CACHE_ENV), env.get("XDG_CACHE_HOME"), env.get("HOME"))
    found = _cache_dirs.get(key)
    if found is None:
        found = _cache_dirs[key] = _choose_cache_dir(key[0], key[1])
    return found


def cache_dir():
    """$ATTN_MLIR_CACHE, else $XDG_CACHE_HOME/attn_mlir (an absolute
    XDG_CACHE_HOME only, as the XDG spec says), else ~/.cache/attn_mlir;
    where the default cannot be created or written (a read-only or missing
    home), a private directory under the temporary directory, with one
    CacheWarning. An ATTN_MLIR_CACHE that cannot be created is an error:
    it was asked for."""
    return cache_location()[0]


def _choose_cache_dir(override, xdg):
    if override:
        d = Path(override)
        d.mkdir(parents=True, exist_ok=True)
        return d, CACHE_ENV
    if xdg and os.path.isabs(xdg):
        d, source = Path(xdg) / "attn_mlir", "XDG_CACHE_HOME"
    else:
        try:
            d, source = Path.home() / ".cache" / "attn_mlir", "~/.cache"
        except RuntimeError:   # no HOME and no passwd entry
            d, source = None, "~/.cache"
    problem = "there is no home directory" if d is None else _unusable(d)
    if problem is None:
        return d, source
    fallback = _private_temp_dir()
    warnings.warn(f"attn_mlir cache: cannot use {d or source} ({problem}); "
                  f"caching kernels in {fallback} instead (set {CACHE_ENV} "
                  f"to choose)", CacheWarning, stacklevel=4)
    return fallback, "temporary fallback"


def _unusable(d):
    """Why directory `d` cannot hold the cache (None: it can)."""
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return f"{type(e).__name__}: {e.strerror or e}"
    if not os.access(d, os.W_OK | os.X_OK):
        return "it is not writable"
    return None


def _private_temp_dir():
    """{tempdir}/attn_mlir-{uid}, if it is this user's own directory that
    no one else can write (cached libraries are dlopen'd: a directory
    another user made could hold planted ones), else a fresh mkdtemp."""
    d = Path(tempfile.gettempdir()) / f"attn_mlir-{os.getuid()}"
    try:
        d.mkdir(mode=0o700, exist_ok=True)
        st = d.lstat()
        if (stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
                and not st.st_mode & 0o022 and os.access(d, os.W_OK)):
            return d
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix="attn_mlir-"))


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
        tool = attn_compile()
        if tool:
            plan = [f"--plan-target={target}"] + \
                ([f"--plan-chip={chip}"] if chip else [])
            if _links_itself(tool):
                try:
                    _run([tool, str(src), *plan, "--shared", "-o",
                          str(out_so)], "attn-compile")
                    return
                except CompileError as e:
                    # Only a link failure (a libcall the host's C libraries
                    # lack) falls back to the C compiler.
                    if "attn-compile: linking" not in str(e) or \
                            not shutil.which(os.environ.get("CC", "cc")):
                        raise
            _run([tool, str(src), *plan, "-o", str(tmp / "kernel.o")],
                 "attn-compile")
            _link(tmp / "kernel.o", out_so)
            return
        _run([attn_opt(), str(src),
              f"--attn-lower-to-cpu-pipeline=plan-target={target} "
              f"plan-chip={chip}", "--verify-each=false",
              "-o", str(tmp / "kernel.llvm.mlir")], "attn-opt")
        _run([_llvm_tool("mlir-translate"), "--mlir-to-llvmir",
              str(tmp / "kernel.llvm.mlir"), "-o", str(tmp / "kernel.ll")],
             "mlir-translate")
        _run([_llvm_tool("opt"), "-O3", str(tmp / "kernel.ll"),
              "-o", str(tmp / "kernel.bc")], "opt")
        _run([_llvm_tool("llc"), "-O3", "-relocation-model=pic",
              "-filetype=obj", str(tmp / "kernel.bc"),
              "-o", str(tmp / "kernel.o")], "llc")
        _link(tmp / "kernel.o", out_so)


_LINKS_ITSELF = {}


def _links_itself(tool):
    """Whether attn-compile links shared libraries itself (built with LLD:
    `--can-link` exits 0), so that no C compiler is needed."""
    if tool not in _LINKS_ITSELF:
        try:
            _LINKS_ITSELF[tool] = subprocess.run(
                [tool, "--can-link"], capture_output=True,
                timeout=60).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            _LINKS_ITSELF[tool] = False
    return _LINKS_ITSELF[tool]


def _link(obj, out_so):
    cc = os.environ.get("CC", "cc")
    # -z defs: a symbol nothing provides fails here, with the linker's
    # message, not when the library is loaded.
    _run([cc, "-shared", "-Wl,-z,defs", str(obj), "-o", str(out_so), "-lm"],
         "linking")


# --- cache entries that are checked before use -------------------------------

def file_digest(path):
    """(size, sha256 hex) of a file's contents."""
    h, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()


def fsync_dir(d):
    """Makes the renames and creations in directory `d` durable."""
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_durably(path, data):
    """Writes bytes or text to `path` through a temporary file, fsync and
    rename: readers see the old contents or all of the new ones."""
    path = Path(path)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    fsync_dir(path.parent)


def sidecar(path):
    """The sidecar of a cache entry: `{name}.json` beside `{name}.so`."""
    return Path(path).with_suffix(".json")


def entry_problem(path):
    """Why the cache entry `path` must not be used (None: it matches the
    size and sha256 its sidecar recorded when it was written)."""
    path, meta = Path(path), sidecar(path)
    if not path.exists():
        return f"{path.name} is missing"
    try:
        record = json.loads(meta.read_text())
        size, digest = int(record["size"]), str(record["sha256"])
    except FileNotFoundError:
        return (f"its sidecar {meta.name} is missing (written by an older "
                f"attn_mlir, or lost)")
    except (OSError, ValueError, TypeError, KeyError) as e:
        return f"its sidecar {meta.name} is unreadable ({type(e).__name__})"
    try:
        actual = path.stat().st_size
        if actual != size:
            return f"it has {actual} bytes, its sidecar records {size}"
        if file_digest(path)[1] != digest:
            return "its sha256 differs from the one its sidecar records"
    except OSError as e:   # removed or unreadable since the check above
        return f"it cannot be read ({e.strerror or e})"
    return None


def discard_entry(path):
    for p in (Path(path), sidecar(path)):
        p.unlink(missing_ok=True)


def publish(dest, make, directory=False, before_rename=None):
    """Makes `dest`, a file or (`directory`) a directory, all at once:
    `make(staging)` writes it at a staging path beside `dest` (a file path
    that does not exist, or an empty directory); its files are fsynced,
    `before_rename(staging)` runs (a file's sidecar is written then), and
    it is renamed to `dest` and the parent directory fsynced. Readers see
    all of `dest` or none of it; a failure leaves no staging path behind.
    A file `dest` is replaced; a directory `dest` must not exist."""
    dest = Path(dest)
    if directory:
        staging = Path(tempfile.mkdtemp(prefix=dest.name + ".",
                                        dir=dest.parent))
    else:
        staging = dest.with_name(f"{dest.name}.tmp{os.getpid()}")
    try:
        make(staging)
        if directory:
            for p in staging.rglob("*"):
                if p.is_file():
                    fsync_file(p)
            fsync_dir(staging)
        else:
            fsync_file(staging)
        if before_rename is not None:
            before_rename(staging)
        os.replace(staging, dest)
        fsync_dir(dest.parent)
    finally:
        if staging.is_dir():
            shutil.rmtree(staging)
        elif staging.exists():
            staging.unlink()
    return dest


def build_locked(dest, problem, discard, build, what, redo, stacklevel=1):
    """Returns `dest`, a cache entry, once it is usable, holding the file
    lock `{dest less suffix}.lock` while it is checked and (re)built, so
    that concurrent processes build it once. `problem(dest)` is None where
    it can be used as it is, else (reason, damaged): a damaged entry is
    reported with a CacheWarning ("discarding the {what} {dest}: {reason};
    {redo}"), an absent or stale one is replaced silently; then
    `discard(dest)` removes what is there and `build(dest)` makes it anew
    (through `publish`, so a failed build leaves nothing). `stacklevel`:
    that of the warning as seen from the caller."""
    dest = Path(dest)
    # (cache_dir() made the directory once; it may have been removed since.)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        # Checked (again) under the lock: another process may have (re)built
        # the entry while this one waited, or have been half-way through
        # writing it when this one first looked.
        found = problem(dest)
        if found is None:
            return dest
        reason, damaged = found
        if damaged:
            warnings.warn(f"attn_mlir cache: discarding the {what} {dest}: "
                          f"{reason}; {redo}", CacheWarning,
                          stacklevel=stacklevel + 1)
        discard(dest)
        build(dest)
    return dest


def _write_sidecar(staging, dest):
    """Records the size and sha256 of `staging` in the sidecar of `dest`,
    the entry it becomes (before the rename: a crash in between leaves a
    sidecar without a library, which the check rejects)."""
    size, digest = file_digest(staging)
    write_durably(sidecar(dest), json.dumps(
        {"file": Path(dest).name, "size": size, "sha256": digest}))


def cached_file(path, build, what):
    """Returns `path`, a cache entry that `build(staging_path)` makes, after
    checking it against its sidecar. A missing entry is built; a damaged
    one (truncated, empty, changed bytes, no or a broken sidecar) is
    discarded with a CacheWarning naming it and the problem, then built
    again. `what` names the entry in messages ("kernel library", ...)."""
    path = Path(path)
    if entry_problem(path) is None:
        return path

    def problem(p):
        reason = entry_problem(p)
        if reason is None:
            return None
        # Nothing there at all is no damage: just not built yet.
        return reason, p.exists() or sidecar(p).exists()

    return build_locked(
        path, problem, discard_entry,
        lambda p: publish(p, build,
                          before_rename=lambda s: _write_sidecar(s, p)),
        what, "rebuilding it", stacklevel=3)


def load_kernel(mlir_text, func_name):
    """Returns the C-interface entry of `func_name`, compiling if needed."""
    key = hashlib.sha256((_cpu_compiler_fingerprint() + ":".join(cpu_plan()) +
                          mlir_text).encode()).hexdigest()[:32]
    so = cache_dir() / f"{key}.so"
    lib = _loaded.get(so)
    if lib is None:
        # Checked once per process: later calls reuse the handle.
        start, built = time.perf_counter(), []

        def build(out):
            built.append(True)
            _build(mlir_text, out)

        cached_file(so, build, "kernel library")
        lib = _loaded[so] = ctypes.CDLL(str(so))
        plan = ":".join(cpu_plan())
        _log.kernel_ready(
            mlir_text, "cpu" if plan == "cpu:" else f"cpu(plan {plan})",
            "cache miss, compiled" if built else "cache hit, loaded",
            time.perf_counter() - start, so)
    return getattr(lib, f"_mlir_ciface_{func_name}")


# Path of a library -> its ctypes handle, checked and opened in this process.
_loaded = {}
