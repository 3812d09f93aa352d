"""Arrays in and out of compiled kernels: dtypes and the C memref ABI.

A kernel compiled with C wrappers takes each memref as a pointer to
{allocated, aligned, offset, sizes[rank], strides[rank]} (strides in
elements) and scalars by value. numpy arrays (bf16 and fp8 as ml_dtypes)
and torch CPU tensors are both accepted, as views: no copies are made, so
outputs are written in place.
"""

import contextlib
import ctypes
import os
import threading

import ml_dtypes
import numpy as np

# Canonical element names (MLIR spelling) and their numpy dtypes.
NUMPY_DTYPES = {
    "f32": np.dtype(np.float32),
    "f16": np.dtype(np.float16),
    "bf16": np.dtype(ml_dtypes.bfloat16),
    "f8E4M3FN": np.dtype(ml_dtypes.float8_e4m3fn),
    "f8E5M2": np.dtype(ml_dtypes.float8_e5m2),
    "i32": np.dtype(np.int32),
    "i64": np.dtype(np.int64),
    "u8": np.dtype(np.uint8),
    "i8": np.dtype(np.int8),
}
_BY_NUMPY = {v: k for k, v in NUMPY_DTYPES.items()}
# Booleans travel as their bytes (0 or 1): i8 flags.
_BY_NUMPY[np.dtype(np.bool_)] = "i8"
FP8 = ("f8E4M3FN", "f8E5M2")
FLOATS = ("f32", "f16", "bf16")


def _torch():
    try:
        import torch
        return torch
    except ImportError:
        return None


_TORCH_DTYPES = None   # torch dtype -> canonical name, built on first use


def _torch_dtype_name(dtype):
    global _TORCH_DTYPES
    if _TORCH_DTYPES is None:
        torch = _torch()
        _TORCH_DTYPES = {
            torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
            torch.float8_e4m3fn: "f8E4M3FN", torch.float8_e5m2: "f8E5M2",
            torch.int32: "i32", torch.int64: "i64", torch.uint8: "u8",
            torch.int8: "i8", torch.bool: "i8"}
    return _TORCH_DTYPES.get(dtype)


def is_torch(x):
    module = type(x).__module__
    return module == "torch" or module.startswith("torch.")


class View:
    """A strided array handed to a kernel: pointer, shape, element strides."""

    __slots__ = ("name", "ptr", "shape", "strides", "dtype", "owner")

    def __init__(self, name, ptr, shape, strides, dtype, owner):
        self.name, self.ptr, self.dtype, self.owner = name, ptr, dtype, owner
        self.shape, self.strides = tuple(shape), tuple(strides)

    @property
    def ndim(self):
        return len(self.shape)

    def reinterpret(self, dtype):
        """Same bytes as another element type of the same width (uint8 fp8
        caches)."""
        return View(self.name, self.ptr, self.shape, self.strides, dtype,
                    self.owner)


class _State(threading.local):
    metadata_only = False


_STATE = _State()


class NeedsValues(Exception):
    """Raised in metadata-only mode where a check needs the contents of a
    tensor: fake (meta) tensors have none, so the checks stop there."""


@contextlib.contextmanager
def metadata_only():
    """Runs an op's argument checks on tensors without storage (the fake
    tensors of torch.compile, meta tensors): pointers read as 0, nothing is
    compiled or run, values are never read (host_values raises
    NeedsValues; checks that only validate contents are skipped).
    Thread-local: a trace in one thread leaves calls in others alone."""
    previous = _STATE.metadata_only
    _STATE.metadata_only = True
    try:
        yield
    finally:
        _STATE.metadata_only = previous


def checking_metadata():
    return _STATE.metadata_only


def view(x, name, allow_none=False):
    """Wraps a numpy array or torch CPU tensor; ValueError names `name`."""
    if x is None:
        if allow_none:
            return None
        raise ValueError(f"{name}: expected an array, got None")
    if is_torch(x):
        meta = _STATE.metadata_only
        if not (x.is_cuda or x.is_cpu or meta):
            raise ValueError(f"{name}: tensor is on {x.device}; kernels run on "
                             f"the CPU or on CUDA/ROCm devices")
        dtype = _torch_dtype_name(x.dtype)
        if dtype is None:
            raise ValueError(f"{name}: unsupported dtype {x.dtype}")
        strides = x.stride()
        if strides and min(strides) < 0:
            raise ValueError(f"{name}: negative strides are not supported")
        return View(name, 0 if meta else x.data_ptr(), x.shape, strides, dtype,
                    x)
    if isinstance(x, np.ndarray):
        dtype = _BY_NUMPY.get(x.dtype)
        if dtype is None:
            raise ValueError(f"{name}: unsupported dtype {x.dtype}")
        item = x.dtype.itemsize
        if any(s < 0 or s % item for s in x.strides):
            raise ValueError(f"{name}: strides {x.strides} are negative or not "
                             f"a multiple of the element size")
        return View(name, x.ctypes.data, x.shape, [s // item for s in x.strides],
                    dtype, x)
    raise ValueError(f"{name}: expected a numpy array or torch tensor, got "
                     f"{type(x).__name__}")


def chunk_alignment(v):
    """GPU kernels stage rows of 16-bit and fp8 operands in chunks of 8
    elements (16-byte cp.async copies, 8-byte fp8 loads). Where rows hold
    whole chunks, returns the chunk size in bytes, to which the pointer must
    be aligned (check_pointer_alignment), and raises ValueError naming the
    operand if an outer stride is not a multiple of it; else returns 0."""
    if not isinstance(v, View) or len(v.shape) < 2:
        return 0
    item = NUMPY_DTYPES[v.dtype].itemsize
    if item > 2 or v.strides[-1] != 1 or v.shape[-1] % 8:
        return 0
    chunk = 8 * item
    if any(s * item % chunk
           for s, n in zip(v.strides[:-1], v.shape[:-1]) if n > 1):
        raise ValueError(
            f"{v.name}: GPU kernels read its rows in {chunk}-byte chunks; its "
            f"outer strides must be multiples of 8 elements (strides "
            f"{v.strides}); pass a contiguous copy")
    return chunk


def check_pointer_alignment(v, chunk):
    if chunk and v.ptr % chunk:
        raise ValueError(
            f"{v.name}: GPU kernels read its rows in {chunk}-byte chunks; the "
            f"tensor must start {chunk}-byte aligned (pointer {v.ptr:#x}); "
            f"pass a contiguous copy")


def validating():
    """ATTN_MLIR_VALIDATE=1: also check what only device memory holds (index
    contents, scales in CUDA tensors), reading it on the host, which
    synchronizes. Read per call (a dictionary lookup). Never in
    metadata-only mode: there are no values to read."""
    if _STATE.metadata_only:
        return False
    return os.environ.get("ATTN_MLIR_VALIDATE", "") not in ("", "0")


def extent(shape, strides):
    """Elements from the first to one past the last element a strided view
    addresses (0 when it is empty); strides in elements, non-negative."""
    if 0 in shape:
        return 0
    return 1 + sum((n - 1) * s for n, s in zip(shape, strides))


def self_overlap(shape, strides):
    """Why two indices of a strided view may address one element, or None.
    Sufficient test for distinct elements: ordered by stride, each dim of
    size > 1 steps past everything the smaller-stride dims reach. Layouts
    that interleave dims without overlapping fail it too; no kernel output
    needs one."""
    dims = sorted((s, n) for n, s in zip(shape, strides) if n > 1)
    reach = 1
    for s, n in dims:
        if s == 0:
            return f"a zero stride on a dim of size {n} (a broadcast view)"
        if s < reach:
            return (f"strides {tuple(strides)} for shape {tuple(shape)} map "
                    f"several indices to one element")
        reach = s * (n - 1) + reach
    return None


def check_output(v, name=None):
    """An output a kernel writes: every element distinct and writable.
    Raises ValueError naming it."""
    name = name or v.name
    why = self_overlap(v.shape, v.strides)
    if why:
        raise ValueError(f"{name}: an output must not overlap itself; it has "
                         f"{why}; pass a contiguous array")
    check_writeable(v, name)


def check_writeable(v, name=None):
    owner = v.owner
    if isinstance(owner, np.ndarray) and not owner.flags.writeable:
        raise ValueError(f"{name or v.name}: an output must be writable; this "
                         f"array is read-only")


def _fake_array(v):
    """A numpy array header at `v`'s address (never dereferenced), for
    np.shares_memory."""
    item = NUMPY_DTYPES[v.dtype].itemsize

    class Header:
        __array_interface__ = {
            "data": (v.ptr, False), "shape": tuple(v.shape),
            "strides": tuple(s * item for s in v.strides),
            "typestr": f"|V{item}", "version": 3}
    return np.asarray(Header())


_TOO_HARD = getattr(np, "exceptions", np).TooHardError


def shares_memory(a, span_a, b, span_b):
    """Whether Views `a` and `b` (of one device) address a common byte;
    span_* are their extents in bytes. Disjoint address ranges answer at
    once; overlapping ranges are solved exactly, and a case too hard to
    solve cheaply answers False (not rejected)."""
    if not span_a or not span_b:
        return False
    if a.ptr >= b.ptr + span_b or b.ptr >= a.ptr + span_a:
        return False
    try:
        return bool(np.shares_memory(_fake_array(a), _fake_array(b),
                                     max_work=100000))
    except _TOO_HARD:
        return False


def reads_values(x):
    """Whether checks read the contents of `x`: host arrays always, device
    ones only when validating (it synchronizes), fake tensors never."""
    if _STATE.metadata_only:
        return False
    return device_of(x) is None or validating()


def device_of(x):
    """The torch device of a CUDA tensor, else None (host memory)."""
    if is_torch(x) and x.is_cuda:
        return x.device
    return None


def host_values(x, name):
    """The values of a small index or scale array as a numpy array."""
    if is_torch(x):
        if _STATE.metadata_only:
            raise NeedsValues(name)
        return x.detach().cpu().numpy()
    return np.asarray(x)


_DESCRIPTORS = {}


def descriptor_type(rank):
    if rank not in _DESCRIPTORS:
        fields = [("allocated", ctypes.c_void_p), ("aligned", ctypes.c_void_p),
                  ("offset", ctypes.c_int64)]
        if rank:
            fields += [("sizes", ctypes.c_int64 * rank),
                       ("strides", ctypes.c_int64 * rank)]
        _DESCRIPTORS[rank] = type(f"MemRef{rank}D", (ctypes.Structure,),
                                  {"_fields_": fields})
    return _DESCRIPTORS[rank]


def descriptor(v):
    d = descriptor_type(v.ndim)()
    d.allocated = d.aligned = v.ptr
    d.offset = 0
    for i, (n, s) in enumerate(zip(v.shape, v.strides)):
        d.sizes[i] = n
        d.strides[i] = s
    return d


def _row_major(v):
    expect = 1
    for n, s in zip(reversed(v.shape), reversed(v.strides)):
        if n != 1 and s != expect:
            return False
        expect *= n
    return True


_MEMREF_TYPES = {}


def memref_type(v, static_dims=()):
    """The MLIR memref type of a view: the listed dims static, the rest
    dynamic; row-major views get the identity layout (static strides, no
    offset: the descriptor's pointer is the first element), others any
    strides. Memoized: a repeated call (a serving loop) costs a lookup."""
    key = (v.shape, v.strides, v.dtype, static_dims)
    t = _MEMREF_TYPES.get(key)
    if t is None:
        if len(_MEMREF_TYPES) > 4096:
            _MEMREF_TYPES.clear()
        t = _MEMREF_TYPES[key] = _memref_type(v, static_dims)
    return t


def _memref_type(v, static_dims):
    dims = "x".join(str(v.shape[i]) if i in static_dims else "?"
                    for i in range(v.ndim))
    if v.ndim and _row_major(v):
        return f"memref<{dims}x{v.dtype}>"
    # A unit innermost stride is static: GPU kernels then copy rows as
    # 16-byte vectors.
    strides = ["?"] * v.ndim
    if v.ndim and v.strides[-1] == 1:
        strides[-1] = "1"
    layout = "strided<[" + ", ".join(strides) + "], offset: ?>"
    if v.ndim == 0:
        return f"memref<{v.dtype}, {layout}>"
    return f"memref<{dims}x{v.dtype}, {layout}>"
