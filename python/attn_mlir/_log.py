"""The `attn_mlir` logger: one INFO line per specialization and process,
when its kernel is first compiled or loaded (never per call).

Silent by default (a NullHandler, as libraries do): an application enables
it with logging as usual, or ATTN_MLIR_LOG=info (debug, warning, ...)
attaches a stderr handler at that level when attn_mlir is imported.
"""

import hashlib
import logging
import os
import re
import sys
import warnings

LOG_ENV = "ATTN_MLIR_LOG"

logger = logging.getLogger("attn_mlir")
logger.addHandler(logging.NullHandler())


def _configure():
    spec = os.environ.get(LOG_ENV, "").strip()
    if not spec:
        return
    level = (int(spec) if spec.isdigit()
             else logging.getLevelName(spec.upper()))
    if not isinstance(level, int):
        # A typo must not stop the import: say so and stay silent.
        warnings.warn(f"{LOG_ENV}={spec!r}: expected a logging level "
                      f"(debug, info, warning, error, critical); ignored",
                      stacklevel=3)
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(name)s %(levelname)s: "
                                           "%(message)s"))
    logger.addHandler(handler)
    logger.setLevel(level)


_configure()


def specialization(mlir_text):
    """(op, signature digest) of a specialization's MLIR text: the digest is
    sha256 of the text, the name of the specialization across compilers and
    chips."""
    m = re.search(r"attn\.(\w+)", mlir_text)
    op = f"attn.{m.group(1)}" if m else "?"
    return op, hashlib.sha256(mlir_text.encode()).hexdigest()[:12]


def kernel_ready(mlir_text, chip, outcome, seconds, path):
    """Logs that a specialization's kernel is ready: `outcome` says how
    ("cache miss, compiled", "cache hit, loaded", ...). Callers run this on
    first use only; the check keeps even that free when logging is off."""
    if not logger.isEnabledFor(logging.INFO):
        return
    op, sig = specialization(mlir_text)
    logger.info("%s sig=%s chip=%s: %s in %.3f s (%s)", op, sig, chip,
                outcome, seconds, path)
