"""Cache entries are checked before use (issue 14, "Reliability").

A kernel library, the GPU runtime library and a GPU bundle each record the
size and sha256 of what was written (a sidecar `{key}.json`, the bundle's
manifest). A truncated, empty, changed or unverifiable entry is discarded
and rebuilt with a CacheWarning where it can be rebuilt, and is an error
naming it where it cannot (a prebuilt bundle on a machine without attn-opt):
never SIGBUS/SIGSEGV in dlopen or the driver.

The damaged libraries are loaded in a subprocess: without the checks that
process would die of a signal, which fails the test instead of pytest.
"""

import fcntl
import hashlib
import json
import os
import re
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

from attn_mlir import CacheWarning, _gpu, _toolchain, aot, ops
from reference import needs_cpu_kernels

ROOT = Path(__file__).resolve().parents[2]

# The specialization ops.merge_states builds for `merge_args` (checked by
# test_merge_text): the cheapest kernel to compile, on the CPU and for GPUs.
MERGE_NAME = "attn_merge_states_f32_d16_h2_lse"  # the kernel's symbol
MERGE_TEXT = "func.func @" + MERGE_NAME + """\
(%partial: memref<?x2x?x16xf32>, %segment_lse: memref<?x2x?xf32>, %out: memref<?x2x16xf32>) {
  attn.merge_states partial(%partial : memref<?x2x?x16xf32>) segment_lse(%segment_lse : memref<?x2x?xf32>) out(%out : memref<?x2x16xf32>)
  return
}
"""
CHIP = "sm_80"


def merge_args():
    rng = np.random.default_rng(7)
    acc = rng.standard_normal((3, 2, 4, 16)).astype(np.float32)
    lse = rng.standard_normal((3, 2, 4)).astype(np.float32)
    return acc, lse


def merge_reference(acc, lse):
    w = np.exp(lse.astype(np.float64))
    w /= w.sum(axis=2, keepdims=True)
    return (w[..., None] * acc).sum(axis=2)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private, empty kernel cache and empty in-process memos."""
    d = tmp_path / "cache"
    monkeypatch.setenv("ATTN_MLIR_CACHE", str(d))
    monkeypatch.delenv("ATTN_MLIR_BUNDLES", raising=False)
    monkeypatch.setattr(_toolchain, "_loaded", {})
    monkeypatch.setattr(_gpu, "_kernels", {})
    return d


# --- damage ------------------------------------------------------------------

def truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def empty(path):
    path.write_bytes(b"")


def flip(path):
    data = bytearray(path.read_bytes())
    for i in range(len(data) // 2, len(data) // 2 + 64):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def remove(path):
    path.unlink()


def garbage(path):
    path.write_text('{"size": 12, "sha2')


# --- CPU kernel libraries ----------------------------------------------------

# (damage, file it applies to, words of the warning's reason)
LIBRARY_DAMAGE = {
    "truncated": (truncate, "so", r"has \d+ bytes, its sidecar records \d+"),
    "empty": (empty, "so", r"has 0 bytes, its sidecar records"),
    "flipped": (flip, "so", "sha256 differs"),
    "library missing": (remove, "so", r"\.so is missing"),
    "sidecar missing": (remove, "json", r"sidecar \S+\.json is missing"),
    "sidecar garbage": (garbage, "json", r"sidecar \S+\.json is unreadable"),
}

SCRIPT = """\
import sys
import numpy as np
from attn_mlir import ops
sys.path.insert(0, {tests!r})
from test_cache_integrity import merge_args
acc, lse = merge_args()
out = np.full((3, 2, 16), np.nan, np.float32)
ops.merge_states(acc, out, segment_lse=lse)
np.save(sys.argv[1], out)
"""


def run_merge_in_subprocess(cache_dir, out_file):
    env = dict(os.environ, ATTN_MLIR_CACHE=str(cache_dir),
               PYTHONPATH=os.pathsep.join(
                   [str(ROOT / "python"), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, "-c",
         SCRIPT.format(tests=str(Path(__file__).parent)), str(out_file)],
        env=env, capture_output=True, text=True, timeout=600)


def compile_merge(cache, tmp_path):
    """Runs merge_states in a subprocess, compiling it into `cache`; returns
    its output and the library's path. (A subprocess also under
    ATTN_MLIR_TEST_DEVICE=cuda, whose conftest sends ops to the GPU.)"""
    proc = run_merge_in_subprocess(cache, tmp_path / "first.npy")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "CacheWarning" not in proc.stderr, proc.stderr  # a new entry: none
    out = np.load(tmp_path / "first.npy")
    np.testing.assert_allclose(out, merge_reference(*merge_args()),
                               rtol=1e-5, atol=1e-6)
    (so,) = cache.glob("*.so")
    return out, so


def test_merge_text(monkeypatch):
    # MERGE_TEXT is the specialization merge_states runs (the GPU tests
    # compile it).
    seen = []
    monkeypatch.setattr(ops._Call, "run", lambda call: seen.append(call.text()))
    acc, lse = merge_args()
    ops.merge_states(acc, np.zeros((3, 2, 16), np.float32), segment_lse=lse)
    assert seen == [MERGE_TEXT]


@needs_cpu_kernels
def test_library_has_sidecar(cache, tmp_path):
    _, so = compile_merge(cache, tmp_path)
    record = json.loads(so.with_suffix(".json").read_text())
    assert (record["size"], record["sha256"]) == _toolchain.file_digest(so)
    assert _toolchain.entry_problem(so) is None


@pytest.mark.parametrize("kind", LIBRARY_DAMAGE)
@needs_cpu_kernels
def test_damaged_library_is_rebuilt(cache, tmp_path, kind):
    expected, so = compile_merge(cache, tmp_path)
    damage, which, reason = LIBRARY_DAMAGE[kind]
    damage(so.with_suffix("." + which))
    assert _toolchain.entry_problem(so) is not None
    proc = run_merge_in_subprocess(cache, tmp_path / "out.npy")
    assert proc.returncode == 0, (
        f"a process using the {kind} entry failed (rc {proc.returncode}):\n"
        f"{proc.stderr[-3000:]}")
    assert "CacheWarning" in proc.stderr, proc.stderr
    warning = next(line for line in proc.stderr.splitlines()
                   if "CacheWarning" in line)
    assert str(so) in warning, warning
    assert re.search(reason, warning), warning
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), expected)
    # Rebuilt: library and sidecar agree again, and no one is left half-made.
    assert _toolchain.entry_problem(so) is None
    assert so.stat().st_size > 0
    assert not list(cache.glob("*.tmp*"))


@needs_cpu_kernels
def test_intact_library_is_reused(cache, tmp_path):
    expected, so = compile_merge(cache, tmp_path)
    inode = so.stat().st_ino
    proc = run_merge_in_subprocess(cache, tmp_path / "out.npy")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "CacheWarning" not in proc.stderr, proc.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), expected)
    assert so.stat().st_ino == inode   # not rebuilt


@needs_cpu_kernels
def test_library_checked_once_per_process(cache, tmp_path, monkeypatch):
    # The hash is computed before a library's first dlopen in a process;
    # later calls reuse the handle and touch no file.
    _, so = compile_merge(cache, tmp_path)
    hashed = []
    real = _toolchain.file_digest
    monkeypatch.setattr(_toolchain, "file_digest",
                        lambda p: hashed.append(p) or real(p))
    _toolchain.load_kernel(MERGE_TEXT, MERGE_NAME)
    assert hashed == [so]
    for _ in range(3):
        _toolchain.load_kernel(MERGE_TEXT, MERGE_NAME)
    assert hashed == [so]


def test_entry_rechecked_under_lock(tmp_path, monkeypatch):
    # A process that finds no entry and waits for the lock must use the one
    # the lock's holder wrote, not build (or discard) it again.
    path = tmp_path / "entry.so"
    first_check = threading.Event()
    real = _toolchain.entry_problem

    def entry_problem(p):
        problem = real(p)
        first_check.set()
        return problem
    monkeypatch.setattr(_toolchain, "entry_problem", entry_problem)
    builds, result = [], []
    with open(path.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # another process, building
        waiter = threading.Thread(target=lambda: result.append(
            _toolchain.cached_file(path, builds.append, "test entry")))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            waiter.start()
            assert first_check.wait(60)
            # What the lock holder writes before it releases the lock.
            path.write_bytes(b"\x7fELF built by the lock holder")
            size, digest = _toolchain.file_digest(path)
            path.with_suffix(".json").write_text(
                json.dumps({"size": size, "sha256": digest}))
            fcntl.flock(lock, fcntl.LOCK_UN)
            waiter.join(60)
    assert result == [path]
    assert builds == []
    assert path.read_bytes() == b"\x7fELF built by the lock holder"
    assert not [w for w in caught if issubclass(w.category, CacheWarning)]


def test_failed_build_leaves_no_entry(tmp_path):
    path = tmp_path / "entry.so"

    def build(out):
        Path(out).write_bytes(b"half")
        raise _toolchain.CompileError("llc failed")
    with pytest.raises(_toolchain.CompileError, match="llc failed"):
        _toolchain.cached_file(path, build, "test entry")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["entry.lock"]


# --- the GPU runtime library -------------------------------------------------

def test_runtime_source_is_package_data():
    # Found in the package (importlib.resources), not through the checkout.
    src = _gpu._native(_gpu.RUNTIME_SOURCE)
    assert src.is_file()
    assert Path(str(src)).parent == Path(_gpu.__file__).parent / "_native"
    assert b"attn_rt_launch" in src.read_bytes()


RUNTIME_SCRIPT = """\
import ctypes
from attn_mlir import _gpu
lib = ctypes.CDLL(str(_gpu._cached_runtime()))
print("loaded", lib.attn_rt_launch is not None)
"""


@pytest.mark.parametrize("kind", ["truncated", "sidecar missing"])
def test_damaged_runtime_library_is_rebuilt(cache, kind):
    lib = _gpu._cached_runtime()
    assert _toolchain.entry_problem(lib) is None
    damage, which, reason = LIBRARY_DAMAGE[kind]
    damage(lib.with_suffix("." + which))
    env = dict(os.environ, ATTN_MLIR_CACHE=str(cache),
               PYTHONPATH=str(ROOT / "python"))
    proc = subprocess.run([sys.executable, "-c", RUNTIME_SCRIPT], env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "loaded True" in proc.stdout
    assert "CacheWarning" in proc.stderr and str(lib) in proc.stderr
    assert re.search(reason, proc.stderr), proc.stderr
    assert _toolchain.entry_problem(lib) is None


# --- GPU bundles -------------------------------------------------------------

@pytest.fixture(scope="module")
def nvvm():
    """Skips where attn-opt was built without the NVVM backend."""
    try:
        _gpu.attn_opt()
    except _gpu.CompileError as e:
        pytest.skip(str(e))
    help_text = subprocess.run([_gpu.attn_opt(), "--help"],
                               capture_output=True, text=True).stdout
    if "attn-lower-to-nvvm-pipeline" not in help_text:
        pytest.skip("attn-opt was built without the NVVM backend")


def binary_of(bundle):
    return bundle / json.loads((bundle / "manifest.json").read_text())["binary"]


def edit_manifest(bundle, **fields):
    m = bundle / "manifest.json"
    record = json.loads(m.read_text())
    record.update(fields)
    record = {k: v for k, v in record.items() if v is not None}
    m.write_text(json.dumps(record, indent=1))


def strip_hashes(bundle):
    edit_manifest(bundle, binary_size=None, binary_sha256=None,
                  manifest_sha256=None)


# (damage of a bundle directory, words of the reason)
BUNDLE_DAMAGE = {
    "binary truncated": (lambda b: truncate(binary_of(b)),
                         r"binary kernel\.\w+ has \d+ bytes, "
                         r"manifest\.json records \d+"),
    "binary empty": (lambda b: empty(binary_of(b)),
                     r"binary kernel\.\w+ has 0 bytes"),
    "binary flipped": (lambda b: flip(binary_of(b)),
                       r"sha256 of its binary kernel\.\w+ differs"),
    "binary missing": (lambda b: remove(binary_of(b)),
                       r"binary kernel\.\w+ is missing"),
    "manifest garbage": (lambda b: garbage(b / "manifest.json"),
                         "manifest.json is unreadable"),
    "manifest edited": (lambda b: edit_manifest(b, chip="sm_90a"),
                        "manifest.json does not match the sha256 it records"),
    "manifest missing": (lambda b: remove(b / "manifest.json"),
                         "manifest.json is missing"),
}


def test_bundle_records_hashes(nvvm, tmp_path):
    bundle = _gpu.compile_bundle(MERGE_TEXT, CHIP, tmp_path / "b")
    record = json.loads((bundle / "manifest.json").read_text())
    assert ((record["binary_size"], record["binary_sha256"])
            == _toolchain.file_digest(bundle / record["binary"]))
    assert record["manifest_sha256"] == _gpu._manifest_digest(record)
    assert _gpu.bundle_problem(bundle) is None
    assert not [p for p in tmp_path.iterdir() if p.name != "b"]  # no staging


@pytest.mark.parametrize("kind", BUNDLE_DAMAGE)
def test_bundle_damage_is_found(nvvm, tmp_path, kind):
    bundle = _gpu.compile_bundle(MERGE_TEXT, CHIP, tmp_path / "b")
    damage, reason = BUNDLE_DAMAGE[kind]
    damage(bundle)
    problem = _gpu.bundle_problem(bundle)
    assert problem is not None and re.search(reason, problem), \
        problem


@pytest.mark.parametrize("kind", BUNDLE_DAMAGE)
def test_damaged_cached_bundle_is_recompiled(nvvm, cache, kind):
    bundle = _gpu.bundle_for(MERGE_TEXT, CHIP)
    assert bundle.parent == cache / "gpu"
    good = binary_of(bundle).read_bytes()
    damage, reason = BUNDLE_DAMAGE[kind]
    damage(bundle)
    with pytest.warns(CacheWarning) as caught:
        again = _gpu.bundle_for(MERGE_TEXT, CHIP)
    message = str(caught[0].message)
    assert str(bundle) in message and "compiling it again" in message
    assert re.search(reason, message), message
    assert again == bundle and _gpu.bundle_problem(bundle) is None
    assert binary_of(bundle).read_bytes() == good


def aot_bundle(tmp_path, monkeypatch):
    """A bundle in an ATTN_MLIR_BUNDLES directory (as `attn_mlir.aot`
    prepares them)."""
    out = tmp_path / "bundles"
    assert aot.compile_all([MERGE_TEXT], CHIP, out) == []
    monkeypatch.setenv(_gpu.BUNDLES_ENV, str(out))
    bundle = out / _gpu.bundle_key(MERGE_TEXT, CHIP)
    assert _gpu.find_bundle(MERGE_TEXT, CHIP) == bundle
    return bundle


def no_compiler(monkeypatch):
    """This process as on a GPU machine without attn-opt."""
    monkeypatch.setattr(_gpu, "_can_compile", lambda: False)


@pytest.mark.parametrize("kind", BUNDLE_DAMAGE)
def test_damaged_bundle_without_compiler_is_an_error(nvvm, cache, tmp_path,
                                                     monkeypatch, kind):
    bundle = aot_bundle(tmp_path, monkeypatch)
    assert _gpu.bundle_for(MERGE_TEXT, CHIP) == bundle
    damage, reason = BUNDLE_DAMAGE[kind]
    damage(bundle)
    no_compiler(monkeypatch)
    if kind == "manifest missing":
        # Not found at all: the ordinary missing-kernel error.
        with pytest.raises(_gpu.MissingKernelError, match="no GPU kernel"):
            _gpu.bundle_for(MERGE_TEXT, CHIP)
        return
    with pytest.raises(_gpu.DamagedBundleError) as err:
        _gpu.bundle_for(MERGE_TEXT, CHIP)
    message = str(err.value)
    assert f"GPU bundle {bundle} is damaged" in message
    assert re.search(reason, message), message
    assert "attn-opt is not available here to compile it again" in message
    assert f"python -m attn_mlir.aot --chip {CHIP}" in message
    assert not (cache / "gpu").exists()   # nothing compiled or discarded


def test_old_bundle_without_compiler_is_an_error(nvvm, cache, tmp_path,
                                                 monkeypatch):
    bundle = aot_bundle(tmp_path, monkeypatch)
    strip_hashes(bundle)
    no_compiler(monkeypatch)
    with pytest.raises(_gpu.DamagedBundleError,
                       match=rf"GPU bundle {bundle} cannot be verified: "
                             r"manifest.json records no hashes.*"
                             r"python -m attn_mlir.aot --chip sm_80"):
        _gpu.bundle_for(MERGE_TEXT, CHIP)


def test_old_bundle_with_compiler_is_recompiled(nvvm, cache, tmp_path,
                                                monkeypatch):
    # Stale, not damaged: compiled again (into the cache), without a warning.
    bundle = aot_bundle(tmp_path, monkeypatch)
    strip_hashes(bundle)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        fresh = _gpu.bundle_for(MERGE_TEXT, CHIP)
    assert fresh == cache / "gpu" / bundle.name
    assert _gpu.bundle_problem(fresh) is None


def test_damaged_aot_bundle_with_compiler_is_recompiled(nvvm, cache, tmp_path,
                                                        monkeypatch):
    bundle = aot_bundle(tmp_path, monkeypatch)
    flip(binary_of(bundle))
    with pytest.warns(CacheWarning, match=rf"ignoring the GPU bundle {bundle}: "
                                          r"the sha256 of its binary"):
        fresh = _gpu.bundle_for(MERGE_TEXT, CHIP)
    assert fresh == cache / "gpu" / bundle.name
    assert _gpu.bundle_problem(fresh) is None


class FakeRuntime:
    """attn_rt_load without a GPU: records the image it is handed."""

    def __init__(self):
        self.images = []

    def attn_rt_load(self, backend, device, image, name, shared_bytes, fn, mod,
                     err, n):
        self.images.append(image.raw)
        return 0


def test_load_bundle_checks_before_the_driver(nvvm, cache, tmp_path,
                                              monkeypatch):
    bundle = _gpu.compile_bundle(MERGE_TEXT, CHIP, tmp_path / "b")
    fake = FakeRuntime()
    monkeypatch.setattr(_gpu, "runtime", lambda: fake)
    kernels = _gpu.load_bundle(bundle, 0)
    binary = binary_of(bundle)
    expected = binary.read_bytes() + (b"\0" if binary.suffix == ".ptx" else b"")
    assert fake.images == [expected] * len(kernels) and kernels

    # A damaged one never reaches the driver, with or without attn-opt.
    monkeypatch.setattr(_gpu, "_kernels", {})
    fake.images.clear()
    flip(binary)
    with pytest.raises(_gpu.DamagedBundleError,
                       match=rf"GPU bundle {bundle} is damaged: the sha256.*"
                             r"Delete it .*python -m attn_mlir.aot --chip "
                             r"sm_80"):
        _gpu.load_bundle(bundle, 0)
    strip_hashes(bundle)
    no_compiler(monkeypatch)
    with pytest.raises(_gpu.DamagedBundleError,
                       match=rf"GPU bundle {bundle} cannot be verified: .*"
                             r"attn-opt is not available here"):
        _gpu.load_bundle(bundle, 0)
    assert fake.images == []


# --- the manifest's format_version --------------------------------------------
# Without attn-opt: bundles written by hand as compile_bundle writes them, and
# attn-opt's output faked (_lower), so these hold whatever attn-opt is built.

STAND_IN_PTX = "// stand-in PTX\n.version 8.0\n.target sm_80\n"
MERGE_KERNELS = [{"name": "merge", "op": "attn.merge_states", "threads": 128,
                  "shared_bytes": 0,
                  "grid": [{"terms": [[0, 0, 1]], "add": 0}],
                  "params": [{"arg": 0, "kind": "memref", "rank": 4,
                              "dtype": "f32"}]}]


def handmade_bundle(root, **fields):
    """The bundle of MERGE_TEXT for CHIP in `root`, written by hand with a
    stand-in PTX binary and a manifest recording its hashes; `fields`
    replace manifest fields (None: drop one) before the hashes are taken,
    so the bundle is intact but for what they change."""
    bundle = root / _gpu.bundle_key(MERGE_TEXT, CHIP)
    bundle.mkdir(parents=True)
    binary = STAND_IN_PTX.encode()
    (bundle / "kernel.ptx").write_bytes(binary)
    record = {"format_version": _gpu.MANIFEST_FORMAT, "chip": CHIP,
              "key": bundle.name, "kernels": MERGE_KERNELS,
              "binary": "kernel.ptx", "mlir": MERGE_TEXT,
              "compiler": "handmade", "binary_size": len(binary),
              "binary_sha256": hashlib.sha256(binary).hexdigest()}
    record.update(fields)
    record = {k: v for k, v in record.items() if v is not None}
    record["manifest_sha256"] = _gpu._manifest_digest(record)
    (bundle / "manifest.json").write_text(json.dumps(record, indent=1))
    return bundle


def attn_opt_output(manifest):
    """What attn-opt's NVVM pipeline (format=isa) prints, with `manifest`
    as its attn.manifest (escaped as MLIR prints string attributes)."""
    attr = json.dumps(manifest).replace('"', "\\22")
    ptx = STAND_IN_PTX.replace("\n", "\\0A")
    return (f'module attributes {{attn.manifest = "{attr}"}} {{\n'
            f'  gpu.binary @attn_kernels [#gpu.object<#nvvm.target<chip = '
            f'"{CHIP}">, assembly = "{ptx}">]\n}}\n')


def fake_attn_opt(monkeypatch, manifest):
    """compile_bundle as if attn-opt printed `manifest` (and no ptxas)."""
    lowered = attn_opt_output(manifest)
    monkeypatch.setattr(_gpu, "_lower", lambda *args: lowered)
    monkeypatch.setattr(_gpu, "_ptxas", lambda: None)
    monkeypatch.setattr(_gpu, "_can_compile", lambda: True)
    monkeypatch.setattr(_gpu, "compiler_fingerprint", lambda: "handmade")


# manifest.json's format_version (None: none) -> words of the reason.
BAD_FORMATS = {
    "missing": (None, r"manifest\.json has no format_version \(made by an "
                      r"older attn_mlir\); this attn_mlir reads "
                      r"format_version 2"),
    "older": (1, r"manifest\.json has format_version 1 \(made by another "
                 r"attn_mlir\); this attn_mlir reads format_version 2"),
    "newer": (3, r"manifest\.json has format_version 3 \(made by another "
                 r"attn_mlir\); this attn_mlir reads format_version 2"),
    "string": ("2", r"manifest\.json has format_version '2'"),
    "bool": (True, r"manifest\.json has format_version True"),
}


def test_handmade_bundle_loads(cache, tmp_path, monkeypatch):
    # The stand-in is a bundle the loader accepts (the tests below change
    # only its format_version).
    bundle = handmade_bundle(tmp_path)
    assert _gpu.bundle_problem(bundle) is None
    fake = FakeRuntime()
    monkeypatch.setattr(_gpu, "runtime", lambda: fake)
    no_compiler(monkeypatch)
    kernels = _gpu.load_bundle(bundle, 0)
    assert [k.record["name"] for k in kernels] == ["merge"]
    assert fake.images == [STAND_IN_PTX.encode() + b"\0"]


@pytest.mark.parametrize("kind", BAD_FORMATS)
@pytest.mark.parametrize("compiler", [False, True])
def test_load_bundle_rejects_other_formats(cache, tmp_path, monkeypatch, kind,
                                           compiler):
    version, reason = BAD_FORMATS[kind]
    bundle = handmade_bundle(tmp_path, format_version=version)
    problem = _gpu.bundle_problem(bundle)
    assert problem is not None and re.search(reason, problem), problem
    fake = FakeRuntime()
    monkeypatch.setattr(_gpu, "runtime", lambda: fake)
    monkeypatch.setattr(_gpu, "_can_compile", lambda: compiler)
    with pytest.raises(_gpu.DamagedBundleError) as err:
        _gpu.load_bundle(bundle, 0)
    message = str(err.value)
    assert f"GPU bundle {bundle} must be rebuilt: " in message, message
    assert re.search(reason, message), message
    assert "rebuild it" in message, message
    assert f"python -m attn_mlir.aot --chip {CHIP}" in message, message
    assert fake.images == []   # never handed to the driver


def test_format_is_checked_before_the_hashes(cache, tmp_path, monkeypatch):
    # A format_version changed after the manifest was written: not read as
    # format 1 with a wrong hash, but as the other format it claims.
    bundle = handmade_bundle(tmp_path)
    m = bundle / "manifest.json"
    record = json.loads(m.read_text())
    record["format_version"] = 3
    m.write_text(json.dumps(record))
    assert "has format_version 3" in _gpu.bundle_problem(bundle)


@pytest.mark.parametrize("kind", BAD_FORMATS)
def test_other_format_aot_bundle_without_compiler_is_an_error(
        cache, tmp_path, monkeypatch, kind):
    version, reason = BAD_FORMATS[kind]
    out = tmp_path / "bundles"
    bundle = handmade_bundle(out, format_version=version)
    monkeypatch.setenv(_gpu.BUNDLES_ENV, str(out))
    no_compiler(monkeypatch)
    with pytest.raises(_gpu.DamagedBundleError,
                       match=rf"GPU bundle {bundle} must be rebuilt: {reason}"
                             r".*attn-opt is not available here.*"
                             r"python -m attn_mlir\.aot --chip sm_80"):
        _gpu.bundle_for(MERGE_TEXT, CHIP)
    assert not (cache / "gpu").exists()


def test_other_format_cached_bundle_is_recompiled(cache, monkeypatch):
    # Made by an older attn_mlir, not damaged: compiled again in place,
    # without a warning, into a bundle of this format.
    fake_attn_opt(monkeypatch, {"format_version": 2,
                                "kernels": MERGE_KERNELS})
    old = handmade_bundle(cache / "gpu", format_version=None)
    assert not _gpu.is_current(old)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        bundle = _gpu.bundle_for(MERGE_TEXT, CHIP)
    assert bundle == old and _gpu.bundle_problem(bundle) is None
    assert json.loads((bundle / "manifest.json").read_text())[
        "format_version"] == 2
    assert _gpu.is_current(bundle)


def test_is_current_needs_this_format(tmp_path, monkeypatch):
    monkeypatch.setattr(_gpu, "compiler_fingerprint", lambda: "handmade")
    assert _gpu.is_current(handmade_bundle(tmp_path / "a"))
    assert not _gpu.is_current(handmade_bundle(tmp_path / "b",
                                               format_version=1))
    assert not _gpu.is_current(handmade_bundle(tmp_path / "c",
                                               format_version=None))


def test_compile_bundle_writes_the_format(tmp_path, monkeypatch):
    fake_attn_opt(monkeypatch, {"format_version": 2,
                                "kernels": MERGE_KERNELS})
    bundle = _gpu.compile_bundle(MERGE_TEXT, CHIP, tmp_path / "b")
    record = json.loads((bundle / "manifest.json").read_text())
    assert record["format_version"] == _gpu.MANIFEST_FORMAT == 2
    assert record["kernels"] == MERGE_KERNELS
    assert (bundle / "kernel.ptx").read_text() == STAND_IN_PTX
    assert _gpu.bundle_problem(bundle) is None


# attn-opt's attn.manifest -> words of the CompileError.
BAD_ATTRIBUTES = {
    "bare list": (MERGE_KERNELS, "attn.manifest has no format_version"),
    "no version": ({"kernels": MERGE_KERNELS},
                   "attn.manifest has no format_version"),
    "older": ({"format_version": 1, "kernels": MERGE_KERNELS},
              "attn.manifest has format_version 1, this attn_mlir reads "
              "format_version 2"),
    "newer": ({"format_version": 3, "kernels": MERGE_KERNELS},
              "attn.manifest has format_version 3, this attn_mlir reads "
              "format_version 2"),
    "no kernels": ({"format_version": 2}, 'no "kernels" list'),
}


@pytest.mark.parametrize("kind", BAD_ATTRIBUTES)
def test_compile_bundle_rejects_other_formats(tmp_path, monkeypatch, kind):
    manifest, words = BAD_ATTRIBUTES[kind]
    fake_attn_opt(monkeypatch, manifest)
    with pytest.raises(_gpu.CompileError, match=re.escape(words)):
        _gpu.compile_bundle(MERGE_TEXT, CHIP, tmp_path / "b")
    assert list(tmp_path.iterdir()) == []   # no bundle, no staging


def test_aot_recompiles_damaged_bundles(nvvm, tmp_path, monkeypatch):
    bundle = aot_bundle(tmp_path, monkeypatch)
    inode = binary_of(bundle).stat().st_ino
    assert aot.compile_all([MERGE_TEXT], CHIP, bundle.parent) == []
    assert binary_of(bundle).stat().st_ino == inode   # intact: kept
    truncate(binary_of(bundle))
    with pytest.warns(CacheWarning, match=rf"damaged bundle {bundle}: its "
                                          r"binary kernel\.\w+ has \d+ bytes"):
        assert aot.compile_all([MERGE_TEXT], CHIP, bundle.parent) == []
    assert _gpu.bundle_problem(bundle) is None


def test_bundle_loads_on_the_gpu(nvvm, cache):
    # The one step that needs a GPU: the driver accepts the checked image.
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs torch with CUDA")
    chip = _gpu.chip_for_capability(*torch.cuda.get_device_capability(0))
    kernels = _gpu.load_bundle(_gpu.bundle_for(MERGE_TEXT, chip), 0)
    assert kernels and all(k.function.value for k in kernels)


# --- the CPU compiler ----------------------------------------------------------

@needs_cpu_kernels
def test_cpu_kernels_with_and_without_attn_compile(cache, monkeypatch):
    """attn-compile (beside attn-opt) makes a CPU kernel in one process; an
    attn-opt without it goes through mlir-translate, opt and llc. Both give
    the float64 answer, and their libraries have different cache keys."""
    acc, lse = merge_args()
    want = merge_reference(acc, lse)
    results, libs = [], []
    for use_tool in (True, False):
        if not use_tool:
            monkeypatch.setattr(_toolchain, "attn_compile", lambda: None)
        monkeypatch.setattr(_toolchain, "_cpu_hash", None)
        monkeypatch.setattr(_toolchain, "_loaded", {})
        if use_tool:
            assert _toolchain.attn_compile() is not None
        out = np.full((3, 2, 16), np.nan, np.float32)
        ops.merge_states(acc, out, segment_lse=lse)
        results.append(out)
        libs.append(set(cache.glob("*.so")))
    for out in results:
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    assert len(libs[1] - libs[0]) == 1   # a second library, its own key


def test_attn_compile_sits_beside_attn_opt(monkeypatch, tmp_path):
    fake_opt = tmp_path / "attn-opt"
    fake_opt.write_text("#!/bin/sh\n")
    fake_opt.chmod(0o755)
    monkeypatch.setenv("ATTN_MLIR_OPT", str(fake_opt))
    assert _toolchain.attn_compile() is None
    tool = tmp_path / "attn-compile"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert _toolchain.attn_compile() == str(tool)


def _fresh_cpu_compile(monkeypatch):
    monkeypatch.setattr(_toolchain, "_cpu_hash", None)
    monkeypatch.setattr(_toolchain, "_loaded", {})


def _merge_computes():
    """A merge_states call on the CPU gives the float64 answer."""
    acc, lse = merge_args()
    out = np.full((3, 2, 16), np.nan, np.float32)
    ops.merge_states(acc, out, segment_lse=lse)
    np.testing.assert_allclose(out, merge_reference(acc, lse), rtol=1e-5,
                               atol=1e-6)


def test_attn_compile_links_without_a_c_compiler(cache, monkeypatch):
    """attn-compile built with LLD links the kernel library itself: with no
    C compiler (CC names nothing) a CPU kernel still builds, loads and
    computes."""
    tool = _toolchain.attn_compile()
    if tool is None or not _toolchain._links_itself(tool):
        pytest.skip("attn-compile built without LLD (liblld-22-dev)")
    monkeypatch.setenv("CC", "/nonexistent/cc")
    _fresh_cpu_compile(monkeypatch)
    _merge_computes()


def test_failed_in_process_link_falls_back_to_the_c_compiler(
        cache, monkeypatch, tmp_path):
    """A link attn-compile cannot make (a symbol the host's C libraries lack)
    falls back to the object file and the C compiler; without one, the
    CompileError names the link."""
    real = _toolchain.attn_compile()
    if real is None:
        pytest.skip("no attn-compile")
    # A wrapper whose --shared link fails as attn-compile reports it.
    tool = tmp_path / "attn-compile"
    tool.write_text(
        "#!/bin/sh\n"
        'case " $* " in *" --can-link "*) exit 0;; esac\n'
        'case " $* " in *" --shared "*) echo "attn-compile: linking x.so '
        'failed: undefined symbol: __extendhfsf2" >&2; exit 1;; esac\n'
        f'exec {real} "$@"\n')
    tool.chmod(0o755)
    monkeypatch.setattr(_toolchain, "attn_compile", lambda: str(tool))
    _fresh_cpu_compile(monkeypatch)
    _merge_computes()
    # No C compiler either: the link failure is reported.
    for f in cache.glob("*"):
        f.unlink()
    monkeypatch.setenv("CC", "/nonexistent/cc")
    _fresh_cpu_compile(monkeypatch)
    with pytest.raises(_toolchain.CompileError, match="attn-compile: linking"):
        _merge_computes()
