"""Mixed batches (prefills and decodes in one ops.unified call) run as one op
or split into a decode op and a prefill-rows op (ops.MIXED_SPLIT_CACHES,
AttnOps.td `min_query_len` / `max_query_len`): microseconds of the batch,
beside each half alone (the prefills alone, the decodes alone) and the
seed's unified kernel, for bf16 and fp8 e4m3 caches. MIXED_SPLIT=0 runs
every batch as one op, MIXED_SPLIT=1 splits both cache kinds; otherwise
ops' default. (The replay of a call's plan is keyed by its arguments, not
by that setting: hence one setting a process, and the processes
alternate.)

    MIXED_SPLIT=0 python bench/probes/mixed_split.py
    MIXED_SPLIT=1 python bench/probes/mixed_split.py

MIXED_SIDE=0 runs the split's ops one after the other on one stream.
MIXED_DROPIN=1 calls the drop-in (vllm.unified_attention), whose planner
splits the decode op's keys where it pays (vllm._mixed_decode_split);
MIXED_DECODE_SPLIT=0 turns that off (vllm.MIXED_DECODE_SPLIT).
ATTN_MLIR_DRY_RUN=1 only records the specializations. MIXED_CASES=a,b runs
only the cases whose names contain one of those strings.
"""
import json
import math
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import bench_gpu as G  # noqa: E402
from bench_gpu import ops, np  # noqa: E402

ROUNDS = 5
BS, HQ, HK, D = 16, 32, 8, 128


def batch(qlens, seqlens, cache):
    """ops.unified's operands for sequences of `qlens` queries over
    `seqlens` keys, pages of BS in a shuffled block table."""
    B = len(qlens)
    maxblk = max((s + BS - 1) // BS for s in seqlens)
    nb = B * maxblk + 8
    kc, vc = G.randn(nb, BS, HK, D, dtype=cache), \
        G.randn(nb, BS, HK, D, dtype=cache)
    kw = {}
    if cache == "fp8":
        descale = np.full(1, 0.5, np.float32) if G.DRY else \
            G.torch.full((1,), 0.5, dtype=G.torch.float32, device=G.dev)
        kw.update(k_descale=descale, v_descale=descale)
    bt = G.ints(np.random.default_rng(3).permutation(nb)[: B * maxblk]
                .reshape(B, maxblk))
    q, o = G.randn(sum(qlens), HQ, D), G.randn(sum(qlens), HQ, D)
    cu = G.ints(np.concatenate([[0], np.cumsum(qlens)]))
    su = G.ints(seqlens)
    return q, kc, vc, bt, cu, su, o, kw, qlens, seqlens


SPLIT = os.environ.get("MIXED_SPLIT")
if SPLIT is not None:
    ops.MIXED_SPLIT_CACHES = ("fp8", "16-bit") if SPLIT == "1" else ()
# MIXED_SIDE=0: the split's two ops one after the other on one stream (no
# side stream from the runtime), as before the side stream.
# MIXED_SIDE_HIGH=fp8,16-bit: the cache kinds whose decode op's side stream
# runs at the greatest priority (ops.MIXED_SIDE_HIGH).
if os.environ.get("MIXED_SIDE_HIGH") is not None:
    ops.MIXED_SIDE_HIGH = tuple(
        k for k in os.environ["MIXED_SIDE_HIGH"].split(",") if k)
if os.environ.get("MIXED_SIDE") == "0":
    from attn_mlir import _gpu
    _gpu.fork = lambda *args, **kwargs: None


DROPIN = os.environ.get("MIXED_DROPIN") == "1"
if os.environ.get("MIXED_DECODE_SPLIT") == "0":
    G.vllm.MIXED_DECODE_SPLIT = False
# MIXED_COUNT_ALL=1: the split decode op's count planned for every
# sequence of the batch (session 28's first rule), not for the decodes
# the batch can hold at most (vllm._decode_count_bound).
if os.environ.get("MIXED_COUNT_ALL") == "1":
    G.vllm._decode_count_bound = lambda num_seqs, *rest: num_seqs


def call(args):
    q, kc, vc, bt, cu, su, o, kw = args[:8]
    if DROPIN:
        qlens, seqlens = args[8], args[9]
        d = kw.get("k_descale")
        return lambda: G.vllm.unified_attention(
            q, kc, vc, o, cu, max(qlens), su, max(seqlens), 1 / math.sqrt(D),
            True, (-1, -1), bt, 0.0, None, d, d)
    return lambda: ops.unified(q, kc, vc, bt, cu, su, o,
                               scale=1 / math.sqrt(D), **kw)


def seed_call(args, qlens, seqlens):
    q, kc, vc, bt, cu, su, o, kw = args[:8]
    one = G.torch.ones(1, dtype=G.torch.float32, device=G.dev)
    d = kw.get("k_descale", one)
    o2 = G.torch.empty_like(o)
    return lambda: G.S.unified.unified_attention(
        q, kc, vc, o2, cu, max(qlens), su, max(seqlens), 1 / math.sqrt(D),
        True, (-1, -1), bt, 0.0, None, d, d)


MIXES = {
    # bench_gpu.py's mixed row (prefills first) and vLLM's order (decodes
    # first: its batches are reordered so).
    "4x1024 + 60 decodes of 2048": ([1024] * 4 + [1] * 60,
                                    [1024] * 4 + [2048] * 60),
    "60 decodes of 2048 + 4x1024": ([1] * 60 + [1024] * 4,
                                    [2048] * 60 + [1024] * 4),
    "2x2048 + 62 decodes of 4096": ([2048] * 2 + [1] * 62,
                                    [2048] * 2 + [4096] * 62),
    "8x512 after 1536 + 56 decodes of 2048": ([512] * 8 + [1] * 56,
                                              [2048] * 8 + [2048] * 56),
    # Few long decodes beside chunked prefills: the decode op's programs
    # (one a sequence and KV head, unsplit) are few and long.
    "2x512 + 6 decodes of 32768": ([512] * 2 + [1] * 6,
                                   [512] * 2 + [32768] * 6),
    # A prefill chunk's tail beside few long decodes (queries averaging
    # fewer than 16 a sequence: one op unless the decodes split).
    "1x64 after 4032 + 6 decodes of 32768": ([64] + [1] * 6,
                                             [4096] + [32768] * 6),
    # Shapes between (session 28's check that splitting the decodes of
    # mixed batches loses nowhere).
    "4x256 after 768 + 4 decodes of 1024": ([256] * 4 + [1] * 4,
                                            [1024] * 4 + [1024] * 4),
    "8x512 + 8 decodes of 4096": ([512] * 8 + [1] * 8,
                                  [512] * 8 + [4096] * 8),
    "1x2048 + 3 decodes of 16384": ([2048] + [1] * 3,
                                    [2048] + [16384] * 3),
    "4x128 + 12 decodes of 8192": ([128] * 4 + [1] * 12,
                                   [128] * 4 + [8192] * 12),
    # Chunked prefills alone over long contexts: with the drop-in, whose
    # planner would split decodes of such keys, they run as two ops (an
    # empty decode op beside the prefill op): what that costs.
    "2x512 after 32256": ([512] * 2, [32768] * 2),
}


def selected():
    """(label, qlens, seqlens, cache) of each batch and cache type that
    MIXED_CASES selects (all without it)."""
    wanted = [w for w in os.environ.get("MIXED_CASES", "").split(",") if w]
    for cache in ("bf16", "fp8"):
        for name, (qlens, seqlens) in MIXES.items():
            label = f"{name}, {cache}"
            if not wanted or any(w in label for w in wanted):
                yield label, qlens, seqlens, cache


def print_graphs(fns):
    """Each of `fns` ({name: fn}) in a CUDA graph, as vLLM replays a
    batch: three timings, in us."""
    for name, fn in fns.items():
        r = [round(G.timed_graph(fn) * 1e3, 1) for _ in range(3)]
        print(json.dumps(dict(case=name, graph_us=r,
                              median=statistics.median(r))), flush=True)


def main():
    form = {None: "default", "0": "one op", "1": "split"}.get(SPLIT, SPLIT)
    if DROPIN:
        form += ", all counted" if os.environ.get("MIXED_COUNT_ALL") == "1" \
            else ""
        form += ", drop-in" + (", decodes unsplit"
                               if not G.vllm.MIXED_DECODE_SPLIT else "")
    if os.environ.get("MIXED_SIDE") == "0":
        form += ", one stream"
    elif os.environ.get("MIXED_SIDE_HIGH") is not None:
        form += ", high: " + os.environ["MIXED_SIDE_HIGH"]
    fns, outs = {}, []
    for label, qlens, seqlens, cache in selected():
        whole = batch(qlens, seqlens, cache)
        fns[f"{label}: {form}"] = call(whole)
        outs.append((label, whole[6]))
        pre = [i for i, n in enumerate(qlens) if n > 1]
        dec = [i for i, n in enumerate(qlens) if n == 1]
        for part, idx in (("prefills alone", pre), ("decodes alone", dec)):
            if not idx or len(idx) == len(qlens):
                continue
            sub = batch([qlens[i] for i in idx], [seqlens[i] for i in idx],
                        cache)
            fns[f"{label}: {part}"] = call(sub)
        if not G.DRY:
            fns[f"{label}: seed"] = seed_call(whole, qlens, seqlens)
    runs = G.rounds(fns, ROUNDS)
    for name, r in runs.items():
        print(json.dumps(dict(case=name, us=r, median=statistics.median(r))),
              flush=True)
    if not G.DRY:
        print_graphs({name: fn for name, fn in fns.items()
                      if name.endswith(form)})
        for label, o in outs:
            print(json.dumps(dict(case=f"{label}: {form}",
                                  finite=bool(G.torch.isfinite(o).all()))),
                  flush=True)


if __name__ == "__main__":
    main()
