"""Compile every kernel a model's attention needs before serving starts.

    from attn_mlir.precompile import AttentionConfig, precompile
    cfg = AttentionConfig(num_q_heads=32, num_kv_heads=8, head_dim=128,
                          dtype="bfloat16", kv_cache_dtype="fp8",
                          block_size=16, sliding_window=None)
    precompile([cfg], chip="sm_90a")      # or chip="cpu"; or out="bundles/"

A specialization depends on the layer's configuration (head counts, head
dim, types, page size, window, softcap, sinks, ALiBi), never on batch size
or lengths, so a model has few: `attn_mlir.vllm.unified_attention`'s
one-pass kernel (with its forms for mixed and prefill batches, whose
queries per sequence select planning hints) and, for decode batches over
long contexts, the split-KV
kernel (one for every segment count: it reads the count from its buffers
at run time) with its merge_states. `specializations()`
finds them by making those calls in a dry run (arguments checked, nothing
compiled or run); `precompile()` compiles them into the kernel cache (or
into an AOT bundle directory), so that serving never compiles after
warm-up: each later call is a cache hit (one log line per process at INFO).
`python -m attn_mlir.aot --model cfg.json` does the same from a JSON file
of AttentionConfig fields (an object or a list of them).
"""

import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Optional

import ml_dtypes
import numpy as np

from . import _gpu, _log, _toolchain, ops, vllm

_DTYPES = {"bfloat16": ml_dtypes.bfloat16, "float16": np.float16,
           "float32": np.float32}
_FP8 = {"fp8": ml_dtypes.float8_e4m3fn, "fp8_e4m3": ml_dtypes.float8_e4m3fn,
        "fp8_e5m2": ml_dtypes.float8_e5m2}


@dataclasses.dataclass(frozen=True)
class AttentionConfig:
    """One attention layer as vLLM serves it (attn_mlir.vllm.unified_attention
    with vLLM's cache layout)."""
    num_q_heads: int
    num_kv_heads: int
    head_dim: int
    dtype: str = "bfloat16"          # q and out: bfloat16, float16, float32
    kv_cache_dtype: str = "auto"     # "auto" (= dtype), "fp8", "fp8_e5m2", ...
    block_size: int = 16
    sliding_window: Optional[int] = None   # keys a query sees, itself included
    softcap: Optional[float] = None
    sinks: bool = False
    alibi: bool = False
    split_kv: bool = True            # also the split-KV decode kernels

    @classmethod
    def from_dict(cls, d):
        unknown = set(d) - {f.name for f in dataclasses.fields(cls)}
        if unknown:
            raise ValueError(f"AttentionConfig: unknown field(s) "
                             f"{', '.join(sorted(unknown))}")
        return cls(**d)


def _arrays(cfg, tokens, batch, context):
    if cfg.dtype not in _DTYPES:
        raise ValueError(f"dtype: {cfg.dtype!r} is not one of "
                         f"{', '.join(_DTYPES)}")
    dt = _DTYPES[cfg.dtype]
    fp8 = "fp8" in cfg.kv_cache_dtype
    if fp8 and cfg.kv_cache_dtype not in _FP8:
        raise ValueError(f"kv_cache_dtype: {cfg.kv_cache_dtype!r} is not one "
                         f"of {', '.join(_FP8)} (or a non-fp8 string)")
    cache_dt = _FP8[cfg.kv_cache_dtype] if fp8 else dt
    hq, hk, d, bs = (cfg.num_q_heads, cfg.num_kv_heads, cfg.head_dim,
                     cfg.block_size)
    pages = -(-context // bs)
    q = np.zeros((tokens, hq, d), dt)
    cache = np.zeros((batch * pages, bs, hk, d), cache_dt)
    per_seq = tokens // batch
    return dict(
        q=q, k=cache, v=cache, out=np.zeros_like(q),
        cu_seqlens_q=np.arange(0, tokens + 1, per_seq, dtype=np.int32),
        max_seqlen_q=per_seq,
        seqused_k=np.full(batch, context, np.int32), max_seqlen_k=context,
        softmax_scale=d ** -0.5, causal=True,
        window_size=(cfg.sliding_window - 1, 0) if cfg.sliding_window
        else None,
        block_table=np.arange(batch * pages, dtype=np.int32).reshape(batch,
                                                                     pages),
        softcap=cfg.softcap, q_descale=None,
        k_descale=np.ones(1, np.float32) if fp8 else None,
        v_descale=np.ones(1, np.float32) if fp8 else None,
        alibi_slopes=np.ones(hq, np.float32) if cfg.alibi else None,
        sinks=np.zeros(hq, np.float32) if cfg.sinks else None)


def specializations(cfg):
    """The MLIR text of every kernel `cfg`'s layers can call: the one-pass
    kernel (decode batches; over fp8 caches their decode-rows form), its
    forms for batches whose queries average more than
    ops.LONG_QUERY_TOKENS (mixed batches) and at least
    ops.PREFILL_ROW_TOKENS (prefills) a sequence, where those planning
    hints apply, and, with split_kv, the split-KV kernels that
    attn_mlir.vllm's plan picks for decode over long contexts (the kernel
    reads the segment count at run time, so every count is the same
    specialization; short segments take the attn.stream_pages hint, long
    ones not) and a mixed batch's split decode op."""
    long_keys = 1 << 16   # (a bound: the arrays stay small)
    with ops.collect_specializations() as texts:
        vllm.unified_attention(**_arrays(cfg, tokens=4, batch=2, context=64))
        for per_seq in (ops.LONG_QUERY_TOKENS + 1, ops.PREFILL_ROW_TOKENS):
            vllm.unified_attention(**_arrays(cfg, tokens=2 * per_seq,
                                             batch=2, context=per_seq))
        if cfg.split_kv:
            context = 512   # the shortest context the plan splits
            # Short segments (the attn.stream_pages hint), then long ones.
            vllm.unified_attention(**_arrays(cfg, tokens=2, batch=2,
                                             context=context))
            vllm.unified_attention(**{
                **_arrays(cfg, tokens=2, batch=2, context=context),
                "max_seqlen_k": long_keys}, num_segments=2)
            # A mixed batch over long contexts: its decode op splits.
            per_seq = ops.LONG_QUERY_TOKENS + 1
            vllm.unified_attention(**{
                **_arrays(cfg, tokens=2 * per_seq, batch=2, context=per_seq),
                "max_seqlen_k": long_keys})
    return list(texts)


def precompile(configs, *, chip="cpu", out=None, jobs=2):
    """Compiles every specialization of `configs` (AttentionConfig, or
    dicts of its fields) for `chip` ("cpu", or a GPU chip such as
    "sm_90a", "gfx942"): into the kernel cache, or with `out` into that AOT
    bundle directory (GPU chips; then ATTN_MLIR_BUNDLES=out). Returns the
    number of specializations; raises RuntimeError listing those that
    failed."""
    texts = []
    for cfg in configs:
        if isinstance(cfg, dict):
            cfg = AttentionConfig.from_dict(cfg)
        for text in specializations(cfg):
            if text not in texts:
                texts.append(text)
    if chip == "cpu":
        if out is not None:
            raise ValueError("out: AOT bundles are for GPU chips; CPU "
                             "kernels go to the cache")
        start = time.perf_counter()
        for text in texts:
            _toolchain.load_kernel(text, text.split("@", 1)[1].split("(")[0])
        failures = []
        _log.logger.info("precompiled %d CPU kernels in %.2f s", len(texts),
                         time.perf_counter() - start)
    elif out is not None:
        from . import aot
        failures = aot.compile_all(texts, chip, out, jobs=jobs)
    else:
        def one(text):
            try:
                _gpu.bundle_for(text, chip)
            except Exception as e:  # reported below with the others
                return f"{_gpu._describe(text)}: {e}"
        with ThreadPoolExecutor(jobs) as pool:
            failures = [f for f in pool.map(one, texts) if f]
    if failures:
        raise RuntimeError("precompile: " + "; ".join(failures))
    return len(texts)
