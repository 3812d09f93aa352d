"""attn_mlir: attention kernels compiled by the attn MLIR dialect.

`attn_mlir.vllm` holds drop-in replacements for vLLM's four Triton attention
entry points; `attn_mlir.ops` calls the ops directly; kernels are compiled
by attn-opt on first use per specialization and cached on disk. With torch
tensors both go through `torch.ops.attn_mlir.*` (`attn_mlir.torch_ops`),
which torch.compile traces. `attn_mlir.distributed` (imported on its own:
it needs torch) spreads attention over torch.distributed ranks;
`attn_mlir.precompile` compiles a model's kernels before serving.
`python -m attn_mlir info` describes the installation; the `attn_mlir`
logger (or ATTN_MLIR_LOG=info) reports each compile (docs/configuration.md).
"""

# (pyproject.toml's version; test_observability keeps the two equal.)
__version__ = "0.1.0"

import sys as _sys  # noqa: E402

from . import ops, vllm  # noqa: E402, F401
from ._toolchain import CacheWarning  # noqa: E402, F401

if "torch" in _sys.modules:
    # torch is loaded: register torch.ops.attn_mlir now, so that code traced
    # by torch.compile before any eager call finds the ops. Otherwise the
    # first call with torch tensors does (numpy users never import torch).
    ops._torch_ops()

__all__ = ["CacheWarning", "__version__", "ops", "vllm"]
