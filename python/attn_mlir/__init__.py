"""attn_mlir: attention kernels compiled by the attn MLIR dialect.

`attn_mlir.vllm` holds drop-in replacements for vLLM's four Triton attention
entry points; `attn_mlir.ops` calls the ops directly; kernels are compiled
by attn-opt on first use per specialization and cached on disk.
`python -m attn_mlir info` describes the installation; the `attn_mlir`
logger (or ATTN_MLIR_LOG=info) reports each compile (docs/configuration.md).
"""

# (pyproject.toml's version; test_observability keeps the two equal.)
__version__ = "0.1.0"

from . import ops, vllm  # noqa: E402, F401
from ._toolchain import CacheWarning  # noqa: F401

__all__ = ["CacheWarning", "__version__", "ops", "vllm"]
