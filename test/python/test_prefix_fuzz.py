"""Random feature combinations of vllm.context_attention_fwd (prefix
prefill over vLLM's split-x paged cache) against the float64 reference, as
test_unified_fuzz.py does for the unified call: each case draws a batch of
new tokens over cached contexts (empty ones included), GQA of any ratio, a
head dim, a page size, the query and cache types (fp8 caches with scales),
an fp8 output, a sliding window, ALiBi or sinks.

ATTN_MLIR_FUZZ_CASES (default 12) and ATTN_MLIR_FUZZ_SEED (default 2026)
as there; under ATTN_MLIR_TEST_DEVICE=cuda on the GPU (conftest.py).
"""

import numpy as np
import pytest

from reference import check
from test_prefix_prefill import run_case
from test_unified_fuzz import (CASES, HEAD_DIMS, PAGE_SIZES, SEED,
                               check_fp8_output, heads)


def draw(case):
    """The configuration of one case: plain values, printed on failure."""
    rng = np.random.default_rng([SEED, case, 13])
    n = int(rng.integers(1, 7))
    hk, hq = heads(rng)
    c = dict(
        case=case, hk=hk, hq=hq, d=int(rng.choice(HEAD_DIMS)),
        q_lens=[int(x) for x in rng.integers(1, 300, n)],
        ctx_lens=[int(x) if rng.random() < 0.85 else 0
                  for x in rng.integers(1, 1200, n)],
        dtype=str(rng.choice(["bf16", "f16", "f32"], p=[0.5, 0.3, 0.2])),
        block_size=int(rng.choice(PAGE_SIZES)),
        kv_dtype=str(rng.choice(["auto", "fp8_e4m3", "fp8_e5m2"],
                                p=[0.6, 0.25, 0.15])),
        kv_scales=[float(x) for x in rng.uniform(0.25, 2.0, 2)],
        window=int(rng.integers(1, 600)) if rng.random() < 0.3 else None,
        alibi=bool(rng.random() < 0.2), sinks=bool(rng.random() < 0.25),
        fp8_out=bool(rng.random() < 0.15))
    # vLLM's ALiBi kernel of prefix prefill takes no sinks (it drops them);
    # the drop-in rejects the pair by name (test_sinks_with_alibi_rejected).
    c["sinks"] = c["sinks"] and not c["alibi"]
    return c


@pytest.mark.parametrize("case", [f"case_{i}" for i in range(CASES)])
def test_prefix_fuzz(case):
    c = draw(int(case[5:]))
    o, ref = run_case(
        np.random.default_rng([SEED, c["case"], 14]), dtype=c["dtype"],
        d=c["d"], hq=c["hq"], hk=c["hk"], block_size=c["block_size"],
        q_lens=c["q_lens"], ctx_lens=c["ctx_lens"], kv_dtype=c["kv_dtype"],
        window=c["window"], alibi=c["alibi"], sinks=c["sinks"],
        fp8_out=c["fp8_out"], kv_scales=tuple(c["kv_scales"]))
    if c["fp8_out"]:
        check_fp8_output(o, ref, 0.05, str(c))  # run_case's output scale
    else:
        check(o, ref, c["dtype"], str(c))
