"""Running any MLIR function that attn-opt lowers, on the CPU, from Python.

`run_function(mlir_text, name, args)` compiles the module with the CPU
pipeline (cached like every kernel) and calls `name` with numpy arrays /
torch CPU tensors for its memref parameters and Python numbers for its
scalar parameters, in signature order. (GPU kernels run through `ops` and
`_gpu`, not here.)
"""

import ctypes
import re

from ._abi import descriptor, view
from ._toolchain import load_kernel

_SCALARS = {"f32": ctypes.c_float, "f64": ctypes.c_double, "i64": ctypes.c_int64,
            "i32": ctypes.c_int32, "index": ctypes.c_int64}


def signature(mlir_text, name):
    """The parameter types of func.func @name, as written."""
    m = re.search(r"func\.func\s+@" + re.escape(name) + r"\s*\(", mlir_text)
    if not m:
        raise ValueError(f"name: no function @{name} in the module")
    depth, i, start = 1, m.end(), m.end()
    while depth:
        depth += {"(": 1, ")": -1}.get(mlir_text[i], 0)
        i += 1
    params, depth, cur = [], 0, ""
    for ch in mlir_text[start:i - 1]:
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            params.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        params.append(cur)
    return [p.split(":", 1)[1].strip() for p in params]


def run_function(mlir_text, name, args):
    types = signature(mlir_text, name)
    if len(types) != len(args):
        raise ValueError(f"args: @{name} takes {len(types)} arguments, got "
                         f"{len(args)}")
    fn = load_kernel(mlir_text, name)
    fn.restype = None
    call, keep = [], []
    for i, (t, a) in enumerate(zip(types, args)):
        if t.startswith("memref"):
            d = descriptor(view(a, f"argument {i}"))
            keep.append(d)
            call.append(ctypes.byref(d))
        elif t in _SCALARS:
            call.append(_SCALARS[t](a))
        else:
            raise ValueError(f"argument {i}: unsupported parameter type {t}")
    fn(*call)
