"""Prefix prefill with heads other than bench_gpu.py's 128 (96 and 256,
Gemma-2's), bf16 and fp8 e4m3 caches in vLLM's layouts (split-x K with x =
16 bytes, [D, page] V, page 16, a shuffled block table), B=8, ctx=2048,
512 new tokens, GQA 16/8 (D=256) or 32/8 (D=96), through ops.prefix_prefill
beside the seed's Triton kernel in the same process. Prints one JSON line a
case (TFLOP/s, median of `ROUNDS` rounds), so that two builds (bundle
directories) run one after the other in one device call compare:

    ATTN_MLIR_BUNDLES=old python bench/probes/prefix_heads.py
    ATTN_MLIR_BUNDLES=new python bench/probes/prefix_heads.py

Arguments select other cases and pin schedules, so that schedules compare
in one process: `--case 96:32:8:fp8` (D:Hq:Hk:cache, repeatable) and
`--schedule 32,64,4,8` (block_q, block_n, heads_per_program[, warps ...],
repeatable; `plan` is attn-plan's choice). The seed runs once a case.
ATTN_MLIR_DRY_RUN=1 only records the specializations.
"""
import argparse
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_gpu as G  # noqa: E402
from bench_gpu import ops, np  # noqa: E402

ROUNDS = 5
B, CTX, QL, BS = 8, 2048, 512, 16


def case(D, Hq, Hk, cache, schedules=(None,), rounds=ROUNDS):
    x = 16 if cache == "fp8" else 8
    nblk = CTX // BS
    nb = B * nblk + 4
    k_cache = G.randn(nb, Hk, D // x, BS, x, dtype=cache)
    v_cache = G.randn(nb, Hk, D, BS, dtype=cache)
    kv = None
    if cache == "fp8":
        kv = (np.full(1, 0.5, np.float32) if G.DRY else
              G.torch.full((1,), 0.5, dtype=G.torch.float32, device=G.dev))
    perm = np.random.default_rng(0).permutation(nb)[:B * nblk].reshape(B, nblk)
    table = G.ints(perm)
    q = G.randn(B * QL, Hq, D)
    k, v = G.randn(B * QL, Hk, D), G.randn(B * QL, Hk, D)
    o = G.randn(B * QL, Hq, D)
    starts = G.ints(np.arange(B + 1) * QL)
    seq = G.ints(np.full(B, CTX + QL))
    scale = 1 / math.sqrt(D)
    fns = {}
    for sched in schedules:
        name = "attn_mlir" if sched is None else \
            "attn_mlir@" + ",".join(map(str, sched))
        fns[name] = lambda sched=sched: ops.prefix_prefill(
            q, k, v, k_cache, v_cache, table, starts, seq, o, scale=scale,
            k_scale=kv, v_scale=kv, schedule=sched)
    if not G.DRY:
        one = G.torch.ones(1, dtype=G.torch.float32, device=G.dev)
        o2 = G.torch.empty_like(o)
        fns["seed"] = lambda: G.S.prefix_prefill.context_attention_fwd(
            q, k, v, o2, "fp8" if cache == "fp8" else "auto", k_cache,
            v_cache, table, starts, seq, CTX + QL, QL, kv if kv is not None
            else one, kv if kv is not None else one)
    times = G.rounds(fns, rounds)
    flops = 4 * B * Hq * QL * (CTX + QL / 2) * D
    row = dict(D=D, Hq=Hq, Hk=Hk, cache=cache)
    for name, us in times.items():
        row[name] = flops / statistics.median(us) / 1e6
    if not G.DRY:
        fns["seed"]()
        for name, fn in fns.items():
            if name != "seed":
                o.fill_(float("nan"))
                fn()
                row["err_vs_seed" + name[len("attn_mlir"):]] = \
                    G.relerr(o, o2)
    print(json.dumps(row), flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", default=[],
                        help="D:Hq:Hk:cache (cache bf16 or fp8)")
    parser.add_argument("--schedule", action="append", default=[],
                        help="block_q,block_n,heads_per_program[,warps...] "
                        "or plan")
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    cases = [(int(d), int(hq), int(hk), c) for d, hq, hk, c in
             (x.split(":") for x in args.case)] or \
        [(D, Hq, Hk, c) for D, Hq, Hk in ((256, 16, 8), (96, 32, 8))
         for c in ("bf16", "fp8")]
    schedules = [None if x == "plan" else tuple(int(v) for v in x.split(","))
                 for x in args.schedule] or [None]
    for D, Hq, Hk, cache in cases:
        case(D, Hq, Hk, cache, schedules, args.rounds)


main()
