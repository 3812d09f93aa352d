"""attn_mlir: attention kernels compiled by the attn MLIR dialect.

`attn_mlir.vllm` holds drop-in replacements for vLLM's four Triton attention
entry points; `attn_mlir.ops` calls the ops directly; kernels are compiled
by attn-opt on first use per specialization and cached on disk.
"""

from . import ops, vllm  # noqa: F401
from ._toolchain import CacheWarning  # noqa: F401

__all__ = ["CacheWarning", "ops", "vllm"]
