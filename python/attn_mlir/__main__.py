"""attn_mlir from the command line.

    python -m attn_mlir info          # version, toolchain, GPUs, cache, bundles
    python -m attn_mlir cache info    # what the kernel cache holds
    python -m attn_mlir cache clear   # empty it

(`python -m attn_mlir.aot` prepares GPU bundles ahead of time.)
"""

import argparse
import fcntl
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from . import __version__, _gpu, _log, _toolchain

# What attn_mlir writes in its cache, by name (the only files `cache clear`
# removes: ATTN_MLIR_CACHE may point at a directory that holds others).
# Group 1 names the entry, whose lock is `{group 1}.lock` beside it.
# Kernel libraries, the GPU runtime: {key}.so, its sidecar .json and .lock,
# and their staging files (.tmp{pid}).
_LIBRARY = re.compile(r"([0-9a-f]{32}|libattn_gpu_runtime-[0-9a-f]{16})"
                      r"\.(?:so|json|lock)(?:\.tmp\d+)?")
# gpu/: bundle directories {key}, their locks and staging directories.
_BUNDLE = re.compile(r"([0-9a-f]{24})(?:\..+)?")


def _entries(root):
    """{lock path: [paths]}: the cache entries under `root`, each with its
    files (its lock among them when it exists)."""
    groups = {}
    for base, pattern in ((root, _LIBRARY), (root / "gpu", _BUNDLE)):
        if not base.is_dir():
            continue
        for p in sorted(base.iterdir()):
            m = pattern.fullmatch(p.name)
            if m:
                groups.setdefault(base / f"{m.group(1)}.lock", []).append(p)
    return groups


def _size(path):
    if path.is_dir() and not path.is_symlink():
        return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file())
    return path.lstat().st_size


def _human(n):
    for unit in ("bytes", "KiB", "MiB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def cache_summary(root):
    """Counts and size of what attn_mlir keeps under cache directory `root`,
    and the number of other files it leaves alone."""
    groups = _entries(root)
    files = [p for paths in groups.values() for p in paths]
    known = set(files)
    others = 0
    if root.is_dir():
        others += sum(1 for p in root.iterdir()
                      if p not in known and p.name != "gpu")
        if (root / "gpu").is_dir():
            others += sum(1 for p in (root / "gpu").iterdir()
                          if p not in known)
    return {
        "kernels": sum(1 for p in files if _LIBRARY.fullmatch(p.name)
                       and p.suffix == ".so"
                       and not p.name.startswith("libattn_gpu_runtime")),
        "runtimes": sum(1 for p in files if p.suffix == ".so"
                        and p.name.startswith("libattn_gpu_runtime")),
        "bundles": sum(1 for p in files if (p / "manifest.json").is_file()),
        "bytes": sum(_size(p) for p in files),
        "others": others,
    }


def clear_cache(root):
    """Removes attn_mlir's entries under `root`, each under its lock: an
    entry another process is building is left (counted in `busy`).
    Returns (entries removed, bytes freed, busy)."""
    removed = freed = busy = 0
    for lock, paths in _entries(root).items():
        with open(lock, "a") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                busy += 1
                continue
            entry = [p for p in paths if p != lock]
            for p in entry:
                freed += _size(p)
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                else:
                    p.unlink(missing_ok=True)
            # Unlinked while held: a process waiting on it builds afresh.
            lock.unlink(missing_ok=True)
        removed += bool(entry)
    gpu = root / "gpu"
    if gpu.is_dir() and not any(gpu.iterdir()):
        gpu.rmdir()
    return removed, freed, busy


def _tool(find):
    try:
        return find()
    except _toolchain.CompileError:
        return None


def _backends(opt):
    """The attn-opt pipelines this attn-opt was built with."""
    try:
        text = subprocess.run([opt, "--help"], capture_output=True,
                              text=True, timeout=60).stdout
    except (OSError, subprocess.SubprocessError):
        return "?"
    found = re.findall(r"attn-lower-to-(\w+)-pipeline", text)
    return ", ".join(dict.fromkeys(found)) or "none"


def _lld():
    llvm = _toolchain._LLVM_BIN / "ld.lld"
    return str(llvm) if _toolchain._executable(llvm) else shutil.which("ld.lld")


def info():
    out = [f"attn_mlir {__version__} ({Path(__file__).parent}; Python "
           f"{sys.version.split()[0]})"]
    opt = _tool(_toolchain.attn_opt)
    fingerprint = _tool(_toolchain._compiler_fingerprint) if opt else None
    out.append(f"compiler hash: {fingerprint or 'none (no attn-opt)'}")

    def compiler(var, default):
        name = os.environ.get(var, default)
        return shutil.which(name) or f"not found ({var}={name})"

    ptxas = _gpu._ptxas()
    tools = [
        ("attn-opt", opt or "not found (ATTN_MLIR_OPT, PATH, build/bin)"),
        *[(t, _tool(lambda t=t: _toolchain._llvm_tool(t)) or
           f"not found (ATTN_MLIR_LLVM_BIN={_toolchain._LLVM_BIN}, PATH)")
          for t in ("mlir-translate", "opt", "llc")],
        ("cc", compiler("CC", "cc")),
        ("c++", compiler("CXX", "c++")),
        ("ptxas", ptxas or "not found (NVIDIA bundles carry PTX, which "
         "the driver compiles)"),
        ("ld.lld", _lld() or "not found"),
    ]
    out.append("toolchain:")
    out += [f"  {name:<15}{where}" for name, where in tools]
    out.append(f"backends: {_backends(opt) if opt else 'none (no attn-opt)'}")
    plan = ":".join(_toolchain.cpu_plan())
    out.append(f"CPU plan: {plan.rstrip(':')}")
    devices, note = _gpu.detect_devices()
    out.append("chips: cpu" + "".join(f", {chip} (device {i}: {name})"
                                       for i, name, chip in devices)
               + (f" (no GPU: {note})" if note else ""))
    root, source = _toolchain.cache_location()
    s = cache_summary(root)
    out.append(f"cache: {root} (from {source}): {s['kernels']} kernel "
               f"libraries, {s['bundles']} GPU bundles, {_human(s['bytes'])}")
    dirs = [Path(p) for p in
            os.environ.get(_gpu.BUNDLES_ENV, "").split(os.pathsep) if p]
    out.append(f"bundles ({_gpu.BUNDLES_ENV}): " + ("not set" if not dirs
                                                    else ""))
    for d in dirs:
        count = (sum(1 for p in d.iterdir() if (p / "manifest.json").is_file())
                 if d.is_dir() else None)
        out.append(f"  {d}: " + ("missing" if count is None
                                 else f"{count} bundles"))
    level = _log.logger.getEffectiveLevel()
    out.append(f"log: {_log.LOG_ENV}={os.environ.get(_log.LOG_ENV, '')!r}, "
               f"attn_mlir logger at "
               f"{_log.logging.getLevelName(level)}")
    env = sorted((k, v) for k, v in os.environ.items()
                 if k.startswith("ATTN_MLIR_"))
    out.append("environment: " + (", ".join(f"{k}={v}" for k, v in env)
                                  or "no ATTN_MLIR_* variable set"))
    print("\n".join(out))
    return 0


def cache(action):
    root, source = _toolchain.cache_location()
    if action == "clear":
        removed, freed, busy = clear_cache(root)
        print(f"removed {removed} cache entries ({_human(freed)}) from {root}"
              + (f"; {busy} being built by another process, left"
                 if busy else ""))
        return 0
    s = cache_summary(root)
    print(f"cache: {root} (from {source})\n"
          f"  kernel libraries: {s['kernels']}\n"
          f"  GPU runtime libraries: {s['runtimes']}\n"
          f"  GPU bundles: {s['bundles']}\n"
          f"  size: {_human(s['bytes'])}\n"
          f"  other files (left by `cache clear`): {s['others']}")
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="python -m attn_mlir", description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="version, toolchain, GPUs, cache, bundles")
    c = sub.add_parser("cache", help="the kernel cache")
    c.add_argument("action", choices=("info", "clear"), nargs="?",
                   default="info")
    args = ap.parse_args(argv)
    if args.command == "info":
        return info()
    return cache(args.action)


if __name__ == "__main__":
    sys.exit(main())
