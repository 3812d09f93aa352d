"""Unified prefill rows on sm_90a, checked against a float64 reference, for
compute-sanitizer (memcheck, racecheck, synccheck):

    compute-sanitizer --tool racecheck python3 bench/sanitize_unified.py

Calls whose queries average at least 128 a sequence carry the prefill-rows
hint, and attn-plan gives their 16-bit unified programs (heads of 64 or
128) the gathering producer warpgroup of prefix prefill: whole tiles' pages
by TMA boxes (pages of 8-128 keys dividing 128, or multiples of 128), the
rows of ragged tiles and of other pages by cp.async, Q by TMA, two consumer
warpgroups in pingpong. Cases: pages of 16, 48, 64 and 256 behind a
shuffled block table; sequences with no context, with contexts that end
inside a page and a KV tile, one of a single query next to long ones; GQA
4 and 8, MHA; causal or not, windows, softcap, sinks, ALiBi; bf16 and f16.
Each case also runs the schedule the plan gave before (64-row programs,
three stages), so the two compare. fp8 e4m3 caches with one descale each
(the producer copies the pages' bytes and dequantizes them) run the plan
alone, as do the decode cases (queries of at most 16 a sequence: the plan's
two-stage programs of one warpgroup, split-KV with the fused merge in two;
SANITIZE_CASES=decode runs them alone).
Outputs are NaN-poisoned first; exits non-zero when one differs from the
reference. SANITIZE_CASES=fp8 runs only the cases whose names contain it.
"""
import math
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "python"))
from attn_mlir import ops  # noqa: E402

DRY = bool(os.environ.get("ATTN_MLIR_DRY_RUN"))
# (name, D, Hq, Hk, page, query lens, contexts, dtype, features)
CASES = [
    ("gqa4", 128, 32, 8, 16, (77, 130, 300, 1, 600), (0, 300, 1000, 37, 5),
     "bf16", {}),
    ("gqa8 page64", 128, 16, 2, 64, (512, 64, 200), (129, 2048, 5), "bf16",
     {}),
    ("mha d64 f16", 64, 8, 8, 16, (300, 33, 257), (0, 100, 70), "f16", {}),
    ("window softcap sinks", 128, 32, 8, 16, (400, 130, 90), (600, 0, 33),
     "bf16", dict(sliding_window=100, softcap=20.0, sinks=True)),
    ("alibi", 128, 32, 8, 16, (300, 64), (100, 0), "bf16",
     dict(alibi=True)),
    ("bidirectional window", 64, 16, 4, 16, (200, 70), (50, 0), "bf16",
     dict(causal=False, sliding_window=64)),
    # Pages of 48 are no whole boxes (gathered); pages of 256 hold two
    # tiles (boxes of 128 rows).
    ("page48", 128, 32, 8, 48, (300, 129, 7), (100, 0, 500), "bf16", {}),
    ("page256 window", 64, 16, 4, 256, (700, 300), (300, 0), "bf16",
     dict(sliding_window=200)),
    # Decode rows (queries of at most 16 a sequence: two-stage programs of
    # one warpgroup, tile 0 staged with Q): contexts that end inside a page
    # and a tile, on a tile's end, empty; split-KV with the fused merge
    # (segments; their copies with an L2 evict-first policy, as the
    # drop-in's short segments); pages of 8, 64 and 256; speculative rows.
    ("decode gqa4", 128, 32, 8, 16, (1, 1, 1, 1, 1), (0, 63, 64, 1000, 37),
     "bf16", {}),
    ("decode split gqa4", 128, 32, 8, 16, (1, 1, 1), (2000, 5, 700),
     "bf16", dict(segments=5)),
    ("decode speculative window softcap sinks", 128, 32, 8, 64, (4, 3, 1),
     (900, 60, 129), "bf16", dict(sliding_window=200, softcap=20.0,
                                  sinks=True)),
    ("decode page8 d64 f16", 64, 16, 4, 8, (1, 2, 1), (300, 0, 77), "f16",
     {}),
    ("decode split page256 alibi", 128, 16, 4, 256, (1, 1), (3000, 100),
     "bf16", dict(segments=3, alibi=True)),
    ("fp8 cache gqa4", 128, 32, 8, 16, (77, 130, 300, 1, 600),
     (0, 300, 1000, 37, 5), "bf16", dict(fp8=True)),
    ("fp8 cache d64 window softcap sinks", 64, 16, 4, 16, (400, 130),
     (600, 33), "bf16", dict(fp8=True, sliding_window=100, softcap=20.0,
                             sinks=True)),
]
FP8_DESCALES = (0.5, -0.25)   # k, v


def reference(q, kc, vc, table, cu, seqused, page, scale, group, *,
              sliding_window=None, softcap=None, sinks=None, alibi=None,
              causal=True):
    out = np.zeros_like(q)
    for b in range(len(seqused)):
        lo, hi = cu[b], cu[b + 1]
        L, N = hi - lo, seqused[b]
        C = N - L
        blocks = table[b, np.arange(N) // page]
        slot = np.arange(N) % page
        qpos = C + np.arange(L)[:, None]
        kpos = np.arange(N)[None, :]
        visible = (kpos <= qpos) if causal else np.ones((L, N), bool)
        if sliding_window:
            dist = qpos - kpos if causal else np.abs(qpos - kpos)
            visible &= dist < sliding_window
        for h in range(q.shape[1]):
            K = kc[blocks, slot, h // group]
            V = vc[blocks, slot, h // group]
            s = q[lo:hi, h] @ K.T * scale
            if softcap:
                s = softcap * np.tanh(s / softcap)
            if alibi is not None:
                s = s + alibi[h] * (kpos - C)
            s = np.where(visible, s, -np.inf)
            m = s.max(-1, keepdims=True)
            if sinks is not None:
                m = np.maximum(m, sinks[h])
            m = np.where(np.isfinite(m), m, 0.0)
            p = np.exp(s - m)
            z = p.sum(-1, keepdims=True)
            if sinks is not None:
                z = z + np.exp(sinks[h] - m)
            out[lo:hi, h] = np.where(z > 0, p @ V / np.where(z > 0, z, 1), 0)
    return out


def check(name, D, Hq, Hk, page, lens, ctx, dtype, feats):
    rng = np.random.default_rng(0)
    lens, ctx = np.array(lens), np.array(ctx)
    cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
    seqused = (ctx + lens).astype(np.int32)
    need = [-(-int(n) // page) for n in seqused]
    nb = sum(need) + 3
    perm = rng.permutation(nb)
    table = np.zeros((len(lens), max(need)), np.int32)
    pos = 0
    for b, n in enumerate(need):
        table[b, :n] = perm[pos:pos + n]
        pos += n
    tokens = int(cu[-1])
    host = [rng.standard_normal(s).astype(np.float32) for s in
            ((tokens, Hq, D), (nb, page, Hk, D), (nb, page, Hk, D))]
    scale = 1 / math.sqrt(D)
    kw = dict(sliding_window=feats.get("sliding_window"),
              softcap=feats.get("softcap"), causal=feats.get("causal", True))
    sinks = (rng.standard_normal(Hq) * 2).astype(np.float32) \
        if feats.get("sinks") else None
    alibi = (2.0 ** (-8.0 * np.arange(1, Hq + 1) / Hq)).astype(np.float32) \
        if feats.get("alibi") else None
    # The schedule the plan gave before: 64-row programs, three stages.
    # (Decode rows run the plan alone: it is that schedule with two.)
    previous = dict(block_q=64 // (Hq // Hk), block_n=64,
                    heads_per_program=Hq // Hk, stages=3)
    segments = feats.get("segments")
    fp8 = feats.get("fp8", False)
    schedules = [None] if fp8 or max(lens) <= 16 else [None, previous]
    if fp8:
        kw.update(k_descale=FP8_DESCALES[0], v_descale=FP8_DESCALES[1])
    if DRY:
        import ml_dtypes
        t = ml_dtypes.bfloat16 if dtype == "bf16" else np.float16
        arrays = [a.astype(t) for a in host]
        if fp8:
            arrays[1:] = [a.astype(ml_dtypes.float8_e4m3fn) for a in host[1:]]
        for sched in schedules:
            outs, merged = split_outputs(np, np.zeros_like(arrays[0]),
                                         segments)
            run_unified(*arrays, table, cu, seqused, *outs, scale=scale,
                        sinks=sinks, alibi_slopes=alibi, schedule=sched,
                        **kw, **merged)
        return 0
    import torch
    tt = torch.bfloat16 if dtype == "bf16" else torch.float16
    dev = [torch.tensor(a, dtype=tt, device="cuda") for a in host]
    if fp8:
        dev[1:] = [x.to(torch.float8_e4m3fn) for x in dev[1:]]
    exact = [a.float().cpu().double().numpy() for a in dev]
    if fp8:
        exact[1] = exact[1] * FP8_DESCALES[0]
        exact[2] = exact[2] * FP8_DESCALES[1]
    ref = reference(*exact, table, cu, seqused, page, scale, Hq // Hk,
                    sinks=None if sinks is None else sinks.astype(np.float64),
                    alibi=None if alibi is None else alibi.astype(np.float64),
                    **{k: v for k, v in kw.items() if not k.endswith("descale")})
    ints = [torch.tensor(a, device="cuda") for a in (table, cu, seqused)]
    extra = {}
    if sinks is not None:
        extra["sinks"] = torch.tensor(sinks, device="cuda")
    if alibi is not None:
        extra["alibi_slopes"] = torch.tensor(alibi, device="cuda")
    bad = 0
    for sched in schedules:
        o = torch.full_like(dev[0], float("nan"))
        outs, merged = split_outputs(torch, o, segments)
        run_unified(*dev, *ints, *outs, scale=scale, schedule=sched, **kw,
                    **extra, **merged)
        torch.cuda.synchronize()
        err = np.abs(o.float().cpu().double().numpy() - ref).max()
        ok = bool(np.isfinite(err) and err < 3e-2)
        bad += not ok
        print(f"{name}: page={page} lens={tuple(lens)} ctx={tuple(ctx)} "
              f"{dtype} schedule={'plan' if sched is None else 'previous'}: "
              f"max|err| {err:.3e} {'ok' if ok else 'WRONG'}", flush=True)
    return bad


def run_unified(*args, **kw):
    """ops.unified; the split-KV form as the vLLM drop-in launches short
    segments (its private stream_pages: copies with an L2 evict-first
    policy on sm_90a)."""
    if kw.get("segment_max") is not None:
        return ops._unified(*args, stream_pages=True, **kw)
    return ops.unified(*args, **kw)


def split_outputs(lib, o, segments):
    """ops.unified's output operands: `o`, or with `segments` the split-KV
    form's partials (NaN-poisoned) with the fused merge into `o`."""
    if not segments:
        return [o], {}
    tokens, heads, _ = o.shape
    if lib is np:
        part = np.zeros((tokens, heads, segments, o.shape[2]), np.float32)
        stats = [np.zeros((tokens, heads, segments), np.float32)
                 for _ in range(2)]
        counters = np.zeros((tokens, heads), np.int32)
    else:
        f32 = dict(dtype=lib.float32, device="cuda")
        part = lib.full((tokens, heads, segments, o.shape[2]), float("nan"),
                        **f32)
        stats = [lib.full((tokens, heads, segments), float("nan"), **f32)
                 for _ in range(2)]
        counters = lib.zeros((tokens, heads), dtype=lib.int32, device="cuda")
    return [part], dict(segment_max=stats[0], segment_sum=stats[1],
                        merged_out=o, merge_counters=counters)


def main():
    # SANITIZE_CASES=fp8: only the cases whose names contain it.
    only = os.environ.get("SANITIZE_CASES", "")
    bad = sum(check(*case) for case in CASES if only in case[0])
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
