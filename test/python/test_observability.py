"""Observability and configuration (issue 19): the "attn_mlir" logger,
`python -m attn_mlir info` / `cache`, where the cache lives, and the table
of ATTN_MLIR_* variables in docs/configuration.md."""

import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
import warnings
from pathlib import Path

import numpy as np
import pytest

import attn_mlir
from attn_mlir import CacheWarning, _gpu, _launch, _log, _toolchain, ops
from attn_mlir import __main__ as cli
from reference import needs_cpu_kernels
from test_cache_integrity import (  # noqa: F401 (nvvm: a fixture)
    MERGE_NAME, MERGE_TEXT, merge_args, nvvm)

ROOT = Path(__file__).resolve().parents[2]
SIG = hashlib.sha256(MERGE_TEXT.encode()).hexdigest()[:12]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private, empty kernel cache and empty in-process memos."""
    d = tmp_path / "cache"
    monkeypatch.setenv("ATTN_MLIR_CACHE", str(d))
    monkeypatch.delenv("ATTN_MLIR_BUNDLES", raising=False)
    monkeypatch.delenv("ATTN_MLIR_CPU_PLAN", raising=False)
    monkeypatch.setattr(_toolchain, "_loaded", {})
    monkeypatch.setattr(_gpu, "_kernels", {})
    monkeypatch.setattr(ops, "_GPU_KERNELS", {})
    return d


@pytest.fixture
def info_log(caplog):
    caplog.set_level(logging.INFO, logger="attn_mlir")
    return caplog


def lines(caplog):
    return [r.getMessage() for r in caplog.records if r.name == "attn_mlir"]


def python_env(**extra):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT / "python"), os.environ.get("PYTHONPATH", "")]))
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = str(v)
    return env


def run_python(args, **env):
    return subprocess.run([sys.executable, *args], env=python_env(**env),
                          capture_output=True, text=True, timeout=600)


def test_version_matches_pyproject():
    with open(ROOT / "pyproject.toml", "rb") as f:
        assert attn_mlir.__version__ == tomllib.load(f)["project"]["version"]


# --- the log -----------------------------------------------------------------

@needs_cpu_kernels
def test_one_line_per_compile_none_per_call(cache, info_log):
    _toolchain.load_kernel(MERGE_TEXT, MERGE_NAME)
    (so,) = cache.glob("*.so")
    assert lines(info_log) == [lines(info_log)[0]]
    line = lines(info_log)[0]
    assert re.fullmatch(
        rf"attn\.merge_states sig={SIG} chip=cpu: cache miss, compiled in "
        rf"\d+\.\d{{3}} s \({re.escape(str(so))}\)", line), line
    assert info_log.records[0].levelno == logging.INFO
    for _ in range(3):   # the handle is reused: nothing more is logged
        _toolchain.load_kernel(MERGE_TEXT, MERGE_NAME)
    assert len(lines(info_log)) == 1


@needs_cpu_kernels
def test_cache_hit_is_logged_once_per_process(cache, info_log, monkeypatch):
    _toolchain.load_kernel(MERGE_TEXT, MERGE_NAME)
    monkeypatch.setattr(_toolchain, "_loaded", {})   # as a new process
    built = []
    real = _toolchain._build
    monkeypatch.setattr(_toolchain, "_build",
                        lambda *a: built.append(a) or real(*a))
    for _ in range(3):
        _toolchain.load_kernel(MERGE_TEXT, MERGE_NAME)
    assert not built
    assert len(lines(info_log)) == 2
    assert "cache miss, compiled" in lines(info_log)[0]
    assert re.search(rf"sig={SIG} chip=cpu: cache hit, loaded in ",
                     lines(info_log)[1]), lines(info_log)


@needs_cpu_kernels
def test_cpu_plan_is_named(cache, info_log, monkeypatch):
    monkeypatch.setenv("ATTN_MLIR_CPU_PLAN", "nvvm:sm_90a")
    _toolchain.load_kernel(MERGE_TEXT, MERGE_NAME)
    assert "chip=cpu(plan nvvm:sm_90a): cache miss" in lines(info_log)[0]


def test_ops_calls_log_once(cache, info_log):
    # Through ops (the CPU or, under ATTN_MLIR_TEST_DEVICE=cuda, the GPU).
    acc, lse = merge_args()
    for _ in range(3):
        ops.merge_states(acc, np.zeros((3, 2, 16), np.float32),
                         segment_lse=lse)
    assert len(lines(info_log)) == 1, lines(info_log)
    assert lines(info_log)[0].startswith(f"attn.merge_states sig={SIG} ")


@needs_cpu_kernels
def test_nothing_is_formatted_when_disabled(cache, monkeypatch):
    # Off (the default: WARNING from the root logger), the first load does
    # no logging work at all.
    def boom(text):
        raise AssertionError("formatted a log line that nobody reads")

    monkeypatch.setattr(_log, "specialization", boom)
    level = _log.logger.level
    _log.logger.setLevel(logging.NOTSET)
    try:
        assert not _log.logger.isEnabledFor(logging.INFO)
        _toolchain.load_kernel(MERGE_TEXT, MERGE_NAME)
    finally:
        _log.logger.setLevel(level)
    assert len(list(cache.glob("*.so"))) == 1


def test_gpu_bundles_are_logged(nvvm, cache, info_log, tmp_path,  # noqa: F811
                                monkeypatch):
    bundle = _gpu.bundle_for(MERGE_TEXT, "sm_80")
    _gpu.bundle_for(MERGE_TEXT, "sm_80")
    aot = tmp_path / "aot"
    shutil.copytree(bundle, aot / bundle.name)
    monkeypatch.setenv("ATTN_MLIR_CACHE", str(tmp_path / "other"))
    monkeypatch.setenv("ATTN_MLIR_BUNDLES", str(aot))
    _gpu.bundle_for(MERGE_TEXT, "sm_80")
    got = lines(info_log)
    assert len(got) == 3, got
    prefix = f"attn.merge_states sig={SIG} chip=sm_80: "
    assert got[0].startswith(prefix + "cache miss, compiled in ")
    assert got[0].endswith(f"({bundle})")
    assert got[1].startswith(prefix + "cache hit in ")
    assert got[2].startswith(prefix + "AOT bundle hit in ")
    assert got[2].endswith(f"({aot / bundle.name})")


MERGE_SCRIPT = f"""\
import sys
import numpy as np
sys.path.insert(0, {str(Path(__file__).parent)!r})
from attn_mlir import ops
from test_cache_integrity import merge_args
acc, lse = merge_args()
for _ in range(3):
    ops.merge_states(acc, np.zeros((3, 2, 16), np.float32), segment_lse=lse)
"""


@needs_cpu_kernels
def test_log_env_prints_to_stderr(tmp_path):
    proc = run_python(["-c", MERGE_SCRIPT], ATTN_MLIR_CACHE=tmp_path,
                      ATTN_MLIR_LOG="info", ATTN_MLIR_CPU_PLAN=None)
    assert proc.returncode == 0, proc.stderr
    got = re.findall(r"^attn_mlir INFO: attn\.merge_states sig=(\w+) "
                     r"chip=cpu: cache miss", proc.stderr, re.M)
    assert got == [SIG], proc.stderr
    quiet = run_python(["-c", MERGE_SCRIPT], ATTN_MLIR_CACHE=tmp_path,
                       ATTN_MLIR_LOG=None, ATTN_MLIR_CPU_PLAN=None)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""


def test_silent_by_default():
    # The NullHandler: without it logging's last resort prints warnings.
    proc = run_python(["-c", "import logging, attn_mlir; "
                       "logging.getLogger('attn_mlir').warning('heard')"],
                      ATTN_MLIR_LOG=None)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert any(isinstance(h, logging.NullHandler)
               for h in _log.logger.handlers)


def test_log_env_levels():
    proc = run_python(["-c", "import logging, attn_mlir; "
                       "lg = logging.getLogger('attn_mlir'); "
                       "lg.info('not shown'); lg.warning('shown')"],
                      ATTN_MLIR_LOG="WARNING")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "attn_mlir WARNING: shown\n"
    bad = run_python(["-c", "import logging, attn_mlir; "
                      "print(logging.getLogger('attn_mlir').level)"],
                     ATTN_MLIR_LOG="loud")
    assert bad.returncode == 0, bad.stderr
    assert "ATTN_MLIR_LOG='loud': expected a logging level" in bad.stderr
    assert bad.stdout.strip() == "0"


# --- python -m attn_mlir -----------------------------------------------------

def fake_bundle(root, key="ab" * 12):
    (root / key).mkdir(parents=True)
    (root / key / "manifest.json").write_text("{}")


def test_info_runs(tmp_path):
    bundles = tmp_path / "bundles"
    fake_bundle(bundles)
    cache_path = tmp_path / "cache"
    proc = run_python(["-m", "attn_mlir", "info"], ATTN_MLIR_CACHE=cache_path,
                      ATTN_MLIR_BUNDLES=os.pathsep.join(
                          [str(bundles), str(tmp_path / "gone")]))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith(f"attn_mlir {attn_mlir.__version__} ")
    assert f"cache: {cache_path} (from ATTN_MLIR_CACHE): 0 kernel" in out
    assert f"compiler hash: {_toolchain._compiler_fingerprint()}\n" in out
    assert f"  attn-opt       {_toolchain.attn_opt()}\n" in out
    assert re.search(r"^chips: cpu", out, re.M), out
    assert f"  {bundles}: 1 bundles\n" in out
    assert f"  {tmp_path / 'gone'}: missing\n" in out


def test_info_names_the_xdg_cache(tmp_path):
    proc = run_python(["-m", "attn_mlir", "info"], ATTN_MLIR_CACHE=None,
                      XDG_CACHE_HOME=tmp_path / "xdg")
    assert proc.returncode == 0, proc.stderr
    assert (f"cache: {tmp_path / 'xdg' / 'attn_mlir'} (from XDG_CACHE_HOME)"
            in proc.stdout), proc.stdout


def test_info_without_compiler_or_gpu(monkeypatch, capsys, cache):
    def missing():
        raise _toolchain.CompileError("cannot find 'attn-opt'")

    monkeypatch.setattr(_toolchain, "attn_opt", missing)
    monkeypatch.setattr(_gpu, "detect_devices", lambda: ([], "no driver"))
    assert cli.main(["info"]) == 0
    out = capsys.readouterr().out
    assert "compiler hash: none (no attn-opt)" in out
    assert "  attn-opt       not found" in out
    assert "chips: cpu (no GPU: no driver)" in out


def test_detect_devices_without_a_driver(monkeypatch):
    real = _gpu.ctypes.CDLL

    def no_cuda(name, *a, **k):
        if "libcuda" in str(name):
            raise OSError("libcuda.so.1: cannot open shared object file")
        return real(name, *a, **k)

    monkeypatch.setattr(_gpu.ctypes, "CDLL", no_cuda)
    monkeypatch.setitem(sys.modules, "torch", None)   # import fails
    devices, note = _gpu.detect_devices()
    assert devices == [] and "no CUDA driver" in note


def populate(cache_path):
    """A compiled kernel, a (stand-in) bundle and a file not attn_mlir's."""
    _toolchain.load_kernel(MERGE_TEXT, MERGE_NAME)
    fake_bundle(cache_path / "gpu")
    (cache_path / "gpu" / f"{'ab' * 12}.lock").touch()
    (cache_path / "notes.txt").write_text("mine")


@needs_cpu_kernels
def test_cache_clear_empties_the_cache(cache):
    populate(cache)
    info = run_python(["-m", "attn_mlir", "cache", "info"],
                      ATTN_MLIR_CACHE=cache)
    assert info.returncode == 0, info.stderr
    assert "kernel libraries: 1\n" in info.stdout
    assert "GPU bundles: 1\n" in info.stdout
    assert "other files (left by `cache clear`): 1" in info.stdout
    proc = run_python(["-m", "attn_mlir", "cache", "clear"],
                      ATTN_MLIR_CACHE=cache)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("removed 2 cache entries (")
    assert sorted(p.name for p in cache.rglob("*")) == ["notes.txt"]
    again = run_python(["-m", "attn_mlir", "cache"], ATTN_MLIR_CACHE=cache)
    assert "kernel libraries: 0\n" in again.stdout, again.stdout


@needs_cpu_kernels
def test_cache_clear_leaves_entries_being_built(cache):
    populate(cache)
    (so,) = cache.glob("*.so")
    with open(so.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # as build_locked holds it
        removed, _, busy = cli.clear_cache(cache)
    assert (removed, busy) == (1, 1)
    assert so.exists() and so.with_suffix(".json").exists()
    assert not (cache / "gpu").exists()


@needs_cpu_kernels
def test_cleared_kernel_is_compiled_again(cache, info_log, monkeypatch):
    _toolchain.load_kernel(MERGE_TEXT, MERGE_NAME)
    cli.clear_cache(cache)
    assert not list(cache.iterdir())
    monkeypatch.setattr(_toolchain, "_loaded", {})
    _toolchain.load_kernel(MERGE_TEXT, MERGE_NAME)
    assert ["cache miss" in line for line in lines(info_log)] == [True, True]


# --- where the cache is ------------------------------------------------------

@pytest.fixture
def home(tmp_path, monkeypatch):
    """No ATTN_MLIR_CACHE or XDG_CACHE_HOME, HOME and the temporary
    directory under tmp_path, no cache directory resolved yet."""
    monkeypatch.delenv("ATTN_MLIR_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    monkeypatch.setattr(_toolchain, "_cache_dirs", {})
    monkeypatch.setattr(_toolchain, "_loaded", {})
    return tmp_path / "home"


def resolve_quietly():
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        return _toolchain.cache_location()


def test_default_is_home_cache(home):
    assert resolve_quietly() == (home / ".cache" / "attn_mlir", "~/.cache")
    assert (home / ".cache" / "attn_mlir").is_dir()


@needs_cpu_kernels
def test_xdg_cache_home(home, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert resolve_quietly() == (tmp_path / "xdg" / "attn_mlir",
                                 "XDG_CACHE_HOME")
    _toolchain.load_kernel(MERGE_TEXT, MERGE_NAME)
    assert len(list((tmp_path / "xdg" / "attn_mlir").glob("*.so"))) == 1
    assert not (home / ".cache").exists()


def test_relative_xdg_cache_home_is_ignored(home, monkeypatch):
    # The XDG spec: a relative path is invalid and is ignored.
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    assert resolve_quietly() == (home / ".cache" / "attn_mlir", "~/.cache")


def test_attn_mlir_cache_overrides_xdg(home, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("ATTN_MLIR_CACHE", str(tmp_path / "mine"))
    assert resolve_quietly() == (tmp_path / "mine", "ATTN_MLIR_CACHE")
    assert not (tmp_path / "xdg").exists()


def fallback(tmp_path):
    return tmp_path / "tmp" / f"attn_mlir-{os.getuid()}"


def check_falls_back(tmp_path, unusable):
    with pytest.warns(CacheWarning) as caught:
        d, source = _toolchain.cache_location()
    assert (d, source) == (fallback(tmp_path), "temporary fallback")
    (w,) = caught
    assert re.search(rf"cannot use {re.escape(str(unusable))} \(.+\); "
                     rf"caching kernels in {re.escape(str(d))} instead",
                     str(w.message)), str(w.message)
    assert d.is_dir() and (d.stat().st_mode & 0o777) == 0o700
    # Warned once: later calls (and compiles) use it silently.
    assert resolve_quietly() == (d, source)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        _toolchain.load_kernel(MERGE_TEXT, MERGE_NAME)
    assert len(list(d.glob("*.so"))) == 1


@needs_cpu_kernels
def test_home_that_cannot_be_created_falls_back(home, tmp_path, monkeypatch):
    # HOME under a regular file: mkdir fails even for root.
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("HOME", str(tmp_path / "file" / "home"))
    check_falls_back(tmp_path, tmp_path / "file" / "home" / ".cache" /
                     "attn_mlir")


@needs_cpu_kernels
def test_xdg_cache_that_cannot_be_created_falls_back(home, tmp_path,
                                                     monkeypatch):
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "file"))
    check_falls_back(tmp_path, tmp_path / "file" / "attn_mlir")


def test_read_only_home_falls_back(home, tmp_path):
    home.mkdir()
    home.chmod(0o555)
    try:
        if os.access(home, os.W_OK):
            pytest.skip("running as root: a read-only mode does not stop "
                        "writes (test_home_that_cannot_be_created_falls_back "
                        "covers the fallback)")
        check_falls_back(tmp_path, home / ".cache" / "attn_mlir")
    finally:
        home.chmod(0o755)


def test_no_home_at_all_falls_back(home, tmp_path, monkeypatch):
    def no_home():
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.setattr(Path, "home", no_home)
    with pytest.warns(CacheWarning, match="there is no home directory"):
        assert _toolchain.cache_dir() == fallback(tmp_path)


def test_fallback_must_be_private(home, tmp_path, monkeypatch):
    # A shared one (another user could plant libraries that get dlopen'd)
    # is not used: a fresh private directory is.
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("HOME", str(tmp_path / "file"))
    shared = fallback(tmp_path)
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.warns(CacheWarning):
        d = _toolchain.cache_dir()
    assert d != shared and d.parent == tmp_path / "tmp"
    assert d.name.startswith("attn_mlir-")
    assert (d.stat().st_mode & 0o777) == 0o700


@needs_cpu_kernels
def test_cache_dir_removed_while_running(cache):
    # Resolved once per process; an entry is still built after the
    # directory is removed behind its back.
    assert _toolchain.cache_dir() == cache
    shutil.rmtree(cache)
    _toolchain.load_kernel(MERGE_TEXT, MERGE_NAME)
    assert len(list(cache.glob("*.so"))) == 1


# --- docs/configuration.md ---------------------------------------------------

def test_every_variable_is_documented():
    doc = (ROOT / "docs" / "configuration.md").read_text()
    documented = set(re.findall(r"^\| `(ATTN_MLIR_\w+)`", doc, re.M))
    used = set()
    for d in ("python", "bench", "test", "scripts"):
        for path in (ROOT / d).rglob("*"):
            if path.suffix in (".py", ".sh") and path.is_file():
                used |= set(re.findall(r"ATTN_MLIR_[A-Z0-9_]*[A-Z0-9]",
                                       path.read_text(errors="replace")))
    assert used, "found no ATTN_MLIR_ variables"
    assert sorted(used - documented) == []
    assert sorted(documented - used) == []
    for page in ("README.md", "docs/runtime.md"):
        assert "configuration.md" in (ROOT / page).read_text(), page


# --- kernel symbols ---------------------------------------------------------


def test_kernel_symbols_name_the_specialization(tmp_path, monkeypatch):
    """Each specialization's function, and so its kernel symbol, says what it
    computes (nsys/ncu list kernels by it), not `kernel`."""
    rec = tmp_path / "rec.jsonl"
    monkeypatch.setenv("ATTN_MLIR_RECORD", str(rec))
    monkeypatch.setenv("ATTN_MLIR_DRY_RUN", "1")
    from ml_dtypes import bfloat16
    q = np.zeros((6, 8, 128), bfloat16)
    kv = np.zeros((6, 2, 128), bfloat16)
    cu = np.array([0, 6], np.int32)
    ops.flash(q, kv, kv, cu, cu, np.zeros_like(q), scale=0.1, causal=True,
              lse=np.zeros((6, 8), np.float32))
    kc = np.zeros((4, 16, 2, 64), np.float16)
    ops.unified(np.zeros((3, 8, 64), np.float16), kc, kc,
                np.zeros((1, 4), np.int32), np.array([0, 3], np.int32),
                np.array([40], np.int32), np.zeros((3, 8, 64), np.float16),
                scale=0.1, sliding_window=16, softcap=30.0)
    names = [re.search(r"func\.func @(\w+)\(", json.loads(line)["mlir"])[1]
             for line in rec.read_text().splitlines()]
    assert names == ["attn_flash_bf16_d128_h8_gqa4_causal_lse",
                     "attn_unified_f16_d64_h8_gqa4_window_softcap"]


def test_gpu_kernel_carries_the_symbol(nvvm, tmp_path):  # noqa: F811
    """The NVIDIA bundle's entry point is the specialization's name."""
    bundle = _gpu.compile_bundle(MERGE_TEXT, "sm_80", tmp_path / "b")
    ptx = "".join(p.read_text() for p in bundle.glob("*.ptx"))
    assert f".entry {MERGE_NAME}(" in ptx
    assert ".entry kernel(" not in ptx


@pytest.mark.parametrize("setting", ["1", "0"])
def test_nvtx_range_around_gpu_launches(monkeypatch, setting):
    """ATTN_MLIR_NVTX=1 wraps a GPU call's launches in an NVTX range named
    for its kernel; unset or 0, no range. (The launch is faked: this runs
    without a GPU.)"""
    torch = pytest.importorskip("torch")
    events = []
    monkeypatch.setenv("ATTN_MLIR_NVTX", setting)
    monkeypatch.setattr(torch.cuda.nvtx, "range_push",
                        lambda name: events.append(("push", name)))
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop",
                        lambda: events.append(("pop",)))
    monkeypatch.setattr(_launch, "_current_stream", lambda torch, dev: 0)
    monkeypatch.setattr(_gpu, "launch",
                        lambda kernel, args, stream, backend:
                        events.append(("launch",)))
    c = ops._Call("flash")
    c.params = [("%q", "memref<?x8x128xbf16>", "mem", None),
                ("%k", "memref<?x2x128xbf16>", "mem", None)]
    c.attrs = ["causal"]
    c.device = torch.device("cuda", 0)
    text = c.text()

    class Kernel:
        record = {"params": []}
    monkeypatch.setitem(ops._GPU_KERNELS, (text, 0), [Kernel(), Kernel()])
    c._run_gpu(text)
    name = "attn_flash_bf16_d128_h8_gqa4_causal"
    if setting == "1":
        assert events == [("push", name), ("launch",), ("launch",), ("pop",)]
    else:
        assert events == [("launch",), ("launch",)]
