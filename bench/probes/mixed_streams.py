"""Does a mixed batch gain from running its prefills and its decodes at the
same time? Issue 20 asks for mixed batches as one grid of two program
shapes (POD-Attention) where that pays. Before building it, this probe
bounds the gain: the prefill sequences and the decode sequences of a batch
as two ops.unified calls (views of the batch's operands), run one after
the other on one stream, or on two streams at once (fork and join on
events; a CUDA graph captures them as two branches). Beside them the whole
batch as one call (ops' default). Microseconds, eager and graph-replayed,
for bf16 and fp8 e4m3 caches.

    python bench/probes/mixed_streams.py

ATTN_MLIR_DRY_RUN=1 only records the specializations. MIXED_CASES=a,b runs
only the cases whose names contain one of those strings. MIXED_CHUNKS=8,15
adds forms whose decodes run in chunks of that many sequences, one after
the other on the side stream (at most one chunk's programs hold SMs).
"""
import json
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_gpu as G  # noqa: E402
from mixed_split import batch, call, print_graphs, selected  # noqa: E402

ROUNDS = 5
CHUNKS = [int(c) for c in os.environ.get("MIXED_CHUNKS", "").split(",") if c]


def part(args, qlens, lo, hi):
    """ops.unified's operands for sequences lo..hi of a batch: views of the
    batch's tensors (rows of q, out and the block table) and the part's own
    cu_seqlens_q and seqused_k."""
    q, kc, vc, bt, cu, su, o, kw = args[:8]
    start = sum(qlens[:lo])
    end = sum(qlens[:hi])
    cu_part = cu[lo:hi + 1] - cu[lo]
    return (q[start:end], kc, vc, bt[lo:hi], cu_part, su[lo:hi], o[start:end],
            kw)


def forms(whole, qlens):
    """{form: callable} for one batch."""
    pre = [i for i, n in enumerate(qlens) if n > 1]
    lo, hi = min(pre), max(pre) + 1
    assert pre == list(range(lo, hi)), "prefills must be contiguous"
    prefill = call(part(whole, qlens, lo, hi))
    ranges = [(a, b) for a, b in ((0, lo), (hi, len(qlens))) if b > a]
    decode_parts = [call(part(whole, qlens, a, b)) for a, b in ranges]

    def decodes(parts=decode_parts):
        for fn in parts:
            fn()

    # Decode sequences in chunks of c a call (MIXED_CHUNKS): one after
    # the other on the side stream, so that at most one chunk's programs
    # hold SMs and the prefills keep the others (a partition of the SMs,
    # as a decode grid of limited blocks would make).
    chunked = {c: [call(part(whole, qlens, x, min(x + c, b)))
                   for a, b in ranges for x in range(a, b, c)]
               for c in CHUNKS}

    out = {"one call": call(whole),
           "sequential": lambda: (prefill(), decodes())}
    if G.DRY:
        return out
    torch = G.torch
    low = torch.cuda.Stream()
    high = torch.cuda.Stream(priority=-1)

    def concurrent(first, side, parts=decode_parts):
        main = torch.cuda.current_stream()
        side.wait_stream(main)
        if first == "prefill":
            prefill()
            with torch.cuda.stream(side):
                decodes(parts)
        else:
            with torch.cuda.stream(side):
                decodes(parts)
            prefill()
        main.wait_stream(side)

    out["streams, prefill first"] = lambda: concurrent("prefill", low)
    out["streams, decodes first"] = lambda: concurrent("decodes", low)
    out["streams, decodes high priority"] = lambda: concurrent(
        "prefill", high)
    for c, parts in chunked.items():
        out[f"streams, decodes in chunks of {c}, high priority, first"] = (
            lambda parts=parts: concurrent("decodes", high, parts))
        out[f"streams, decodes in chunks of {c}, high priority"] = (
            lambda parts=parts: concurrent("prefill", high, parts))
        out[f"decodes alone in chunks of {c}"] = (
            lambda parts=parts: decodes(parts))
    out["prefills alone"] = prefill
    out["decodes alone"] = decodes
    return out


fns = {}
for label, qlens, seqlens, cache in selected():
    whole = batch(qlens, seqlens, cache)
    for form, fn in forms(whole, qlens).items():
        fns[f"{label}: {form}"] = fn
runs = G.rounds(fns, ROUNDS)
for name, r in runs.items():
    print(json.dumps(dict(case=name, eager_us=r, median=statistics.median(r))),
          flush=True)
if not G.DRY:
    print_graphs({name: fn for name, fn in fns.items() if "alone" not in name})
