"""vLLM general plugin: registers attn_mlir's attention backend.

pyproject.toml names `register` under the `vllm.general_plugins` entry
point, so every vLLM process calls it at start-up. It imports only vLLM's
backend registry (not the backend module, whose vLLM base classes pull in
much of vLLM while plugins are still loading) and records the backend by
class path, as vLLM's registry does for every backend.

vLLM's backend enum is closed: out-of-tree backends take its `CUSTOM`
member (vLLM's documented route), selected with `--attention-backend
CUSTOM` (or `attention_backend="CUSTOM"`, `VLLM_ATTENTION_BACKEND=CUSTOM`
in older releases). See docs/vllm_backend.md.
"""

import logging

logger = logging.getLogger("attn_mlir.integrations.vllm")

BACKEND_PATH = "attn_mlir.integrations.vllm_backend.AttnMlirBackend"


def _registry():
    """vLLM's registry module: vllm.v1.attention.backends.registry (current
    releases), else vllm.attention.backends.registry (where it lived when
    AttentionBackendEnum.CUSTOM was introduced)."""
    try:
        from vllm.v1.attention.backends import registry
        return registry
    except ImportError:
        from vllm.attention.backends import registry
        return registry


def register():
    """Registers AttnMlirBackend as vLLM's CUSTOM attention backend; returns
    the enum member, or None (with a logged warning) when vLLM or its
    registry is not importable, or CUSTOM already names another backend."""
    try:
        registry = _registry()
        custom = registry.AttentionBackendEnum.CUSTOM
        register_backend = registry.register_backend
    except (ImportError, AttributeError) as e:
        logger.warning("attn_mlir: vLLM's attention backend registry is not "
                       "importable (%s: %s); the attn_mlir backend was not "
                       "registered", type(e).__name__, e)
        return None
    is_overridden = getattr(custom, "is_overridden", None)
    if is_overridden is not None and is_overridden():
        current = custom.get_path()
        if current != BACKEND_PATH:
            # Another plugin took CUSTOM first; plugins load in no set order,
            # so taking it over would make the choice arbitrary.
            logger.warning("attn_mlir: vLLM's CUSTOM attention backend is "
                           "already registered as %s; the attn_mlir backend "
                           "was not registered", current)
            return None
    register_backend(custom, BACKEND_PATH)
    logger.info("attn_mlir: registered %s as vLLM's CUSTOM attention backend",
                BACKEND_PATH)
    return custom
