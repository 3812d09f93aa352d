"""Heads of 80 and 112 (no whole 64-column swizzle atoms: mma.sync
programs on sm_90a) through flash (dense bf16, B=4, S=4096, H=16, causal
and not), unified decode (B=64, ctx 2048, GQA 32/8, page 16) and
block-sparse (S=8192, H=16, Phi-3-small's pattern). One JSON line a case,
TFLOP/s or GB/s (median of `ROUNDS` rounds), so that two builds (bundle
directories) run one after the other in one device call compare:

    ATTN_MLIR_BUNDLES=old python bench/probes/odd_heads.py

ATTN_MLIR_DRY_RUN=1 only records the specializations.
"""
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_gpu as G  # noqa: E402
from bench_gpu import ops, np  # noqa: E402

ROUNDS = 5


def emit(row, name, us, work):
    row[name] = work / statistics.median(us) / 1e6
    print(json.dumps(row), flush=True)


def flash(D, causal, B=4, S=4096, H=16):
    q, k, v, o = (G.randn(B * S, H, D) for _ in range(4))
    cu = G.ints(np.arange(B + 1) * S)
    fn = lambda: ops.flash(q, k, v, cu, cu, o, scale=1 / math.sqrt(D),  # noqa
                           causal=causal)
    flops = 4 * B * S * S * H * D / (2 if causal else 1)
    emit(dict(op="flash", D=D, causal=causal), "TFLOP/s",
         G.rounds({"f": fn}, ROUNDS)["f"], flops)


def decode(D, B=64, ctx=2048, Hq=32, Hk=8, bs=16):
    nblk = ctx // bs
    nb = B * nblk + 8
    kc, vc = G.randn(nb, bs, Hk, D), G.randn(nb, bs, Hk, D)
    bt = G.ints(np.random.default_rng(1).permutation(nb - 8)[: B * nblk]
                .reshape(B, nblk))
    q, o = G.randn(B, Hq, D), G.randn(B, Hq, D)
    cu, su = G.ints(np.arange(B + 1)), G.ints(np.full(B, ctx))
    fn = lambda: ops.unified(q, kc, vc, bt, cu, su, o,  # noqa
                             scale=1 / math.sqrt(D))
    nbytes = B * ctx * Hk * D * 2 * 2
    emit(dict(op="unified decode", D=D), "GB/s",
         G.rounds({"f": fn}, ROUNDS)["f"], nbytes * 1e3)


def blocksparse(D, S=8192, H=16, bsz=64):
    crow, col, density = G.phi3_layout(S, H, bsz, 16, 8)
    q, k, v, o = (G.randn(S, H, D) for _ in range(4))
    cu = G.ints([0, S])
    crow_d, col_d = G.ints(crow), G.ints(col)
    fn = lambda: ops.blocksparse(q, k, v, cu, cu, crow_d, col_d, o,  # noqa
                                 scale=1 / math.sqrt(D), block_size=bsz)
    flops = 4 * S * S * H * D / 2 * float(density)
    emit(dict(op="blocksparse", D=D), "TFLOP/s",
         G.rounds({"f": fn}, ROUNDS)["f"], flops)


for D in (80, 112):
    flash(D, False)
    flash(D, True)
    decode(D)
    blocksparse(D)
