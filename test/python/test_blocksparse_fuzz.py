"""Random block-sparse calls (vllm.blocksparse_flash_attn_varlen_fwd)
against the float64 reference, as test_unified_fuzz.py does for the unified
call: each case draws a batch of prefills and decode rows, GQA of
any ratio, a head dim, the key and query block sizes, and a vLLM-style
layout (local blocks plus a vertical stride, shared or per head).

ATTN_MLIR_FUZZ_CASES (default 12) and ATTN_MLIR_FUZZ_SEED (default 2026)
as there; under ATTN_MLIR_TEST_DEVICE=cuda on the GPU (conftest.py).
"""

import numpy as np
import pytest

from attn_mlir import vllm
from reference import DTYPES, RECORDING_ONLY, check
from test_blocksparse import layout, reference
from test_unified_fuzz import CASES, HEAD_DIMS, SEED, heads


def draw(case):
    """The configuration of one case: plain values, printed on failure."""
    rng = np.random.default_rng([SEED, case, 17])
    n = int(rng.integers(1, 6))
    q_lens, k_lens = [], []
    for _ in range(n):
        # (vLLM's call takes prefills and decode rows, nothing between.)
        k = int(rng.integers(1, 700))
        q = k if rng.random() < 0.6 else 1
        q_lens.append(q)
        k_lens.append(k)
    hk, hq = heads(rng, ratios=(1, 2, 3, 4, 8))
    bs = int(rng.choice([16, 32, 64, 128]))
    qbs = rng.choice([None, bs // 2, bs, 2 * bs])
    return dict(case=case, q_lens=q_lens, k_lens=k_lens, hk=hk, hq=hq,
                d=int(rng.choice([d for d in HEAD_DIMS if d % 16 == 0])),
                dtype=str(rng.choice(["bf16", "f16", "f32"], p=[0.5, 0.3, 0.2])),
                bs=bs, qbs=None if qbs is None else int(qbs),
                local=int(rng.integers(1, 5)), stride=int(rng.integers(2, 9)),
                per_head=bool(rng.random() < 0.5),
                scale_factor=float(rng.uniform(0.5, 1.5)))


@pytest.mark.parametrize("case", [f"case_{i}" for i in range(CASES)])
def test_blocksparse_fuzz(case):
    c = draw(int(case[5:]))
    rng = np.random.default_rng([SEED, c["case"], 18])
    cq = np.concatenate([[0], np.cumsum(c["q_lens"])]).astype(np.int32)
    ck = np.concatenate([[0], np.cumsum(c["k_lens"])]).astype(np.int32)
    hq, hk, d = c["hq"], c["hk"], c["d"]
    q = rng.standard_normal((cq[-1], hq, d)).astype(DTYPES[c["dtype"]])
    k = rng.standard_normal((ck[-1], hk, d)).astype(DTYPES[c["dtype"]])
    v = rng.standard_normal((ck[-1], hk, d)).astype(DTYPES[c["dtype"]])
    qb = c["qbs"] or c["bs"]
    rows = -(-max(c["k_lens"]) // qb)
    crow, col = layout(hq if c["per_head"] else 1, rows, c["local"],
                       c["stride"], c["per_head"])
    scale = c["scale_factor"] * d ** -0.5
    out = vllm.blocksparse_flash_attn_varlen_fwd(
        q, k, v, ck, cq, scale, (crow, col), block_size=c["bs"],
        q_block_size=c["qbs"], max_seqlen=max(c["k_lens"]))
    if RECORDING_ONLY:  # nothing ran: the reference is not needed
        return
    check(out, reference(q, k, v, cq, ck, scale, crow, col, c["bs"], qb),
          c["dtype"], str(c))
