"""Direct calls of the attn ops: each call emits the op for the arguments'
static properties (head counts, head dim, page size, dtypes, features),
compiles it once per specialization, and runs it on the given arrays.

Arguments are numpy arrays (ml_dtypes for bf16/fp8) or torch CPU tensors;
outputs are written in place. These functions check only what the MLIR
verifier cannot see through types; `attn_mlir.vllm` validates run-time
contents (offsets, block tables) with named ValueErrors.
"""

import ctypes

import numpy as np

from ._abi import View, descriptor, host_values, memref_type, view
from ._toolchain import load_kernel


def _scale_view(x, name):
    """A scale given as a float or a 1-element array, as a 1-element f32 view
    (a host copy: the CPU kernels read it once per call)."""
    if x is None:
        return None
    raw = [x] if isinstance(x, (int, float, np.floating)) else host_values(x, name)
    vals = np.asarray(raw, dtype=np.float32).reshape(-1)
    if vals.size != 1:
        raise ValueError(f"{name}: expected a single scale value, got "
                         f"{vals.size} values")
    return view(vals.copy(), name)


def _schedule_attr(schedule):
    if schedule is None:
        return None
    bq, bn, pack = schedule
    return (f"#attn.schedule<block_q = {bq}, block_n = {bn}, "
            f"heads_per_program = {pack}>")


class _Call:
    """Builds `func.func @kernel(...) { attn.<op> ... }` and runs it."""

    def __init__(self, op):
        self.op = op
        self.params = []   # (ssa, type, kind, value)
        self.clauses = []
        self.attrs = []

    def mem(self, kw, v, static=()):
        if v is None:
            return
        if not isinstance(v, View):
            v = view(v, kw)
        t = memref_type(v, static)
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
        fn = load_kernel(self.text(), "kernel")
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
    c.mem("k_scale", _scale_view(k_scale, "k_scale"), (0,))
    c.mem("v_scale", _scale_view(v_scale, "v_scale"), (0,))
    c.mem("alibi_slopes", alibi_slopes, (0,))
    c.mem("sinks", sinks, (0,))
    c.mem("out_scale", _scale_view(out_scale, "out_scale"), (0,))
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
    c.mem("q_descale", _scale_view(q_descale, "q_descale"), (0,))
    c.mem("k_descale", _scale_view(k_descale, "k_descale"), (0,))
    c.mem("v_descale", _scale_view(v_descale, "v_descale"), (0,))
    c.mem("alibi_slopes", alibi_slopes, (0,))
    c.mem("sinks", sinks, (0,))
    c.mem("out_scale", _scale_view(out_scale, "out_scale"), (0,))
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
            c.mem(kw, _scale_view(s, kw), (0,))
    c.mem("out_scale", _scale_view(out_scale, "out_scale"), (0,))
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
    c.mem("out_scale", _scale_view(out_scale, "out_scale"), (0,))
    c.mem("out", out, (1, 2))
    c.run()
