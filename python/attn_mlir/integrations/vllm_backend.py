"""attn_mlir as a vLLM V1 attention backend.

`AttnMlirBackend` implements vLLM's V1 backend interface the way vLLM's own
Triton backend (vllm/v1/attention/backends/triton_attn.py) does, with the
attention computed by `attn_mlir.vllm.unified_attention`:

* KV cache `[num_blocks, 2, block_size, num_kv_heads, head_size]` (K and V
  pages of a block side by side), any block size; fp16/bf16/fp32 models;
  kv_cache_dtype "auto" (the model's dtype), "float16"/"bfloat16" (when that
  is the model's dtype) and fp8 ("fp8"/"fp8_e4m3": e4m3fn, "fp8_e5m2")
  with the layer's per-tensor k_scale/v_scale.
* `AttnMlirImpl.forward` writes the step's new keys and values into the
  cache (vLLM's reshape_and_cache_flash, in torch ops: slot_mapping entries
  of -1 are padding and write nothing; fp8 caches store
  saturate(x / scale)), then attends into the caller's `output`. Sliding
  windows, logits soft-capping, ALiBi, attention sinks and per-sequence
  causal flags are passed through to the kernel; decoder attention only.
* CUDA graphs: nothing in `forward` reads device memory on the host, and
  the split-KV plan of small decode batches runs through buffers the
  metadata builder allocates once (as vLLM's Triton builder does), so the
  drop-in allocates no workspace of its own.

vLLM versions followed: vllm>=0.17,<0.33, the interface of
vllm/v1/attention/backend.py and vllm/v1/attention/backends/registry.py
(`AttentionBackend`, `AttentionImpl`, `AttentionMetadataBuilder`,
`CommonAttentionMetadata`, `forward_includes_kv_cache_update`, the
`AttentionBackendEnum.CUSTOM` registration) as published for 0.17.1
through 0.32 and on main; written from that source, not run against an
installed vLLM. Releases 0.11.1-0.16 kept the same classes in
vllm.attention.backends.abstract and vllm.v1.attention.backends.utils,
which are imported as a fallback but were not checked. Registration:
`attn_mlir.integrations.vllm_plugin`.

Without vLLM the module still imports, on minimal stand-in base classes
(`VLLM_AVAILABLE` is False), so the backend can be exercised with
CommonAttentionMetadata-like objects (test/python/test_vllm_backend.py).
"""

import enum
import logging
from dataclasses import dataclass
from typing import Any, ClassVar

try:
    import torch
except ImportError as e:  # vLLM itself needs torch; say what is missing
    raise ImportError("attn_mlir.integrations.vllm_backend needs torch") from e

from .. import vllm as _dropin
from ..ops import MAX_HEAD_DIM
from .vllm_plugin import BACKEND_PATH, register  # noqa: F401

logger = logging.getLogger("attn_mlir.integrations.vllm")


def _vllm_interface():
    """vLLM's base classes, or None when vLLM is not importable."""
    try:
        from vllm.v1.attention.backend import (AttentionBackend,
                                               AttentionCGSupport,
                                               AttentionImpl,
                                               AttentionMetadataBuilder,
                                               AttentionType, MultipleOf)
    except ImportError:
        try:  # vLLM before vllm/v1/attention/backend.py existed
            from vllm.attention.backends.abstract import (AttentionBackend,
                                                          AttentionImpl,
                                                          AttentionType,
                                                          MultipleOf)
            from vllm.v1.attention.backends.utils import (
                AttentionCGSupport, AttentionMetadataBuilder)
        except ImportError:
            return None
    return (AttentionBackend, AttentionCGSupport, AttentionImpl,
            AttentionMetadataBuilder, AttentionType, MultipleOf)


_INTERFACE = _vllm_interface()
VLLM_AVAILABLE = _INTERFACE is not None

if VLLM_AVAILABLE:
    (AttentionBackend, AttentionCGSupport, AttentionImpl,
     AttentionMetadataBuilder, AttentionType, MultipleOf) = _INTERFACE
else:
    # Minimal stand-ins with vLLM's names and the members this module uses.

    class AttentionType(str, enum.Enum):
        DECODER = "decoder"
        ENCODER = "encoder"
        ENCODER_ONLY = "encoder_only"
        ENCODER_DECODER = "encoder_decoder"

    class AttentionCGSupport(enum.Enum):
        ALWAYS = 3
        UNIFORM_BATCH = 2
        UNIFORM_SINGLE_TOKEN_DECODE = 1
        NEVER = 0

    class MultipleOf:
        def __init__(self, base):
            self.base = base

    class AttentionBackend:
        forward_includes_kv_cache_update = True

    class AttentionImpl:
        pass

    class AttentionMetadataBuilder:
        _cudagraph_support = AttentionCGSupport.NEVER
        reorder_batch_threshold = None

        def __init__(self, kv_cache_spec, layer_names, vllm_config, device):
            self.kv_cache_spec = kv_cache_spec
            self.layer_names = layer_names
            self.vllm_config = vllm_config
            self.device = device

        def build_for_cudagraph_capture(self, common_attn_metadata):
            return self.build(0, common_attn_metadata)


# vLLM cache dtype string -> the torch fp8 type its cache holds.
_FP8_CACHE = {"fp8": torch.float8_e4m3fn, "fp8_e4m3": torch.float8_e4m3fn,
              "fp8_e5m2": torch.float8_e5m2}

# vLLM's Triton backend constants: a 2-D launch needs >= 128 programs, so
# decode batches of at most 128 // num_kv_heads sequences split the keys
# into 16 segments.
_MIN_LAUNCH_GRID_SIZE_2D = 128
_NUM_PAR_SOFTMAX_SEGMENTS = 16


def reshape_and_cache_flash(key, value, key_cache, value_cache, slot_mapping,
                            kv_cache_dtype, k_scale=None, v_scale=None):
    """vLLM's reshape_and_cache_flash in torch ops: row t of key/value goes
    to slot s = slot_mapping[t] (block s // block_size, offset s %
    block_size) of key_cache/value_cache [num_blocks, block_size, heads,
    head_size]; s = -1 (padding) writes nothing, rows past
    slot_mapping's length are ignored. fp8 caches (uint8 or fp8 storage)
    store the fp8 value of x / scale, saturated to the format's range.

    Fixed shapes and no host reads, so it can be captured in a CUDA graph:
    instead of dropping padding rows (a data-dependent shape), each one
    rewrites what the first real row writes; with no real row every row
    writes slot 0's own contents back."""
    fp8 = _FP8_CACHE.get(kv_cache_dtype)
    n = slot_mapping.shape[0]
    if n == 0:
        return
    block_size = key_cache.shape[1]
    slots = slot_mapping.to(torch.long)
    valid = slots >= 0
    first = torch.argmax(valid.to(torch.int32))   # 0 when no row is valid
    src = torch.where(valid, torch.arange(n, device=slots.device), first)
    slot = slots[src].clamp(min=0)
    block, offset = slot // block_size, slot % block_size
    any_valid = valid.any()
    for new, cache, scale in ((key, key_cache, k_scale),
                              (value, value_cache, v_scale)):
        new = new[:n][src]
        if fp8 is not None:
            fmax = torch.finfo(fp8).max
            new = (new.to(torch.float32) / scale).clamp(-fmax, fmax).to(fp8)
            # Byte views: index_put_ and where need no fp8 kernels.
            new, cache = new.view(torch.uint8), cache.view(torch.uint8)
        else:
            new = new.to(cache.dtype)
        old = cache[block, offset]
        cache.index_put_((block, offset), torch.where(any_valid, new, old))


@dataclass
class AttnMlirMetadata:
    """Per-batch metadata (vLLM's TritonAttentionMetadata, less cascade)."""
    num_actual_tokens: int       # tokens excluding padding
    max_query_len: int
    query_start_loc: torch.Tensor    # [num_seqs + 1] int32
    max_seq_len: int
    seq_lens: torch.Tensor           # [num_seqs] int32, keys incl. new ones
    block_table: torch.Tensor        # [num_seqs, max_blocks] int32
    slot_mapping: torch.Tensor       # [num_tokens] int64, -1 = padding
    # vLLM's split-KV plan and its buffers (owned by the builder).
    seq_threshold_3D: int
    num_par_softmax_segments: int
    softmax_segm_output: torch.Tensor
    softmax_segm_max: torch.Tensor
    softmax_segm_expsum: torch.Tensor
    causal: Any = True               # bool, or [num_seqs] bool flags


class AttnMlirMetadataBuilder(AttentionMetadataBuilder):
    _cudagraph_support: ClassVar = AttentionCGSupport.ALWAYS

    def __init__(self, kv_cache_spec, layer_names, vllm_config, device):
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)
        model_config = vllm_config.model_config
        parallel_config = vllm_config.parallel_config
        self.num_heads_q = model_config.get_num_attention_heads(parallel_config)
        self.num_heads_kv = model_config.get_num_kv_heads(parallel_config)
        self.head_size = kv_cache_spec.head_size
        self.block_size = kv_cache_spec.block_size
        self.seq_threshold_3D = max(
            1, _MIN_LAUNCH_GRID_SIZE_2D // self.num_heads_kv)
        self.num_par_softmax_segments = _NUM_PAR_SOFTMAX_SEGMENTS
        # The split form runs only for batches of one query per sequence
        # (max_query_len <= 1), so seq_threshold_3D rows are enough.
        rows = (self.seq_threshold_3D, self.num_heads_q,
                self.num_par_softmax_segments)
        self.softmax_segm_output = torch.empty(
            rows + (self.head_size,), dtype=torch.float32, device=device)
        self.softmax_segm_max = torch.empty(rows, dtype=torch.float32,
                                            device=device)
        self.softmax_segm_expsum = torch.empty(rows, dtype=torch.float32,
                                               device=device)

    def build(self, common_prefix_len, common_attn_metadata,
              fast_build=False):
        # common_prefix_len is ignored: use_cascade_attention says no, and the
        # block table covers a shared prefix anyway.
        c = common_attn_metadata
        return AttnMlirMetadata(
            num_actual_tokens=c.num_actual_tokens,
            max_query_len=c.max_query_len,
            query_start_loc=c.query_start_loc,
            max_seq_len=c.max_seq_len,
            seq_lens=c.seq_lens,
            block_table=c.block_table_tensor,
            slot_mapping=c.slot_mapping,
            seq_threshold_3D=self.seq_threshold_3D,
            num_par_softmax_segments=self.num_par_softmax_segments,
            softmax_segm_output=self.softmax_segm_output,
            softmax_segm_max=self.softmax_segm_max,
            softmax_segm_expsum=self.softmax_segm_expsum,
            causal=getattr(c, "causal", True))

    def use_cascade_attention(self, *args, **kwargs):
        return False


class AttnMlirBackend(AttentionBackend):
    accept_output_buffer: bool = True
    # forward() writes the new keys and values into the cache itself.
    forward_includes_kv_cache_update: bool = True
    supported_dtypes: ClassVar[list] = [torch.float16, torch.bfloat16,
                                        torch.float32]
    supported_kv_cache_dtypes: ClassVar[list] = [
        "auto", "float16", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2"]

    @staticmethod
    def get_name():
        # vLLM looks the name up in AttentionBackendEnum, whose member for
        # out-of-tree backends is CUSTOM (vllm_plugin registers it there).
        return "CUSTOM"

    @staticmethod
    def get_impl_cls():
        return AttnMlirImpl

    @staticmethod
    def get_builder_cls():
        return AttnMlirMetadataBuilder

    @staticmethod
    def get_kv_cache_shape(num_blocks, block_size, num_kv_heads, head_size,
                           cache_dtype_str="auto"):
        if block_size < 1:
            raise ValueError(f"block_size: must be >= 1, got {block_size}")
        if not AttnMlirBackend.supports_head_size(head_size):
            raise ValueError(_head_size_error(head_size))
        return (num_blocks, 2, block_size, num_kv_heads, head_size)

    @staticmethod
    def get_supported_kernel_block_sizes():
        return [MultipleOf(1)]   # any page size

    @classmethod
    def get_supported_head_sizes(cls):
        return []   # any within supports_head_size's range

    @classmethod
    def supports_head_size(cls, head_size):
        return isinstance(head_size, int) and 1 <= head_size <= MAX_HEAD_DIM

    @classmethod
    def supports_dtype(cls, dtype):
        return dtype in cls.supported_dtypes

    @classmethod
    def supports_kv_cache_dtype(cls, kv_cache_dtype):
        return kv_cache_dtype is None or \
            kv_cache_dtype in cls.supported_kv_cache_dtypes

    @classmethod
    def supports_sink(cls):
        return True

    @classmethod
    def supports_alibi_sqrt(cls):
        return True

    @classmethod
    def supports_attn_type(cls, attn_type):
        return attn_type == AttentionType.DECODER

    @classmethod
    def supports_compute_capability(cls, capability):
        return True

    @staticmethod
    def use_cascade_attention(*args, **kwargs):
        return False


def _head_size_error(head_size):
    return (f"head_size: {head_size} is not supported by the attn_mlir "
            f"backend (any integer in [1, {MAX_HEAD_DIM}])")


class AttnMlirImpl(AttentionImpl):
    """Decoder attention over vLLM's paged cache through
    `attn_mlir.vllm.unified_attention`. Configuration errors raise at
    construction; a query dtype outside supported_dtypes, or a cache of
    another unquantized dtype, at the first forward."""

    def __init__(self, num_heads, head_size, scale, num_kv_heads=None,
                 alibi_slopes=None, sliding_window=None, kv_cache_dtype="auto",
                 logits_soft_cap=None, attn_type=AttentionType.DECODER,
                 kv_sharing_target_layer_name=None, sinks=None,
                 use_alibi_sqrt=False):
        num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        if not AttnMlirBackend.supports_head_size(head_size):
            raise ValueError(_head_size_error(head_size))
        if num_kv_heads < 1 or num_heads % num_kv_heads:
            raise ValueError(f"num_kv_heads: {num_kv_heads} must divide "
                             f"num_heads ({num_heads})")
        if not AttnMlirBackend.supports_kv_cache_dtype(kv_cache_dtype):
            raise ValueError(
                f"kv_cache_dtype: {kv_cache_dtype!r} is not supported by the "
                f"attn_mlir backend (one of "
                f"{', '.join(AttnMlirBackend.supported_kv_cache_dtypes)})")
        if attn_type != AttentionType.DECODER:
            raise NotImplementedError(
                f"attn_type: the attn_mlir backend implements decoder "
                f"attention only, got {attn_type!r}")
        if alibi_slopes is not None and len(alibi_slopes) != num_heads:
            raise ValueError(f"alibi_slopes: {len(alibi_slopes)} slopes for "
                             f"{num_heads} heads")
        if sinks is not None and tuple(sinks.shape) != (num_heads,):
            raise ValueError(f"sinks: expected shape ({num_heads},), got "
                             f"{tuple(sinks.shape)}")
        if logits_soft_cap is not None and logits_soft_cap < 0:
            raise ValueError(f"logits_soft_cap: must be >= 0 (0 or None "
                             f"disables it), got {logits_soft_cap}")
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = float(scale)
        self.num_kv_heads = num_kv_heads
        self.num_queries_per_kv = num_heads // num_kv_heads
        self.alibi_slopes = None if alibi_slopes is None else \
            torch.tensor(alibi_slopes, dtype=torch.float32)
        self.use_alibi_sqrt = bool(use_alibi_sqrt)
        # vLLM's (left, right) window; left = -1 is none. A window of W keys
        # includes the query itself.
        self.sliding_window = (-1, -1) if not sliding_window else \
            (sliding_window - 1, 0)
        self.kv_cache_dtype = kv_cache_dtype
        self.logits_soft_cap = logits_soft_cap or 0
        self.kv_sharing_target_layer_name = kv_sharing_target_layer_name
        self.attn_type = attn_type
        self.sinks = sinks
        self._fp8 = _FP8_CACHE.get(kv_cache_dtype)
        self._f32 = {}   # (name, device) -> float32 copy of slopes / sinks

    def process_weights_after_loading(self, act_dtype):
        self._f32.clear()   # sinks are weights: convert the loaded values

    def _float32_on(self, name, x, device):
        """`x` (ALiBi slopes, sinks) as float32 on `device`: the kernel's
        operand type. Converted on first use and kept (a stable address for
        CUDA graphs); passed as it is when it already is one."""
        if x is None or (x.dtype == torch.float32 and x.device == device):
            return x
        key = (name, device)
        if key not in self._f32:
            self._f32[key] = x.detach().to(device=device, dtype=torch.float32)
        return self._f32[key]

    def forward(self, layer, query, key, value, kv_cache, attn_metadata,
                output=None, output_scale=None, output_block_scale=None):
        """query [tokens, num_heads, head_size], key/value [tokens,
        num_kv_heads, head_size], kv_cache [num_blocks, 2, block_size,
        num_kv_heads, head_size]; writes output [tokens, num_heads,
        head_size] (rows past num_actual_tokens untouched) and returns it."""
        if output is None:
            raise ValueError("output: the attn_mlir backend writes into the "
                             "caller's buffer (accept_output_buffer); got None")
        if output_block_scale is not None:
            raise NotImplementedError("output_block_scale: block-scaled output "
                                      "quantization is not supported")
        if attn_metadata is None:   # vLLM's profiling run
            return output.fill_(0)
        if query.dtype not in AttnMlirBackend.supported_dtypes:
            raise ValueError(f"query: dtype {query.dtype} is not supported by "
                             f"the attn_mlir backend (float16, bfloat16, "
                             f"float32)")
        key_cache, value_cache = kv_cache.unbind(1)
        if (self.kv_sharing_target_layer_name is None and key is not None
                and value is not None):
            self.do_kv_cache_update(layer, key, value, kv_cache,
                                    attn_metadata.slot_mapping)
        m = attn_metadata
        k_descale = v_descale = None
        if self._fp8 is not None:
            key_cache = key_cache.view(self._fp8)
            value_cache = value_cache.view(self._fp8)
            shape = (m.query_start_loc.shape[0] - 1, key_cache.shape[2])
            k_descale = layer._k_scale.expand(shape)
            v_descale = layer._v_scale.expand(shape)
        elif key_cache.dtype != query.dtype:
            raise ValueError(f"kv_cache: dtype {key_cache.dtype} differs from "
                             f"the query's {query.dtype} (kv_cache_dtype="
                             f"{self.kv_cache_dtype!r}); only fp8 caches may "
                             f"differ")
        n = m.num_actual_tokens
        buf = m.softmax_segm_output
        # The builder's split-KV buffers, when this call fits them; a
        # threshold of 0 keeps the one-pass form (never the drop-in's own
        # workspace, which a CUDA graph could outlive).
        fits = (n <= buf.shape[0] and buf.shape[1] == self.num_heads and
                buf.shape[3] >= self.head_size)
        device = query.device
        _dropin.unified_attention(
            q=query[:n], k=key_cache, v=value_cache, out=output[:n],
            cu_seqlens_q=m.query_start_loc, max_seqlen_q=m.max_query_len,
            seqused_k=m.seq_lens, max_seqlen_k=m.max_seq_len,
            softmax_scale=self.scale, causal=m.causal,
            window_size=self.sliding_window, block_table=m.block_table,
            softcap=self.logits_soft_cap, q_descale=None,
            k_descale=k_descale, v_descale=v_descale,
            alibi_slopes=self._float32_on("alibi_slopes", self.alibi_slopes,
                                          device),
            use_alibi_sqrt=self.use_alibi_sqrt,
            output_scale=output_scale,
            sinks=self._float32_on("sinks", self.sinks, device),
            seq_threshold_3D=m.seq_threshold_3D if fits else 0,
            num_par_softmax_segments=m.num_par_softmax_segments,
            softmax_segm_output=buf, softmax_segm_max=m.softmax_segm_max,
            softmax_segm_expsum=m.softmax_segm_expsum)
        return output

    def do_kv_cache_update(self, layer, key, value, kv_cache, slot_mapping):
        """vLLM's separate cache-update hook (used by vLLM when a backend sets
        forward_includes_kv_cache_update = False; forward calls it here)."""
        key_cache, value_cache = kv_cache.unbind(1)
        fp8 = self._fp8 is not None
        reshape_and_cache_flash(key, value, key_cache, value_cache,
                                slot_mapping, self.kv_cache_dtype,
                                layer._k_scale if fp8 else None,
                                layer._v_scale if fp8 else None)


__all__ = ["AttnMlirBackend", "AttnMlirImpl", "AttnMlirMetadata",
           "AttnMlirMetadataBuilder", "BACKEND_PATH", "VLLM_AVAILABLE",
           "register", "reshape_and_cache_flash"]
