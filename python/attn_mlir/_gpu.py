"""GPU kernels: bundles, ahead-of-time preparation, and launches.

A specialization (the MLIR text of one `func.func @attn_...` with an attn op,
as `attn_mlir.ops` builds it) becomes a *bundle* for a chip: a directory
holding `manifest.json` (kernels, parameter ABI, grid formulas, threads,
shared memory, the ptxas resource report, the source MLIR) and the binary
(`kernel.cubin` when ptxas is available, always `kernel.ptx`). Bundles are
named by sha256(chip + MLIR text) and looked up in $ATTN_MLIR_BUNDLES
(directories, separated by os.pathsep) and then in the cache
($ATTN_MLIR_CACHE/gpu). Where attn-opt exists a missing bundle is compiled
on first use; elsewhere (a GPU machine without LLVM) it must have been
prepared: record the specializations with ATTN_MLIR_RECORD=file.jsonl (plus
ATTN_MLIR_DRY_RUN=1 to skip execution) on a machine with attn-opt, then
`python -m attn_mlir.aot --chip sm_90a --record file.jsonl --out DIR`.

The manifest records its `format_version` (MANIFEST_FORMAT), the binary's
size and sha256 and a sha256 of itself; a bundle is checked against them
before its binary goes to the driver. A damaged one is compiled again where
attn-opt is (with a CacheWarning), and is an error that names it elsewhere;
so is one whose manifest records no hashes (made before they existed) or
another format_version (made by another attn_mlir): rebuild it.

Launches go through the C runtime (_native/gpu_runtime.cpp, package data of
attn_mlir, compiled into the cache on first use), which opens the CUDA
driver with dlopen; they run on the current torch stream, with no
synchronization and no allocation.
"""

import ctypes
import hashlib
import importlib.resources
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import time
import warnings
from pathlib import Path

from . import _abi, _log, _toolchain
from ._abi import View
from ._toolchain import CacheWarning, CompileError, attn_opt, cache_dir

_F32, _F32_BITS = struct.Struct("<f"), struct.Struct("<I")

BUNDLES_ENV = "ATTN_MLIR_BUNDLES"

# The format of attn-opt's `attn.manifest` attribute ({"format_version": 2,
# "kernels": [...]}) and of a bundle's manifest.json that this attn_mlir
# reads and writes; any other is rejected (CompileError, a bundle to
# rebuild).
MANIFEST_FORMAT = 2


def _is_manifest_format(version):
    # (bool is an int, and JSON's 1.0 == 1: neither is the format.)
    return type(version) is int and version == MANIFEST_FORMAT


class MissingKernelError(RuntimeError):
    """No bundle for a specialization, and no compiler to make one."""


class DamagedBundleError(MissingKernelError):
    """A bundle's files do not match the hashes its manifest records (or it
    records none), where it is not compiled again."""


def chip_for_capability(major, minor):
    """The NVVM chip name attn_mlir compiles for on a device of this
    compute capability (sm_90a on Hopper: the arch-specific target)."""
    return f"sm_{major}{minor}" + ("a" if (major, minor) == (9, 0) else "")


def chip_for_hip_device(props):
    """The ROCDL chip of a ROCm device (torch's gcnArchName, e.g.
    'gfx942:sramecc+:xnack-' -> 'gfx942')."""
    return props.gcnArchName.split(":")[0]


def is_amd(chip):
    return chip.startswith("gfx")


# CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR
_CU_CC_MAJOR, _CU_CC_MINOR = 75, 76


def detect_devices():
    """([(index, name, chip)], note) of the GPUs this machine's drivers
    show, for `python -m attn_mlir info`: NVIDIA ones through the CUDA
    driver (ctypes, neither torch nor the runtime library needed), else
    ROCm ones through torch. Never raises: without a GPU or a driver the
    list is empty and the note says why."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        cuda = None
    if cuda is not None:
        count, dev = ctypes.c_int(0), ctypes.c_int(0)
        rc = cuda.cuInit(0) or cuda.cuDeviceGetCount(ctypes.byref(count))
        if rc:
            return [], f"the CUDA driver is there but reports error {rc}"
        found = []
        for i in range(count.value):
            name = ctypes.create_string_buffer(256)
            major, minor = ctypes.c_int(0), ctypes.c_int(0)
            if (cuda.cuDeviceGet(ctypes.byref(dev), i)
                    or cuda.cuDeviceGetName(name, len(name), dev)
                    or cuda.cuDeviceGetAttribute(ctypes.byref(major),
                                                 _CU_CC_MAJOR, dev)
                    or cuda.cuDeviceGetAttribute(ctypes.byref(minor),
                                                 _CU_CC_MINOR, dev)):
                continue
            found.append((i, name.value.decode(errors="replace"),
                          chip_for_capability(major.value, minor.value)))
        return found, None if found else "the CUDA driver sees no device"
    try:
        import torch
    except ImportError:
        return [], "no CUDA driver (libcuda.so.1), and no torch for ROCm"
    if not (torch.version.hip and torch.cuda.is_available()):
        return [], "no CUDA driver (libcuda.so.1), and torch sees no ROCm GPU"
    return [(i, torch.cuda.get_device_name(i),
             chip_for_hip_device(torch.cuda.get_device_properties(i)))
            for i in range(torch.cuda.device_count())], None


def parse_amdgpu_resources(isa):
    """{kernel: {"registers", "stack_bytes", "spill_stores", "spill_loads"}}
    (as parse_resource_report) from the AMDGPU metadata of an assembly
    listing: scratch is the private segment, spills are VGPR spills (4
    bytes each)."""
    out = {}
    i = isa.find("amdhsa.kernels:")
    if i < 0:
        return out
    # Kernel entries are "  - ." at indentation 2; their fields at 4.
    for entry in re.split(r"\n  - ", isa[i:])[1:]:
        fields = dict(re.findall(r"^\s{0,4}\.?(\w+):\s+(\S+)", "." + entry,
                                 re.M))
        if "name" not in fields:
            continue
        spills = int(fields.get("vgpr_spill_count", 0))
        out[fields["name"]] = {
            "registers": int(fields.get("vgpr_count", 0)),
            "stack_bytes": int(fields.get("private_segment_fixed_size", 0)),
            "spill_stores": 4 * spills, "spill_loads": 4 * spills}
    return out


F32_PRECISION_ENV = "ATTN_MLIR_F32_PRECISION"


def f32_precision():
    """How NVIDIA kernels multiply f32 operands: "tf32" (the default, as
    vLLM) or "3xtf32" (about f32's accuracy), from $ATTN_MLIR_F32_PRECISION
    (attn-lower-to-nvvm-pipeline's f32-precision)."""
    value = os.environ.get(F32_PRECISION_ENV, "tf32") or "tf32"
    if value not in ("tf32", "3xtf32"):
        raise ValueError(f"{F32_PRECISION_ENV}={value!r}: expected tf32 or "
                         "3xtf32")
    return value


def bundle_key(mlir_text, chip):
    # (3xtf32 kernels are other bundles; tf32 keys are those from before
    # the option existed.)
    prec = "" if is_amd(chip) or f32_precision() == "tf32" else "3xtf32\n"
    return hashlib.sha256(f"{chip}\n{prec}{mlir_text}".encode()).hexdigest()[:24]


def _describe(mlir_text):
    m = re.search(r"attn\.(\w+)", mlir_text)
    sig = re.search(r"func\.func @\w+\((.*?)\)\s*\{", mlir_text, re.S)
    return (f"attn.{m.group(1) if m else '?'} with signature "
            f"({sig.group(1) if sig else '?'})")


def _search_dirs():
    dirs = [Path(p) for p in os.environ.get(BUNDLES_ENV, "").split(os.pathsep)
            if p]
    return dirs + [cache_dir() / "gpu"]


def find_bundle(mlir_text, chip):
    key = bundle_key(mlir_text, chip)
    for d in _search_dirs():
        if (d / key / "manifest.json").is_file():
            return d / key
    return None


# --- compiling ---------------------------------------------------------------

def _decode_mlir_string(raw):
    """The contents of an MLIR string literal (\\XX hex escapes, \\\\)."""
    return re.sub(r"\\([0-9A-Fa-f]{2}|\\|\")",
                  lambda m: m.group(1) if m.group(1) in ("\\", '"')
                  else chr(int(m.group(1), 16)), raw)


def _string_attr(text, pattern):
    m = re.search(pattern + r'"((?:[^"\\]|\\.)*)"', text, re.S)
    return _decode_mlir_string(m.group(1)) if m else None


def _wheel_ptxas():
    """ptxas shipped in Python wheels, for GPU machines without a CUDA
    toolkit: NVIDIA's nvidia-cuda-nvcc wheel, then Triton's (which PyTorch
    on Linux installs). Found without importing either."""
    import importlib.util
    found = []
    for module, rel in (("nvidia.cuda_nvcc", ("bin", "ptxas")),
                        ("nvidia", ("cuda_nvcc", "bin", "ptxas")),
                        ("triton", ("backends", "nvidia", "bin", "ptxas"))):
        try:
            spec = importlib.util.find_spec(module)
        except (ImportError, ValueError):
            continue
        roots = list(spec.submodule_search_locations or []) if spec else []
        if spec and spec.origin and not roots:
            roots = [str(Path(spec.origin).parent)]
        for root in roots:
            c = Path(root, *rel)
            if c.is_file() and os.access(c, os.X_OK):
                found.append(str(c))
    return found[0] if found else None


def _ptxas():
    """ATTN_MLIR_PTXAS, the CUDA toolkit's, PATH's, then a wheel's."""
    for c in (os.environ.get("ATTN_MLIR_PTXAS"), "/usr/local/cuda/bin/ptxas"):
        if c and Path(c).is_file():
            return c
    return shutil.which("ptxas") or _wheel_ptxas()


def parse_resource_report(report):
    """{kernel: {"registers", "stack_bytes", "spill_stores", "spill_loads"
    [, "performance_loss"]}} from `ptxas -v` output."""
    out, name = {}, None
    for line in report.splitlines():
        m = re.search(r"Function properties for (\S+)", line)
        if m:
            name = m.group(1)
            out.setdefault(name, {})
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, "
                      r"(\d+) bytes spill loads", line)
        if m and name:
            out[name].update(stack_bytes=int(m.group(1)),
                             spill_stores=int(m.group(2)),
                             spill_loads=int(m.group(3)))
        m = re.search(r"Compiling entry function '(\S+)'", line)
        if m:
            name = m.group(1)
            out.setdefault(name, {})
        m = re.search(r"Used (\d+) registers", line)
        if m and name:
            out[name]["registers"] = int(m.group(1))
        # Potential performance losses ptxas reports (C75xx): wgmma it had
        # to serialize (a wait after every MMA; C7513, C7515, C7518, ...),
        # setmaxnreg it ignored (C7508).
        m = re.search(r"\((C75\d\d)\) Potential Performance Loss"
                      r"(?:.*function '(\S+)')?", line)
        if m and (m.group(2) or name):
            out.setdefault(m.group(2) or name, {})["performance_loss"] = \
                m.group(1)
    return out


class SpillWarning(UserWarning):
    """A compiled kernel keeps values in local memory (slow)."""


def warn_on_spills(resources, mlir_text, chip):
    """Warns about each kernel of `resources` (parse_resource_report) that
    spills or whose wgmma ptxas serialized. The default schedules do
    neither (test/Pipelines checks them); a pinned schedule may."""
    for name, r in resources.items():
        problems = []
        if r.get("stack_bytes") or r.get("spill_stores"):
            problems.append(f"spills {r.get('spill_stores', 0)} bytes to "
                            f"local memory (stack frame "
                            f"{r.get('stack_bytes', 0)} bytes)")
        if r.get("performance_loss"):
            problems.append("has a performance loss that ptxas reports "
                            f"({r['performance_loss']}: serialized wgmma "
                            "or ignored setmaxnreg)")
        if problems:
            sched = re.search(r"#attn\.schedule<[^>]*>", mlir_text)
            warnings.warn(
                f"{name} of {_describe(mlir_text)} on {chip} "
                f"{' and '.join(problems)}"
                + (f" under the pinned {sched.group(0)}: a smaller block_n "
                   "or more warps avoids it" if sched else ""),
                SpillWarning, stacklevel=3)


def _lower(tmp, chip, options, out_name):
    """Runs the chip's attn-opt pipeline on tmp/kernel.mlir."""
    pipeline = ("attn-lower-to-rocdl-pipeline" if is_amd(chip)
                else "attn-lower-to-nvvm-pipeline")
    llvm_flags = []
    if not is_amd(chip):
        options += f" f32-precision={f32_precision()}"
        # LLVM's SLP vectorizer took 15-30% of attn-opt's NVVM time and
        # changes no PTX of any sweep kernel (sm_80, sm_89, sm_90a); on
        # AMDGPU it forms packed math, so ROCDL keeps it
        # (bench/results/2026-11-28-cpu-compile-latency-slp.md).
        llvm_flags.append("-vectorize-slp=false")
    # (The parser verifies the input and lit runs every pass verified;
    # verifying after each pass here cost 11-18% of attn-opt's sm_90a time,
    # bench/results/2026-11-27-cpu-compile-verify-once.txt.)
    cmd = [attn_opt(), str(tmp / "kernel.mlir"),
           f"--{pipeline}=chip={chip} {options}", "--verify-each=false",
           *llvm_flags, "-o", str(tmp / out_name)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CompileError(f"attn-opt failed ({' '.join(cmd)}):\n"
                           f"{proc.stderr[-4000:]}")
    return (tmp / out_name).read_text()


def parse_kernel_manifest(text):
    """The kernel records of attn-opt's `attn.manifest` attribute (its JSON
    text): {"format_version": MANIFEST_FORMAT, "kernels": [record, ...]}.
    CompileError for any other format."""
    try:
        manifest = json.loads(text)
    except ValueError as e:
        raise CompileError(
            f"attn-opt's attn.manifest is not JSON ({e})") from None
    if not isinstance(manifest, dict) or "format_version" not in manifest:
        raise CompileError(
            f"attn-opt's attn.manifest has no format_version (the format "
            f"of an attn-opt older than this attn_mlir, which reads "
            f"format_version {MANIFEST_FORMAT}): rebuild attn-opt "
            f"(scripts/build.sh) or point ATTN_MLIR_OPT at a current one")
    version = manifest["format_version"]
    if not _is_manifest_format(version):
        raise CompileError(
            f"attn-opt's attn.manifest has format_version {version!r}, this "
            f"attn_mlir reads format_version {MANIFEST_FORMAT}: use an "
            f"attn-opt and an attn_mlir of the same version")
    kernels = manifest.get("kernels")
    if not isinstance(kernels, list):
        raise CompileError("attn-opt's attn.manifest has no \"kernels\" list")
    return kernels


def compile_bundle(mlir_text, chip, dest):
    """Compiles one specialization into the bundle directory `dest`: PTX
    (and a cubin where ptxas is) for NVIDIA chips, an HSACO code object for
    AMD ones (gfx90a, gfx942, gfx1100). The bundle is written and fsynced in
    a staging directory and renamed to `dest` (which must not exist), so
    readers see all of it or none (_toolchain.publish)."""
    dest = Path(dest)
    with tempfile.TemporaryDirectory(prefix="attn_mlir_gpu_") as tmp:
        tmp = Path(tmp)
        (tmp / "kernel.mlir").write_text(mlir_text)
        out = _lower(tmp, chip, "format=isa", "kernel.gpu.mlir")
        manifest = _string_attr(out, r"attn\.manifest = ")
        isa = _string_attr(out, r"#gpu\.object<.*?assembly = ")
        if manifest is None or isa is None:
            raise CompileError("attn-opt produced no kernel manifest or ISA")
        record = {"format_version": MANIFEST_FORMAT, "chip": chip,
                  "key": dest.name, "kernels": parse_kernel_manifest(manifest),
                  "binary": "kernel.ptx", "mlir": mlir_text,
                  "compiler": compiler_fingerprint()}

        def write(staging):
            if is_amd(chip):
                (staging / "kernel.s").write_bytes(isa.encode())
                binary = _string_attr(
                    _lower(tmp, chip, "format=bin", "kernel.bin.mlir"),
                    r"#gpu\.object<.*?bin = ")
                if binary is None:
                    raise CompileError("attn-opt produced no code object")
                (staging / "kernel.hsaco").write_bytes(
                    binary.encode("latin-1"))
                record["binary"] = "kernel.hsaco"
                record["resources"] = parse_amdgpu_resources(isa)
            else:
                (staging / "kernel.ptx").write_bytes(isa.encode())
                ptxas = _ptxas()
                if ptxas:
                    proc = subprocess.run(
                        [ptxas, f"-arch={chip}", "-v", "-O3",
                         str(staging / "kernel.ptx"), "-o",
                         str(staging / "kernel.cubin")],
                        capture_output=True, text=True)
                    if proc.returncode != 0:
                        raise CompileError(
                            f"ptxas failed:\n{proc.stderr[-4000:]}")
                    record["binary"] = "kernel.cubin"
                    record["resources"] = parse_resource_report(proc.stderr)
            size, digest = _toolchain.file_digest(staging / record["binary"])
            record.update(binary_size=size, binary_sha256=digest)
            record["manifest_sha256"] = _manifest_digest(record)
            (staging / "manifest.json").write_bytes(
                json.dumps(record, indent=1).encode())

        _toolchain.publish(dest, write, directory=True)
    if "resources" in record:
        warn_on_spills(record["resources"], mlir_text, chip)
    return dest


def _can_compile():
    try:
        attn_opt()
        return True
    except CompileError:
        return False


def compiler_fingerprint():
    """Hash of the attn-opt that compiles here (None without one)."""
    return _toolchain._compiler_fingerprint() if _can_compile() else None


# --- checking ----------------------------------------------------------------

def _manifest_digest(record):
    """sha256 of a manifest's contents, less the field that records it."""
    body = {k: v for k, v in record.items() if k != "manifest_sha256"}
    text = json.dumps(body, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


class _BadBundle(Exception):
    """Why a bundle cannot be used. `kind`: "damaged"; "unhashed", not
    damaged but recording no hashes (made by an attn_mlir from before they
    existed); "format", a manifest.json of no or another format_version
    (made by another attn_mlir). `chip`: the manifest's, where it could be
    read."""

    def __init__(self, reason, kind="damaged", chip=None):
        super().__init__(reason)
        self.kind, self.chip = kind, chip

    @property
    def stale(self):
        """Made by another attn_mlir, not damaged: replaced without a
        warning where it can be compiled again."""
        return self.kind != "damaged"


def _verified(bundle_dir):
    """(manifest, binary bytes) of a bundle whose manifest and binary match
    the sha256s (and size) the manifest records; raises _BadBundle."""
    bundle_dir = Path(bundle_dir)
    try:
        record = json.loads((bundle_dir / "manifest.json").read_bytes())
    except FileNotFoundError:
        raise _BadBundle("manifest.json is missing") from None
    except (OSError, ValueError) as e:
        raise _BadBundle(f"manifest.json is unreadable ({e})") from None
    if not isinstance(record, dict):
        raise _BadBundle("manifest.json is not a JSON object")
    chip = record.get("chip") if isinstance(record.get("chip"), str) else None
    # The format first: nothing else of a manifest of another format is
    # known to mean what this attn_mlir reads it as.
    if "format_version" not in record:
        raise _BadBundle(f"manifest.json has no format_version (made by an "
                         f"older attn_mlir); this attn_mlir reads "
                         f"format_version {MANIFEST_FORMAT}", kind="format",
                         chip=chip)
    if not _is_manifest_format(record["format_version"]):
        raise _BadBundle(f"manifest.json has format_version "
                         f"{record['format_version']!r} (made by another "
                         f"attn_mlir); this attn_mlir reads format_version "
                         f"{MANIFEST_FORMAT}", kind="format", chip=chip)
    if not all(k in record for k in ("binary_size", "binary_sha256",
                                     "manifest_sha256")):
        raise _BadBundle("manifest.json records no hashes of the bundle "
                         "(made by an older attn_mlir), so it cannot be "
                         "verified", kind="unhashed", chip=chip)
    if _manifest_digest(record) != record["manifest_sha256"]:
        raise _BadBundle("manifest.json does not match the sha256 it "
                         "records (changed after it was written)")
    name = record.get("binary")
    try:
        data = (bundle_dir / name).read_bytes()
    except FileNotFoundError:
        raise _BadBundle(f"its binary {name} is missing", chip=chip) from None
    except (OSError, TypeError) as e:
        raise _BadBundle(f"its binary {name} is unreadable ({e})",
                         chip=chip) from None
    if len(data) != record["binary_size"]:
        raise _BadBundle(f"its binary {name} has {len(data)} bytes, "
                         f"manifest.json records {record['binary_size']}",
                         chip=chip)
    if hashlib.sha256(data).hexdigest() != record["binary_sha256"]:
        raise _BadBundle(f"the sha256 of its binary {name} differs from the "
                         f"one manifest.json records", chip=chip)
    return record, data


def bundle_problem(bundle_dir):
    """Why a bundle must not be used as it is (None: its files match the
    hashes of its manifest)."""
    try:
        _verified(bundle_dir)
    except _BadBundle as e:
        return str(e)
    return None


def _unusable(bundle_dir, problem, chip=None):
    """The error for a bundle that fails its check and is not compiled
    again (`problem`: the _BadBundle)."""
    what = {"damaged": "is damaged", "unhashed": "cannot be verified",
            "format": "must be rebuilt"}[problem.kind]
    chip = chip or problem.chip or "CHIP"
    fix = (f"attn-opt is not available here to compile it again: rebuild "
           f"it on a machine with attn-opt (`python -m attn_mlir.aot --chip "
           f"{chip} --record spec.jsonl --out DIR`) and replace the directory"
           if not _can_compile() else
           f"Delete it (its next use compiles it again) or rebuild it with "
           f"`python -m attn_mlir.aot --chip {chip} --record spec.jsonl "
           f"--out DIR`")
    return DamagedBundleError(f"GPU bundle {bundle_dir} {what}: {problem}. "
                              f"{fix}.")


def is_current(bundle_dir):
    """Whether a bundle was made by this machine's attn-opt, by an attn_mlir
    that records hashes, in this manifest format. Bundle names depend only
    on chip and MLIR text, so a rebuilt compiler would otherwise keep
    serving kernels of the old one; without attn-opt (the GPU machine)
    every bundle found is used as it is (after its hashes and format are
    checked)."""
    current = compiler_fingerprint()
    if current is None:
        return True
    try:
        record = json.loads((Path(bundle_dir) / "manifest.json").read_text())
    except (OSError, ValueError):
        return False
    return (isinstance(record, dict) and record.get("compiler") == current
            and "binary_sha256" in record
            and _is_manifest_format(record.get("format_version")))


def bundle_for(mlir_text, chip):
    """The bundle directory of a specialization: found (intact, and made by
    this machine's compiler if it has one), or compiled here. A damaged
    bundle is compiled again with a CacheWarning where attn-opt is, and
    raises DamagedBundleError elsewhere. Logged (attn_mlir, INFO): callers
    look a specialization up once per process."""
    start = time.perf_counter()
    bundle, outcome = _find_or_compile(mlir_text, chip)
    _log.kernel_ready(mlir_text, chip, outcome, time.perf_counter() - start,
                      bundle)
    return bundle


def _find_or_compile(mlir_text, chip):
    """bundle_for's (bundle, how it was had: an AOT bundle or cache hit, or
    a cache miss)."""
    key = bundle_key(mlir_text, chip)
    root = cache_dir() / "gpu"
    can_compile = _can_compile()
    found = find_bundle(mlir_text, chip)
    if found is not None:
        try:
            _verified(found)
            if is_current(found):
                return found, ("cache hit" if found == root / key
                               else "AOT bundle hit")
        except _BadBundle as e:
            if not can_compile:
                raise _unusable(found, e, chip) from None
            if found != root / key and not e.stale:
                warnings.warn(f"attn_mlir: ignoring the GPU bundle {found}: "
                              f"{e}; compiling the kernel into the cache",
                              CacheWarning, stacklevel=3)
    if not can_compile:
        raise MissingKernelError(
            f"no GPU kernel for {_describe(mlir_text)} on {chip} (bundle "
            f"{key}), and attn-opt is not available here to compile it. On a "
            f"machine with attn-opt, run the same calls with "
            f"ATTN_MLIR_RECORD=spec.jsonl ATTN_MLIR_DRY_RUN=1, then "
            f"`python -m attn_mlir.aot --chip {chip} --record spec.jsonl "
            f"--out DIR`, and set {BUNDLES_ENV}=DIR here.")
    root.mkdir(parents=True, exist_ok=True)

    def problem(bundle):
        if not bundle.exists():
            return "it is missing", False
        try:
            _verified(bundle)
        except _BadBundle as e:
            return str(e), not e.stale
        if not is_current(bundle):
            return "another attn-opt made it", False
        return None

    built = []

    def build(bundle):
        built.append(True)
        compile_bundle(mlir_text, chip, bundle)

    bundle = _toolchain.build_locked(
        root / key, problem, lambda b: shutil.rmtree(b, ignore_errors=True),
        build, "GPU bundle", "compiling it again", stacklevel=3)
    # (Not built here: another process compiled it while this one waited.)
    return bundle, "cache miss, compiled" if built else "cache hit"


# --- launching ---------------------------------------------------------------

_runtime = None

# Package data of attn_mlir (pyproject.toml): the runtime's source, and
# where a packager may put the library built from it.
_NATIVE = "_native"
RUNTIME_SOURCE = "gpu_runtime.cpp"
RUNTIME_LIBRARY = "libattn_gpu_runtime.so"


def _native(name):
    """A file of the package's _native/ directory (an importlib.resources
    Traversable)."""
    return importlib.resources.files(__package__) / _NATIVE / name


def _cached_runtime():
    """The runtime library built from the package's source into the cache
    (it needs only a C++ compiler and libdl), checked against its sidecar
    like the kernel libraries (_toolchain.cached_file)."""
    src = _native(RUNTIME_SOURCE)
    digest = hashlib.sha256(src.read_bytes()).hexdigest()[:16]

    def build(out):
        cxx = os.environ.get("CXX", "c++")
        with importlib.resources.as_file(src) as path:
            proc = subprocess.run([cxx, "-O2", "-shared", "-fPIC", str(path),
                                   "-o", str(out), "-ldl"],
                                  capture_output=True, text=True)
        if proc.returncode != 0:
            raise CompileError(f"building the GPU runtime failed:\n"
                               f"{proc.stderr[-2000:]}")

    return _toolchain.cached_file(
        cache_dir() / f"libattn_gpu_runtime-{digest}.so", build,
        "GPU runtime library")


def _open_runtime():
    """$ATTN_MLIR_RUNTIME, else the library shipped in the package
    (_native/libattn_gpu_runtime.so), else one built into the cache."""
    override = os.environ.get("ATTN_MLIR_RUNTIME")
    if override:
        return ctypes.CDLL(override)
    shipped = _native(RUNTIME_LIBRARY)
    if shipped.is_file():
        # (A real file for an ordinary install; a temporary copy, which the
        # open library outlives, for a zipped one.)
        with importlib.resources.as_file(shipped) as path:
            return ctypes.CDLL(str(path))
    return ctypes.CDLL(str(_cached_runtime()))


def runtime():
    """The C runtime library (_open_runtime), with its signatures."""
    global _runtime
    if _runtime is not None:
        return _runtime
    lib = _open_runtime()
    vp, ci, cu = ctypes.c_void_p, ctypes.c_int, ctypes.c_uint
    lib.attn_rt_load.argtypes = [ci, ci, vp, ctypes.c_char_p, ci,
                                 ctypes.POINTER(vp), ctypes.POINTER(vp),
                                 ctypes.c_char_p, ci]
    lib.attn_rt_launch.argtypes = [ci, vp, cu, cu, cu, cu, cu, vp,
                                   ctypes.POINTER(vp), ctypes.c_char_p, ci]
    # attn_rt_replay and attn_rt_replay_pointers have no argtypes: their
    # callers (ReplayEngine) pass ctypes objects and small ints only, and
    # checked conversions would triple a call's cost (1.5 us against 0.5 on
    # the 2-core machine).
    lib.attn_rt_available.argtypes = [ci, ctypes.c_char_p, ci]
    lib.attn_rt_multiprocessors.argtypes = [ci, ci, ctypes.POINTER(ci),
                                            ctypes.c_char_p, ci]
    ull = ctypes.POINTER(ctypes.c_ulonglong)
    lib.attn_rt_encode_tensor_map.argtypes = [
        ci, ci, vp, ull, ull, ctypes.POINTER(cu), vp, ctypes.c_char_p, ci]
    if hasattr(lib, "attn_rt_fork"):   # (an ATTN_MLIR_RUNTIME may predate it)
        lib.attn_rt_fork.argtypes = [ci, vp, ci, ctypes.POINTER(vp),
                                     ctypes.c_char_p, ci]
        lib.attn_rt_join.argtypes = [ci, vp, vp, ctypes.c_char_p, ci]
    if hasattr(lib, "attn_rt_occupancy"):
        lib.attn_rt_occupancy.argtypes = [ci, vp, ci, ci, ctypes.POINTER(ci),
                                          ctypes.c_char_p, ci]
    _runtime = lib
    return lib


class GpuError(RuntimeError):
    """The driver refused a load or a launch."""


def _check(rc, err):
    if rc != 0:
        raise GpuError(err.value.decode(errors="replace"))


class Kernel:
    """One kernel of a bundle, loaded on one device."""

    def __init__(self, record, function, module, image, blocks=None,
                 multiprocessors=None, occupancy=None):
        self.record, self.function = record, function
        # Persistent kernels: at most one block per SM walks the programs.
        self._blocks = blocks
        # Kernels with a small-grid footprint (manifest "small_grid"): grids
        # of fewer than this many programs launch with it, unless the
        # blocks an SM of both footprints are known (`occupancy`: the
        # manifest's, the small grid's), which decide by waves
        # (shared_bytes).
        small = record.get("small_grid")
        self._small_below = (small["programs_per_sm"] * multiprocessors
                             if small and multiprocessors else 0)
        self._wave_slots = None
        if small and multiprocessors and occupancy and min(occupancy) > 0:
            self._wave_slots = (multiprocessors * occupancy[0],
                                multiprocessors * occupancy[1])
        self._module, self._image = module, image   # keep alive
        # The parameter buffer and its slot pointers, reused by every launch
        # (the driver copies the parameters when the launch is enqueued).
        # Tensor maps (TMA kernels) are 128-byte parameters of their own,
        # 64-byte aligned, ahead of the operands.
        params = record["params"]
        maps = [p for p in params if p["kind"] == "tensor_map"]
        n = sum(3 + 2 * p["rank"] if p["kind"] == "memref" else 1
                for p in params if p["kind"] != "tensor_map")
        self._words = (ctypes.c_uint64 * n)()
        self._map_buffer = (ctypes.c_uint8 * (_MAP_BYTES * len(maps) + 64))()
        first = -(-ctypes.addressof(self._map_buffer) // 64) * 64
        self._map_slots = [first + _MAP_BYTES * i for i in range(len(maps))]
        base = ctypes.addressof(self._words)
        slots = self._map_slots + list(range(base, base + 8 * n, 8))
        self._slots = (ctypes.c_void_p * len(slots))(*slots)
        self._err = ctypes.create_string_buffer(256)
        self._kinds = [p["kind"] for p in params]
        self._f32 = [p["kind"] == "scalar" and p["dtype"] == "f32"
                     for p in params]
        self._boxes = [tuple(reversed(p["box"])) if p["kind"] == "tensor_map"
                       else None for p in params]

    def grid(self, shapes):
        dims = []
        for extent in self.record["grid"]:
            n = extent["add"]
            for operand, dim, div in extent["terms"]:
                n += shapes[operand][dim] // div
            dims.append(max(int(n), 0))
        while len(dims) < 3:
            dims.append(1)
        if self._blocks:
            return [min(dims[0] * dims[1] * dims[2], self._blocks), 1, 1]
        return dims

    def busy_programs(self, grid, shapes):
        """The programs of a launch of `grid` that have work, at least:
        the grid's first extent is a sum of counts (query tiles of the
        tokens, and sequences: an upper bound of the tiles), of which the
        larger, with the extent's constant, is a lower bound; a decode
        batch's (one token a sequence) is exact."""
        extent = self.record["grid"][0]
        terms = [shapes[operand][dim] // div
                 for operand, dim, div in extent["terms"]]
        first = min(grid[0], max(max(terms, default=0) + extent["add"], 1))
        return first * grid[1] * grid[2]

    def shared_bytes(self, grid, shapes=None):
        """The dynamic shared memory a launch of `grid` asks for: the
        manifest's, or the larger small-grid footprint (fewer blocks an
        SM, spread over more SMs; docs/runtime.md) where that takes no more
        waves of blocks than the manifest's: a decode program's time hardly
        shrinks with fewer beside it, so each wave costs about one program's
        time (H200: 320 fp8 decode programs in 91 us at two an SM, two
        waves; 264 in 54 us, one: bench/results/2026-11-30-h200-
        session26.md). Without the SMs' occupancy, grids of fewer programs
        than the manifest's programs_per_sm x SMs take it."""
        if self._wave_slots and shapes is not None:
            # (Programs without work return at once: the ones with work
            # make the waves.)
            programs = self.busy_programs(grid, shapes)
            compact, spread = self._wave_slots
            small = wave_footprint(programs, (compact, spread)) == spread
        else:
            small = grid[0] * grid[1] * grid[2] < self._small_below
        if small:
            return self.record["small_grid"]["shared_bytes"]
        return self.record["shared_bytes"]


def wave_footprint(programs, slots):
    """Of footprints holding `slots` blocks each at once on the device, the
    one a launch of `programs` takes: the fewest waves, then the fewest
    slots (fewer blocks an SM, spread over more SMs). Kernel.shared_bytes
    decides so, and vllm.plan_segments counts with it."""
    best, waves = None, 0
    for n in slots:   # (a loop, not min(key=): a launch's host path)
        w = -(-programs // n)
        if best is None or w < waves or (w == waves and n < best):
            best, waves = n, w
    return best


_kernels = {}


def load_bundle(bundle, device_index, backend=0):
    """The kernels of a bundle on a device: [Kernel] in manifest order. The
    bytes handed to the driver are the ones checked against the manifest's
    hashes (a damaged image can crash the driver rather than fail)."""
    cache_key = (str(bundle), device_index)
    if cache_key in _kernels:
        return _kernels[cache_key]
    try:
        manifest, data = _verified(bundle)
    except _BadBundle as e:
        raise _unusable(bundle, e) from None
    if manifest["binary"].endswith(".ptx"):
        data += b"\0"
    image = ctypes.create_string_buffer(data, len(data))
    lib = runtime()
    kernels = []
    for record in manifest["kernels"]:
        fn, mod = ctypes.c_void_p(), ctypes.c_void_p()
        err = ctypes.create_string_buffer(1024)
        small = record.get("small_grid")
        # (The function's limit admits the larger of both footprints.)
        most = max(record["shared_bytes"],
                   small["shared_bytes"] if small else 0)
        _check(lib.attn_rt_load(backend, device_index, image,
                                record["name"].encode(), most,
                                ctypes.byref(fn), ctypes.byref(mod), err,
                                len(err)), err)
        sms = None
        if record.get("persistent") or small:
            count = ctypes.c_int(0)
            _check(lib.attn_rt_multiprocessors(backend, device_index,
                                               ctypes.byref(count), err,
                                               len(err)), err)
            sms = count.value
        occupancy = None
        if small and SMALL_GRID_BY_WAVES:
            occupancy = [_occupancy(lib, backend, fn, record["threads"],
                                    footprint, err)
                         for footprint in (record["shared_bytes"],
                                           small["shared_bytes"])]
            occupancy = None if None in occupancy else occupancy
        kernels.append(Kernel(record, fn, mod, image,
                              sms if record.get("persistent") else None, sms,
                              occupancy))
    _kernels[cache_key] = kernels
    return kernels


# Small-grid footprints chosen by waves where the driver reports each
# footprint's blocks an SM (Kernel.shared_bytes); False: by the manifest's
# programs_per_sm alone (the rule before; bench/probes/decode_segments.py
# compares them).
SMALL_GRID_BY_WAVES = True


def _occupancy(lib, backend, function, threads, shared_bytes, err):
    """Blocks an SM of `function` at that footprint, or None where the
    runtime or driver cannot say."""
    if not hasattr(lib, "attn_rt_occupancy"):
        return None
    blocks = ctypes.c_int(0)
    rc = lib.attn_rt_occupancy(backend, function, threads, shared_bytes,
                               ctypes.byref(blocks), err, len(err))
    if rc == 10:
        return None
    _check(rc, err)
    return blocks.value


# CUtensorMap: 128 bytes; CUtensorMapDataType of the element types.
_MAP_BYTES = 128
_MAP_DTYPES = {"bf16": 9, "f16": 6, "f32": 7, "i8": 0, "f8E4M3FN": 0,
               "f8E5M2": 0}
# (address, shape, strides, dtype, box) -> the encoded map: a serving
# loop's repeated calls copy 128 bytes instead of encoding again.
_TENSOR_MAPS = {}


def _tensor_map(view, box, slot):
    """Writes the tensor map of `view` (a View of device memory: dims
    outermost first, element strides, the innermost contiguous) for boxes
    `box` (innermost first) to the parameter slot at address `slot`."""
    key = (view.ptr, view.shape, view.strides, view.dtype, box)
    known = _TENSOR_MAPS.get(key)
    if known is not None:
        ctypes.memmove(slot, known, _MAP_BYTES)
        return
    if view.strides[-1] != 1:
        raise GpuError(f"{view.name}: a TMA kernel needs its innermost dim "
                       f"contiguous (strides {view.strides})")
    if 0 in view.shape:   # nothing to load: no program reads the map
        ctypes.memset(slot, 0, _MAP_BYTES)
        return
    size = _abi.NUMPY_DTYPES[view.dtype].itemsize
    rank = len(view.shape)
    dims = (ctypes.c_ulonglong * rank)(*reversed(view.shape))
    strides = (ctypes.c_ulonglong * max(rank - 1, 1))(
        *[s * size for s in reversed(view.strides[:-1])])
    boxes = (ctypes.c_uint * rank)(*box)
    err = ctypes.create_string_buffer(512)
    lib = runtime()
    rc = lib.attn_rt_encode_tensor_map(_MAP_DTYPES[view.dtype], rank,
                                       ctypes.c_void_p(view.ptr), dims,
                                       strides, boxes, ctypes.c_void_p(slot),
                                       err, len(err))
    if rc != 0:
        raise GpuError(f"{view.name}: {err.value.decode(errors='replace')} "
                       f"(shape {view.shape}, strides {view.strides}, "
                       f"address {view.ptr:#x})")
    if len(_TENSOR_MAPS) > 4096:
        _TENSOR_MAPS.clear()
    _TENSOR_MAPS[key] = ctypes.string_at(slot, _MAP_BYTES)


class PreparedLaunch:
    """A kernel's launch for one call signature (attn_mlir._replay): the
    parameter words, grid and tensor-map boxes fixed by the first call's
    arguments, in a parameter buffer of its own; a later launch only writes
    the operands' pointers into it (the runtime does, ReplayEngine).
    `sources[i]` says which of the caller's pointers feeds View argument i
    (None for scalars)."""

    def __init__(self, kernel, args, sources):
        self.kernel = kernel
        template, self.patch_pairs, self.maps, shapes = [], [], [], []
        map_params = sum(kind == "tensor_map" for kind in kernel._kinds)
        self._map_buffer = (ctypes.c_uint8 * (_MAP_BYTES * map_params
                                              + 64))()
        first = -(-ctypes.addressof(self._map_buffer) // 64) * 64
        map_slots = [first + _MAP_BYTES * i for i in range(map_params)]
        for kind, is_f32, box, arg, src in zip(kernel._kinds, kernel._f32,
                                               kernel._boxes, args, sources):
            if kind == "tensor_map":
                self.maps.append((src, arg, box, map_slots[len(self.maps)]))
            elif isinstance(arg, View):
                shapes.append(arg.shape)
                self.patch_pairs.append((len(template), src))
                template += [0, 0, 0, *arg.shape, *arg.strides]
            else:
                shapes.append(())
                template.append(
                    _F32_BITS.unpack(_F32.pack(arg))[0] if is_f32
                    else int(arg) & 0xFFFFFFFFFFFFFFFF)
        self._words = (ctypes.c_uint64 * max(len(template), 1))(*template)
        base = ctypes.addressof(self._words)
        slots = map_slots + [base + 8 * i for i in range(len(template))]
        self._slots = (ctypes.c_void_p * max(len(slots), 1))(*slots)
        flat = [x for pair in self.patch_pairs for x in pair]
        self._patches = (ctypes.c_int * max(len(flat), 1))(*flat)
        self.grid = kernel.grid(shapes)
        self._dims = (*self.grid, kernel.record["threads"],
                      kernel.shared_bytes(self.grid, shapes))


def fork(stream, high=False, backend=0):
    """The calling thread's side stream (a raw handle), ordered after the
    work queued on `stream` so far (high: at the device's greatest
    priority), or None where the runtime or driver has none: the caller then
    launches on `stream` alone. A CUDA graph capturing `stream` takes in the
    side stream's launches; join() hands them back."""
    lib = runtime()
    if not hasattr(lib, "attn_rt_fork"):
        return None
    side = ctypes.c_void_p()
    rc = lib.attn_rt_fork(backend, stream, int(high), ctypes.byref(side),
                          _STREAM_ERR, len(_STREAM_ERR))
    if rc == 10:
        return None
    _check(rc, _STREAM_ERR)
    return side.value


def join(stream, side, backend=0):
    """`stream` waits for the work queued on `side` (fork's) so far."""
    _check(runtime().attn_rt_join(backend, stream, side, _STREAM_ERR,
                                  len(_STREAM_ERR)), _STREAM_ERR)


# fork's and join's message buffer (read only when they fail), reused as
# each kernel's own is: no allocation per call.
_STREAM_ERR = ctypes.create_string_buffer(512)


def launch_prepared(launches, ptrs, stream, backend=0):
    """Launches PreparedLaunch objects in order on `stream` (a raw handle),
    given the call's operand pointers (a list; the launches' sources index
    it): the path of launches with tensor maps (encoded from the call's
    pointers) and of NVTX ranges per op call; ReplayEngine launches the
    others. Like the full path's parameter buffers, a plan's are not for one
    signature's calls from several threads at once."""
    lib = runtime()
    for prepared in launches:
        words = prepared._words
        for at, src in prepared.patch_pairs:
            words[at] = words[at + 1] = ptrs[src]
        for src, arg, box, slot in prepared.maps:
            _tensor_map(View(arg.name, ptrs[src], arg.shape, arg.strides,
                             arg.dtype, None), box, slot)
        err = prepared.kernel._err
        _check(lib.attn_rt_launch(backend, prepared.kernel.function,
                                  *prepared._dims, stream, prepared._slots,
                                  err, len(err)), err)


class _ReplayLaunch(ctypes.Structure):
    """gpu_runtime.cpp's AttnReplayLaunch."""
    _fields_ = [("function", ctypes.c_void_p), ("dims", ctypes.c_uint * 5),
                ("params", ctypes.c_void_p), ("words", ctypes.c_void_p),
                ("patches", ctypes.c_void_p), ("patch_count", ctypes.c_int)]


class _ReplayPlan(ctypes.Structure):
    """gpu_runtime.cpp's AttnReplayPlan."""
    _fields_ = [("spec", ctypes.c_void_p), ("count", ctypes.c_int),
                ("aligned", ctypes.c_void_p), ("aligned_count", ctypes.c_int),
                ("pairs", ctypes.c_void_p), ("pair_count", ctypes.c_int),
                ("scratch", ctypes.c_void_p), ("launches", ctypes.c_void_p),
                ("launch_count", ctypes.c_int)]


class ReplayEngine:
    """The per-call work of a replayed call (attn_mlir._replay), done by
    the runtime in one round trip: from the arguments' base pointers (put in
    `bases`), each operand pointer (spec: (argument index, offset), or (-1,
    pointer) for a buffer of attn_mlir's own), the pointer checks (aligned:
    (pointer, bytes); pairs: (output, bytes, operand, bytes) that must not
    overlap), and, where every launch is a PreparedLaunch without tensor
    maps (`launches_here`), the launches with their pointers patched in."""

    def __init__(self, spec, bases, aligned, pairs, launches):
        def longs(rows):
            flat = [int(x) for row in rows for x in row]
            return (ctypes.c_longlong * max(len(flat), 1))(*flat)
        self._spec, self._aligned, self._pairs = (longs(spec), longs(aligned),
                                                  longs(pairs))
        self.bases = (ctypes.c_uint64 * max(bases, 1))()
        self._scratch = (ctypes.c_uint64 * max(len(spec), 1))()
        self._err = ctypes.create_string_buffer(512)
        self.launches_here = bool(launches) and all(
            isinstance(getattr(launch, "_words", None), ctypes.Array)
            and not launch.maps for launch in launches)
        self._launches = (_ReplayLaunch * max(len(launches), 1))()
        if self.launches_here:
            for out, launch in zip(self._launches, launches):
                out.function = launch.kernel.function.value
                out.dims[:] = launch._dims
                out.params = ctypes.addressof(launch._slots)
                out.words = ctypes.addressof(launch._words)
                out.patches = ctypes.addressof(launch._patches)
                out.patch_count = len(launch.patch_pairs)
            self._keep = launches
        self._plan = _ReplayPlan(
            ctypes.addressof(self._spec), len(spec),
            ctypes.addressof(self._aligned), len(aligned),
            ctypes.addressof(self._pairs), len(pairs),
            ctypes.addressof(self._scratch), ctypes.addressof(self._launches),
            len(launches) if self.launches_here else 0)
        self._plan_ref = ctypes.byref(self._plan)
        self._replay = runtime().attn_rt_replay

    def pointers(self):
        """The operand pointers from `bases` (a list), or None where a check
        fails."""
        if not runtime().attn_rt_replay_pointers(self.bases, self._plan_ref):
            return None
        return list(self._scratch)

    def launch(self, stream, backend=0):
        """The whole call from `bases` (launches_here); False where a check
        fails (nothing launched)."""
        rc = self._replay(backend, ctypes.c_void_p(stream), self.bases,
                          self._plan_ref, self._err, 512)
        if rc < 0:
            return False
        _check(rc, self._err)
        return True


def launch(kernel, args, stream, backend=0):
    """Launches `kernel` with `args` (one per manifest parameter: Views of
    device memory, or python scalars; a tensor map's is the View it
    describes) on `stream` (a raw handle). Every operand parameter is
    packed into 8-byte slots of a single buffer, tensor maps into 128-byte
    ones."""
    words, shapes = [], []
    maps = 0
    for kind, is_f32, box, arg in zip(kernel._kinds, kernel._f32,
                                      kernel._boxes, args):
        if kind == "tensor_map":
            _tensor_map(arg, box, kernel._map_slots[maps])
            maps += 1
        elif isinstance(arg, View):
            shapes.append(arg.shape)
            words += [arg.ptr, arg.ptr, 0, *arg.shape, *arg.strides]
        else:
            shapes.append(())
            words.append(_F32_BITS.unpack(_F32.pack(arg))[0] if is_f32
                         else int(arg) & 0xFFFFFFFFFFFFFFFF)
    kernel._words[:] = words
    gx, gy, gz = kernel.grid(shapes)
    _check(runtime().attn_rt_launch(
        backend, kernel.function, gx, gy, gz, kernel.record["threads"],
        kernel.shared_bytes((gx, gy, gz), shapes), ctypes.c_void_p(stream),
        kernel._slots, kernel._err, len(kernel._err)), kernel._err)
