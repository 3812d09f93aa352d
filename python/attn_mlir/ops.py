"""Direct calls of the attn ops: each call emits the op for the arguments'
static properties (head counts, head dim, page size, dtypes, features),
compiles it once per specialization, and runs it on the given arrays.

Arguments are numpy arrays (ml_dtypes for bf16/fp8) or torch tensors, all
on the CPU or all on one CUDA device (then the op runs as a GPU kernel on the
current stream, see `_gpu`); outputs are written in place.

ATTN_MLIR_RECORD=file.jsonl appends every specialization a call needs to the
file (for `python -m attn_mlir.aot`); with ATTN_MLIR_DRY_RUN=1 calls only
record and run nothing. These functions check only what the MLIR
verifier cannot see through types; `attn_mlir.vllm` validates run-time
contents (offsets, block tables) with named ValueErrors.
"""

import ctypes
import json
import os

import numpy as np

from . import _abi
from ._abi import (View, descriptor, device_of, host_values, is_torch,
                   memref_type, view)
from ._toolchain import load_kernel


def _scale_view(x, name, device=None):
    """A scale given as a float or a 1-element array, as a 1-element f32 view
    (a host copy: the CPU kernels read it once per call). On a GPU a scale
    must be in device memory: a CUDA tensor is used as it is, a float is
    filled into a new 1-element tensor (stream-ordered, no synchronization)."""
    if x is None:
        return None
    if device is not None:
        import torch
        if device_of(x) is not None:
            if x.numel() != 1 or x.dtype != torch.float32:
                raise ValueError(f"{name}: expected one float32 value, got "
                                 f"{x.numel()} values of {x.dtype}")
            return view(x.reshape(1), name)
        if isinstance(x, (int, float, np.floating)):
            return view(torch.full((1,), float(x), dtype=torch.float32,
                                   device=device), name)
        raise ValueError(f"{name}: on a GPU call give a float or a float32 "
                         f"CUDA tensor, got {type(x).__name__}")
    raw = [x] if isinstance(x, (int, float, np.floating)) else host_values(x, name)
    vals = np.asarray(raw, dtype=np.float32).reshape(-1)
    if vals.size != 1:
        raise ValueError(f"{name}: expected a single scale value, got "
                         f"{vals.size} values")
    return view(vals.copy(), name)


def _schedule_attr(schedule):
    if schedule is None:
        return None
    bq, bn, pack, *rest = schedule
    warps = f", warps = {rest[0]}" if rest and rest[0] else ""
    return (f"#attn.schedule<block_q = {bq}, block_n = {bn}, "
            f"heads_per_program = {pack}{warps}>")


def _current_stream(torch, dev):
    """The raw handle of the current stream of `dev` (the private accessor
    that Triton's launcher uses is several microseconds faster than
    torch.cuda.current_stream; the public one is the fallback)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw(dev.index)
    return torch.cuda.current_stream(dev).cuda_stream


# (torch dtype, shape, strides, device index, static dims) of a tensor
# operand -> (memref type, element name, torch device).
_TORCH_OPERANDS = {}

# (MLIR text, device index) -> loaded kernels: a repeated call costs one
# dictionary lookup, not a bundle search.
_GPU_KERNELS = {}


class _Call:
    """Builds `func.func @kernel(...) { attn.<op> ... }` and runs it."""

    def __init__(self, op):
        self.op = op
        self.params = []   # (ssa, type, kind, value)
        self.clauses = []
        self.attrs = []
        self.device = None   # torch device of the first operand on a GPU

    def scale(self, kw, x):
        self.mem(kw, _scale_view(x, kw, self.device), (0,))

    def mem(self, kw, v, static=()):
        if v is None:
            return
        if is_torch(v):
            # Memoized on the tensor's properties: a serving loop's repeated
            # calls skip the checks and the type construction.
            key = (v.dtype, v.shape, v.stride(), v.get_device(), v.is_cpu,
                   static)
            known = _TORCH_OPERANDS.get(key)
            if known is None:
                w = view(v, kw)
                dev = device_of(v)
                # GPU operands: the chunk alignment their rows need.
                chunk = _abi.chunk_alignment(w) if dev is not None else 0
                known = (memref_type(w, static), w.dtype, dev, chunk)
                if len(_TORCH_OPERANDS) > 4096:
                    _TORCH_OPERANDS.clear()
                _TORCH_OPERANDS[key] = known
            t, dtype, dev, chunk = known
            v = View(kw, v.data_ptr(), key[1], key[2], dtype, v)
            if chunk:
                _abi.check_pointer_alignment(v, chunk)
        else:
            if not isinstance(v, View):
                v = view(v, kw)
            dev = device_of(v.owner)
            t = memref_type(v, static)
        if not self.params:
            self.device = dev
        elif dev != self.device:
            raise ValueError(f"{kw}: on {dev or 'the host'}, but the call's "
                             f"first operand is on {self.device or 'the host'}")
        self.params.append((f"%{kw}", t, "mem", v))
        self.clauses.append(f"{kw}(%{kw} : {t})")

    def scalar(self, kw, value, ty="f32", clause=True):
        if value is None:
            return
        self.params.append((f"%{kw}", ty, ty, value))
        if clause:
            self.clauses.append(f"{kw}(%{kw})")

    def attr(self, name, value):
        if value is not None and value is not False:
            self.attrs.append(name if value is True else f"{name} = {value}")

    def text(self):
        sig = ", ".join(f"{ssa}: {t}" for ssa, t, _, _ in self.params)
        attrs = (" {" + ", ".join(self.attrs) + "}") if self.attrs else ""
        return (f"func.func @kernel({sig}) {{\n"
                f"  attn.{self.op} {' '.join(self.clauses)}{attrs}\n"
                f"  return\n}}\n")

    def run(self):
        text = self.text()
        record = os.environ.get("ATTN_MLIR_RECORD")
        if record:
            with open(record, "a") as f:
                f.write(json.dumps({"mlir": text}) + "\n")
        if os.environ.get("ATTN_MLIR_DRY_RUN"):
            return
        if self.device is not None:
            return self._run_gpu(text)
        fn = load_kernel(text, "kernel")
        fn.restype = None
        args, keep = [], []
        for _, _, kind, value in self.params:
            if kind == "mem":
                d = descriptor(value)
                keep.append(d)
                args.append(ctypes.byref(d))
            elif kind == "f32":
                args.append(ctypes.c_float(value))
            else:
                args.append(ctypes.c_int64(value))
        fn(*args)

    def _run_gpu(self, text):
        import torch
        from . import _gpu
        dev = self.device
        # ROCm torch runs the ROCDL kernels (HSACO) through the HIP module
        # API; that path is the CUDA one with other entry points and has not
        # run on AMD hardware (docs/runtime.md).
        backend = 1 if torch.version.hip else 0
        kernels = _GPU_KERNELS.get((text, dev.index))
        if kernels is None:
            if backend:
                chip = _gpu.chip_for_hip_device(
                    torch.cuda.get_device_properties(dev))
            else:
                chip = _gpu.chip_for_capability(
                    *torch.cuda.get_device_capability(dev))
            kernels = _gpu.load_bundle(_gpu.bundle_for(text, chip), dev.index,
                                       backend)
            _GPU_KERNELS[(text, dev.index)] = kernels
        stream = _current_stream(torch, dev)
        for kernel in kernels:
            args = [self.params[p["arg"]][3] for p in kernel.record["params"]]
            _gpu.launch(kernel, args, stream, backend)


def prefix_prefill(q, k, v, k_cache, v_cache, block_table, query_start,
                   seq_lens, out, *, scale, k_scale=None, v_scale=None,
                   alibi_slopes=None, alibi_form=None, sinks=None,
                   out_scale=None, sliding_window=None, skip_decode=False,
                   schedule=None):
    c = _Call("prefix_prefill")
    c.mem("q", q, (1, 2))
    c.mem("k", k, (1, 2))
    c.mem("v", v, (1, 2))
    c.mem("k_cache", k_cache, (1, 2, 3, 4))
    c.mem("v_cache", v_cache, (1, 2, 3))
    c.mem("block_table", block_table)
    c.mem("query_start", query_start)
    c.mem("seq_lens", seq_lens)
    c.scalar("scale", float(scale))
    c.scale("k_scale", k_scale)
    c.scale("v_scale", v_scale)
    c.mem("alibi_slopes", alibi_slopes, (0,))
    c.mem("sinks", sinks, (0,))
    c.scale("out_scale", out_scale)
    c.mem("out", out, (1, 2))
    c.attr("sliding_window", f"{sliding_window} : i64" if sliding_window else None)
    c.attr("skip_decode", bool(skip_decode))
    c.attr("alibi_form", f"#attn.alibi<{alibi_form}>" if alibi_form else None)
    c.attr("schedule", _schedule_attr(schedule))
    c.run()


def unified(q, k_cache, v_cache, block_table, cu_seqlens_q, seqused_k, out, *,
            scale, softcap=None, q_descale=None, k_descale=None,
            v_descale=None, alibi_slopes=None, alibi_form=None, sinks=None,
            out_scale=None, sliding_window=None, num_segments=None,
            segment_max=None, segment_sum=None, schedule=None):
    c = _Call("unified")
    c.mem("q", q, (1, 2))
    c.mem("k_cache", k_cache, (1, 2, 3))
    c.mem("v_cache", v_cache, (1, 2, 3))
    c.mem("block_table", block_table)
    c.mem("cu_seqlens_q", cu_seqlens_q)
    c.mem("seqused_k", seqused_k)
    c.scalar("scale", float(scale))
    c.scalar("softcap", None if softcap is None else float(softcap))
    c.scale("q_descale", q_descale)
    c.scale("k_descale", k_descale)
    c.scale("v_descale", v_descale)
    c.mem("alibi_slopes", alibi_slopes, (0,))
    c.mem("sinks", sinks, (0,))
    c.scale("out_scale", out_scale)
    c.mem("out", out, (1, 2, 3) if num_segments else (1, 2))
    c.mem("segment_max", segment_max, (1, 2))
    c.mem("segment_sum", segment_sum, (1, 2))
    c.attr("sliding_window", f"{sliding_window} : i64" if sliding_window else None)
    c.attr("num_segments", f"{num_segments} : i64" if num_segments else None)
    c.attr("alibi_form", f"#attn.alibi<{alibi_form}>" if alibi_form else None)
    c.attr("schedule", _schedule_attr(schedule))
    c.run()


def flash(q, k, v, cu_seqlens_q, cu_seqlens_k, out, *, scale, causal=False,
          bias=None, dropout=None, fp8_scales=None, out_scale=None,
          schedule=None):
    """dropout: (p, philox_seed, philox_offset); fp8_scales: (q, k, v, p)."""
    c = _Call("flash")
    c.mem("q", q, (1, 2))
    c.mem("k", k, (1, 2))
    c.mem("v", v, (1, 2))
    c.mem("cu_seqlens_q", cu_seqlens_q)
    c.mem("cu_seqlens_k", cu_seqlens_k)
    c.scalar("scale", float(scale))
    c.mem("bias", bias, (0, 1) if bias is not None and bias.shape[0] == 1 else (1,))
    if dropout is not None:
        p, seed, offset = dropout
        c.scalar("dropout_p", float(p), clause=False)
        c.scalar("philox_seed", int(seed), "i64", clause=False)
        c.scalar("philox_offset", int(offset), "i64", clause=False)
        c.clauses.append("dropout(%dropout_p, %philox_seed, %philox_offset)")
    if fp8_scales is not None:
        for kw, s in zip(("q_scale", "k_scale", "v_scale", "p_scale"), fp8_scales):
            c.scale(kw, s)
    c.scale("out_scale", out_scale)
    c.mem("out", out, (1, 2))
    c.attr("causal", bool(causal))
    c.attr("schedule", _schedule_attr(schedule))
    c.run()


def blocksparse(q, k, v, cu_seqlens_q, cu_seqlens_k, crow, col, out, *, scale,
                block_size, q_block_size=None, schedule=None):
    c = _Call("blocksparse")
    c.mem("q", q, (1, 2))
    c.mem("k", k, (1, 2))
    c.mem("v", v, (1, 2))
    c.mem("cu_seqlens_q", cu_seqlens_q)
    c.mem("cu_seqlens_k", cu_seqlens_k)
    c.mem("crow", crow, (0,))
    c.mem("col", col, (0,))
    c.scalar("scale", float(scale))
    c.mem("out", out, (1, 2))
    c.attr("block_size", f"{block_size} : i64")
    c.attr("q_block_size", f"{q_block_size} : i64" if q_block_size else None)
    c.attr("schedule", _schedule_attr(schedule))
    c.run()


def merge_states(partial, out, *, segment_max=None, segment_sum=None,
                 segment_lse=None, sinks=None, out_scale=None):
    c = _Call("merge_states")
    c.mem("partial", partial, (1, 3))
    c.mem("segment_max", segment_max, (1,))
    c.mem("segment_sum", segment_sum, (1,))
    c.mem("segment_lse", segment_lse, (1,))
    c.mem("sinks", sinks, (0,))
    c.scale("out_scale", out_scale)
    c.mem("out", out, (1, 2))
    c.run()
